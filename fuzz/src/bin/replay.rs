//! Stable-toolchain driver for the fuzz targets (no libFuzzer needed).
//!
//! * `replay FILE_OR_DIR...` runs both targets on every file (a corpus or a crash artifact);
//!   with no argument it reads one input from standard input.
//! * `replay --seeds DIR` writes valid encodings to `DIR/ciphertext/` and `DIR/keys/` (a seed
//!   corpus for `cargo fuzz run`).
//! * `replay --mutate N` runs `N` random mutations of the seed inputs through both targets.
//! * `replay --mutate-frames N` runs `N` random mutations of frame streams through the frame
//!   reader (target `frames`).
//! * `replay --mutate-msgs N` runs `N` random mutations per MPC message decoder (target
//!   `mpc_msgs`; the selector byte is kept, so each decoder sees exactly `N` inputs) and prints
//!   the count and wall time of each.
//! * `replay --smoke SECONDS [--seed S]` (CI's bounded fuzz smoke) gives every target of
//!   `veil_fuzz::TARGETS` `SECONDS` of wall time: its seeds first, then mutations of them and
//!   random byte strings (one in four) until the time is up. A panic stops it: the input is
//!   written to `artifacts/smoke-<target>` (and printed in hex when short) and the exit status
//!   is 1. The RNG seed is printed; `--seed` replays the same input sequence.

use rand_core::{RngCore, SeedableRng};
use std::io::Read;
use std::path::Path;

fn run(data: &[u8]) {
    for (_, target) in veil_fuzz::TARGETS {
        target(data);
    }
}

/// `--smoke`: every target for `secs` seconds of seeds, mutations and random inputs.
fn smoke(secs: f64, seed: u64) -> Result<(), String> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::time::{Duration, Instant};
    eprintln!(
        "fuzz smoke: {} targets x {secs} s, seed {seed}",
        veil_fuzz::TARGETS.len()
    );
    let all = Instant::now();
    for (k, (name, target)) in veil_fuzz::TARGETS.into_iter().enumerate() {
        let seeds = veil_fuzz::target_seeds(name);
        if seeds.is_empty() {
            return Err(format!("{name}: no seed inputs"));
        }
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ ((k as u64) << 56));
        let t = Instant::now();
        let limit = Duration::from_secs_f64(secs);
        let mut n = 0usize;
        let mut input = Vec::new();
        loop {
            if n < seeds.len() {
                input = seeds[n].clone();
            } else if n % 32 == 0 && t.elapsed() >= limit {
                break;
            } else if rng.next_u32() % 4 == 0 {
                let len = rng.next_u32() as usize % 257;
                input.clear();
                input.extend((0..len).map(|_| rng.next_u32() as u8));
            } else {
                input = seeds[rng.next_u64() as usize % seeds.len()].clone();
                for _ in 0..1 + rng.next_u32() % 4 {
                    mutate(&mut rng, &mut input);
                }
            }
            if catch_unwind(AssertUnwindSafe(|| target(&input))).is_err() {
                let path = Path::new("artifacts").join(format!("smoke-{name}"));
                let saved = std::fs::create_dir_all("artifacts")
                    .and_then(|()| std::fs::write(&path, &input))
                    .map_or_else(
                        |e| format!("not saved: {e}"),
                        |()| path.display().to_string(),
                    );
                if input.len() <= 4096 {
                    let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
                    eprintln!("{name}: the input (hex): {hex}");
                }
                return Err(format!(
                    "{name}: panic on input {n} ({} bytes; {saved}); seed {seed}",
                    input.len()
                ));
            }
            n += 1;
        }
        eprintln!(
            "{name:>16}: {n} inputs ({} seeds), no panic, {:.1} s",
            seeds.len(),
            t.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "fuzz smoke: every target ran, no panic, {:.1} s",
        all.elapsed().as_secs_f64()
    );
    Ok(())
}

fn replay(path: &Path, count: &mut usize) -> std::io::Result<()> {
    if path.is_dir() {
        for e in std::fs::read_dir(path)? {
            replay(&e?.path(), count)?;
        }
    } else {
        run(&std::fs::read(path)?);
        *count += 1;
    }
    Ok(())
}

fn mutate(rng: &mut impl RngCore, b: &mut Vec<u8>) {
    for _ in 0..1 + rng.next_u32() % 3 {
        let len = b.len().max(1);
        match rng.next_u32() % 5 {
            0 if !b.is_empty() => {
                let i = rng.next_u64() as usize % b.len();
                b[i] ^= 1 << (rng.next_u32() % 8);
            }
            1 if !b.is_empty() => {
                // Favour the header and the small fields after it.
                let i = rng.next_u64() as usize % b.len().min(64);
                b[i] = rng.next_u32() as u8;
            }
            2 => b.truncate(rng.next_u64() as usize % len),
            3 => {
                let i = rng.next_u64() as usize % len;
                let extra: Vec<u8> = (0..rng.next_u32() % 16)
                    .map(|_| rng.next_u32() as u8)
                    .collect();
                let at = i.min(b.len());
                b.splice(at..at, extra);
            }
            _ => {
                let i = rng.next_u64() as usize % len;
                if i < b.len() {
                    b[i] = 0xff;
                }
            }
        }
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--smoke") => {
            let secs: f64 = match args.get(1).and_then(|s| s.parse().ok()) {
                Some(s) if s > 0.0 && s < 3600.0 => s,
                _ => {
                    eprintln!("usage: replay --smoke SECONDS [--seed S]");
                    std::process::exit(2);
                }
            };
            let seed = match (args.get(2).map(String::as_str), args.get(3)) {
                (Some("--seed"), Some(s)) => match s.parse() {
                    Ok(s) => s,
                    Err(_) => {
                        eprintln!("--seed takes an unsigned integer");
                        std::process::exit(2);
                    }
                },
                _ => std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
            };
            if let Err(e) = smoke(secs, seed) {
                eprintln!("fuzz smoke failed: {e}");
                std::process::exit(1);
            }
        }
        Some("--seeds") => {
            let dir = Path::new(args.get(1).map(String::as_str).unwrap_or("corpus"));
            for (i, (target, bytes)) in veil_fuzz::seed_inputs().into_iter().enumerate() {
                let d = dir.join(target);
                std::fs::create_dir_all(&d)?;
                std::fs::write(d.join(format!("seed-{i}")), bytes)?;
            }
            let d = dir.join("frames");
            std::fs::create_dir_all(&d)?;
            for (i, bytes) in veil_fuzz::frame_seed_inputs().into_iter().enumerate() {
                std::fs::write(d.join(format!("seed-{i}")), bytes)?;
            }
            let d = dir.join("mpc_msgs");
            std::fs::create_dir_all(&d)?;
            for (k, seeds) in veil_fuzz::mpc_seed_inputs().into_iter().enumerate() {
                for (i, bytes) in seeds.into_iter().enumerate() {
                    let name = format!("seed-{}-{i}", veil_fuzz::MPC_DECODERS[k]);
                    std::fs::write(d.join(name), bytes)?;
                }
            }
            eprintln!("seed corpus written under {}", dir.display());
        }
        Some("--mutate") => {
            let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let seeds = veil_fuzz::seed_inputs();
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(n as u64);
            for i in 0..n {
                let mut b = seeds[i % seeds.len()].1.clone();
                mutate(&mut rng, &mut b);
                run(&b);
            }
            eprintln!("{n} mutated inputs: no panic");
        }
        Some("--mutate-frames") => {
            let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let seeds = veil_fuzz::frame_seed_inputs();
            for sd in &seeds {
                veil_fuzz::fuzz_frames(sd);
            }
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(n as u64 ^ 0xF4A3);
            let t = std::time::Instant::now();
            let mut frames = 0usize;
            for i in 0..n {
                let mut b = seeds[i % seeds.len()].clone();
                mutate(&mut rng, &mut b);
                frames += veil_fuzz::fuzz_frames(&b);
            }
            eprintln!(
                "frames: {n} mutated inputs ({} seeds), no panic, {frames} frames decoded, {:.1} s",
                seeds.len(),
                t.elapsed().as_secs_f64()
            );
        }
        Some("--mutate-msgs") => {
            let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let all = std::time::Instant::now();
            for (k, seeds) in veil_fuzz::mpc_seed_inputs().into_iter().enumerate() {
                let name = veil_fuzz::MPC_DECODERS[k];
                for sd in &seeds {
                    assert!(
                        veil_fuzz::fuzz_mpc_msgs(sd),
                        "{name}: a seed does not decode"
                    );
                }
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64((n + k) as u64);
                let t = std::time::Instant::now();
                let mut decoded = 0usize;
                for i in 0..n {
                    let mut b = seeds[i % seeds.len()].clone();
                    mutate(&mut rng, &mut b);
                    // Keep the selector: every input goes to decoder k.
                    if b.is_empty() {
                        b.push(k as u8);
                    } else {
                        b[0] = k as u8;
                    }
                    decoded += veil_fuzz::fuzz_mpc_msgs(&b) as usize;
                }
                eprintln!(
                    "{name:>15}: {n} mutated inputs ({} seeds), no panic, {decoded} decoded, {:.1} s",
                    seeds.len(),
                    t.elapsed().as_secs_f64()
                );
            }
            eprintln!(
                "mpc_msgs: {} decoders x {n} inputs, {:.1} s",
                veil_fuzz::MPC_DECODERS.len(),
                all.elapsed().as_secs_f64()
            );
        }
        Some(_) => {
            let mut count = 0;
            for a in &args {
                replay(Path::new(a), &mut count)?;
            }
            eprintln!("{count} inputs replayed: no panic");
        }
        None => {
            let mut data = Vec::new();
            std::io::stdin().read_to_end(&mut data)?;
            run(&data);
        }
    }
    Ok(())
}

//! Latency measurement for the benchmark commands: warm-up runs, then timed runs, reporting the
//! minimum and the median (the machines are shared and noisy; medians and ratios are what to quote).

use serde::Serialize;
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// A function that waits for a device's queued work (GPU launches are asynchronous).
pub type SyncHook = Arc<dyn Fn() + Send + Sync>;

static DEVICE_SYNC: RwLock<Option<SyncHook>> = RwLock::new(None);

/// Installs (or, with `None`, removes) the hook every timed run calls before its clock stops, so
/// that an asynchronous device is timed to completion. CPU backends need none.
pub fn set_device_sync(hook: Option<SyncHook>) {
    *DEVICE_SYNC.write().unwrap_or_else(|e| e.into_inner()) = hook;
}

fn device_sync() {
    let hook = DEVICE_SYNC
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(h) = hook {
        h();
    }
}

/// Minimum and median wall time of a primitive, in milliseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Timing {
    /// Fastest run.
    pub min_ms: f64,
    /// Median run.
    pub median_ms: f64,
    /// Number of timed runs.
    pub n: usize,
}

/// Times `f` (`warmup` untimed calls, then `reps` timed calls); `per` divides each sample (e.g. the
/// per-rotation cost of a batch). `setup` runs untimed before each call and feeds it.
pub fn time_with<S, T>(
    reps: usize,
    warmup: usize,
    per: usize,
    mut setup: impl FnMut() -> S,
    mut f: impl FnMut(S) -> T,
) -> Timing {
    for _ in 0..warmup {
        let s = setup();
        std::hint::black_box(f(s));
        device_sync();
    }
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let s = setup();
        device_sync();
        let t0 = Instant::now();
        let out = f(s);
        device_sync();
        let dt = t0.elapsed().as_secs_f64() * 1e3 / per.max(1) as f64;
        std::hint::black_box(out);
        samples.push(dt);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    Timing {
        min_ms: samples[0],
        median_ms: samples[samples.len() / 2],
        n: samples.len(),
    }
}

/// Times `f` with no per-call setup.
pub fn time<T>(reps: usize, warmup: usize, mut f: impl FnMut() -> T) -> Timing {
    time_with(reps, warmup, 1, || (), |_| f())
}

//! A minimal progress display for long runs (key generation, benchmarks), on standard error.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Prints `label: done/total (elapsed)` on one updating line when stderr is a terminal, and one
/// line per step otherwise (so logs stay readable).
pub struct Progress {
    label: String,
    start: Instant,
    tty: bool,
    quiet: bool,
}

impl Progress {
    /// A new display for `label`. `quiet` suppresses it (e.g. under `--json`).
    pub fn new(label: &str, quiet: bool) -> Self {
        Self {
            label: label.to_string(),
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            quiet,
        }
    }

    /// Reports `done` of `total` steps.
    pub fn update(&mut self, done: usize, total: usize) {
        if self.quiet {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64();
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r{}: {done}/{total} ({secs:.1} s)", self.label);
            if done >= total {
                let _ = writeln!(e);
            }
        } else {
            let _ = writeln!(e, "{}: {done}/{total} ({secs:.1} s)", self.label);
        }
        let _ = e.flush();
    }
}

//! Per-module benches (filled in the next commit).
fn main() {}

//! The shared conformance suite (`veil_tests::conformance`) on CUDA, full tier: every
//! `PolyBackend` op at N = 2^12 … 2^16 and whole CKKS flows at every N, bit for bit against
//! `CpuBackend::scalar`. Without a CUDA device (no driver, no GPU) every test is skipped with the
//! reason, unless `VEIL_REQUIRE_DEVICE` requires it (`1` or a list naming this backend).

use std::sync::OnceLock;
use veil_backend_cuda::CudaBackend;
use veil_core::CkksParams;
use veil_tests::conformance::conformance_params;

/// Whether CUDA device `VEIL_CUDA_DEVICE` (default 0) can run the backend (probed once).
fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let p = conformance_params(12).remove(0);
            veil_backend_cuda::new(&p, veil_backend_cuda::default_index())
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
}

fn make(p: &CkksParams) -> CudaBackend {
    veil_backend_cuda::new(p, veil_backend_cuda::default_index())
        .expect("the CUDA backend (the probe succeeded)")
}

veil_tests::testgen_conformance_device!(full, available, make);

/// The device probe answers without panicking, with or without a driver.
#[test]
fn device_probe_does_not_panic() {
    match veil_backend_cuda::device_count() {
        Ok(n) => println!("{n} CUDA device(s)"),
        Err(e) => println!("no CUDA device: {e}"),
    }
}

/// The `#[cube]` 64-bit arithmetic is exact against `u128` on 2^20 pseudo-random pairs over the
/// full word range, for a 61-bit and a 30-bit prime.
#[test]
fn arith_exact_vs_u128() {
    if !veil_tests::conformance::device_gate(env!("CARGO_PKG_NAME"), available()) {
        return;
    }
    let client =
        veil_backend_cuda::client(veil_backend_cuda::default_index()).expect("the probe succeeded");
    for q in [(1u64 << 61) - 1, 1_073_479_681] {
        veil_kernels_cube::arith::check_arith(&client, q, 1 << 20).unwrap();
    }
}

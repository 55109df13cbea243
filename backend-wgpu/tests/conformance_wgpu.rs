//! The shared conformance suite (`veil_tests::conformance`) on wgpu: every `PolyBackend` op and
//! whole CKKS flows, bit for bit against `CpuBackend::scalar`.
//!
//! The device is `WgpuDevice::DefaultDevice`, so `CUBECL_WGPU_DEFAULT_DEVICE=Cpu` selects Mesa's
//! lavapipe on a machine without a GPU (what CI does). The `full` tier (every op at N = 2^12 …
//! 2^16, whole CKKS flows at every N) takes about 25 s on lavapipe on 2 cores, so CI runs all of
//! it. Without an adapter every test is skipped with the reason, unless `VEIL_REQUIRE_DEVICE` requires it (`1` or a list naming this backend).

use std::sync::OnceLock;
use veil_backend_wgpu::{CubeBackendError, WgpuBackend};
use veil_core::CkksParams;
use veil_tests::conformance::conformance_params;

/// Whether the default wgpu device can run the backend (probed once per test binary).
fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let p = conformance_params(12).remove(0);
            veil_backend_wgpu::new_default(&p)
                .map(|_| ())
                .map_err(|e| match e {
                    CubeBackendError::NoDevice { .. } => format!(
                        "{e} (without a GPU: install mesa-vulkan-drivers and set \
                         CUBECL_WGPU_DEFAULT_DEVICE=Cpu)"
                    ),
                    e => e.to_string(),
                })
        })
        .clone()
}

fn make(p: &CkksParams) -> WgpuBackend {
    veil_backend_wgpu::new_default(p).expect("the wgpu backend (the probe succeeded)")
}

veil_tests::testgen_conformance_device!(full, available, make);

/// The `#[cube]` 64-bit arithmetic (high product from 32-bit pieces, Barrett, Shoup) is exact
/// against `u128` on 2^20 pseudo-random pairs over the full word range, for a 61-bit and a 30-bit
/// prime.
#[test]
fn arith_exact_vs_u128() {
    if !veil_tests::conformance::device_gate(env!("CARGO_PKG_NAME"), available()) {
        return;
    }
    let client = veil_backend_wgpu::client(&veil_backend_wgpu::WgpuDevice::DefaultDevice)
        .expect("the probe succeeded");
    for q in [(1u64 << 61) - 1, 1_073_479_681] {
        veil_kernels_cube::arith::check_arith(&client, q, 1 << 20).unwrap();
    }
}

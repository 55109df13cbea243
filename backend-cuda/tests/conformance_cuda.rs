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

/// The device probe answers without panicking, with or without a driver, and what it reports is
/// consistent: with a device, a count of at least one, a name for each device and a typed refusal
/// of the index past the last; without one, a typed [`CubeBackendError::NoDevice`] for `cuda`
/// whose reason names what is missing (the driver library, the driver's answer or a device),
/// the same refusal from every entry point, and the backend probe of the suite fails too.
#[test]
fn device_probe_reports_devices_or_why_there_are_none() {
    use veil_backend_cuda::CubeBackendError;
    let no_device = |e: &CubeBackendError| match e {
        CubeBackendError::NoDevice { runtime, reason } => {
            assert_eq!(*runtime, "cuda");
            reason.clone()
        }
        other => panic!("expected NoDevice, got {other:?}"),
    };
    match veil_backend_cuda::device_count() {
        Ok(n) => {
            assert!(n >= 1, "a device count of 0 must be an error");
            for i in 0..n {
                let name = veil_backend_cuda::device_name(i).expect("a present device has a name");
                assert!(!name.trim().is_empty(), "device {i} has an empty name");
                eprintln!("CUDA device {i}: {name}");
            }
            let e = veil_backend_cuda::device_name(n).unwrap_err();
            assert_eq!(no_device(&e), format!("device {n} requested, {n} present"));
            let e = veil_backend_cuda::client(n)
                .err()
                .expect("index past the last");
            assert!(no_device(&e).contains("requested"));
        }
        Err(e) => {
            let reason = no_device(&e);
            eprintln!("no CUDA device: {e}");
            assert!(
                ["libcuda", "CUDA driver", "CUDA initialisation"]
                    .iter()
                    .any(|m| reason.contains(m)),
                "the reason names what is missing: {reason}"
            );
            assert!(e.to_string().contains(&reason));
            // Every entry point refuses with the same reason, none panics.
            let name = veil_backend_cuda::device_name(0).unwrap_err();
            assert_eq!(no_device(&name), reason);
            let client = veil_backend_cuda::client(0).err().expect("no client");
            assert_eq!(no_device(&client), reason);
            assert!(available().is_err(), "the backend probe agrees");
        }
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

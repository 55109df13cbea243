//! Veil's CUDA backend: [`CubeBackend`] on CubeCL's CUDA runtime.
//!
//! Without a GPU or driver, cudarc and CubeCL panic while initialising CUDA. [`device_count`]
//! therefore probes first with the one call that does not panic (is the driver library
//! present?), then asks the driver for its devices inside `catch_unwind`, and [`new`] only
//! creates a client once a device is known to exist; every failure is a
//! [`CubeBackendError::NoDevice`] with the reason.

use cubecl::cuda::{CudaDevice, CudaRuntime};
use cubecl::prelude::*;
use veil_core::CkksParams;

use veil_kernels_cube::panic_message;
pub use veil_kernels_cube::{CubeBackend, CubeBackendError, CubeBuffer};

/// `PolyBackend` on CUDA.
pub type CudaBackend = CubeBackend<CudaRuntime>;

fn no_device(reason: impl Into<String>) -> CubeBackendError {
    CubeBackendError::NoDevice {
        runtime: "cuda",
        reason: reason.into(),
    }
}

/// Number of CUDA devices, or why there are none usable. Never panics.
pub fn device_count() -> Result<usize, CubeBackendError> {
    // SAFETY: `is_culib_present` only tries to load the driver library (libcuda) by name.
    #[allow(unsafe_code)]
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    if !present {
        return Err(no_device(
            "the CUDA driver library (libcuda) is not installed",
        ));
    }
    match std::panic::catch_unwind(cudarc::driver::CudaContext::device_count) {
        Ok(Ok(n)) if n > 0 => Ok(n as usize),
        Ok(Ok(_)) => Err(no_device("the CUDA driver reports no device")),
        Ok(Err(e)) => Err(no_device(format!("the CUDA driver failed: {e:?}"))),
        Err(e) => Err(no_device(format!(
            "CUDA initialisation panicked: {}",
            panic_message(e.as_ref())
        ))),
    }
}

/// The name of CUDA device `index` as the driver reports it (checked against [`device_count`]
/// first; never panics).
pub fn device_name(index: usize) -> Result<String, CubeBackendError> {
    let n = device_count()?;
    if index >= n {
        return Err(no_device(format!("device {index} requested, {n} present")));
    }
    let name = std::panic::catch_unwind(|| {
        cudarc::driver::CudaContext::new(index).and_then(|ctx| ctx.name())
    });
    match name {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(no_device(format!(
            "the CUDA driver failed to name device {index}: {e:?}"
        ))),
        Err(e) => Err(no_device(format!(
            "naming CUDA device {index} panicked: {}",
            panic_message(e.as_ref())
        ))),
    }
}

/// A compute client for CUDA device `index` (checked against [`device_count`] first).
pub fn client(index: usize) -> Result<ComputeClient<CudaRuntime>, CubeBackendError> {
    let n = device_count()?;
    if index >= n {
        return Err(no_device(format!("device {index} requested, {n} present")));
    }
    std::panic::catch_unwind(|| CudaRuntime::client(&CudaDevice::new(index))).map_err(|e| {
        no_device(format!(
            "creating the CubeCL client panicked: {}",
            panic_message(e.as_ref())
        ))
    })
}

/// The backend for `params` on CUDA device `index`.
pub fn new(params: &CkksParams, index: usize) -> Result<CudaBackend, CubeBackendError> {
    let client = client(index)?;
    // The self-test is the first kernel compilation (NVRTC, loaded at run time): a missing or
    // broken NVRTC panics inside CubeCL, which is reported as an error.
    CubeBackend::new_guarded(client, params, format!("cuda/{index}"))
}

/// The device index to use: `VEIL_CUDA_DEVICE` when set, else 0.
pub fn default_index() -> usize {
    std::env::var("VEIL_CUDA_DEVICE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

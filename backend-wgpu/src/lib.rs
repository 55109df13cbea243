//! Veil's wgpu backend: [`CubeBackend`] on CubeCL's wgpu runtime (Vulkan, Metal, DX12).
//!
//! Without a GPU, Mesa's software Vulkan driver (lavapipe, `apt-get install mesa-vulkan-drivers`)
//! runs the same kernels. Where a GPU is present wgpu prefers it, so name the software adapter
//! with [`WgpuDevice::Cpu`] or `CUBECL_WGPU_DEFAULT_DEVICE=Cpu` (which
//! [`WgpuDevice::DefaultDevice`] reads) to be sure of getting it. The kernels need 64-bit integers (`shaderInt64`); a device without them is refused
//! with [`CubeBackendError::MissingFeature`].

use cubecl::prelude::*;
use cubecl::wgpu::WgpuRuntime;
use veil_core::CkksParams;

pub use cubecl::wgpu::WgpuDevice;
use veil_kernels_cube::panic_message;
pub use veil_kernels_cube::{CubeBackend, CubeBackendError, CubeBuffer};

/// `PolyBackend` on wgpu.
pub type WgpuBackend = CubeBackend<WgpuRuntime>;

/// A compute client for `device`, or [`CubeBackendError::NoDevice`] when wgpu finds no adapter
/// (CubeCL panics then; the panic is caught here).
pub fn client(device: &WgpuDevice) -> Result<ComputeClient<WgpuRuntime>, CubeBackendError> {
    let device = device.clone();
    std::panic::catch_unwind(move || WgpuRuntime::client(&device)).map_err(|e| {
        CubeBackendError::NoDevice {
            runtime: "wgpu",
            reason: panic_message(e.as_ref()),
        }
    })
}

/// The backend for `params` on `device`.
pub fn new(params: &CkksParams, device: &WgpuDevice) -> Result<WgpuBackend, CubeBackendError> {
    let client = client(device)?;
    let label = match (device, std::env::var("CUBECL_WGPU_DEFAULT_DEVICE")) {
        (WgpuDevice::DefaultDevice, Ok(v)) if !v.is_empty() => format!("wgpu/{v}"),
        _ => format!("wgpu/{device:?}"),
    };
    // The self-test is the first kernel compilation; a driver that panics there is reported as
    // an error.
    CubeBackend::new_guarded(client, params, label)
}

/// The backend on the default device ([`WgpuDevice::DefaultDevice`], which honours
/// `CUBECL_WGPU_DEFAULT_DEVICE`).
pub fn new_default(params: &CkksParams) -> Result<WgpuBackend, CubeBackendError> {
    new(params, &WgpuDevice::DefaultDevice)
}

//! The polynomial backend a party evaluates on, chosen at run time: the CPU (the default), wgpu or
//! CUDA (CubeCL kernels, bit-identical to the CPU reference).
//!
//! The product's parties are generic over [`PolyBackend`]; a command names a backend with a
//! [`BackendChoice`] and hands the code to run on it as an [`OnBackend`] visitor, which
//! [`BackendChoice::dispatch`] calls with a [`Factory`] of that backend. A backend this build
//! does not contain ([`BackendError::NotBuilt`], naming the cargo feature), or one without a
//! usable device ([`BackendError::Unavailable`], with the driver's reason), is an error before
//! anything runs: never a silent fallback to the CPU.

use std::sync::Arc;
use veil_backend_cpu::CpuBackend;
use veil_core::params::CkksParams;
use veil_core::PolyBackend;

/// The kinds of backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// The CPU's fast path (`veil-backend-cpu`, AVX-512/AVX2 NTTs, rayon over limbs).
    #[default]
    Cpu,
    /// CubeCL's wgpu runtime (Vulkan, Metal, DX12; Mesa's lavapipe without a GPU). Needs a build
    /// with the `wgpu` feature.
    Wgpu,
    /// CubeCL's CUDA runtime (an NVIDIA GPU, its driver and NVRTC). Needs a build with the
    /// `cuda` feature.
    Cuda,
}

impl BackendKind {
    /// The name a command line uses (`cpu`, `wgpu`, `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cuda => "cuda",
        }
    }

    /// Whether this build contains the backend.
    pub fn built(self) -> bool {
        match self {
            BackendKind::Cpu => true,
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
            BackendKind::Cuda => cfg!(feature = "cuda"),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(BackendKind::Cpu),
            "wgpu" => Ok(BackendKind::Wgpu),
            "cuda" => Ok(BackendKind::Cuda),
            _ => Err(format!("unknown backend {s:?}: expected cpu, wgpu or cuda")),
        }
    }
}

/// Why a backend cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    /// This build does not contain the backend.
    NotBuilt {
        /// The backend.
        backend: BackendKind,
        /// The cargo feature that builds it in.
        feature: &'static str,
    },
    /// The backend is built in, but no usable device was found (no driver, no adapter, a
    /// missing capability, a failed self-test), or the backend refused the parameters.
    Unavailable {
        /// The backend.
        backend: BackendKind,
        /// The driver's or the backend's reason.
        reason: String,
    },
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::NotBuilt { backend, feature } => write!(
                f,
                "this build has no {backend} backend: rebuild with `--features {feature}` \
                 (e.g. `cargo run --release -p veil --features {feature} --bin veil -- ...`)"
            ),
            BackendError::Unavailable { backend, reason } => {
                write!(f, "the {backend} backend has no usable device: {reason}")?;
                match backend {
                    BackendKind::Wgpu => write!(
                        f,
                        " (without a GPU, Mesa's lavapipe runs the kernels: install \
                         mesa-vulkan-drivers and set CUBECL_WGPU_DEFAULT_DEVICE=Cpu)"
                    ),
                    BackendKind::Cuda => write!(
                        f,
                        " (the CUDA backend needs an NVIDIA GPU, its driver (libcuda) and NVRTC)"
                    ),
                    BackendKind::Cpu => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for BackendError {}

/// Builds a backend for a validated parameter set (one per CKKS context).
pub type Factory<B> = Arc<dyn Fn(&CkksParams) -> Result<B, String> + Send + Sync>;

/// Code that runs on whichever backend a [`BackendChoice`] names: [`BackendChoice::dispatch`]
/// calls [`OnBackend::run`] with that backend's type and a factory of it.
pub trait OnBackend {
    /// What the code returns.
    type Output;
    /// Runs with backends built by `factory` (`label` names the backend and device for logs).
    fn run<B: PolyBackend>(self, label: &str, factory: Factory<B>) -> Self::Output;
}

/// A backend and its device, as a command line chooses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendChoice {
    /// Which backend.
    pub kind: BackendKind,
    /// The device: the CUDA ordinal, or wgpu's `N`-th discrete GPU; `None`: the backend's
    /// default (`VEIL_CUDA_DEVICE` or 0 for CUDA; the adapter wgpu picks, which
    /// `CUBECL_WGPU_DEFAULT_DEVICE` steers, for wgpu). Ignored by the CPU.
    pub device: Option<usize>,
    /// CPU worker threads (0: every core). Ignored by the GPU backends.
    pub threads: usize,
}

impl BackendChoice {
    /// The CPU with `threads` workers (0: every core).
    pub fn cpu(threads: usize) -> Self {
        BackendChoice {
            kind: BackendKind::Cpu,
            device: None,
            threads,
        }
    }

    /// A label for logs: `cpu, 2 threads`, `wgpu (default adapter)`, `cuda:0`.
    pub fn label(&self) -> String {
        match self.kind {
            BackendKind::Cpu => match cpu_threads(self.threads) {
                1 => "cpu, 1 thread".into(),
                n => format!("cpu, {n} threads"),
            },
            BackendKind::Wgpu => match self.device {
                Some(d) => format!("wgpu (discrete GPU {d})"),
                None => "wgpu (default adapter)".into(),
            },
            BackendKind::Cuda => match self.device {
                Some(d) => format!("cuda:{d}"),
                None => "cuda (default device)".into(),
            },
        }
    }

    /// Builds one backend for `probe` (a parameter set the run will use) to surface a missing
    /// device before anything runs, then runs `v` with a factory of this backend.
    pub fn dispatch<V: OnBackend>(
        &self,
        probe: &CkksParams,
        v: V,
    ) -> Result<V::Output, BackendError> {
        let label = self.label();
        match self.kind {
            BackendKind::Cpu => {
                let threads = cpu_threads(self.threads);
                let f: Factory<CpuBackend> =
                    Arc::new(move |p| CpuBackend::fast(p, threads).map_err(|e| e.to_string()));
                run_probed(f, probe, self.kind, &label, v)
            }
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => {
                use veil_backend_wgpu::WgpuDevice;
                let device = match self.device {
                    Some(d) => WgpuDevice::DiscreteGpu(d),
                    None => WgpuDevice::DefaultDevice,
                };
                let f: Factory<veil_backend_wgpu::WgpuBackend> = Arc::new(move |p| {
                    veil_backend_wgpu::new(p, &device).map_err(|e| e.to_string())
                });
                run_probed(f, probe, self.kind, &label, v)
            }
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => {
                let index = self.device.unwrap_or_else(veil_backend_cuda::default_index);
                let f: Factory<veil_backend_cuda::CudaBackend> =
                    Arc::new(move |p| veil_backend_cuda::new(p, index).map_err(|e| e.to_string()));
                run_probed(f, probe, self.kind, &label, v)
            }
            // The backends this build leaves out (each one's cargo feature has its name).
            #[allow(unreachable_patterns)]
            kind => Err(BackendError::NotBuilt {
                backend: kind,
                feature: kind.name(),
            }),
        }
    }
}

/// Probes `f` on `probe` ([`probe_with`]), then runs `v` with it.
fn run_probed<B: PolyBackend, V: OnBackend>(
    f: Factory<B>,
    probe: &CkksParams,
    kind: BackendKind,
    label: &str,
    v: V,
) -> Result<V::Output, BackendError> {
    probe_with(&f, probe, kind)?;
    Ok(v.run(label, f))
}

/// `threads`, or every core for 0.
pub fn cpu_threads(threads: usize) -> usize {
    if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
}

/// Builds one backend for `probe` and drops it; a failure is [`BackendError::Unavailable`]
/// (a backend that panics while probing its device included).
fn probe_with<B: PolyBackend>(
    f: &Factory<B>,
    probe: &CkksParams,
    kind: BackendKind,
) -> Result<(), BackendError> {
    let f = f.clone();
    let p = probe.clone();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(&p))) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(reason)) => Err(BackendError::Unavailable {
            backend: kind,
            reason,
        }),
        Err(_) => Err(BackendError::Unavailable {
            backend: kind,
            reason: "the backend panicked while opening its device".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl OnBackend for Name {
        type Output = String;
        fn run<B: PolyBackend>(self, label: &str, factory: Factory<B>) -> String {
            let p = veil_core::params::insecure_logn12().validate().unwrap();
            let b = factory(&p).unwrap();
            format!("{label}: {}", b.name())
        }
    }

    #[test]
    fn names_parse_and_print() {
        for k in [BackendKind::Cpu, BackendKind::Wgpu, BackendKind::Cuda] {
            assert_eq!(k.name().parse::<BackendKind>(), Ok(k));
            assert_eq!(k.to_string(), k.name());
        }
        let e = "tpu".parse::<BackendKind>().unwrap_err();
        assert!(e.contains("cpu, wgpu or cuda"), "{e}");
    }

    #[test]
    fn cpu_dispatches_to_the_cpu_backend() {
        let p = veil_core::params::insecure_logn12().validate().unwrap();
        let out = BackendChoice::cpu(1).dispatch(&p, Name).unwrap();
        assert_eq!(out, "cpu, 1 thread: cpu-fast/1t");
    }

    /// A backend compiled out is a typed error naming its feature, never a fallback.
    #[test]
    fn a_backend_not_built_is_refused_with_its_feature() {
        let p = veil_core::params::insecure_logn12().validate().unwrap();
        for (kind, feature) in [(BackendKind::Wgpu, "wgpu"), (BackendKind::Cuda, "cuda")] {
            if kind.built() {
                continue;
            }
            let c = BackendChoice {
                kind,
                ..BackendChoice::default()
            };
            let e = c.dispatch(&p, Name).unwrap_err();
            assert_eq!(
                e,
                BackendError::NotBuilt {
                    backend: kind,
                    feature
                }
            );
            assert!(e.to_string().contains(&format!("--features {feature}")));
        }
    }
}

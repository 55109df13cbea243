//! The product's two private paths with the server's evaluation on wgpu (Mesa's lavapipe in CI):
//! a BERT session (`veil serve`'s accept loop and `veil infer`'s client, the tiny 1-layer test
//! encoder at the insecure N = 2^12 test set) and a LeNet batch (`veil infer-image`'s FHE-only
//! loopback run, the built-in trained LeNet on 16 MNIST test images at the product's 128-bit set).
//!
//! The kernels are bit-identical to the CPU's (the conformance suite), but two sessions draw
//! fresh keys, encryption noise and MPC masks, so their logits are not: each run is checked
//! against the plaintext model within the path's stated bound (the BERT sessions' `LOGIT_BOUND`,
//! the CNN's `1e-3`) with the same predictions, and the wgpu and CPU runs against each other
//! within twice that bound.

use std::net::TcpListener;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use veil_backend_cpu::CpuBackend;
use veil_core::ckks::Ckks;
use veil_core::PolyBackend;
use veil_host::model::{cnn, images};
use veil_host::session::{run_client, serve, CkksCache, ServeOptions, SessionOptions};
use veil_host::transport::{TcpTransport, TransportConfig};
use veil_tests::fixtures::{
    check_against_plaintext, input, plaintext, test_params, tiny_cfg, tiny_weights, LOGIT_BOUND,
};

/// The CNN path's bound on |encrypted − plaintext| per logit (as `tests/tests/cnn_serve.rs`).
const CNN_BOUND: f64 = 1e-3;

fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let p = veil_core::params::insecure_logn12().validate().unwrap();
            veil_backend_wgpu::new_default(&p)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
}

fn wgpu(p: &veil_core::CkksParams) -> Result<veil_backend_wgpu::WgpuBackend, String> {
    veil_backend_wgpu::new_default(p).map_err(|e| e.to_string())
}

fn cpu(p: &veil_core::CkksParams) -> Result<CpuBackend, String> {
    CpuBackend::fast(p, 2).map_err(|e| e.to_string())
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// One BERT session: `serve` on `server`'s backend, the client on the CPU, over TCP loopback.
fn bert_session<B: PolyBackend>(
    server: impl Fn(&veil_core::CkksParams) -> Result<B, String> + Send + Sync + 'static,
    seed: u64,
    valid: usize,
) -> Vec<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let tcfg = TransportConfig {
        timeout: Duration::from_secs(600),
        ..TransportConfig::default()
    };
    let opts = ServeOptions {
        transport: tcfg,
        max_clients: 1,
        max_connections: Some(1),
        ..ServeOptions::default()
    };
    let weights = Arc::new(tiny_weights(seed));
    let cache = Arc::new(CkksCache::with_params(server, test_params));
    let h = std::thread::spawn(move || serve(listener, weights, cache, opts));
    let client = CkksCache::with_params(cpu, test_params);
    let mut t = TcpTransport::connect(addr, tcfg).unwrap();
    let r = run_client(
        &mut t,
        &client,
        &tiny_cfg(),
        &input(seed),
        valid,
        &SessionOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    drop(t);
    let s = h.join().unwrap();
    assert_eq!((s.served, s.failed), (1, 0));
    r.logits
}

#[test]
fn bert_session_with_the_server_on_wgpu_matches_the_cpu_and_the_plaintext() {
    if !veil_tests::conformance::device_gate(env!("CARGO_PKG_NAME"), available()) {
        return;
    }
    let (seed, valid) = (7, 9);
    let want = plaintext(&tiny_weights(seed), &input(seed), valid);
    let on_wgpu = bert_session(wgpu, seed, valid);
    let on_cpu = bert_session(cpu, seed, valid);
    let (dw, dc, dwc) = (
        max_diff(&on_wgpu, &want),
        max_diff(&on_cpu, &want),
        max_diff(&on_wgpu, &on_cpu),
    );
    println!("BERT |wgpu − plain| {dw:.2e}, |cpu − plain| {dc:.2e}, |wgpu − cpu| {dwc:.2e}");
    assert!(dw <= LOGIT_BOUND, "{on_wgpu:?} vs {want:?}");
    assert!(dc <= LOGIT_BOUND, "{on_cpu:?} vs {want:?}");
    assert!(dwc <= 2.0 * LOGIT_BOUND);
    let argmax = veil_host::vision::argmax;
    assert_eq!(argmax(&on_wgpu), argmax(&want));
}

/// One FHE-only LeNet batch on `ck` (both parties of the loopback run on it).
fn lenet_batch<B: PolyBackend>(ck: &Ckks<B>, imgs: &images::Images) -> Vec<Vec<f64>> {
    let net = cnn::load("lenet").unwrap();
    let run = veil_host::vision::run_loopback(ck, &net, imgs, 16, None, |_, _| {}).unwrap();
    let worst = check_against_plaintext(&net, imgs, &run.client.logits);
    println!(
        "LeNet on {}: block {}, worst |Δlogit| {worst:.2e}",
        ck.backend().name(),
        run.block
    );
    assert!(worst < CNN_BOUND, "worst {worst}");
    run.client.logits
}

#[test]
fn lenet_batch_on_wgpu_matches_the_cpu_and_the_plaintext() {
    if !veil_tests::conformance::device_gate(env!("CARGO_PKG_NAME"), available()) {
        return;
    }
    let p = veil_core::cnn::batch_params(16).validate().unwrap();
    let imgs = images::read_images("mnist-test").unwrap().take(16);
    let on_wgpu = lenet_batch(&Ckks::new(Arc::new(wgpu(&p).unwrap())), &imgs);
    let on_cpu = lenet_batch(&Ckks::new(Arc::new(cpu(&p).unwrap())), &imgs);
    let d = on_wgpu
        .iter()
        .zip(&on_cpu)
        .map(|(a, b)| max_diff(a, b))
        .fold(0.0, f64::max);
    assert!(d <= 2.0 * CNN_BOUND, "|wgpu − cpu| {d}");
}

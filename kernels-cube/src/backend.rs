//! [`CubeBackend`]: `PolyBackend` on any CubeCL runtime.

use crate::automorphism::launch_automorphism;
use crate::basis::{launch_base_convert, launch_div_finish, launch_key_inner_product, Conversion};
use crate::elementwise::{
    launch_binary_assign, launch_binary_new, launch_copy_rows, launch_fill_zero, launch_mul_add,
    launch_neg, launch_scalar_assign, BinaryOp,
};
use crate::launch::RowMap;
use crate::ntt::{launch_intt, launch_ntt, NttTables};
use crate::CubeBackendError;
use cubecl::prelude::*;
use cubecl::server::Handle;
use veil_core::backend::{Basis, Domain, PolyBackend};
use veil_core::math::rns::{BasisConverter, DivRoundPlan};
use veil_core::math::Modulus;
use veil_core::CkksParams;

/// A device buffer of `rows × N` words.
pub struct CubeBuffer {
    handle: Handle,
    rows: usize,
}

impl CubeBuffer {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

impl std::fmt::Debug for CubeBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Contents stay on the device (and may be secret).
        f.debug_struct("CubeBuffer")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// Offsets of the conversion plans in the plan table.
#[derive(Clone, Debug, Default)]
struct PlanIndex {
    /// `[level][digit]`: decomposition (ModUp) plans.
    decompose: Vec<Vec<usize>>,
    /// `[level]`: ModDown plans (drop `P_level` from `Q_level ∪ P_level`).
    mod_down: Vec<usize>,
    /// `[level]`: rescale plans (drop `q_level`); entry 0 unused.
    rescale: Vec<usize>,
    /// `[level]`: ModDown-by-`p_0` plans (drop `p_0` from `Q_level ∪ {p_0}`).
    mod_down_p0: Vec<usize>,
}

fn push_converter(table: &mut Vec<u64>, c: &BasisConverter) -> usize {
    let off = table.len();
    table.extend_from_slice(&c.src_hat_inv);
    table.extend_from_slice(&c.src_hat_inv_shoup);
    for row in &c.src_hat_mod_dst {
        table.extend_from_slice(row);
    }
    off
}

fn push_div_plan(table: &mut Vec<u64>, p: &DivRoundPlan) -> usize {
    let off = push_converter(table, &p.conv);
    table.extend_from_slice(&p.half_mod_drop);
    table.extend_from_slice(&p.half_mod_keep);
    table.extend_from_slice(&p.d_inv_mod_keep);
    table.extend_from_slice(&p.d_inv_mod_keep_shoup);
    off
}

/// `PolyBackend` on a CubeCL runtime `R`: every operation runs as `#[cube]` kernels on `R`'s
/// device, bit-identical to `veil_backend_cpu::CpuBackend::scalar`.
///
/// Construction uploads the parameter set's tables once (moduli with their Barrett constants,
/// NTT twiddles with Shoup companions, every decomposition, ModDown and rescale plan) and runs a
/// self-test that compares a modular product and an NTT with `veil-core` on the host, so a device
/// that silently mishandles `u64` is refused with [`CubeBackendError::SelfTest`].
pub struct CubeBackend<R: Runtime> {
    client: ComputeClient<R>,
    params: CkksParams,
    label: String,
    log_n: u32,
    q_total: usize,
    primes: usize,
    mods: Handle,
    ntt: NttTables,
    plans: Handle,
    plans_len: usize,
    index: PlanIndex,
}

impl<R: Runtime> std::fmt::Debug for CubeBackend<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CubeBackend")
            .field("name", &self.label)
            .field("params", &self.params.name())
            .finish_non_exhaustive()
    }
}

fn upload_words<R: Runtime>(client: &ComputeClient<R>, words: &[u64]) -> Handle {
    if words.is_empty() {
        client.create_from_slice(u64::as_bytes(&[0u64]))
    } else {
        client.create_from_slice(u64::as_bytes(words))
    }
}

impl<R: Runtime> CubeBackend<R> {
    /// [`CubeBackend::new`] with its panics caught: the self-test is the first kernel
    /// compilation, and a driver or compiler (e.g. a missing NVRTC) that panics there is
    /// reported as a [`CubeBackendError::SelfTest`] of `label`.
    pub fn new_guarded(
        client: ComputeClient<R>,
        params: &CkksParams,
        label: impl Into<String>,
    ) -> Result<Self, CubeBackendError> {
        let label = label.into();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Self::new(client, params, label.clone())
        }))
        .unwrap_or_else(|e| {
            Err(CubeBackendError::SelfTest {
                device: label,
                detail: format!(
                    "compiling or running the kernels panicked: {}",
                    crate::panic_message(e.as_ref())
                ),
            })
        })
    }

    /// Builds the backend for `params` on `client`'s device. `label` names the device in
    /// [`PolyBackend::name`] (e.g. `wgpu/llvmpipe`).
    ///
    /// Fails when the device has no 64-bit integers, when the ring is too large for the
    /// kernels' 32-bit unit indices, or when the self-test does not reproduce the host's words.
    pub fn new(
        client: ComputeClient<R>,
        params: &CkksParams,
        label: impl Into<String>,
    ) -> Result<Self, CubeBackendError> {
        let label = label.into();
        if !client
            .properties()
            .supports_type(u64::as_type_native_unchecked())
        {
            return Err(CubeBackendError::MissingFeature {
                device: label,
                feature: "64-bit integers (shaderInt64)",
            });
        }
        let log_n = params.log_n();
        let moduli: Vec<Modulus> = params.all_moduli().copied().collect();
        let primes = moduli.len();
        let n = params.n();
        if primes.checked_mul(n).is_none_or(|w| w >= (1usize << 31)) {
            return Err(CubeBackendError::TooLarge {
                words: primes.saturating_mul(n),
            });
        }
        let mut mods = Vec::with_capacity(3 * primes);
        for m in &moduli {
            let ratio = u128::MAX / m.value() as u128;
            mods.extend_from_slice(&[m.value(), ratio as u64, (ratio >> 64) as u64]);
        }
        let mut tw = Vec::with_capacity(primes * n);
        let mut tw_shoup = Vec::with_capacity(primes * n);
        let mut itw = Vec::with_capacity(primes * n);
        let mut itw_shoup = Vec::with_capacity(primes * n);
        let mut n_inv = Vec::with_capacity(2 * primes);
        for g in 0..primes {
            let t = params.ntt_table(g);
            let (w, ws) = t.twiddles();
            tw.extend_from_slice(w);
            tw_shoup.extend_from_slice(ws);
            let (w, ws) = t.inv_twiddles();
            itw.extend_from_slice(w);
            itw_shoup.extend_from_slice(ws);
            let (ni, nis) = t.n_inv();
            n_inv.extend_from_slice(&[ni, nis]);
        }
        let (table, index) = Self::plans(params, &moduli);
        let be = Self {
            mods: upload_words(&client, &mods),
            ntt: NttTables {
                tw: upload_words(&client, &tw),
                tw_shoup: upload_words(&client, &tw_shoup),
                itw: upload_words(&client, &itw),
                itw_shoup: upload_words(&client, &itw_shoup),
                n_inv: upload_words(&client, &n_inv),
            },
            plans: upload_words(&client, &table),
            plans_len: table.len(),
            index,
            client,
            params: params.clone(),
            label,
            log_n,
            q_total: params.q().len(),
            primes,
        };
        be.self_test()?;
        Ok(be)
    }

    /// Every conversion plan of the parameter set, laid out in one table.
    fn plans(params: &CkksParams, moduli: &[Modulus]) -> (Vec<u64>, PlanIndex) {
        let mut table = Vec::new();
        let mut index = PlanIndex::default();
        let alpha = params.alpha();
        for level in 0..=params.max_level() {
            let mut digits = Vec::new();
            for j in 0..params.digits_at(level) {
                let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
                let dst: Vec<Modulus> = (0..=level)
                    .filter(|i| !(s..e).contains(i))
                    .map(|i| moduli[i])
                    .chain(params.p()[..params.special_at(level)].iter().copied())
                    .collect();
                let conv = BasisConverter::new(&moduli[s..e], &dst);
                digits.push(push_converter(&mut table, &conv));
            }
            index.decompose.push(digits);
            let md = DivRoundPlan::new(&moduli[..=level], &params.p()[..params.special_at(level)]);
            index.mod_down.push(push_div_plan(&mut table, &md));
            let md0 = DivRoundPlan::new(&moduli[..=level], &params.p()[..1]);
            index.mod_down_p0.push(push_div_plan(&mut table, &md0));
            if level >= 1 {
                let rs = DivRoundPlan::new(&moduli[..level], &moduli[level..=level]);
                index.rescale.push(push_div_plan(&mut table, &rs));
            } else {
                index.rescale.push(usize::MAX);
            }
        }
        (table, index)
    }

    /// Runs a modular product and a forward NTT on the device and compares them with the host.
    fn self_test(&self) -> Result<(), CubeBackendError> {
        let n = self.params.n();
        let m = self.params.q()[0];
        let q = m.value();
        // Deterministic words spread over [0, q), with the edges 0, 1, q-1.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (((z ^ (z >> 31)) as u128 * q as u128) >> 64) as u64
        };
        let mut a: Vec<u64> = (0..n).map(|_| next()).collect();
        let b: Vec<u64> = (0..n).map(|_| next()).collect();
        a[..3].copy_from_slice(&[0, 1, q - 1]);
        let want_mul: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| m.mul(x, y)).collect();
        let mut want_ntt = a.clone();
        self.params.ntt_table(0).forward(&mut want_ntt);

        let ba = self.upload(&a);
        let bb = self.upload(&b);
        let mut prod = self.alloc(1);
        self.mul(&ba, &bb, &mut prod, Basis::q(1));
        let mut got = vec![0u64; n];
        self.read_back(&prod, &mut got)?;
        let check = |what: &str, want: &[u64], got: &[u64]| {
            if got.iter().all(|&x| x == 0) {
                return Err(CubeBackendError::SelfTest {
                    device: self.label.clone(),
                    detail: format!("{what}: the device returned only zeros"),
                });
            }
            match want.iter().zip(got).position(|(w, g)| w != g) {
                None => Ok(()),
                Some(i) => Err(CubeBackendError::SelfTest {
                    device: self.label.clone(),
                    detail: format!("{what}: word {i} is {} instead of {}", got[i], want[i]),
                }),
            }
        };
        check("modular product", &want_mul, &got)?;
        let mut x = ba;
        self.ntt(&mut x, Basis::q(1));
        self.read_back(&x, &mut got)?;
        check("forward NTT", &want_ntt, &got)
    }

    /// The compute client.
    pub fn client(&self) -> &ComputeClient<R> {
        &self.client
    }

    /// Waits until every launched kernel has finished (launches are asynchronous; downloads
    /// wait on their own). Benchmarks call it before stopping the clock.
    pub fn sync(&self) -> Result<(), CubeBackendError> {
        cubecl::future::block_on(self.client.sync()).map_err(|e| CubeBackendError::Device {
            device: self.label.clone(),
            detail: format!("{e:?}"),
        })
    }

    /// Reads `buf` back into `out` (its first `out.len()` words), reporting a failed read-back
    /// (or a failed launch queued before it) with the device's own message.
    fn read_back(&self, buf: &CubeBuffer, out: &mut [u64]) -> Result<(), CubeBackendError> {
        let bytes =
            self.client
                .read_one(buf.handle.clone())
                .map_err(|e| CubeBackendError::Device {
                    device: self.label.clone(),
                    detail: format!("read-back failed: {e:?}"),
                })?;
        let words = u64::from_bytes(&bytes);
        if words.len() < out.len() {
            return Err(CubeBackendError::Device {
                device: self.label.clone(),
                detail: format!("read back {} words, {} expected", words.len(), out.len()),
            });
        }
        out.copy_from_slice(&words[..out.len()]);
        Ok(())
    }

    /// The row map of `basis`. Panics (like the CPU backend's slice indexing) when the basis has
    /// more Q or P primes than the parameter set: the kernels index the prime tables with it.
    fn map(&self, basis: Basis) -> RowMap {
        assert!(
            basis.q <= self.q_total && basis.p <= self.primes - self.q_total,
            "basis {basis:?} exceeds the parameter set's primes"
        );
        RowMap {
            rows: basis.rows(),
            log_n: self.log_n,
            first: 0,
            bq: basis.q as u32,
            q_total: self.q_total as u32,
            primes: self.primes,
        }
    }

    /// Panics unless every buffer in `bufs` holds at least `rows` rows. The kernels run
    /// unchecked over `rows × N` words, so this is what keeps every device access in bounds
    /// (a short buffer panics here, as a short slice does in the CPU backend).
    fn need(&self, rows: usize, bufs: &[&CubeBuffer], op: &str) {
        for b in bufs {
            assert!(
                b.rows >= rows,
                "{op}: a buffer has {} rows, the basis needs {rows}",
                b.rows
            );
        }
    }

    /// Panics unless `level` is a level of the parameter set.
    fn need_level(&self, level: usize, op: &str) {
        assert!(
            level < self.q_total,
            "{op}: level {level} exceeds the parameter set's top level {}",
            self.q_total - 1
        );
    }

    fn empty(&self, rows: usize) -> CubeBuffer {
        let words = (rows << self.log_n).max(1);
        CubeBuffer {
            handle: self.client.empty(words * std::mem::size_of::<u64>()),
            rows,
        }
    }

    /// `out = round(x / D)` over the first `keep` Q primes, where `x`'s rows `keep..keep + d`
    /// (prime map `(drop_first, drop_bq)`) are divided out with the plan at `plan_off`.
    fn div_round(
        &self,
        x: &CubeBuffer,
        keep: usize,
        d: usize,
        drop_first: usize,
        drop_bq: usize,
        plan_off: usize,
        out: &mut CubeBuffer,
    ) {
        let drop_map = RowMap {
            rows: d,
            first: drop_first as u32,
            bq: drop_bq as u32,
            ..self.map(Basis::q(0))
        };
        // The dropped rows, to the coefficient domain.
        let dropped = self.empty(d);
        launch_copy_rows(
            &self.client,
            &x.handle,
            x.rows,
            &dropped.handle,
            d,
            self.log_n,
            keep,
            d,
            0,
        );
        launch_intt(
            &self.client,
            &dropped.handle,
            &self.ntt,
            &self.mods,
            drop_map,
        );
        let keep_map = self.map(Basis::q(keep));
        launch_base_convert(
            &self.client,
            &dropped.handle,
            d,
            &out.handle,
            &self.plans,
            self.plans_len,
            &self.mods,
            keep_map,
            Conversion {
                src_row0: 0,
                k: d,
                src_first: drop_first,
                src_bq: drop_bq,
                skip: (keep, keep),
                plan_off,
                m: keep,
                div: true,
            },
        );
        launch_ntt(&self.client, &out.handle, &self.ntt, &self.mods, keep_map);
        let d_inv_off = plan_off + 2 * d + keep * d + d + keep;
        launch_div_finish(
            &self.client,
            &x.handle,
            &out.handle,
            &self.plans,
            self.plans_len,
            &self.mods,
            keep_map,
            d_inv_off,
        );
    }
}

impl<R: Runtime> PolyBackend for CubeBackend<R> {
    type Buffer = CubeBuffer;

    fn name(&self) -> String {
        format!("cube-{}", self.label)
    }

    fn params(&self) -> &CkksParams {
        &self.params
    }

    fn alloc(&self, rows: usize) -> CubeBuffer {
        let b = self.empty(rows);
        launch_fill_zero(&self.client, &b.handle, rows << self.log_n);
        b
    }

    fn buffer_rows(&self, buf: &CubeBuffer) -> usize {
        buf.rows
    }

    fn upload(&self, data: &[u64]) -> CubeBuffer {
        let n = self.params.n();
        assert!(
            data.len().is_multiple_of(n),
            "upload: length is not a whole number of rows"
        );
        CubeBuffer {
            handle: upload_words(&self.client, data),
            rows: data.len() / n,
        }
    }

    fn download(&self, buf: &CubeBuffer, out: &mut [u64]) -> veil_core::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.read_back(buf, out)
            .map_err(|_| veil_core::Error::Device { what: "download" })
    }

    fn sync(&self) -> veil_core::Result<()> {
        CubeBackend::sync(self).map_err(|_| veil_core::Error::Device { what: "sync" })
    }

    fn copy_rows(
        &self,
        src: &CubeBuffer,
        src_basis: Basis,
        dst: &mut CubeBuffer,
        dst_basis: Basis,
    ) {
        self.need(src_basis.rows(), &[src], "copy_rows");
        self.need(dst_basis.rows(), &[dst], "copy_rows");
        let _ = (self.map(src_basis), self.map(dst_basis));
        assert!(
            dst_basis.q <= src_basis.q && dst_basis.p <= src_basis.p,
            "copy_rows: destination basis must be a subset"
        );
        launch_copy_rows(
            &self.client,
            &src.handle,
            src.rows,
            &dst.handle,
            dst_basis.rows(),
            self.log_n,
            0,
            dst_basis.q,
            src_basis.q,
        );
    }

    fn zeroize(&self, buf: &mut CubeBuffer) {
        launch_fill_zero(&self.client, &buf.handle, buf.rows << self.log_n);
    }

    fn ntt(&self, a: &mut CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a], "ntt");
        launch_ntt(
            &self.client,
            &a.handle,
            &self.ntt,
            &self.mods,
            self.map(basis),
        );
    }

    fn intt(&self, a: &mut CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a], "intt");
        launch_intt(
            &self.client,
            &a.handle,
            &self.ntt,
            &self.mods,
            self.map(basis),
        );
    }

    fn add_assign(&self, a: &mut CubeBuffer, b: &CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a, b], "add_assign");
        launch_binary_assign(
            &self.client,
            BinaryOp::Add,
            &a.handle,
            &b.handle,
            &self.mods,
            self.map(basis),
        );
    }

    fn sub_assign(&self, a: &mut CubeBuffer, b: &CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a, b], "sub_assign");
        launch_binary_assign(
            &self.client,
            BinaryOp::Sub,
            &a.handle,
            &b.handle,
            &self.mods,
            self.map(basis),
        );
    }

    fn add_new(&self, a: &CubeBuffer, b: &CubeBuffer, basis: Basis) -> CubeBuffer {
        self.need(basis.rows(), &[a, b], "add_new");
        let out = self.empty(basis.rows());
        launch_binary_new(
            &self.client,
            BinaryOp::Add,
            &a.handle,
            &b.handle,
            &out.handle,
            &self.mods,
            self.map(basis),
        );
        out
    }

    fn sub_new(&self, a: &CubeBuffer, b: &CubeBuffer, basis: Basis) -> CubeBuffer {
        self.need(basis.rows(), &[a, b], "sub_new");
        let out = self.empty(basis.rows());
        launch_binary_new(
            &self.client,
            BinaryOp::Sub,
            &a.handle,
            &b.handle,
            &out.handle,
            &self.mods,
            self.map(basis),
        );
        out
    }

    fn neg_assign(&self, a: &mut CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a], "neg_assign");
        launch_neg(&self.client, &a.handle, &self.mods, self.map(basis));
    }

    fn mul_assign(&self, a: &mut CubeBuffer, b: &CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a, b], "mul_assign");
        launch_binary_assign(
            &self.client,
            BinaryOp::Mul,
            &a.handle,
            &b.handle,
            &self.mods,
            self.map(basis),
        );
    }

    fn mul(&self, a: &CubeBuffer, b: &CubeBuffer, out: &mut CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[a, b, out], "mul");
        launch_binary_new(
            &self.client,
            BinaryOp::Mul,
            &a.handle,
            &b.handle,
            &out.handle,
            &self.mods,
            self.map(basis),
        );
    }

    fn mul_add_assign(&self, acc: &mut CubeBuffer, a: &CubeBuffer, b: &CubeBuffer, basis: Basis) {
        self.need(basis.rows(), &[acc, a, b], "mul_add_assign");
        launch_mul_add(
            &self.client,
            &acc.handle,
            &a.handle,
            &b.handle,
            &self.mods,
            self.map(basis),
        );
    }

    fn mul_scalar_assign(&self, a: &mut CubeBuffer, scalars: &[u64], basis: Basis) {
        self.need(basis.rows(), &[a], "mul_scalar_assign");
        let s = upload_words(&self.client, &scalars[..basis.rows()]);
        launch_scalar_assign(
            &self.client,
            true,
            &a.handle,
            &s,
            &self.mods,
            self.map(basis),
        );
    }

    fn add_scalar_assign(&self, a: &mut CubeBuffer, scalars: &[u64], basis: Basis) {
        self.need(basis.rows(), &[a], "add_scalar_assign");
        let s = upload_words(&self.client, &scalars[..basis.rows()]);
        launch_scalar_assign(
            &self.client,
            false,
            &a.handle,
            &s,
            &self.mods,
            self.map(basis),
        );
    }

    fn automorphism(
        &self,
        a: &CubeBuffer,
        g: u64,
        out: &mut CubeBuffer,
        basis: Basis,
        domain: Domain,
    ) {
        self.need(basis.rows(), &[a, out], "automorphism");
        assert!(g % 2 == 1, "automorphism: the Galois element must be odd");
        launch_automorphism(
            &self.client,
            &a.handle,
            g,
            &out.handle,
            &self.mods,
            self.map(basis),
            domain == Domain::Ntt,
        );
    }

    fn decompose(&self, c: &CubeBuffer, level: usize, out: &mut [CubeBuffer]) {
        self.need_level(level, "decompose");
        let ext_rows = level + 1 + self.params.special_at(level);
        self.need(level + 1, &[c], "decompose");
        assert!(
            out.len() >= self.params.digits_at(level),
            "decompose: too few digit buffers"
        );
        self.need(ext_rows, &out.iter().collect::<Vec<_>>(), "decompose");
        let alpha = self.params.alpha();
        let k = self.params.special_at(level);
        let qb = Basis::q(level + 1);
        let ext = Basis::qp(level + 1, k);
        // c over Q_level, to the coefficient domain (a copy: c is left untouched).
        let coeff = self.empty(qb.rows());
        launch_copy_rows(
            &self.client,
            &c.handle,
            c.rows,
            &coeff.handle,
            qb.rows(),
            self.log_n,
            0,
            qb.rows(),
            0,
        );
        launch_intt(
            &self.client,
            &coeff.handle,
            &self.ntt,
            &self.mods,
            self.map(qb),
        );
        let digits = self.params.digits_at(level);
        for (j, d) in out.iter_mut().enumerate().take(digits) {
            let (s, e) = (j * alpha, ((j + 1) * alpha).min(level + 1));
            // Converted rows on the other primes; the digit's own rows are copied in the
            // coefficient domain, and the forward NTT below gives back `c`'s words exactly.
            launch_base_convert(
                &self.client,
                &coeff.handle,
                qb.rows(),
                &d.handle,
                &self.plans,
                self.plans_len,
                &self.mods,
                self.map(ext),
                Conversion {
                    src_row0: s,
                    k: e - s,
                    src_first: s,
                    src_bq: e - s,
                    skip: (s, e),
                    plan_off: self.index.decompose[level][j],
                    m: ext.rows() - (e - s),
                    div: false,
                },
            );
            launch_ntt(
                &self.client,
                &d.handle,
                &self.ntt,
                &self.mods,
                self.map(ext),
            );
        }
    }

    fn key_inner_product(
        &self,
        digits: &[CubeBuffer],
        key_b: &[CubeBuffer],
        key_a: &[CubeBuffer],
        level: usize,
        acc0: &mut CubeBuffer,
        acc1: &mut CubeBuffer,
    ) {
        self.need_level(level, "key_inner_product");
        let (dn, ext_rows) = (
            self.params.digits_at(level),
            level + 1 + self.params.special_at(level),
        );
        assert!(
            digits.len() >= dn && key_b.len() >= dn && key_a.len() >= dn,
            "key_inner_product: too few digits or key parts"
        );
        for b in digits.iter().chain(key_b).chain(key_a).take(3 * dn) {
            self.need(ext_rows, &[b], "key_inner_product");
        }
        self.need(ext_rows, &[acc0, acc1], "key_inner_product");
        let ext = Basis::qp(level + 1, self.params.special_at(level));
        let dn = self.params.digits_at(level);
        for j in 0..dn {
            launch_key_inner_product(
                &self.client,
                &digits[j].handle,
                &key_b[j].handle,
                &key_a[j].handle,
                &acc0.handle,
                &acc1.handle,
                &self.mods,
                self.map(ext),
                j == 0,
            );
        }
    }

    fn mod_down(&self, x: &CubeBuffer, level: usize, out: &mut CubeBuffer) {
        self.need_level(level, "mod_down");
        let k = self.params.special_at(level);
        self.need(level + 1 + k, &[x], "mod_down");
        self.need(level + 1, &[out], "mod_down");
        self.div_round(x, level + 1, k, 0, 0, self.index.mod_down[level], out);
    }

    fn rescale(&self, x: &CubeBuffer, level: usize, out: &mut CubeBuffer) {
        self.need_level(level, "rescale");
        self.need(level + 1, &[x], "rescale");
        self.need(level, &[out], "rescale");
        assert!(level >= 1, "rescale needs a prime to drop");
        self.div_round(x, level, 1, level, 1, self.index.rescale[level], out);
    }

    fn mod_down_p0(&self, x: &CubeBuffer, level: usize, out: &mut CubeBuffer) {
        self.need_level(level, "mod_down_p0");
        self.need(level + 2, &[x], "mod_down_p0");
        self.need(level + 1, &[out], "mod_down_p0");
        self.div_round(x, level + 1, 1, 0, 0, self.index.mod_down_p0[level], out);
    }
}

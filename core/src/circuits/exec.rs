//! Executors: the one interface through which every homomorphic kernel (Transformer and CNN) runs, with two
//! implementations — [`CkksExec`] (real RNS-CKKS on a [`PolyBackend`]) and [`SymExec`] (a
//! symbolic dry run that only tracks levels and degrees). Both count every homomorphic operation
//! in the same place ([`OpCounts`]), so a dry run at BERT-base shape exercises exactly the code
//! path of the real kernels and its counts cannot drift from the implementation.
//!
//! Counting conventions (EncFormer Table I / Table II): a *rotation* is one key-switched Galois
//! automorphism `ρ(v; r)` with `r ≠ 0 (mod n)`; rotations of one ciphertext issued together share
//! one gadget decomposition (hoisting, counted in [`OpCounts::hoists`]) but each still counts as a
//! rotation. A *ct×ct multiplication* is one tensor product; relinearizations are counted apart
//! because the kernels sum tensor products before one relinearization (lazy relinearization).
//! Key switches = rotations + conjugations + relinearizations.

use crate::backend::PolyBackend;
use crate::ckks::{Ciphertext, Ckks, EvaluationKeys, Plaintext, SubringPlaintext, SubringSum, C64};
use crate::error::{Error, Result};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use core::cell::RefCell;
use serde::{Deserialize, Serialize};

/// Homomorphic operation counts of a kernel (or of a whole pipeline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    /// Key-switched rotations `ρ(v; r)`, `r ≠ 0`.
    pub rotations: u64,
    /// Key-switched conjugations.
    pub conjugations: u64,
    /// Ciphertext × ciphertext tensor products.
    pub ct_mults: u64,
    /// Relinearizations (one key switch each).
    pub relins: u64,
    /// Ciphertext × plaintext multiplications.
    pub pt_mults: u64,
    /// Ciphertext × real-constant multiply-accumulates ([`Exec::mul_const_acc`]: one scalar per
    /// RNS limb, no plaintext, no NTT).
    #[serde(default)]
    pub const_mults: u64,
    /// Multiplications by `i` (exact monomial `X^{N/2}`; no key switch, no level).
    pub mul_i: u64,
    /// Rescales.
    pub rescales: u64,
    /// Gadget decompositions shared by hoisted rotation groups.
    pub hoists: u64,
    /// Ciphertext additions and subtractions.
    pub adds: u64,
    /// Rotations whose key-switch output stayed over `Q ∪ P` and shares one ModDown with others
    /// ([`Exec::rotate_sum_lazy`]).
    pub lazy_rotations: u64,
    /// ModDown groups of lazy rotations (one ModDown pair each).
    pub lazy_groups: u64,
    /// Generic layout repacks between FHE kernels (zero under SCP; the "w/o SCP" ablation inserts
    /// them, Appendix G-A).
    pub repacks: u64,
}

impl OpCounts {
    /// Key switches: rotations + conjugations + relinearizations.
    pub fn key_switches(&self) -> u64 {
        self.rotations + self.conjugations + self.relins
    }

    /// `self - before` field by field (the cost of what ran in between).
    pub fn since(&self, before: &OpCounts) -> OpCounts {
        // A struct literal names every field, so a new counter cannot be left out here.
        macro_rules! minus {
            ($($f:ident),*) => { OpCounts { $($f: self.$f - before.$f),* } };
        }
        minus! {
            rotations, conjugations, ct_mults, relins, pt_mults, const_mults, mul_i, rescales,
            hoists, adds, lazy_rotations, lazy_groups, repacks
        }
    }
}

/// Slot values of a plaintext, produced on demand (a dry run never asks).
pub type PtValues<'a> = &'a dyn Fn() -> Vec<C64>;

/// Bytes of compact plaintexts the real executor holds at once in [`Exec::mul_plain_sums`] by
/// default (batches of giant steps are cut to fit; [`CkksExec::with_sum_budget`]).
pub const SUM_BYTES: usize = 96 << 20;

/// Where a term's compact plaintext lives during a batch.
#[derive(Clone, Copy)]
enum Src {
    Cached(u64),
    Fresh(usize),
}

/// One term `ct ⊙ pt` of a plaintext sum ([`Exec::mul_plain_sum_acc`]): the ciphertext, the
/// plaintext's cache key (structural plaintexts only) and its slot values.
pub type PlainTerm<'a, C> = (&'a C, Option<u64>, PtValues<'a>);

/// The terms of a plaintext sum from `(ciphertext, cache key, slot values)` triples the caller
/// holds (structural plaintexts, each cached under its key).
pub fn keyed_terms<'a, C, F: Fn() -> Vec<C64>>(
    items: &'a [(&'a C, u64, F)],
) -> Vec<PlainTerm<'a, C>> {
    items
        .iter()
        .map(|(ct, key, v)| (*ct, Some(*key), v as PtValues<'a>))
        .collect()
}

/// The homomorphic operations the Transformer kernels are written against.
///
/// Plaintext multiplications encode at the ciphertext's level with scale `q_level` (the prime the
/// next rescale divides by), so that `rescale(ct ⊙ pt)` keeps the scale of `ct` exactly and sums of
/// masked terms never mismatch in scale.
pub trait Exec {
    /// The ciphertext type.
    type Ct;
    /// Slots per ciphertext `n`.
    fn slots(&self) -> usize;
    /// The prime `q_level` the next rescale divides by. Executors without a parameter set (the
    /// dry run) return the nominal `2^40`; they track no scales.
    fn rescale_prime(&self, level: usize) -> f64 {
        let _ = level;
        (1u64 << 40) as f64
    }
    /// The level of a ciphertext.
    fn level(&self, ct: &Self::Ct) -> usize;
    /// A deep copy (free).
    fn clone_ct(&self, ct: &Self::Ct) -> Self::Ct;
    /// Hoisted rotations of one ciphertext: `ρ(ct; k)` for each `k` (normalized mod `n`; `k ≡ 0`
    /// is a copy and not counted).
    fn rotate_many(&self, ct: &Self::Ct, ks: &[i64]) -> Result<Vec<Self::Ct>>;
    /// One rotation `ρ(ct; k)`.
    fn rotate(&self, ct: &Self::Ct, k: i64) -> Result<Self::Ct> {
        Ok(self.rotate_many(ct, &[k])?.pop().unwrap())
    }
    /// `Σ_i ρ(ct_i; k_i)` over different ciphertexts of one level and scale, with the key-switch
    /// outputs summed over `Q ∪ P` and brought down by a single ModDown (lazy key switching: the
    /// giant steps of baby-step giant-step). Each nonzero `k_i` counts as one rotation.
    fn rotate_sum_lazy(&self, terms: Vec<(Self::Ct, i64)>) -> Result<Self::Ct>;
    /// Complex conjugation of every slot.
    fn conjugate(&self, ct: &Self::Ct) -> Result<Self::Ct>;
    /// `ct ⊙ pt` where `pt` has the slot values `values()` (no rescale). `key` identifies
    /// structural plaintexts (masks) so that the real executor may cache their encodings.
    fn mul_plain(&self, ct: &Self::Ct, key: Option<u64>, values: PtValues<'_>) -> Result<Self::Ct>;
    /// `acc += ct ⊙ pt` (`acc = ct ⊙ pt` when empty): counted as one ptmul and one addition; the
    /// real executor fuses it into one multiply-accumulate pass without a temporary ciphertext.
    fn mul_plain_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        key: Option<u64>,
        values: PtValues<'_>,
    ) -> Result<()> {
        let t = self.mul_plain(ct, key, values)?;
        accumulate(self, acc, t)
    }
    /// `acc += Σ_t ct_t ⊙ pt_t` (`acc` starts as the first product when empty): the baby-step sum
    /// of a linear transform. Counted exactly as the same sequence of [`Exec::mul_plain_acc`]
    /// calls, which is the default; the real executor runs it as [`Exec::mul_plain_sums`] of one
    /// group (plaintexts encoded compactly, a batch at a time, summed lazily and reduced once per
    /// coefficient: the same words as term by term, since every step is exact modulo each prime).
    fn mul_plain_sum_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        terms: &[PlainTerm<'_, Self::Ct>],
    ) -> Result<()> {
        for &(ct, key, values) in terms {
            self.mul_plain_acc(acc, ct, key, values)?;
        }
        Ok(())
    }
    /// `[Σ_{t ∈ G} ct_t ⊙ pt_t for G in groups]`, `None` for an empty group: several baby-step
    /// sums over one set of ciphertexts (the giant steps of a linear transform). Counted as one
    /// [`Exec::mul_plain_sum_acc`] per group, which is the default; the real executor reads each
    /// ciphertext once for all the groups of a batch.
    fn mul_plain_sums(
        &self,
        groups: &[Vec<PlainTerm<'_, Self::Ct>>],
    ) -> Result<Vec<Option<Self::Ct>>> {
        groups
            .iter()
            .map(|g| {
                let mut acc = None;
                self.mul_plain_sum_acc(&mut acc, g)?;
                Ok(acc)
            })
            .collect()
    }
    /// `ct ⊙ pt` with `pt` encoded at an explicit `scale` instead of `q_level` (no rescale): the
    /// first factor of a split-scale product `Δ₁·Δ₂ = q_level` (FEnc2 §IV-C), whose second
    /// factor is [`Exec::mul_const_acc`]. Executors that do not support it refuse it.
    fn mul_plain_at(
        &self,
        ct: &Self::Ct,
        key: Option<u64>,
        values: PtValues<'_>,
        scale: f64,
    ) -> Result<Self::Ct> {
        let _ = (ct, key, values, scale);
        Err(Error::Backend(
            "this executor does not support split-scale products",
        ))
    }
    /// `acc += ⌊w·scale⌉·ct` (`acc = …` when empty): a real constant encoded at `scale`, the
    /// result's scale being the ciphertext's times `scale` (one scalar per RNS limb; no
    /// plaintext, no NTT).
    fn mul_const_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        w: f64,
        scale: f64,
    ) -> Result<()> {
        let _ = (acc, ct, w, scale);
        Err(Error::Backend(
            "this executor does not support constant multiply-accumulates",
        ))
    }
    /// `out_r = Σ_j W[r][j]·ins_j` for a real matrix `W` (`rows × ins.len()`, row-major), each
    /// output at the inputs' scale times `scale`: a layer whose every ciphertext holds one
    /// feature of a whole batch. The default is one [`Exec::mul_const_acc`] per nonzero weight
    /// (each weight rounded at `scale`); the real engine runs it as one matrix product per
    /// polynomial ([`Ckks::mul_const_matrix`], weights rounded to `2^-21` of the largest).
    /// Counted the same either way: one constant multiply-accumulate per nonzero weight and an
    /// addition for each after a row's first.
    fn mul_const_matrix(
        &self,
        ins: &[&Self::Ct],
        weights: &[f64],
        rows: usize,
        scale: f64,
    ) -> Result<Vec<Self::Ct>> {
        let k = ins.len();
        if k == 0 || weights.len() != rows * k {
            return Err(Error::Shape {
                what: "weights of a constant matrix (rows × inputs)",
                expected: rows * k.max(1),
                found: weights.len(),
            });
        }
        (0..rows)
            .map(|r| {
                let mut acc = None;
                for (j, &w) in weights[r * k..(r + 1) * k].iter().enumerate() {
                    if w != 0.0 {
                        self.mul_const_acc(&mut acc, ins[j], w, scale)?;
                    }
                }
                if acc.is_none() {
                    self.mul_const_acc(&mut acc, ins[0], 0.0, scale)?;
                }
                acc.ok_or(Error::InvalidParameters("constant matrix: no output"))
            })
            .collect()
    }
    /// `ct + pt` where `pt` has the slot values `values()`, encoded at the ciphertext's level
    /// and scale (a bias; no level consumed).
    fn add_plain(&self, ct: &mut Self::Ct, values: PtValues<'_>) -> Result<()>;
    /// `ct + v` in every slot (a bias or shift constant over the batch; no level consumed).
    /// The default adds a plaintext of `v`s; the real engine adds the constant directly.
    fn add_const(&self, ct: &mut Self::Ct, v: f64) -> Result<()> {
        let n = self.slots();
        self.add_plain(ct, &|| alloc::vec![C64::real(v); n])
    }
    /// Tensor product without relinearization (degree 2).
    fn mul_ct(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct>;
    /// Relinearizes a degree-2 ciphertext.
    fn relin(&self, ct: &mut Self::Ct) -> Result<()>;
    /// Rescale by `q_level`.
    fn rescale(&self, ct: &mut Self::Ct) -> Result<()>;
    /// `a += b`.
    fn add_assign(&self, a: &mut Self::Ct, b: &Self::Ct) -> Result<()>;
    /// `a -= b`.
    fn sub_assign(&self, a: &mut Self::Ct, b: &Self::Ct) -> Result<()>;
    /// `a *= i` exactly.
    fn mul_i(&self, a: &mut Self::Ct) -> Result<()>;
    /// Drops moduli down to `level` (free).
    fn drop_to(&self, a: &mut Self::Ct, level: usize) -> Result<()>;
    /// Records one generic repack (the Transformer ablation `repack_generic` calls it).
    fn note_repack(&self);
    /// The counts so far.
    fn counts(&self) -> OpCounts;
}

/// `Err(SlotMismatch)` unless the executor's slot count is the plan's.
pub fn check_slots(found: usize, expected: usize) -> Result<()> {
    if found != expected {
        return Err(Error::SlotMismatch { expected, found });
    }
    Ok(())
}

/// `Err(Shape)` unless a kernel got the number of ciphertexts (or the size) its plan fixes.
pub fn check_count(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if found != expected {
        return Err(Error::Shape {
            what,
            expected,
            found,
        });
    }
    Ok(())
}

/// Accumulates `term` into `acc` (`acc = term` when empty).
pub fn accumulate<E: Exec + ?Sized>(ex: &E, acc: &mut Option<E::Ct>, term: E::Ct) -> Result<()> {
    match acc {
        Some(a) => ex.add_assign(a, &term),
        None => {
            *acc = Some(term);
            Ok(())
        }
    }
}

/// Brings two ciphertexts to the lower of their levels.
pub fn align_levels<E: Exec>(ex: &E, a: &mut E::Ct, b: &mut E::Ct) -> Result<()> {
    let l = ex.level(a).min(ex.level(b));
    ex.drop_to(a, l)?;
    ex.drop_to(b, l)
}

/// FNV-1a hash of a structural plaintext description (cache key for masks).
pub fn pt_key(tag: u64, parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ tag;
    for &p in parts {
        for b in p.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn norm_rot(k: i64, n: usize) -> i64 {
    k.rem_euclid(n as i64)
}

// ---- real CKKS ----------------------------------------------------------------------------

/// The real executor: RNS-CKKS on a backend, with evaluation keys for every rotation the kernels
/// use (collect them with a [`SymExec`] dry run: [`SymExec::rotations_used`]).
pub struct CkksExec<'a, B: PolyBackend> {
    ck: &'a Ckks<B>,
    keys: &'a EvaluationKeys<B>,
    slots: usize,
    counts: RefCell<OpCounts>,
    cache: RefCell<BTreeMap<(u64, usize), Plaintext<B>>>,
    /// Compact encodings of keyed plaintexts ([`Exec::mul_plain_sums`]).
    compact: RefCell<BTreeMap<(u64, usize), SubringPlaintext>>,
    cache_budget: usize,
    cached_bytes: core::cell::Cell<usize>,
    sum_budget: usize,
}

impl<'a, B: PolyBackend> CkksExec<'a, B> {
    /// An executor over `ck` with `keys`, packing `slots` slots per ciphertext. Keyed plaintexts
    /// are cached without limit (see [`CkksExec::with_cache_budget`]).
    pub fn new(ck: &'a Ckks<B>, keys: &'a EvaluationKeys<B>, slots: usize) -> Self {
        Self {
            ck,
            keys,
            slots,
            counts: RefCell::new(OpCounts::default()),
            cache: RefCell::new(BTreeMap::new()),
            compact: RefCell::new(BTreeMap::new()),
            cache_budget: usize::MAX,
            cached_bytes: core::cell::Cell::new(0),
            sum_budget: SUM_BYTES,
        }
    }

    /// Holds at most `bytes` of compact plaintexts at once while summing products
    /// ([`Exec::mul_plain_sums`]; at least two terms per batch): larger sums are cut into parts
    /// that are added. The default is [`SUM_BYTES`].
    pub fn with_sum_budget(mut self, bytes: usize) -> Self {
        self.sum_budget = bytes;
        self
    }

    /// Caches keyed plaintexts only while their total size stays within `bytes`; beyond it each
    /// is encoded when used and dropped (a layer with more distinct diagonals than memory, such
    /// as a large fully connected layer at a large batch).
    pub fn with_cache_budget(mut self, bytes: usize) -> Self {
        self.cache_budget = bytes;
        self
    }

    /// [`CkksExec::with_cache_budget`] in place.
    pub fn set_cache_budget(&mut self, bytes: usize) {
        self.cache_budget = bytes;
    }

    /// Bytes of plaintexts held in the cache.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes.get()
    }

    /// Whether a plaintext at `level` still fits the cache budget (and reserves it if so).
    fn reserve(&self, level: usize) -> bool {
        self.reserve_bytes((level + 1) * self.ck.params().n() * 8)
    }

    fn reserve_bytes(&self, sz: usize) -> bool {
        let now = self.cached_bytes.get();
        if now.saturating_add(sz) > self.cache_budget {
            return false;
        }
        self.cached_bytes.set(now + sz);
        true
    }

    /// The CKKS engine.
    pub fn ckks(&self) -> &Ckks<B> {
        self.ck
    }

    fn bump(&self, f: impl FnOnce(&mut OpCounts)) {
        f(&mut self.counts.borrow_mut());
    }

    /// Runs `f` on the plaintext for `(key, level)` (cached when keyed).
    fn with_pt<T>(
        &self,
        level: usize,
        key: Option<u64>,
        values: PtValues<'_>,
        f: impl FnOnce(&Plaintext<B>) -> Result<T>,
    ) -> Result<T> {
        match key {
            Some(k) => {
                let mut cache = self.cache.borrow_mut();
                if let alloc::collections::btree_map::Entry::Vacant(e) = cache.entry((k, level)) {
                    if !self.reserve(level) {
                        drop(cache);
                        return f(&self.encode_at(level, values)?);
                    }
                    e.insert(self.encode_at(level, values)?);
                }
                f(&cache[&(k, level)])
            }
            None => f(&self.encode_at(level, values)?),
        }
    }

    /// The compact subring encoding of a term's plaintext at `level` (cached when keyed and the
    /// budget allows).
    fn compact_pt(
        &self,
        level: usize,
        key: Option<u64>,
        values: PtValues<'_>,
        fresh: &mut Vec<SubringPlaintext>,
    ) -> Result<Src> {
        if let Some(k) = key {
            if self.compact.borrow().contains_key(&(k, level)) {
                return Ok(Src::Cached(k));
            }
            let pt = self.encode_compact(level, values)?;
            if self.reserve_bytes(pt.bytes()) {
                self.compact.borrow_mut().insert((k, level), pt);
                return Ok(Src::Cached(k));
            }
            fresh.push(pt);
            return Ok(Src::Fresh(fresh.len() - 1));
        }
        fresh.push(self.encode_compact(level, values)?);
        Ok(Src::Fresh(fresh.len() - 1))
    }

    fn encode_compact(&self, level: usize, values: PtValues<'_>) -> Result<SubringPlaintext> {
        let v = self.slot_values(values)?;
        self.ck
            .encode_subring_compact(&v, self.slots, level, self.ck.rescale_prime(level))
    }

    /// The slot values of a plaintext, checked to fill the executor's slots.
    fn slot_values(&self, values: PtValues<'_>) -> Result<Vec<C64>> {
        let v = values();
        if v.len() != self.slots {
            return Err(Error::SlotCount {
                given: v.len(),
                slots: self.slots,
            });
        }
        Ok(v)
    }

    /// The sums of one batch of groups (every term of one shape), their plaintexts encoded
    /// compactly and multiplied in one pass ([`Ckks::mul_subring_sums`]).
    fn subring_batch(
        &self,
        groups: &[&[PlainTerm<'_, Ciphertext<B>>]],
    ) -> Result<Vec<Option<Ciphertext<B>>>> {
        let Some(&(first, _, _)) = groups.iter().flat_map(|g| g.iter()).next() else {
            return Ok(groups.iter().map(|_| None).collect());
        };
        let level = first.level;
        let mut fresh = Vec::new();
        let srcs: Vec<Vec<Src>> = groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&(_, key, values)| self.compact_pt(level, key, values, &mut fresh))
                    .collect::<Result<Vec<Src>>>()
            })
            .collect::<Result<_>>()?;
        let cache = self.compact.borrow();
        let sums: Vec<SubringSum<'_, B>> = groups
            .iter()
            .zip(&srcs)
            .map(|(g, ss)| {
                g.iter()
                    .zip(ss)
                    .map(|(&(ct, _, _), src)| {
                        let pt = match *src {
                            Src::Cached(k) => &cache[&(k, level)],
                            Src::Fresh(i) => &fresh[i],
                        };
                        (ct, pt)
                    })
                    .collect()
            })
            .collect();
        self.ck.mul_subring_sums(&sums)
    }

    fn encode_at(&self, level: usize, values: PtValues<'_>) -> Result<Plaintext<B>> {
        let v = self.slot_values(values)?;
        self.ck
            .encode(&v, self.slots, level, self.ck.rescale_prime(level))
    }
}

impl<B: PolyBackend> Exec for CkksExec<'_, B> {
    type Ct = Ciphertext<B>;

    fn slots(&self) -> usize {
        self.slots
    }
    fn rescale_prime(&self, level: usize) -> f64 {
        self.ck.rescale_prime(level)
    }
    fn level(&self, ct: &Self::Ct) -> usize {
        ct.level()
    }
    fn clone_ct(&self, ct: &Self::Ct) -> Self::Ct {
        self.ck.clone_ct(ct)
    }
    fn rotate_many(&self, ct: &Self::Ct, ks: &[i64]) -> Result<Vec<Self::Ct>> {
        let ks: Vec<i64> = ks.iter().map(|&k| norm_rot(k, self.slots)).collect();
        let nz: Vec<i64> = ks.iter().copied().filter(|&k| k != 0).collect();
        let mut rotated = if nz.is_empty() {
            Vec::new()
        } else {
            self.bump(|c| {
                c.rotations += nz.len() as u64;
                c.hoists += 1;
            });
            self.ck.rotate_hoisted(ct, &nz, self.keys)?
        }
        .into_iter();
        Ok(ks
            .iter()
            .map(|&k| {
                if k == 0 {
                    self.ck.clone_ct(ct)
                } else {
                    rotated.next().unwrap()
                }
            })
            .collect())
    }
    fn rotate_sum_lazy(&self, terms: Vec<(Self::Ct, i64)>) -> Result<Self::Ct> {
        let zeros = terms
            .iter()
            .filter(|(_, k)| norm_rot(*k, self.slots) == 0)
            .count() as u64;
        let (sum, nz) = self.ck.rotate_sum_lazy(terms, self.keys)?;
        // The unrotated terms' additions, and the one joining them to the rotated sum.
        let plain_adds = zeros.saturating_sub(1) + u64::from(zeros > 0 && nz > 0);
        if plain_adds > 0 {
            self.bump(|c| c.adds += plain_adds);
        }
        if nz > 0 {
            self.bump(|c| {
                c.rotations += nz;
                c.hoists += nz;
                c.lazy_rotations += nz;
                c.lazy_groups += 1;
                c.adds += nz - 1;
            });
        }
        Ok(sum)
    }
    fn conjugate(&self, ct: &Self::Ct) -> Result<Self::Ct> {
        self.bump(|c| c.conjugations += 1);
        self.ck.conjugate(ct, self.keys)
    }
    fn mul_plain(&self, ct: &Self::Ct, key: Option<u64>, values: PtValues<'_>) -> Result<Self::Ct> {
        self.bump(|c| c.pt_mults += 1);
        self.with_pt(ct.level(), key, values, |pt| self.ck.mul_plain(ct, pt))
    }
    fn mul_plain_at(
        &self,
        ct: &Self::Ct,
        key: Option<u64>,
        values: PtValues<'_>,
        scale: f64,
    ) -> Result<Self::Ct> {
        self.bump(|c| c.pt_mults += 1);
        let level = ct.level();
        let encode = || -> Result<Plaintext<B>> {
            let v = self.slot_values(values)?;
            self.ck.encode(&v, self.slots, level, scale)
        };
        match key {
            Some(k) => {
                let k = pt_key(k, &[scale.to_bits()]);
                let mut cache = self.cache.borrow_mut();
                if let alloc::collections::btree_map::Entry::Vacant(e) = cache.entry((k, level)) {
                    if !self.reserve(level) {
                        drop(cache);
                        return self.ck.mul_plain(ct, &encode()?);
                    }
                    e.insert(encode()?);
                }
                self.ck.mul_plain(ct, &cache[&(k, level)])
            }
            None => self.ck.mul_plain(ct, &encode()?),
        }
    }
    fn mul_const_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        w: f64,
        scale: f64,
    ) -> Result<()> {
        let mut t = self.ck.clone_ct(ct);
        self.ck.mul_const_assign(&mut t, C64::real(w), scale)?;
        self.bump(|c| c.const_mults += 1);
        accumulate(self, acc, t)
    }
    fn mul_const_matrix(
        &self,
        ins: &[&Self::Ct],
        weights: &[f64],
        rows: usize,
        scale: f64,
    ) -> Result<Vec<Self::Ct>> {
        let outs = self.ck.mul_const_matrix(ins, weights, rows, scale)?;
        // The default's counts: one multiply-accumulate per nonzero weight (one per all-zero
        // row), each after a row's first also an addition.
        let k = ins.len().max(1);
        let (macs, rows) = weights.chunks(k).fold((0u64, 0u64), |(m, r), row| {
            let nz = (row.iter().filter(|&&w| w != 0.0).count() as u64).max(1);
            (m + nz, r + 1)
        });
        self.bump(|c| {
            c.const_mults += macs;
            c.adds += macs - rows;
        });
        Ok(outs)
    }
    fn mul_plain_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        ct: &Self::Ct,
        key: Option<u64>,
        values: PtValues<'_>,
    ) -> Result<()> {
        let Some(a) = acc else {
            *acc = Some(self.mul_plain(ct, key, values)?);
            return Ok(());
        };
        if a.level != ct.level || a.polys.len() != ct.polys.len() || a.slots != ct.slots {
            let t = self.mul_plain(ct, key, values)?;
            return self.add_assign(a, &t);
        }
        self.bump(|c| {
            c.pt_mults += 1;
            c.adds += 1;
        });
        self.with_pt(ct.level, key, values, |pt| {
            let want = ct.scale * pt.scale;
            if (a.scale - want).abs() > 1e-9 * a.scale.abs().max(want.abs()) {
                return Err(Error::ScaleMismatch {
                    left: a.scale,
                    right: want,
                });
            }
            let basis = crate::backend::Basis::q(ct.level + 1);
            let be = self.ck.backend();
            for (x, y) in a.polys.iter_mut().zip(&ct.polys) {
                be.mul_add_assign(x, y, &pt.poly, basis);
            }
            a.seed = None;
            Ok(())
        })
    }
    fn mul_plain_sum_acc(
        &self,
        acc: &mut Option<Self::Ct>,
        terms: &[PlainTerm<'_, Self::Ct>],
    ) -> Result<()> {
        let Some(&(first, _, _)) = terms.first() else {
            return Ok(());
        };
        let shape = match acc {
            Some(a) => (a.level, a.polys.len(), a.slots),
            None => (first.level, first.polys.len(), first.slots),
        };
        if terms.len() < 2
            || terms
                .iter()
                .any(|(c, _, _)| (c.level, c.polys.len(), c.slots) != shape)
        {
            // A lone or mismatched term goes the checked one-by-one way.
            for &(ct, key, values) in terms {
                self.mul_plain_acc(acc, ct, key, values)?;
            }
            return Ok(());
        }
        let sum = self
            .mul_plain_sums(&[terms.to_vec()])?
            .pop()
            .flatten()
            .expect("a nonempty sum");
        accumulate(self, acc, sum)
    }
    fn mul_plain_sums(
        &self,
        groups: &[Vec<PlainTerm<'_, Self::Ct>>],
    ) -> Result<Vec<Option<Self::Ct>>> {
        let mut all = groups.iter().flatten();
        let Some(&(first, _, _)) = all.next() else {
            return Ok(groups.iter().map(|_| None).collect());
        };
        let shape = (first.level, first.polys.len(), first.slots);
        let n = self.ck.params().n();
        if !self.ck.backend().native_subring_sums()
            || shape.2 != self.slots
            || !n.is_multiple_of(2 * self.slots)
            || all.any(|(c, _, _)| (c.level, c.polys.len(), c.slots) != shape)
        {
            // Mixed shapes, or a backend without its own subring pass (it keeps full
            // plaintexts in its memory instead): each group one term at a time.
            let mut out = Vec::with_capacity(groups.len());
            for g in groups {
                let mut acc = None;
                for &(ct, key, values) in g {
                    self.mul_plain_acc(&mut acc, ct, key, values)?;
                }
                out.push(acc);
            }
            return Ok(out);
        }
        // Batches of whole groups within the byte budget; a group larger than the budget is cut
        // into parts whose sums are added.
        let per_term = (shape.0 + 1) * 2 * self.slots * 8;
        let cap = (self.sum_budget / per_term).max(2);
        let mut out: Vec<Option<Self::Ct>> = Vec::with_capacity(groups.len());
        let mut batch: Vec<&[PlainTerm<'_, Self::Ct>]> = Vec::new();
        let mut held = 0;
        let flush = |batch: &mut Vec<&[PlainTerm<'_, Self::Ct>]>,
                     out: &mut Vec<Option<Self::Ct>>|
         -> Result<()> {
            out.extend(self.subring_batch(batch)?);
            batch.clear();
            Ok(())
        };
        for g in groups {
            if g.len() > cap {
                flush(&mut batch, &mut out)?;
                held = 0;
                let mut acc: Option<Self::Ct> = None;
                for part in g.chunks(cap) {
                    if let Some(s) = self.subring_batch(&[part])?.pop().flatten() {
                        match &mut acc {
                            Some(a) => self.ck.add_assign(a, &s)?,
                            None => acc = Some(s),
                        }
                    }
                }
                out.push(acc);
                continue;
            }
            if held + g.len() > cap {
                flush(&mut batch, &mut out)?;
                held = 0;
            }
            batch.push(g);
            held += g.len();
        }
        flush(&mut batch, &mut out)?;
        let k: u64 = groups.iter().map(|g| g.len() as u64).sum();
        let nonempty = groups.iter().filter(|g| !g.is_empty()).count() as u64;
        self.bump(|c| {
            c.pt_mults += k;
            c.adds += k - nonempty;
        });
        Ok(out)
    }
    fn add_plain(&self, ct: &mut Self::Ct, values: PtValues<'_>) -> Result<()> {
        let v = self.slot_values(values)?;
        self.bump(|c| c.adds += 1);
        let pt = self.ck.encode(&v, self.slots, ct.level(), ct.scale)?;
        self.ck.add_plain_assign(ct, &pt)
    }
    fn add_const(&self, ct: &mut Self::Ct, v: f64) -> Result<()> {
        self.bump(|c| c.adds += 1);
        self.ck.add_const_assign(ct, C64::real(v))
    }
    fn mul_ct(&self, a: &Self::Ct, b: &Self::Ct) -> Result<Self::Ct> {
        self.bump(|c| c.ct_mults += 1);
        self.ck.mul_no_relin(a, b)
    }
    fn relin(&self, ct: &mut Self::Ct) -> Result<()> {
        self.bump(|c| c.relins += 1);
        self.ck.relinearize_assign(ct, self.keys)
    }
    fn rescale(&self, ct: &mut Self::Ct) -> Result<()> {
        self.bump(|c| c.rescales += 1);
        self.ck.rescale_assign(ct)
    }
    fn add_assign(&self, a: &mut Self::Ct, b: &Self::Ct) -> Result<()> {
        self.bump(|c| c.adds += 1);
        self.ck.add_assign(a, b)
    }
    fn sub_assign(&self, a: &mut Self::Ct, b: &Self::Ct) -> Result<()> {
        self.bump(|c| c.adds += 1);
        self.ck.sub_assign(a, b)
    }
    fn mul_i(&self, a: &mut Self::Ct) -> Result<()> {
        self.bump(|c| c.mul_i += 1);
        self.ck.mul_const_assign(a, C64::new(0.0, 1.0), 1.0)
    }
    fn drop_to(&self, a: &mut Self::Ct, level: usize) -> Result<()> {
        if a.level() != level {
            self.ck.drop_level_assign(a, level)?;
        }
        Ok(())
    }
    fn note_repack(&self) {
        self.bump(|c| c.repacks += 1);
    }
    fn counts(&self) -> OpCounts {
        *self.counts.borrow()
    }
}

// ---- symbolic -----------------------------------------------------------------------------

/// A symbolic ciphertext: only its level and degree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymCt {
    /// Level.
    pub level: usize,
    /// Degree (1, or 2 after a tensor product).
    pub degree: usize,
}

/// The dry-run executor: validates levels and degrees like the real engine, counts operations and
/// records the rotation amounts used (the Galois keys a real run needs), but computes nothing.
pub struct SymExec {
    slots: usize,
    counts: RefCell<OpCounts>,
    rots: RefCell<BTreeSet<i64>>,
}

impl SymExec {
    /// A dry run with `slots` slots per ciphertext.
    pub fn new(slots: usize) -> Self {
        Self {
            slots,
            counts: RefCell::new(OpCounts::default()),
            rots: RefCell::new(BTreeSet::new()),
        }
    }
    /// A fresh symbolic ciphertext at `level`.
    pub fn fresh(&self, level: usize) -> SymCt {
        SymCt { level, degree: 1 }
    }
    /// Every nonzero rotation amount (in `[1, n)`) used so far.
    pub fn rotations_used(&self) -> Vec<i64> {
        self.rots.borrow().iter().copied().collect()
    }
    fn bump(&self, f: impl FnOnce(&mut OpCounts)) {
        f(&mut self.counts.borrow_mut());
    }
    fn same_level(a: &SymCt, b: &SymCt) -> Result<()> {
        if a.level != b.level {
            return Err(Error::LevelMismatch {
                left: a.level,
                right: b.level,
            });
        }
        Ok(())
    }
}

impl Exec for SymExec {
    type Ct = SymCt;

    fn slots(&self) -> usize {
        self.slots
    }
    fn level(&self, ct: &SymCt) -> usize {
        ct.level
    }
    fn clone_ct(&self, ct: &SymCt) -> SymCt {
        *ct
    }
    fn rotate_many(&self, ct: &SymCt, ks: &[i64]) -> Result<Vec<SymCt>> {
        if ct.degree != 1 {
            return Err(Error::DegreeMismatch {
                found: ct.degree,
                expected: 1,
            });
        }
        let mut nz = 0;
        for &k in ks {
            let k = norm_rot(k, self.slots);
            if k != 0 {
                nz += 1;
                self.rots.borrow_mut().insert(k);
            }
        }
        if nz > 0 {
            self.bump(|c| {
                c.rotations += nz;
                c.hoists += 1;
            });
        }
        Ok(ks.iter().map(|_| *ct).collect())
    }
    fn rotate_sum_lazy(&self, terms: Vec<(SymCt, i64)>) -> Result<SymCt> {
        let first = terms
            .first()
            .map(|t| t.0)
            .ok_or(Error::InvalidParameters("empty lazy rotation sum"))?;
        let mut nz = 0u64;
        let mut zeros = 0u64;
        for (ct, k) in &terms {
            Self::same_level(&first, ct)?;
            if ct.degree != 1 {
                return Err(Error::DegreeMismatch {
                    found: ct.degree,
                    expected: 1,
                });
            }
            let k = norm_rot(*k, self.slots);
            if k == 0 {
                zeros += 1;
            } else {
                nz += 1;
                self.rots.borrow_mut().insert(k);
            }
        }
        self.bump(|c| {
            if nz > 0 {
                c.rotations += nz;
                c.hoists += nz;
                c.lazy_rotations += nz;
                c.lazy_groups += 1;
                c.adds += nz - 1;
            }
            // Zero-rotation terms: summed among themselves, then into the ModDown result.
            c.adds += zeros.saturating_sub(1) + (nz > 0 && zeros > 0) as u64;
        });
        Ok(first)
    }
    fn conjugate(&self, ct: &SymCt) -> Result<SymCt> {
        self.bump(|c| c.conjugations += 1);
        Ok(*ct)
    }
    fn mul_plain(&self, ct: &SymCt, _key: Option<u64>, _values: PtValues<'_>) -> Result<SymCt> {
        self.bump(|c| c.pt_mults += 1);
        Ok(*ct)
    }
    fn mul_plain_at(
        &self,
        ct: &SymCt,
        _key: Option<u64>,
        _values: PtValues<'_>,
        _scale: f64,
    ) -> Result<SymCt> {
        self.bump(|c| c.pt_mults += 1);
        Ok(*ct)
    }
    fn mul_const_acc(
        &self,
        acc: &mut Option<SymCt>,
        ct: &SymCt,
        _w: f64,
        _scale: f64,
    ) -> Result<()> {
        if ct.degree != 1 {
            return Err(Error::DegreeMismatch {
                found: ct.degree,
                expected: 1,
            });
        }
        self.bump(|c| c.const_mults += 1);
        accumulate(self, acc, *ct)
    }
    fn add_plain(&self, _ct: &mut SymCt, _values: PtValues<'_>) -> Result<()> {
        self.bump(|c| c.adds += 1);
        Ok(())
    }
    fn mul_ct(&self, a: &SymCt, b: &SymCt) -> Result<SymCt> {
        Self::same_level(a, b)?;
        if a.degree != 1 || b.degree != 1 {
            return Err(Error::DegreeMismatch {
                found: a.degree.max(b.degree),
                expected: 1,
            });
        }
        self.bump(|c| c.ct_mults += 1);
        Ok(SymCt {
            level: a.level,
            degree: 2,
        })
    }
    fn relin(&self, ct: &mut SymCt) -> Result<()> {
        if ct.degree != 2 {
            return Err(Error::DegreeMismatch {
                found: ct.degree,
                expected: 2,
            });
        }
        self.bump(|c| c.relins += 1);
        ct.degree = 1;
        Ok(())
    }
    fn rescale(&self, ct: &mut SymCt) -> Result<()> {
        if ct.level == 0 {
            return Err(Error::LevelExhausted);
        }
        self.bump(|c| c.rescales += 1);
        ct.level -= 1;
        Ok(())
    }
    fn add_assign(&self, a: &mut SymCt, b: &SymCt) -> Result<()> {
        Self::same_level(a, b)?;
        self.bump(|c| c.adds += 1);
        a.degree = a.degree.max(b.degree);
        Ok(())
    }
    fn sub_assign(&self, a: &mut SymCt, b: &SymCt) -> Result<()> {
        self.add_assign(a, b)
    }
    fn mul_i(&self, _a: &mut SymCt) -> Result<()> {
        self.bump(|c| c.mul_i += 1);
        Ok(())
    }
    fn drop_to(&self, a: &mut SymCt, level: usize) -> Result<()> {
        if level > a.level {
            return Err(Error::InvalidLevel {
                level,
                max_level: a.level,
            });
        }
        a.level = level;
        Ok(())
    }
    fn note_repack(&self) {
        self.bump(|c| c.repacks += 1);
    }
    fn counts(&self) -> OpCounts {
        *self.counts.borrow()
    }
}

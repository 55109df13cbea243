//! Planning helpers every model family's plan shares: a dry run of one FHE block that follows
//! levels and exact scales ([`dry`]), and the choice of the lowest level a block can start at so
//! that its output still reaches an admissible C2M ([`pick_level`]).

use super::track::{ScaleExec, Tracked};
use crate::convert::{BoundaryCfg, C2mPlan, ProtocolError};
use crate::error::Error;
use crate::params::CkksParams;
use crate::transformer::{Exec, OpCounts};
use alloc::vec::Vec;

/// Dry-run outputs of one FHE block: output level and scale, and its counts.
pub(crate) struct Dry {
    pub level: usize,
    pub scale: f64,
    pub counts: OpCounts,
    pub rotations: Vec<i64>,
}

pub(crate) fn dry<T>(
    slots: usize,
    primes: &[f64],
    f: impl FnOnce(&ScaleExec) -> crate::Result<Vec<Tracked>>,
) -> Option<(Dry, T)>
where
    T: Default,
{
    let ex = ScaleExec::new(slots, primes.to_vec());
    let out = f(&ex).ok()?;
    let first = *out.first()?;
    if out
        .iter()
        .any(|c| c.sym.level != first.sym.level || c.scale != first.scale)
    {
        return None;
    }
    Some((
        Dry {
            level: first.sym.level,
            scale: first.scale,
            counts: ex.counts(),
            rotations: ex.rotations_used(),
        },
        T::default(),
    ))
}

/// The smallest level `l ≥ 1` from which `block(l)` ends at or above the shortest admissible
/// C2M level of its output; returns the level, the C2M plan and the dry run.
pub(crate) fn pick_level(
    params: &CkksParams,
    slots: usize,
    cfg: BoundaryCfg,
    mut block: impl FnMut(usize) -> Option<Dry>,
) -> Result<(usize, C2mPlan, Dry), ProtocolError> {
    let mut last: Option<ProtocolError> = None;
    for l in 1..=params.max_level() {
        let Some(d) = block(l) else { continue };
        // EncFormer's local rounding at every boundary: softmax, LayerNorm and GELU take their
        // inputs at 2^{-13} and tolerate the one ulp of a local truncation, which saves the
        // exact MPC rounding (≈ 400 B per real value and 7 rounds per boundary).
        match C2mPlan::shortest_admissible(params, slots, d.scale, cfg).map(C2mPlan::local_rounding)
        {
            Ok(c) if c.level() <= d.level => return Ok((l, c, d)),
            Ok(_) => {}
            Err(e) => last = Some(e.into()),
        }
    }
    Err(last.unwrap_or(ProtocolError::Ckks(Error::InvalidParameters(
        "the parameter set has too few levels for an FHE block and its conversion",
    ))))
}

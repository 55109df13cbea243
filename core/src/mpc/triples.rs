//! The seam for Beaver triples: the [`Triples`] a multiplication consumes and the
//! [`TripleSource`] trait a party may be given in place of its default, Gilboa's OT
//! multiplication ([`crate::mpc::Party::triples`]).

use crate::mpc::channel::Channel;
use crate::mpc::error::Result;
use crate::mpc::ot::BoxFuture;
use crate::mpc::ring::RingCfg;
use crate::mpc::shares::RingShares;

/// Beaver triples `c = a·b` over `Z_{2^ℓ}` (one party's shares).
pub struct Triples {
    /// Shares of `a`.
    pub a: RingShares,
    /// Shares of `b`.
    pub b: RingShares,
    /// Shares of `c = a·b`.
    pub c: RingShares,
}

impl core::fmt::Debug for Triples {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Triples(<{} redacted>)", self.a.len())
    }
}

/// A source of Beaver triples (this party's shares of `c = a·b` over
/// `Z_{2^ℓ}`), used by [`Party::mul`](crate::mpc::Party::mul) and [`Party::poly_eval`](crate::mpc::Party::poly_eval) through
/// [`Party::triples`](crate::mpc::Party::triples). The default (no source injected) is Gilboa's OT
/// multiplication over the party's own OT; another source (a dealer-free
/// silent generator, or the ideal source of the tests) is injected with
/// [`Party::with_triple_source`](crate::mpc::Party::with_triple_source) and must be paired with the peer's.
pub trait TripleSource {
    /// Once per session, from [`Party::setup`](crate::mpc::Party::setup): whatever the source
    /// exchanges before its first triples (a key). The default does nothing.
    fn setup<'a>(&'a mut self, _ch: &'a Channel) -> BoxFuture<'a, Result<()>> {
        alloc::boxed::Box::pin(async { Ok(()) })
    }

    /// `n` triples over `ring`; may exchange messages over `ch` (phase
    /// [`crate::mpc::Phase::Offline`]).
    fn triples<'a>(
        &'a mut self,
        ch: &'a Channel,
        ring: RingCfg,
        n: usize,
    ) -> BoxFuture<'a, Result<Triples>>;
}

//! The server: evaluates on ciphertexts with public keys only.

use super::messages::{expect_within, frame, refuse};
use super::{
    CiphertextLink, KeyExchangeStats, PartyError, Payload, TAG_EVAL_KEYS, TAG_KEYS_ACK, TAG_PARAMS,
    TAG_PUBLIC_KEY,
};
use crate::transport::Transport;
use std::time::Instant;
use veil_core::ckks::{Ckks, EvaluationKeys, PublicKey};
use veil_core::hybrid::ServerKeys;
use veil_core::serial;
use veil_core::PolyBackend;

/// The largest parameter-set frame a server reads (an encoded parameter literal is a few
/// hundred bytes).
const PARAMS_FRAME: usize = 64 << 10;

/// The evaluating party. It holds the client's public key and evaluation keys and nothing
/// secret: every constructor and method takes public types only ([`PublicKey`],
/// [`EvaluationKeys`], ciphertexts, bytes), so it cannot hold a
/// [`SecretKey`](veil_core::ckks::SecretKey).
pub struct Server<'a, B: PolyBackend> {
    ck: &'a Ckks<B>,
    pk: PublicKey<B>,
    keys: EvaluationKeys<B>,
}

impl<B: PolyBackend> std::fmt::Debug for Server<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("params", &self.ck.params().name())
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl<'a, B: PolyBackend> Server<'a, B> {
    /// A server over keys already decoded.
    pub fn from_keys(ck: &'a Ckks<B>, pk: PublicKey<B>, keys: EvaluationKeys<B>) -> Self {
        Server { ck, pk, keys }
    }

    /// Receives the client's parameter set, public key and evaluation keys (see
    /// [`super::Client::send_keys`]), checks the parameter set is `ck`'s, decodes the keys and
    /// acknowledges. Bad bytes are refused with a typed error, and the client is told why.
    ///
    /// `galois_keys` is the most Galois keys the session needs (its plan's rotations, plus the
    /// conjugation where it uses one). Each frame is bounded by the largest encoding of what it
    /// may carry: 64 KiB for the parameter set, a public key, and a relinearization key with
    /// `galois_keys` Galois keys. A larger frame is refused at its header, so a client cannot
    /// make the server buffer more than its session's keys.
    pub fn receive_keys(
        ck: &'a Ckks<B>,
        t: &mut dyn Transport,
        galois_keys: usize,
    ) -> Result<(Self, KeyExchangeStats), PartyError> {
        let p = ck.params();
        let params = expect_within(t, TAG_PARAMS, PARAMS_FRAME)?;
        let t0 = Instant::now();
        let expected = ck.params().id();
        match veil_core::serial::params_literal_from_bytes(&params) {
            Ok((_, found)) if found != expected => {
                return refuse(t, PartyError::ParamsMismatch { expected, found })
            }
            Ok(_) => {}
            Err(source) => {
                return refuse(
                    t,
                    PartyError::Decode {
                        what: Payload::Params,
                        source,
                    },
                )
            }
        }
        let pk_bytes = expect_within(t, TAG_PUBLIC_KEY, serial::public_key_len(p, false))?;
        let pk = match ck.deserialize_public_key(&pk_bytes) {
            Ok(pk) => pk,
            Err(source) => {
                return refuse(
                    t,
                    PartyError::Decode {
                        what: Payload::PublicKey,
                        source,
                    },
                )
            }
        };
        let evk_bytes = expect_within(
            t,
            TAG_EVAL_KEYS,
            serial::evaluation_keys_len(p, galois_keys, true, false),
        )?;
        let keys = match ck.deserialize_evaluation_keys(&evk_bytes) {
            Ok(k) => k,
            Err(source) => {
                return refuse(
                    t,
                    PartyError::Decode {
                        what: Payload::EvaluationKeys,
                        source,
                    },
                )
            }
        };
        t.send(vec![frame(TAG_KEYS_ACK, 2, Vec::new())])?;
        let stats = KeyExchangeStats {
            public_key_bytes: pk_bytes.len() as u64,
            evaluation_key_bytes: evk_bytes.len() as u64,
            galois_keys: keys.galois.len(),
            seconds: t0.elapsed().as_secs_f64(),
        };
        Ok((Server { ck, pk, keys }, stats))
    }

    /// The CKKS context.
    pub fn ckks(&self) -> &'a Ckks<B> {
        self.ck
    }

    /// The client's public key.
    pub fn public_key(&self) -> &PublicKey<B> {
        &self.pk
    }

    /// The client's evaluation keys.
    pub fn evaluation_keys(&self) -> &EvaluationKeys<B> {
        &self.keys
    }

    /// What a private run's server side evaluates with: the context and the client's public
    /// key material.
    pub fn keys(&self) -> ServerKeys<'_, B> {
        ServerKeys {
            ck: self.ck,
            pk: &self.pk,
            keys: &self.keys,
        }
    }
}

impl<B: PolyBackend> CiphertextLink<B> for Server<'_, B> {
    fn ckks(&self) -> &Ckks<B> {
        self.ck
    }
}

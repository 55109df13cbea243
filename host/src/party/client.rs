//! The client: holds the secret key, sends the public and evaluation keys, decrypts results.

use super::messages::{expect, frame};
use super::{
    CiphertextLink, KeyExchangeStats, PartyError, TAG_EVAL_KEYS, TAG_KEYS_ACK, TAG_PARAMS,
    TAG_PUBLIC_KEY,
};
use crate::transport::Transport;
use rand_core::{CryptoRng, RngCore};
use std::time::Instant;
use veil_core::ckks::{Ciphertext, Ckks, PublicKey, SecretKey, C64};
use veil_core::PolyBackend;

fn ckks(step: &'static str) -> impl FnOnce(veil_core::Error) -> PartyError {
    move |source| PartyError::Ckks { step, source }
}

/// The evaluation keys a client generates for its server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyRequest {
    /// Rotations (slot offsets) the server will need Galois keys for.
    pub rotations: Vec<i64>,
    /// Whether the server needs the conjugation key.
    pub conjugation: bool,
}

/// The key holder. Its secret key is generated here from the caller's CSPRNG, zeroized on drop
/// (by [`SecretKey`] itself), and never serialized: no format for it exists.
pub struct Client<'a, B: PolyBackend> {
    ck: &'a Ckks<B>,
    sk: SecretKey,
    pk: PublicKey<B>,
}

impl<B: PolyBackend> std::fmt::Debug for Client<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("params", &self.ck.params().name())
            .finish_non_exhaustive()
    }
}

impl<'a, B: PolyBackend> Client<'a, B> {
    /// Generates a secret key and its public key.
    pub fn new(ck: &'a Ckks<B>, rng: &mut (impl RngCore + CryptoRng)) -> Result<Self, PartyError> {
        let sk = ck.gen_secret_key(rng);
        let pk = ck
            .gen_public_key(&sk, rng)
            .map_err(ckks("generate the public key"))?;
        Ok(Client { ck, sk, pk })
    }

    /// The CKKS context.
    pub fn ckks(&self) -> &'a Ckks<B> {
        self.ck
    }

    /// The secret key, for the key holder's side of a protocol (C2M and M2C as P0). It stays in
    /// this process.
    pub fn secret_key(&self) -> &SecretKey {
        &self.sk
    }

    /// The public key.
    pub fn public_key(&self) -> &PublicKey<B> {
        &self.pk
    }

    /// Generates the relinearization key and the Galois keys of `req`, sends the parameter set,
    /// the public key and the evaluation keys (seed-compressed) in one batch, and waits for the
    /// server's acknowledgement.
    pub fn send_keys(
        &self,
        t: &mut dyn Transport,
        req: &KeyRequest,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<KeyExchangeStats, PartyError> {
        let t0 = Instant::now();
        let ck = self.ck;
        let keys = ck
            .gen_evaluation_keys(&self.sk, &req.rotations, req.conjugation, rng, |_, _| {})
            .map_err(ckks("generate the evaluation keys"))?;
        let params =
            veil_core::serial::params_to_bytes(ck.params()).map_err(ckks("encode the params"))?;
        let pk = ck
            .serialize_public_key(&self.pk, true)
            .map_err(ckks("encode the public key"))?;
        let evk = ck
            .serialize_evaluation_keys(&keys, true)
            .map_err(ckks("encode the evaluation keys"))?;
        let stats = KeyExchangeStats {
            public_key_bytes: pk.len() as u64,
            evaluation_key_bytes: evk.len() as u64,
            galois_keys: keys.galois.len(),
            seconds: 0.0,
        };
        t.send(vec![
            frame(TAG_PARAMS, 1, params),
            frame(TAG_PUBLIC_KEY, 1, pk),
            frame(TAG_EVAL_KEYS, 1, evk),
        ])?;
        expect(t, TAG_KEYS_ACK)?;
        Ok(KeyExchangeStats {
            seconds: t0.elapsed().as_secs_f64(),
            ..stats
        })
    }

    /// Encodes `values` (real) in `slots` slots at the top level and the default scale, and
    /// encrypts them under the secret key (the seeded form: half the bytes on the wire).
    pub fn encrypt_real(
        &self,
        values: &[f64],
        slots: usize,
        scale: f64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Ciphertext<B>, PartyError> {
        let ck = self.ck;
        let pt = ck
            .encode_real(values, slots, ck.params().max_level(), scale)
            .map_err(ckks("encode"))?;
        ck.encrypt_sk(&self.sk, &pt, rng).map_err(ckks("encrypt"))
    }

    /// Decrypts and decodes `ct`.
    pub fn decrypt(&self, ct: &Ciphertext<B>) -> Result<Vec<C64>, PartyError> {
        self.ck
            .decrypt_decode(&self.sk, ct)
            .map_err(ckks("decrypt"))
    }
}

impl<B: PolyBackend> CiphertextLink<B> for Client<'_, B> {
    fn ckks(&self) -> &Ckks<B> {
        self.ck
    }
}

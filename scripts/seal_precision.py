#!/usr/bin/env python3
"""SEAL's CKKS precision, measured the way `veil-bench ckks` measures its own (`peer_precision` in
bench/src/ckks.rs), so the two compare like for like, worst slot and mean.

Per trial: x and y uniform in [-1, 1] in every slot (real), encoded at scale 2^40 at the top level,
encrypted under the public key; both decrypted (fresh), then x*y by multiply + relinearize +
rescale, decrypted (mul). Over all trials: -log2 of the largest absolute error and -log2 of the mean
absolute error, for fresh and for mul. The parameters are the shared peer scripts' (60-bit first
and special prime, 40-bit scaling primes, one special prime, uniform ternary secret).

Needs the TenSEAL venv of the shared peer benchmarks (../shared/peers/ckks/setup.sh):
    $VEIL_PEERS/venv311/bin/python scripts/seal_precision.py [--settings a,b,c] [--trials 3] [--runs 1]
Prints one JSON object per setting and run.
"""
import argparse
import json
import math

import numpy as np
import tenseal.sealapi as s

SETTINGS = {"a": (14, 6), "b": (15, 10), "c": (16, 16)}


def bits(err):
    return -math.log2(max(err, 2.0 ** -64))


def measure(log_n, levels, trials, rng):
    n = 1 << log_n
    parms = s.EncryptionParameters(s.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus(s.CoeffModulus.Create(n, [60] + [40] * levels + [60]))
    # SEAL's 128-bit table stops at 2^15; the 2^16 set is far inside the HE Standard bound.
    sec = s.SEC_LEVEL_TYPE.TC128 if log_n <= 15 else s.SEC_LEVEL_TYPE.NONE
    ctx = s.SEALContext(parms, True, sec)
    kg = s.KeyGenerator(ctx)
    pk, rk = s.PublicKey(), s.RelinKeys()
    kg.create_public_key(pk)
    kg.create_relin_keys(rk)
    enc, ev = s.CKKSEncoder(ctx), s.Evaluator(ctx)
    encryptor, decryptor = s.Encryptor(ctx, pk), s.Decryptor(ctx, kg.secret_key())
    scale = 2.0 ** 40
    fresh, mul = [], []

    def decrypt(ct):
        pt = s.Plaintext()
        decryptor.decrypt(ct, pt)
        return np.array(enc.decode_double(pt))

    for _ in range(trials):
        x = rng.uniform(-1, 1, n // 2)
        y = rng.uniform(-1, 1, n // 2)
        cts = []
        for v in (x, y):
            pt, ct = s.Plaintext(), s.Ciphertext(ctx)
            enc.encode(v.tolist(), scale, pt)
            encryptor.encrypt(pt, ct)
            fresh.append(np.abs(decrypt(ct) - v))
            cts.append(ct)
        ev.multiply_inplace(cts[0], cts[1])
        ev.relinearize_inplace(cts[0], rk)
        ev.rescale_to_next_inplace(cts[0])
        mul.append(np.abs(decrypt(cts[0]) - x * y))
    fresh, mul = np.concatenate(fresh), np.concatenate(mul)
    return {
        "fresh_precision_bits": bits(fresh.max()),
        "fresh_precision_mean_bits": bits(fresh.mean()),
        "mul_rescale_precision_bits": bits(mul.max()),
        "mul_rescale_precision_mean_bits": bits(mul.mean()),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", default="a,b,c")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng()
    for name in a.settings.split(","):
        log_n, levels = SETTINGS[name]
        for run in range(a.runs):
            r = measure(log_n, levels, a.trials, rng)
            r.update(lib="seal(tenseal 0.3.18)", setting=name, run=run, trials=a.trials)
            print(json.dumps(r), flush=True)


main()

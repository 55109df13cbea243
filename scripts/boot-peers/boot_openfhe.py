"""OpenFHE (openfhe-python wheel 1.6.1) CKKS bootstrapping benchmark.

Parameters (OpenFHE's simple-ckks-bootstrapping example, moved to N = 2^16 and 128 bits):
  ring dimension 2^16, full slots N/2, HEStd_128_classic, SPARSE_TERNARY secret,
  FLEXIBLEAUTO scaling (--scaling fixedmanual for FIXEDMANUAL), HYBRID key switching,
  scaling mod 59 bits, first mod 60 bits, EvalBootstrapSetup level budget [3, 3] (dim1 [0, 0]),
  depth = levels_after + GetBootstrapDepth([3, 3], SPARSE_TERNARY) (= levels_after + 16).

The example's 10 levels after bootstrapping do not fit the 128-bit bound at N = 2^16 with 59-bit
primes unless dnum = depth + 1 (= 27 digits: one modulus per digit, evaluation keys of ~0.75 GB
each, far beyond this machine's memory).  The default is therefore levels_after = 6 with the
smallest dnum (NumLargeDigits) that OpenFHE accepts as 128-bit (4); both are flags.

Measured: EvalBootstrapSetup (setup_s), EvalBootstrapKeyGen + EvalMultKeyGen (keygen_s), and
EvalBootstrap on a ciphertext of uniform reals in [-1, 1] in every slot, encrypted at level
depth - 1 (one level left, as OpenFHE's example does): one warm-up, then --reps timed calls.
Threads: OpenMP, from OMP_NUM_THREADS (must be set before start; run.sh does it).
Prints one JSON object on its last stdout line; progress goes to stderr.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import openfhe as o  # noqa: E402

from boot_common import (base_record, emit, fill_times, log, peak_rss_mb,  # noqa: E402
                         precision, threads_arg, time_reps)

VERSION = "1.6.1 (wheel openfhe==1.6.1.0.22.4)"


def make_context(a, depth, dnum):
    p = o.CCParamsCKKSRNS()
    p.SetSecretKeyDist(o.SPARSE_TERNARY)
    p.SetSecurityLevel(o.HEStd_128_classic if a.security == "128" else o.HEStd_NotSet)
    p.SetRingDim(1 << a.logn)
    p.SetScalingModSize(a.scale_bits)
    p.SetFirstModSize(a.first_bits)
    p.SetScalingTechnique(o.FLEXIBLEAUTO if a.scaling == "flexibleauto" else o.FIXEDMANUAL)
    p.SetKeySwitchTechnique(o.HYBRID)
    p.SetMultiplicativeDepth(depth)
    p.SetBatchSize(1 << (a.logn - 1))
    if dnum:
        p.SetNumLargeDigits(dnum)
    cc = o.GenCryptoContext(p)
    return cc, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed bootstraps before the timed ones")
    ap.add_argument("--threads", type=int, default=0, help="recorded only; OpenMP reads OMP_NUM_THREADS")
    ap.add_argument("--logn", type=int, default=16)
    ap.add_argument("--levels-after", type=int, default=6)
    ap.add_argument("--dnum", type=int, default=0, help="0: smallest dnum (>= 3) that passes the security check")
    ap.add_argument("--level-budget", default="3,3")
    ap.add_argument("--scaling", choices=["flexibleauto", "fixedmanual"], default="flexibleauto")
    ap.add_argument("--scale-bits", type=int, default=59)
    ap.add_argument("--first-bits", type=int, default=60)
    ap.add_argument("--security", choices=["128", "none"], default="128")
    ap.add_argument("--key-bytes-dir", default="",
                    help="if set, serialize the evaluation keys (binary) into this directory, record the bytes, delete")
    a = ap.parse_args()

    threads = threads_arg(a.threads)
    rec = base_record("openfhe", f"levels{a.levels_after}", VERSION, threads, a.reps)
    try:
        run(a, rec)
    except MemoryError:
        rec["status"] = "killed for memory"
    except Exception as ex:  # noqa: BLE001
        rec["status"] = "error: " + str(ex).replace("\n", " ")[:300]
    emit(rec)


def run(a, rec):
    budget = [int(x) for x in a.level_budget.split(",")]
    N = 1 << a.logn
    slots = N // 2
    boot_depth = o.CryptoContext.GetBootstrapDepth(budget, o.SPARSE_TERNARY)
    depth = a.levels_after + boot_depth
    log(f"[openfhe] OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} N={N} slots={slots} "
        f"budget={budget} boot_depth={boot_depth} depth={depth}")

    cc = None
    dnums = [a.dnum] if a.dnum else list(range(3, depth + 2))
    last_err = None
    for d in dnums:
        try:
            cc, p = make_context(a, depth, d)
            dnum = d
            break
        except Exception as ex:  # noqa: BLE001
            last_err = ex
    if cc is None:
        raise RuntimeError(f"no dnum in {dnums[0]}..{dnums[-1]} passes: {last_err}")
    cc.Enable(o.PKE)
    cc.Enable(o.KEYSWITCH)
    cc.Enable(o.LEVELEDSHE)
    cc.Enable(o.ADVANCEDSHE)
    cc.Enable(o.FHE)
    rec["n"] = cc.GetRingDimension()
    rec["slots"] = slots
    rec["max_level"] = depth
    rec["params"] = {
        "security": "HEStd_128_classic" if a.security == "128" else "HEStd_NotSet",
        "secret": "SPARSE_TERNARY",
        "scaling": a.scaling.upper(),
        "key_switch": "HYBRID",
        "dnum": dnum,
        "scale_bits": a.scale_bits,
        "first_mod_bits": a.first_bits,
        "level_budget": budget,
        "bootstrap_depth": boot_depth,
        "levels_after_bootstrap_requested": a.levels_after,
        "mult_depth": depth,
    }
    log(f"[openfhe] context ok: ring dim {rec['n']}, dnum {dnum}, depth {depth}")

    t0 = time.perf_counter()
    cc.EvalBootstrapSetup(budget, [0, 0], slots)
    rec["setup_s"] = time.perf_counter() - t0
    log(f"[openfhe] EvalBootstrapSetup {rec['setup_s']:.2f} s, peak RSS {peak_rss_mb():.0f} MB")

    keys = cc.KeyGen()
    sk = keys.secretKey
    t0 = time.perf_counter()
    cc.EvalMultKeyGen(sk)
    cc.EvalBootstrapKeyGen(sk, slots)
    rec["keygen_s"] = time.perf_counter() - t0
    try:
        rec["rotation_keys"] = len(cc.GetExistingEvalAutomorphismKeyIndices(sk.GetKeyTag()))
    except Exception as ex:  # noqa: BLE001
        log(f"[openfhe] key count unavailable: {ex}")
    log(f"[openfhe] keygen {rec['keygen_s']:.2f} s, {rec['rotation_keys']} automorphism keys, "
        f"peak RSS {peak_rss_mb():.0f} MB")

    if a.key_bytes_dir:
        total = 0
        for name, fn in (("auto.bin", o.CryptoContext.SerializeEvalAutomorphismKey),
                         ("mult.bin", o.CryptoContext.SerializeEvalMultKey)):
            path = os.path.join(a.key_bytes_dir, f"openfhe_boot_{os.getpid()}_{name}")
            if not fn(path, o.BINARY, sk.GetKeyTag()):
                raise RuntimeError("key serialization failed")
            total += os.path.getsize(path)
            os.remove(path)
        rec["key_bytes"] = total
        log(f"[openfhe] serialized evaluation keys: {total / 2**30:.2f} GiB")

    rng = np.random.default_rng(7)
    x = rng.uniform(-1.0, 1.0, slots)
    pt = cc.MakeCKKSPackedPlaintext(x, 1, depth - 1, None, slots)
    pt.SetLength(slots)
    ct = cc.Encrypt(keys.publicKey, pt)
    rec["levels_before"] = depth - ct.GetLevel()
    log(f"[openfhe] input ciphertext: level {ct.GetLevel()} -> {rec['levels_before']} level(s) left")

    samples, out = time_reps(lambda: cc.EvalBootstrap(ct), a.reps, warmup=a.warmup)
    fill_times(rec, samples)
    rec["levels_left"] = depth - out.GetLevel() - (out.GetNoiseScaleDeg() - 1)

    dec = cc.Decrypt(sk, out)
    dec.SetLength(slots)
    try:
        got = np.asarray(dec.GetCKKSPackedValue(), dtype=np.complex128)
    except Exception:  # noqa: BLE001
        got = np.asarray(dec.GetRealPackedValue(), dtype=np.float64)
    rec.update(precision(x, got[:slots]))
    rec["status"] = "ok"
    log(f"[openfhe] boot min {rec['boot_s_min']:.3f} s, levels left {rec['levels_left']}, "
        f"precision max-err {rec['prec_min_bits']:.2f} bits, mean {rec['prec_avg_bits']:.2f} bits")


if __name__ == "__main__":
    main()

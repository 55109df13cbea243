"""DESILO FHE (desilofhe 2.0.0, CPU) CKKS bootstrapping benchmark.

DESILO does not let the user choose the bootstrapping parameters: Engine(bootstrap=True,
mode="cpu", thread_count=T) selects its own set (observed: N = 2^16, 2^15 slots, max_level 17).
Variants (--variant):
  default    create_bootstrap_key(sk) (the library's default "medium" bootstrap key, which
             holds every fixed rotation key bootstrapping needs; documented at ~12.3 GB) and
             bootstrap(ct, relin_key, conj_key, bootstrap_key).
  small-key  the lighter variant: create_roll_key(sk) + create_small_bootstrap_key(sk) and
             bootstrap(ct, relin_key, conj_key, roll_key, small_bootstrap_key) (documented at
             ~3.8 GB, slower).
  size-small create_bootstrap_key(sk, size="small"), if this build accepts it.

Measured: Engine construction (setup_s), relinearization + conjugation + bootstrap keys
(keygen_s), and bootstrap() on a ciphertext of uniform reals in [-1, 1] in every slot, encrypted
(public key) at level 0: one warm-up, then --reps timed calls.  Threads: thread_count=--threads
(default OMP_NUM_THREADS).  Prints one JSON object on its last stdout line; progress to stderr.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import desilofhe as d  # noqa: E402

from boot_common import (base_record, emit, fill_times, log, peak_rss_mb,  # noqa: E402
                         precision, threads_arg, time_reps)

VERSION = "2.0.0"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed bootstraps before the timed ones")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--variant", choices=["default", "small-key", "size-small"], default="default")
    a = ap.parse_args()
    threads = threads_arg(a.threads)
    # lib names the variant too (veil-bench boot prints lib only): desilo, desilo-small-key, ...
    lib = "desilo" if a.variant == "default" else "desilo-" + a.variant
    rec = base_record(lib, a.variant, VERSION, threads, a.reps)
    try:
        run(a, threads, rec)
    except MemoryError:
        rec["status"] = "killed for memory"
    except Exception as ex:  # noqa: BLE001
        rec["status"] = "error: " + str(ex).replace("\n", " ")[:300]
    emit(rec)


def run(a, threads, rec):
    log(f"[desilo] variant {a.variant}, thread_count={threads}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    t0 = time.perf_counter()
    e = d.Engine(bootstrap=True, mode="cpu", thread_count=threads)
    rec["setup_s"] = time.perf_counter() - t0
    slots = e.slot_count
    rec["slots"] = slots
    rec["n"] = 2 * slots
    rec["max_level"] = e.max_level
    rec["params"] = {"engine": f'Engine(bootstrap=True, mode="cpu", thread_count={threads})',
                     "secret": "library default", "security": "library default (128-bit per DESILO)"}
    log(f"[desilo] engine {rec['setup_s']:.2f} s: N={rec['n']} slots={slots} max_level={e.max_level}, "
        f"peak RSS {peak_rss_mb():.0f} MB")

    sk = e.create_secret_key()
    pk = e.create_public_key(sk)
    t0 = time.perf_counter()
    rlk = e.create_relinearization_key(sk)
    cjk = e.create_conjugation_key(sk)
    if a.variant == "small-key":
        rok = e.create_roll_key(sk)
        sbk = e.create_small_bootstrap_key(sk)
        keys = [rlk, cjk, rok, sbk]
        boot = lambda c: e.bootstrap(c, rlk, cjk, rok, sbk)  # noqa: E731
        rec["params"]["bootstrap_key"] = "create_roll_key + create_small_bootstrap_key"
    else:
        size = "small" if a.variant == "size-small" else None
        bk = e.create_bootstrap_key(sk, size=size) if size else e.create_bootstrap_key(sk)
        keys = [rlk, cjk, bk]
        boot = lambda c: e.bootstrap(c, rlk, cjk, bk)  # noqa: E731
        rec["params"]["bootstrap_key"] = f"create_bootstrap_key(size={size or 'medium (default)'})"
    rec["keygen_s"] = time.perf_counter() - t0
    try:
        rec["key_bytes"] = int(sum(k.serialized_nbytes for k in keys))
        rec["params"]["key_bytes_in_memory"] = int(sum(k.nbytes for k in keys))
    except Exception as ex:  # noqa: BLE001
        log(f"[desilo] key sizes unavailable: {ex}")
    log(f"[desilo] keygen {rec['keygen_s']:.2f} s, keys {rec['key_bytes'] or 0:.3e} B serialized, "
        f"peak RSS {peak_rss_mb():.0f} MB")

    rng = np.random.default_rng(7)
    x = rng.uniform(-1.0, 1.0, slots)
    ct = e.encrypt(x, pk, 0)
    rec["levels_before"] = ct.level

    samples, out = time_reps(lambda: boot(ct), a.reps, warmup=a.warmup)
    fill_times(rec, samples)
    rec["levels_left"] = out.level
    got = e.decrypt(out, sk)
    rec.update(precision(x, np.asarray(got)[:slots]))
    rec["status"] = "ok"
    log(f"[desilo] boot min {rec['boot_s_min']:.3f} s, level after {out.level}, "
        f"precision max-err {rec['prec_min_bits']:.2f} bits, mean {rec['prec_avg_bits']:.2f} bits")


if __name__ == "__main__":
    main()

"""Helpers shared by boot_openfhe.py and boot_desilo.py (Python 3.10 and 3.11).

Every script ends by printing exactly one JSON object (one line) on stdout via
`emit()`; everything else goes to stderr.  The JSON has the same keys for all
libraries (FIELDS); a field the library does not expose is null.
"""
import json
import math
import os
import resource
import statistics
import sys
import time

FIELDS = [
    "lib", "variant", "version", "threads", "omp_num_threads", "n", "slots", "reps",
    "boot_s_min", "boot_s_median", "boot_s_all", "setup_s", "keygen_s",
    "levels_before", "levels_left", "max_level",
    "prec_min_bits", "prec_avg_bits", "prec_median_bits", "prec_imag_min_bits",
    "peak_rss_mb", "rotation_keys", "key_bytes", "params", "status",
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def peak_rss_mb():
    # Linux: ru_maxrss is in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bits(err):
    """-log2(err); a zero error gives null rather than infinity (JSON has no inf)."""
    if err is None:
        return None
    err = float(err)
    if err <= 0.0:
        return None
    return -math.log2(err)


def precision(expected, got):
    """Precision of the real part: -log2 of the max / mean / median absolute error over all
    slots, plus -log2 of the largest imaginary part (the inputs are real)."""
    import numpy as np

    expected = np.asarray(expected, dtype=np.float64)
    got = np.asarray(got)
    re = np.real(got).astype(np.float64)
    err = np.abs(re - expected)
    out = {
        "prec_min_bits": bits(err.max()),
        "prec_avg_bits": bits(err.mean()),
        "prec_median_bits": bits(float(np.median(err))),
        "prec_imag_min_bits": None,
    }
    if np.iscomplexobj(got):
        out["prec_imag_min_bits"] = bits(np.abs(np.imag(got)).max())
    return out


def time_reps(fn, reps, warmup=1):
    """warmup untimed calls, then reps timed calls; returns (samples_s, last_result)."""
    res = None
    for i in range(warmup):
        t0 = time.perf_counter()
        res = fn()
        log(f"  warm-up {i + 1}: {time.perf_counter() - t0:.3f} s  (peak RSS {peak_rss_mb():.0f} MB)")
    samples = []
    for i in range(reps):
        t0 = time.perf_counter()
        res = fn()
        dt = time.perf_counter() - t0
        samples.append(dt)
        log(f"  rep {i + 1}/{reps}: {dt:.3f} s")
    return samples, res


def base_record(lib, variant, version, threads, reps):
    rec = {k: None for k in FIELDS}
    rec.update({
        "lib": lib,
        "variant": variant,
        "version": version,
        "threads": threads,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "reps": reps,
        "status": "error: did not finish",
    })
    return rec


def fill_times(rec, samples):
    if samples:
        rec["boot_s_min"] = min(samples)
        rec["boot_s_median"] = statistics.median(samples)
        rec["boot_s_all"] = [round(s, 4) for s in samples]


def emit(rec):
    rec["peak_rss_mb"] = round(peak_rss_mb(), 1)
    for k, v in list(rec.items()):
        if isinstance(v, float):
            rec[k] = round(v, 4)
    sys.stdout.flush()
    print(json.dumps(rec), flush=True)


def threads_arg(args_threads):
    if args_threads:
        return args_threads
    try:
        return int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count()
    except ValueError:
        return os.cpu_count()

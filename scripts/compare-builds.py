#!/usr/bin/env python3
"""Times two builds of `veil` against each other, interleaved, and prints after / before per figure.

    scripts/compare-builds.py BEFORE_BIN AFTER_BIN [--rounds 5] [--ckks "--logn 16 --levels 16 --threads 1"]
                              [--mpc "--n 65536"] [--skip-ckks] [--skip-mpc] [--json OUT]

Each round runs `bench ckks ... --json` and `bench mpc ... --json` once with each binary, in the
order A B (odd rounds) or B A (even rounds), so drift in the machine's speed hits both alike. A
figure's value is its minimum over the rounds (for `bench ckks`, over the rounds of the per-process
minimum `min_ms`). Byte and round counts of `bench mpc` must be identical between the builds; they
are checked, not timed.
"""
import argparse
import json
import shlex
import subprocess
import sys


def run(binary, args):
    out = subprocess.run([binary, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def ckks_figures(d):
    return {k: v["min_ms"] for k, v in d["results"].items()}


def mpc_figures(d):
    times, counts = {}, {}
    for r in d["rows"]:
        key = f'{r["transport"]}/{"pool" if r["ot_pool"] else "iknp"}/{r["primitive"]}'
        times[key] = r["time_s"] * 1e3
        times["cpu " + key] = r["cpu_s"] * 1e3
        counts[key] = (r["bytes_per_elem"], r["rounds"])
    return times, counts


def merge_min(acc, figs):
    for k, v in figs.items():
        acc[k] = min(acc.get(k, v), v)


def table(title, before, after, unit):
    print(f"\n{title}")
    print(f"| figure | before {unit} | after {unit} | after / before |")
    print("|---|---:|---:|---:|")
    worst = 0.0
    for k in sorted(before):
        if k not in after:
            print(f"| {k} | {before[k]:.3f} | missing | |")
            continue
        r = after[k] / before[k] if before[k] > 0 else float("nan")
        worst = max(worst, r)
        print(f"| {k} | {before[k]:.3f} | {after[k]:.3f} | {r:.3f} |")
    print(f"worst ratio: {worst:.3f}")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ckks", default="--logn 16 --levels 16 --threads 1")
    ap.add_argument("--mpc", default="")
    ap.add_argument("--skip-ckks", action="store_true")
    ap.add_argument("--skip-mpc", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    bins = {"before": a.before, "after": a.after}
    ck = {"before": {}, "after": {}}
    mt = {"before": {}, "after": {}}
    mc = {}
    for rnd in range(a.rounds):
        order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
        for which in order:
            if not a.skip_ckks:
                merge_min(ck[which], ckks_figures(run(bins[which], ["bench", "ckks", *shlex.split(a.ckks)])))
            if not a.skip_mpc:
                t, c = mpc_figures(run(bins[which], ["bench", "mpc", *shlex.split(a.mpc)]))
                merge_min(mt[which], t)
                for k, v in c.items():
                    if mc.setdefault(k, v) != v:
                        sys.exit(f"bench mpc: {k} counts differ between builds: {mc[k]} vs {v}")
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    if not a.skip_ckks:
        table(f"bench ckks {a.ckks} (min of {a.rounds} processes x min_ms)", ck["before"], ck["after"], "ms")
    if not a.skip_mpc:
        table(f"bench mpc {a.mpc} (min of {a.rounds})", mt["before"], mt["after"], "ms")
        print("byte and round counts identical between the builds")
    if a.json:
        json.dump({"ckks": ck, "mpc_ms": mt}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Prints issue 42's correctness table from scripts/smollm2-table.sh's reports: per prompt, the
private and plaintext greedy tokens, the positions where they agree, whether the first token
agrees, and the worst |Δlogit|; then the totals against the goal (>= 95% of positions, every
first token equal)."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "results/smollm2-table")
rows = []
for f in sorted(out.glob("[0-9][0-9].json")):
    r = json.loads(f.read_text())["real"]
    t, ref = r["tokens"], r["reference"]
    same = sum(a == b for a, b in zip(t, ref))
    rows.append((f.stem, r["prompt"], t, ref, same, len(ref), t[:1] == ref[:1], r["worst_logit_err"]))
print("| # | prompt ids | private tokens | plaintext tokens | equal | first | worst abs dlogit |")
print("|---|---|---|---|---|---|---|")
for s, p, t, ref, same, n, first, err in rows:
    print(f"| {s} | {p} | {t} | {ref} | {same}/{n} | {'yes' if first else 'NO'} | {err:.3f} |")
if rows:
    eq = sum(r[4] for r in rows)
    n = sum(r[5] for r in rows)
    firsts = sum(r[6] for r in rows)
    print(f"\n{len(rows)} prompts: {eq}/{n} positions equal ({100 * eq / n:.1f} %), "
          f"first token equal in {firsts}/{len(rows)}; worst |dlogit| {max(r[7] for r in rows):.3f}")

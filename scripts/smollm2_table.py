#!/usr/bin/env python3
"""Prints issue 42's correctness table from scripts/smollm2-table.sh's reports: per prompt, the
private and plaintext greedy tokens, the positions where they agree, whether the first token
agrees, and the worst |Δlogit|; then the totals against the goal (>= 95% of positions, every
first token equal).

    python3 scripts/smollm2_table.py OUT [FILE.gguf]

Without the GGUF, the prompts' text comes from scripts/smollm2-table.sh's list (by report
number; a warning when the list and the reports differ in number). With the GGUF (the cached
SmolLM2 file; its reader, scripts/llama_reference.py, needs numpy), the prompts, the private and
the plaintext tokens are shown as text decoded from the reports' ids with the GGUF's own
byte-level vocabulary, in place of the ids (which the reports keep)."""
import json
import pathlib
import re
import sys

here = pathlib.Path(__file__).resolve().parent
out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "results/smollm2-table")
gguf = sys.argv[2] if len(sys.argv) > 2 else None

# The prompts, in order, from the shell script's array.
sh = (here / "smollm2-table.sh").read_text()
block = sh.split("prompts=(", 1)[1].split("\n)", 1)[0]
prompts = re.findall(r'^\s*"(.*)"\s*$', block, re.M)


def byte_decoder():
    """The inverse of byte-level BPE's printable mapping: 188 bytes map to themselves, the other
    68 (controls, space, some Latin-1) to code points 256 upward, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


decode = None
if gguf:
    sys.path.insert(0, str(here))
    from llama_reference import read_gguf  # noqa: E402

    _, meta, _ = read_gguf(gguf)
    vocab = meta["tokenizer.ggml.tokens"]
    dec = byte_decoder()

    def decode(ids):
        # A character outside the byte mapping (none in a byte-level vocabulary) becomes U+FFFD.
        raw = b"".join(bytes([dec[c]]) if c in dec else "\ufffd".encode() for i in ids for c in vocab[i])
        return raw.decode("utf-8", "replace")


def cell(s):
    return json.dumps(s, ensure_ascii=False).replace("|", "\\|")


rows = []
for f in sorted(out.glob("[0-9][0-9].json")):
    r = json.loads(f.read_text())["real"]
    t, ref = r["tokens"], r["reference"]
    same = sum(a == b for a, b in zip(t, ref))
    i = int(f.stem)
    text = decode(r["prompt"]) if decode else (prompts[i] if i < len(prompts) else "?")
    rows.append((f.stem, text, r["prompt"], t, ref, same, len(ref), t[:1] == ref[:1], r["worst_logit_err"]))
if not decode and len(prompts) != len(rows):
    print(f"warning: {len(prompts)} prompts in smollm2-table.sh, {len(rows)} reports", file=sys.stderr)
if decode:
    print("| # | prompt | private text | plaintext text | equal | first | worst abs dlogit |")
    print("|---|---|---|---|---|---|---|")
else:
    print("| # | prompt | prompt ids | private tokens | plaintext tokens | equal | first | worst abs dlogit |")
    print("|---|---|---|---|---|---|---|---|")
for s, text, p, t, ref, same, n, first, err in rows:
    mid = f"{cell(decode(t))} | {cell(decode(ref))}" if decode else f"{p} | {t} | {ref}"
    print(f"| {s} | {cell(text)} | {mid} | {same}/{n} | {'yes' if first else 'NO'} | {err:.3f} |")
if rows:
    eq = sum(r[5] for r in rows)
    n = sum(r[6] for r in rows)
    firsts = sum(r[7] for r in rows)
    print(f"\n{len(rows)} prompts: {eq}/{n} positions equal ({100 * eq / n:.1f} %), "
          f"first token equal in {firsts}/{len(rows)}; worst |dlogit| {max(r[8] for r in rows):.3f}")

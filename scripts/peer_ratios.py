#!/usr/bin/env python3
"""Ratio table: Veil's min latency ÷ the fastest peer's min latency, per primitive and setting.

Reads results/veil_<setting>_t<T>.json (from `veil-bench ckks --json`) and the peer JSONs written by
the shared peer scripts (results/<lib>_<setting>_t<T>[_variant].json). Usage:

    peer_ratios.py [dir]                      the ratio table per setting
    peer_ratios.py [dir] --before OLD_DIR     before/after: Veil's JSONs in OLD_DIR (an older build
                                              measured in the same session) beside the new ones,
                                              both as ratios to the same peers, plus ×floor
"""
import glob, json, os, sys

ARGS = [a for a in sys.argv[1:]]
BEFORE = None
if "--before" in ARGS:
    i = ARGS.index("--before")
    BEFORE = ARGS[i + 1]
    del ARGS[i : i + 2]
D = ARGS[0] if ARGS else "results"
ROWS = [
    ("keygen relin", ["keygen_relin"]),
    ("keygen 8 rot keys", ["keygen_rot_x8"]),
    ("keygen conj key", ["keygen_conj"]),
    ("encode", ["encode", "encode(list->vector incl.)"]),
    ("encrypt (pk)", ["encrypt_pk"]),
    ("decrypt+decode", ["decrypt_decode", "decrypt_decode(vector->list incl.)"]),
    ("add ct+ct", ["add_ct_ct"]),
    ("mul ct*pt + rescale", ["mul_ct_pt+rescale", "mul_ct_pt(+rescale fused)"]),
    ("mul ct*ct + relin + rescale", ["mul_ct_ct+relin+rescale", "mul_ct_ct+relin(+rescale fused)"]),
    ("rotate by 1", ["rotate_1", "rotate_1(fixed key)"]),
    ("8 hoisted rots (per rot)", ["hoisted_rot_x8_per_rot", "rotate_many_x8_fixed_per_rot"]),
    ("conjugate", ["conjugate"]),
    ("add ct+ct @lowest", ["add_ct_ct_lowest"]),
    ("rotate by 1 @lowest", ["rotate_1_lowest"]),
]


def get(doc, keys, field="min_ms"):
    for k in keys:
        r = doc.get("results", {}).get(k)
        if r and r.get(field) is not None:
            return r[field]
    return None


def load(d):
    """Veil's JSONs by (setting, threads), and the peers' by (setting, threads) then library."""
    veil, peers = {}, {}
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        parts = os.path.basename(f)[:-5].split("_")
        try:
            doc = json.load(open(f))
        except Exception:
            continue
        if parts[0] == "veil":
            veil[(parts[1], parts[2])] = doc
        elif len(parts) >= 3:
            lib = parts[0] + ("-" + parts[3] if len(parts) > 3 else "")
            peers.setdefault((parts[1], parts[2]), {})[lib] = doc
    return veil, peers


def main():
    veil, peers = load(D)
    worst = 0.0
    for key in sorted(veil):
        s, t = key
        print(f"\n### setting {s}, {t}: {veil[key]['info'].get('params')} — min ms (ratio = veil / fastest peer)\n")
        libs = sorted(peers.get(key, {}))
        print("| primitive | veil | " + " | ".join(libs) + " | fastest peer | ratio |")
        print("|---|---:|" + "---:|" * len(libs) + "---|---:|")
        for label, keys in ROWS:
            v = get(veil[key], keys)
            vals = {l: get(peers[key][l], keys) for l in libs}
            have = {l: x for l, x in vals.items() if x is not None}
            best = min(have, key=have.get) if have else None
            ratio = (v / have[best]) if (best and v) else None
            if ratio:
                worst = max(worst, ratio)
            cells = " | ".join(f"{vals[l]:.3f}" if vals[l] is not None else "–" for l in libs)
            print(f"| {label} | {v:.3f} | {cells} | {best or '–'} | {ratio:.2f} |" if v is not None and ratio
                  else f"| {label} | {v if v is None else round(v, 3)} | {cells} | {best or '–'} | – |")
    print(f"\nworst ratio: {worst:.2f}")


def before_after(old_dir):
    """Before/after table: an older Veil build (OLD_DIR) and the new one against the same peers."""
    new, peers = load(D)
    old, _ = load(old_dir)
    for key in sorted(new):
        if key not in old:
            continue
        s, t = key
        print(f"\n### setting {s}, {t}: before → after (min ms; ratio = Veil / fastest peer)\n")
        print("| primitive | before ms | after ms | speedup | fastest peer ms | ratio before | ratio after | ×floor after |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, keys in ROWS:
            b, a = get(old[key], keys), get(new[key], keys)
            have = {l: x for l in peers.get(key, {}) if (x := get(peers[key][l], keys)) is not None}
            best = min(have.values()) if have else None
            fr = get(new[key], keys, "floor_ratio")
            f = lambda x, d=3: "–" if x is None else f"{x:.{d}f}"
            print(f"| {label} | {f(b)} | {f(a)} | {f(b / a if a and b else None, 2)} | {f(best)} | "
                  f"{f(b / best if b and best else None, 2)} | {f(a / best if a and best else None, 2)} | {f(fr, 2)} |")


if BEFORE:
    before_after(BEFORE)
else:
    main()

#!/usr/bin/env python3
"""Ratio table: Veil's min latency ÷ the fastest peer's min latency, per primitive and setting.

Reads results/veil_<setting>_t<T>.json (from `veil bench ckks --json`) and the peer JSONs written by
the shared peer scripts (results/<lib>_<setting>_t<T>[_variant].json). Usage: peer_ratios.py [dir]
"""
import glob, json, os, sys

D = sys.argv[1] if len(sys.argv) > 1 else "results"
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


def get(doc, keys):
    for k in keys:
        r = doc.get("results", {}).get(k)
        if r and r.get("min_ms") is not None:
            return r["min_ms"]
    return None


def main():
    veil = {}
    peers = {}
    for f in sorted(glob.glob(os.path.join(D, "*.json"))):
        name = os.path.basename(f)[:-5]
        try:
            doc = json.load(open(f))
        except Exception:
            continue
        parts = name.split("_")
        if parts[0] == "veil":
            veil[(parts[1], parts[2])] = doc
        elif len(parts) >= 3:
            lib = parts[0] + ("-" + parts[3] if len(parts) > 3 else "")
            peers.setdefault((parts[1], parts[2]), {})[lib] = doc
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


main()

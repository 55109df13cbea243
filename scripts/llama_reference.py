#!/usr/bin/env python3
"""An independent plaintext Llama-architecture decoder over a GGUF file, in numpy.

It shares no code with Veil: its own GGUF reader (header, metadata, tensor table), its own
dequantizers (F32, F16, Q4_0, Q4_1, Q8_0, written from llama.cpp's block definitions), and the
forward pass written from the architecture (pre-RMSNorm attention with RoPE on adjacent pairs and
grouped-query heads, SwiGLU MLP, final RMSNorm, tied or separate LM head), computed in float64
over the whole sequence with a causal mask.

    python3 scripts/llama_reference.py FILE.gguf 504 3575 282 4649 314 [--top 5] [--json]

prints, for the last position, the top tokens and their logits (with --json: one object with
`logits_last` (every logit of the last position) and `top`). Veil's test
`tests/tests/decoder_load.rs` runs it, when numpy is importable, and compares the last position's
logits with `veil_core::decoder::reference`.
"""
import json
import struct
import sys

import numpy as np

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, buf):
        self.b = buf
        self.at = 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.unpack("<Q")
        s = self.b[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.unpack(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et = self.unpack("<I")
            n = self.unpack("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"value type {t}")


def read_gguf(path):
    buf = open(path, "rb").read()
    r = Reader(buf)
    assert buf[:4] == b"GGUF", "not a GGUF file"
    r.at = 4
    version = r.unpack("<I")
    assert version in (2, 3), version
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    meta = {}
    for _ in range(n_kv):
        k = r.string()
        meta[k] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.unpack("<I")
        dims = [r.unpack("<Q") for _ in range(nd)]
        ty = r.unpack("<I")
        off = r.unpack("<Q")
        infos.append((name, dims, ty, off))
    align = meta.get("general.alignment", 32)
    start = (r.at + align - 1) // align * align
    return buf, meta, {n: (d, t, start + o) for n, d, t, o in infos}


def dequant(buf, dims, ty, off):
    n = int(np.prod(dims))
    if ty == 0:
        return np.frombuffer(buf, "<f4", n, off).astype(np.float64)
    if ty == 1:
        return np.frombuffer(buf, "<f2", n, off).astype(np.float64)
    nb = n // 32
    if ty == 2:  # Q4_0: f16 d, 16 bytes of nibbles; (q - 8)·d
        blk = np.frombuffer(buf, np.uint8, nb * 18, off).reshape(nb, 18)
        d = blk[:, :2].copy().view("<f2").astype(np.float32)
        qs = blk[:, 2:]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32) - 8
        return (q * d).astype(np.float64).reshape(-1)
    if ty == 3:  # Q4_1: f16 d, f16 m, 16 bytes of nibbles; q·d + m
        blk = np.frombuffer(buf, np.uint8, nb * 20, off).reshape(nb, 20)
        d = blk[:, 0:2].copy().view("<f2").astype(np.float32)
        m = blk[:, 2:4].copy().view("<f2").astype(np.float32)
        qs = blk[:, 4:]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32)
        return (q * d + m).astype(np.float64).reshape(-1)
    if ty == 8:  # Q8_0: f16 d, 32 int8; q·d
        blk = np.frombuffer(buf, np.uint8, nb * 34, off).reshape(nb, 34)
        d = blk[:, :2].copy().view("<f2").astype(np.float32)
        q = blk[:, 2:].copy().view(np.int8).astype(np.float32)
        return (q * d).astype(np.float64).reshape(-1)
    raise ValueError(f"ggml type {ty}")


def forward(path, tokens):
    buf, meta, tensors = read_gguf(path)
    assert meta["general.architecture"] == "llama"

    def t(name):
        dims, ty, off = tensors[name]
        # ggml dims are innermost first: [in, out] is out rows of in.
        return dequant(buf, dims, ty, off).reshape(list(reversed(dims)))

    L = meta["llama.block_count"]
    nh = meta["llama.attention.head_count"]
    nkv = meta["llama.attention.head_count_kv"]
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    base = meta["llama.rope.freq_base"]
    emb = t("token_embd.weight")
    d = emb.shape[1]
    hd = d // nh
    m = len(tokens)
    x = emb[np.array(tokens)]

    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g

    pos = np.arange(m)[:, None]
    inv = base ** (-np.arange(0, hd, 2) / hd)
    ang = pos * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(v, heads):  # v: m × heads·hd; rotate the pairs (2i, 2i+1) of each head
        v = v.reshape(m, heads, hd // 2, 2)
        a, b = v[..., 0], v[..., 1]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.stack([a * c - b * s, a * s + b * c], -1).reshape(m, heads * hd)

    mask = np.triu(np.full((m, m), -np.inf), 1)
    for i in range(L):
        p = f"blk.{i}."
        a = rms(x, t(p + "attn_norm.weight"))
        q = rope(a @ t(p + "attn_q.weight").T, nh).reshape(m, nh, hd)
        k = rope(a @ t(p + "attn_k.weight").T, nkv).reshape(m, nkv, hd)
        v = (a @ t(p + "attn_v.weight").T).reshape(m, nkv, hd)
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
        s = np.einsum("ihc,jhc->hij", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = np.einsum("hij,jhc->ihc", s, v).reshape(m, d)
        x = x + ctx @ t(p + "attn_output.weight").T
        h = rms(x, t(p + "ffn_norm.weight"))
        g = h @ t(p + "ffn_gate.weight").T
        u = h @ t(p + "ffn_up.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ t(p + "ffn_down.weight").T
    head = t("output.weight") if "output.weight" in tensors else emb
    logits = rms(x, t("output_norm.weight")) @ head.T
    return logits, meta


def main():
    args = sys.argv[1:]
    top = 5
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    path, tokens = args[0], [int(a) for a in args[1:]]
    logits, meta = forward(path, tokens)
    last = logits[-1]
    order = np.argsort(-last)[:top]
    vocab = meta["tokenizer.ggml.tokens"]
    best = [{"id": int(i), "token": vocab[i], "logit": float(last[i])} for i in order]
    if as_json:
        print(json.dumps({"logits_last": last.tolist(), "top": best}))
    else:
        for b in best:
            print(f"{b['id']:>6} {b['token']!r:>16} {b['logit']:.4f}")


if __name__ == "__main__":
    main()

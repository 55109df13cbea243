#!/usr/bin/env python3
"""The peer for Veil's decoder benchmarks: one GPT-2-shaped decoder layer (d = 768, 12 heads,
FFN 3072, pre-LayerNorm, GELU tanh, biases) with seeded random weights, privately under
SecretFlow SPU 0.9.5, 2-party Cheetah (dealer-free: OT + HE), FM64 with 13 fraction bits,
on this machine: the prefill of m tokens, and one decode step at each context asked for.

Roles (as in ../shared/peers/mpc/bench_spu_minilm.py, the BOLT/BumbleBee hybrid
assumption): the client (party 0) holds its embedded input rows (token + position
embedding, computed in plaintext from the public tables); the server (party 1) holds the
layer's weights as private (colocated) inputs. The decode step's KV cache is secret-shared
between the parties (both shares random-looking: the cache is nobody's private input), and
the step returns the new row and its key and value, which stay shared; the new row is
revealed to the client and checked against a float64 numpy reference.

Both parties run as two threads over SPU's in-memory link; the bytes are SPU's own per-Run
link statistics (rank 0's send + receive = both directions), the time the slower party's
`Run`. The one-time Cheetah setup (HE keys, base OTs) is done by a warm-up run first and not
counted.

    /tmp/veil-peers/spu/bin/python scripts/bench_spu_gpt2.py --prefill 64 --ctx 64,128,256 \\
        --out /tmp/spu-gpt2.json

`--blocks silu:128x3072,swiglu:16x1536,rmsnorm:16x576` also times the Llama architecture's
nonlinear blocks alone (`jax.nn.silu`, SwiGLU's `silu(g)·u`, RMSNorm with a gain), on inputs
secret-shared between the parties, the rows of `veil-bench nonlinear --blocks silu` and
`--variants ln-rms` beside SPU (pass `--prefill 0 --ctx ''` for the blocks alone).

Install: python3.11 -m venv /tmp/veil-peers/spu && /tmp/veil-peers/spu/bin/pip install spu==0.9.5
"""
import argparse
import json
import math
import os
import re
import sys
import threading
import time

D, H, F = 768, 12, 3072
DH = D // H
EPS = 1e-5
WEIGHTS = [('ln1_g', (D,)), ('ln1_b', (D,)), ('attn_w', (D, 3 * D)), ('attn_b', (3 * D,)),
           ('proj_w', (D, D)), ('proj_b', (D,)), ('ln2_g', (D,)), ('ln2_b', (D,)),
           ('fc_w', (D, F)), ('fc_b', (F,)), ('out_w', (F, D)), ('out_b', (D,))]


def weights(seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for name, shape in WEIGHTS:
        if name.endswith('_g'):
            a = 1 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 2:
            a = rng.standard_normal(shape) / math.sqrt(shape[0])
        else:
            a = 0.1 * rng.standard_normal(shape)
        out.append(a.astype(np.float32))
    return out


def layer_jax(x, k_cache, v_cache, w, causal):
    """x: (m, D); k_cache, v_cache: (H, c, DH) or None. Returns (h, k, v) of the m rows."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    (g1, b1, aw, ab, pw, pb, g2, b2, fw, fb, ow, ob) = w

    def ln(y, g, b):
        m = jnp.mean(y, axis=-1, keepdims=True)
        c = y - m
        v = jnp.mean(c * c, axis=-1, keepdims=True)
        return c * jax.lax.rsqrt(v + np.float32(EPS)) * g + b
    m = x.shape[0]
    a = ln(x, g1, b1) @ aw + ab
    sp = lambda y: y.reshape(m, H, DH).transpose(1, 0, 2)  # noqa: E731
    q, k, v = sp(a[:, :D]), sp(a[:, D:2 * D]), sp(a[:, 2 * D:])
    kk = k if k_cache is None else jnp.concatenate([k_cache, k], axis=1)
    vv = v if v_cache is None else jnp.concatenate([v_cache, v], axis=1)
    s = jnp.einsum('htd,hsd->hts', q, kk) * np.float32(1 / math.sqrt(DH))
    if causal:
        s = s + np.triu(np.full((m, m), -256.0, np.float32), 1)[None]
    p = jax.nn.softmax(s, axis=-1)
    c = jnp.einsum('hts,hsd->htd', p, vv).transpose(1, 0, 2).reshape(m, D)
    h = x + c @ pw + pb
    f = jax.nn.gelu(ln(h, g2, b2) @ fw + fb, approximate=True)
    return h + f @ ow + ob, k, v


def layer_numpy(x, k_cache, v_cache, w, causal):
    import numpy as np
    w = [a.astype(np.float64) for a in w]
    (g1, b1, aw, ab, pw, pb, g2, b2, fw, fb, ow, ob) = w
    x = x.astype(np.float64)

    def ln(y, g, b):
        m = y.mean(-1, keepdims=True)
        v = ((y - m) ** 2).mean(-1, keepdims=True)
        return (y - m) / np.sqrt(v + EPS) * g + b
    m = x.shape[0]
    a = ln(x, g1, b1) @ aw + ab
    sp = lambda y: y.reshape(m, H, DH).transpose(1, 0, 2)  # noqa: E731
    q, k, v = sp(a[:, :D]), sp(a[:, D:2 * D]), sp(a[:, 2 * D:])
    if k_cache is not None:
        k = np.concatenate([k_cache.astype(np.float64), k], 1)
        v = np.concatenate([v_cache.astype(np.float64), v], 1)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(DH)
    if causal:
        s = np.where(np.triu(np.ones((m, m), bool), 1)[None], -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    c = ((e / e.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(m, D)
    h = x + c @ pw + pb
    z = ln(h, g2, b2) @ fw + fb
    f = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    return h + f @ ow + ob


LINK_RE = re.compile(r"Link details: total send bytes (\d+), recv bytes (\d+), "
                     r"send actions (\d+), recv actions (\d+)")
PROF_RE = re.compile(r"\[Profiling\] SPU execution (\S+) completed")


def parse_links(text):
    """Per execution name: (send, recv, send actions, recv actions) of the first rank that
    reports it (rank 0 profiles alone)."""
    out, cur = {}, None
    for line in text.splitlines():
        m = PROF_RE.search(line)
        if m:
            cur = m.group(1)
            continue
        m = LINK_RE.search(line)
        if m and cur and cur not in out:
            out[cur] = tuple(map(int, m.groups()))
            cur = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--prefill', type=int, default=64, help='prompt tokens of the prefill (0: skip)')
    ap.add_argument('--ctx', default='64,128,256',
                    help='contexts of the decode steps (cached positions + the new one)')
    ap.add_argument('--blocks', default='',
                    help='Llama blocks alone: comma list of silu:RxC, swiglu:RxC, rmsnorm:RxC')
    ap.add_argument('--out', default=None)
    ap.add_argument('--workdir', default='/tmp/spu-gpt2')
    args = ap.parse_args()
    import jax
    import numpy as np
    import spu
    import spu.api as spu_api
    import spu.libspu as libspu
    import spu.utils.frontend as spu_fe

    ctxs = [int(c) for c in args.ctx.split(',') if c]
    os.makedirs(args.workdir, exist_ok=True)
    cfg = libspu.RuntimeConfig(protocol=libspu.ProtocolKind.CHEETAH,
                               field=libspu.FieldType.FM64, fxp_fraction_bits=13)
    cfg.enable_pphlo_profile = True
    cfg.enable_hal_profile = True
    cfg.experimental_enable_colocated_optimization = True
    io = spu_api.Io(2, cfg)
    secret = libspu.Visibility.VIS_SECRET
    w = weights(1)
    rng = np.random.default_rng(2)
    wnames = [n for n, _ in WEIGHTS]

    def compile_(fn, example, names, outs):
        copts = libspu.CompilerOptions()
        copts.enable_optimize_denominator_with_broadcast = True
        exe, _ = spu_fe.compile(spu_fe.Kind.JAX, fn, example, {}, names,
                                [secret] * len(example), lambda o: outs[:len(o)], copts=copts)
        return exe

    # Jobs: (tag, executable, [(name, array, owner or None for a shared value)], reference)
    jobs = []
    if args.prefill:
        m = args.prefill
        x = (0.5 * rng.standard_normal((m, D))).astype(np.float32)
        fn = lambda x, *w: layer_jax(x, None, None, w, True)  # noqa: E731
        exe = compile_(fn, [x] + w, ['x'] + wnames, ['h', 'k', 'v'])
        ins = [('x', x, 0)] + [(n, a, 1) for n, a in zip(wnames, w)]
        jobs.append((f'prefill{m}', exe, ins, layer_numpy(x, None, None, w, True)))
    for c in ctxs:
        x = (0.5 * rng.standard_normal((1, D))).astype(np.float32)
        kc = (0.5 * rng.standard_normal((H, c - 1, DH))).astype(np.float32)
        vc = (0.5 * rng.standard_normal((H, c - 1, DH))).astype(np.float32)
        fn = lambda x, kc, vc, *w: layer_jax(x, kc, vc, w, False)  # noqa: E731
        exe = compile_(fn, [x, kc, vc] + w, ['x', 'kc', 'vc'] + wnames, ['h', 'k', 'v'])
        ins = [('x', x, 0), ('kc', kc, None), ('vc', vc, None)] + \
              [(n, a, 1) for n, a in zip(wnames, w)]
        jobs.append((f'decode{c}', exe, ins, layer_numpy(x, kc, vc, w, False)))

    for spec in [b for b in args.blocks.split(',') if b]:
        kind, shape = spec.split(':')
        rows, cols = (int(v) for v in shape.split('x'))
        x = (3.0 * rng.standard_normal((rows, cols))).astype(np.float32)
        if kind == 'silu':
            exe = compile_(jax.nn.silu, [x], ['x'], ['o'])
            ins = [('x', x, None)]
            ref = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
        elif kind == 'swiglu':
            u = rng.standard_normal((rows, cols)).astype(np.float32)
            exe = compile_(lambda g, u: jax.nn.silu(g) * u, [x, u], ['g', 'u'], ['o'])
            ins = [('g', x, None), ('u', u, None)]
            g64 = x.astype(np.float64)
            ref = g64 / (1 + np.exp(-g64)) * u
        elif kind == 'rmsnorm':
            gain = (1 + 0.1 * rng.standard_normal(cols)).astype(np.float32)

            def rms(y, g):
                import jax.numpy as jnp
                return y * jax.lax.rsqrt(jnp.mean(y * y, -1, keepdims=True) + EPS) * g
            exe = compile_(rms, [x, gain], ['x', 'gain'], ['o'])
            ins = [('x', x, None), ('gain', gain, 1)]
            x64 = x.astype(np.float64)
            ref = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + EPS) * gain
        else:
            sys.exit(f'unknown block {kind!r}: silu, swiglu or rmsnorm')
        jobs.append((f'{kind}{rows}x{cols}', exe, ins, ref))

    # Warm-up: Cheetah's one-time setup, on a tiny product.
    wx = np.ones((2, 8), np.float32)
    warm = compile_(lambda a, b: a @ b, [wx, wx.T.copy()], ['a', 'b'], ['o'])
    jobs.insert(0, ('warmup', warm, [('a', wx, 0), ('b', wx.T.copy(), 1)], None))

    shares = []
    for tag, _exe, ins, _ref in jobs:
        per = []
        for name, arr, owner in ins:
            ss = io.make_shares(arr, secret) if owner is None else io.make_shares(arr, secret, owner)
            per.append((name, ss))
        shares.append(per)

    logf = os.path.join(args.workdir, f'mem_{int(time.time())}.log')
    fd = os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(1)
    sys.stdout.flush()
    os.dup2(fd, 1)
    desc = libspu.link.Desc()
    desc.add_party('p0', 'thread_0')
    desc.add_party('p1', 'thread_1')
    times = [dict(), dict()]
    revealed = {}
    outs0 = {}
    errs = []
    barrier = threading.Barrier(2)

    def party(r):
        try:
            rc = libspu.RuntimeConfig()
            rc.ParseFromString(cfg.SerializeToString())
            if r != 0:
                rc.enable_pphlo_profile = False
                rc.enable_hal_profile = False
            rt = libspu.RuntimeWrapper(libspu.link.create_mem(desc, r), rc)
            for (tag, exe, _ins, _ref), per in zip(jobs, shares):
                exe.name = tag
                for name, ss in per:
                    rt.SetVar(name, ss[r])
                barrier.wait()
                t = time.perf_counter()
                rt.Run(exe)
                times[r][tag] = time.perf_counter() - t
                first = list(exe.output_names)[0]
                if r == 0:
                    outs0[tag] = rt.GetVar(first)
                barrier.wait()
                if r == 1:
                    revealed[tag] = (rt.GetVar(first), None)
                barrier.wait()
                for name in list(exe.input_names) + list(exe.output_names):
                    rt.DelVar(name)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)
            barrier.abort()

    ths = [threading.Thread(target=party, args=(r,)) for r in range(2)]
    [t.start() for t in ths]
    [t.join() for t in ths]
    sys.stdout.flush()
    os.dup2(saved, 1)
    os.close(fd)
    if errs:
        raise errs[0]
    links = parse_links(open(logf).read())
    rows = []
    for tag, _exe, _ins, ref in jobs:
        if ref is None:
            continue
        got = io.reconstruct([outs0[tag], revealed[tag][0]]).astype(np.float64)
        send, recv, sa, ra = links.get(tag, (0, 0, 0, 0))
        err = float(np.abs(got - ref).max())
        rows.append({'run': tag, 'seconds': max(times[0][tag], times[1][tag]),
                     'bytes': send + recv, 'send_actions': sa, 'recv_actions': ra,
                     'max_abs_err_vs_f64': err})
        print(f"{tag:>10s}  {rows[-1]['seconds']:8.2f} s  {(send + recv) / 2**20:9.1f} MiB  "
              f"{sa:6d} send actions  max |err| {err:.2e}", flush=True)
    if args.out:
        with open(args.out, 'w') as f:
            json.dump({'spu_version': spu.__version__, 'jax_version': jax.__version__,
                       'protocol': 'CHEETAH', 'field': 'FM64', 'fxp': 13, 'shape':
                       {'d': D, 'heads': H, 'ffn': F}, 'link': 'mem (2 threads)',
                       'nproc': os.cpu_count(), 'loadavg': os.getloadavg(),
                       'date_utc': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                       'runs': rows, 'log': logf}, f, indent=1)
        print(f'# wrote {args.out}')


if __name__ == '__main__':
    main()

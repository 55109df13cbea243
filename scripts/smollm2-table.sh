#!/usr/bin/env bash
# Issue 42's correctness table: SmolLM2-135M-Instruct (the real checkpoint) generates 8 greedy
# tokens privately on each of 20 prompts, and each run is compared with the plaintext model's
# greedy tokens on the same dequantized weights. One JSON report per prompt lands in OUT
# (resumable: a prompt whose report exists is skipped); scripts/smollm2_table.py prints the table.
#   scripts/smollm2-table.sh [OUT] [VEIL_BENCH]
# About 6 minutes per prompt on two cores (26-34 s per step with the weights kept; the first
# step about a minute).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/smollm2-table}
bin=${2:-$here/../target/release/veil-bench}
[ -x "$bin" ] || { echo "build it first: cargo build --release -p veil-bench"; exit 2; }
mkdir -p "$out"
prompts=(
  "The capital of France is"
  "Once upon a time"
  "The sun rises in the"
  "Water boils at"
  "My favorite color is"
  "The quick brown fox"
  "In 1492, Columbus"
  "Python is a programming"
  "The largest planet is"
  "Two plus two equals"
  "Cats and dogs are"
  "The moon orbits the"
  "A healthy breakfast includes"
  "The first president of the United States was"
  "Paris is known for"
  "Rain falls from"
  "The best way to learn is"
  "Music makes people"
  "Trees produce oxygen through"
  "The ocean is"
)
for i in "${!prompts[@]}"; do
  f=$(printf '%s/%02d.json' "$out" "$i")
  [ -s "$f" ] && continue
  echo "[$(date '+%T')] prompt $i: ${prompts[$i]}"
  "$bin" generate --model smollm2 --prompt "${prompts[$i]}" --new-tokens 8 \
    --weight-cache-mib "${VEIL_WEIGHT_CACHE_MIB:-8192}" --json > "$f.part" \
    && mv "$f.part" "$f" || { echo "prompt $i failed"; rm -f "$f.part"; }
done
python3 "$here/smollm2_table.py" "$out"

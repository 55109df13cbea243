#!/usr/bin/env bash
# Runs `veil-bench ckks` side by side with OpenFHE, DESILO FHE and SEAL (the project's shared peer
# benchmarks, ../shared/peers/ckks, set up with its setup.sh) on this machine, interleaved setting by
# setting, and prints the ratio table (Veil ÷ fastest peer; < 1 means Veil is faster).
#   scripts/compare-peers.sh [SETTINGS] [THREADS] [REPS]     e.g. scripts/compare-peers.sh "a b c" 1 10
# Results land in ./results (JSON and logs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
peers=${VEIL_PEERS_DIR:-$root/../shared/peers/ckks}
SETTINGS=${1:-a b c}; T=${2:-1}; REPS=${3:-10}
[ -x "$peers/run.sh" ] || [ -f "$peers/run.sh" ] || { echo "peer scripts not found at $peers"; exit 2; }
cargo build --release -q -p veil --bin veil || exit 1
veil=$root/target/release/veil
mkdir -p results
for s in $SETTINGS; do
  case $s in a) ln=14; L=6 ;; b) ln=15; L=10 ;; c) ln=16; L=16 ;; *) echo "unknown setting $s"; exit 2 ;; esac
  echo "### setting $s (N=2^$ln, L=$L), threads $T — $(date '+%T') load $(cut -d' ' -f1 /proc/loadavg)"
  "$veil" bench ckks --logn $ln --levels $L --threads $T --reps $REPS --json > results/veil_${s}_t$T.json 2>/dev/null \
    && echo "veil done" || echo "veil failed"
  for lib in seal desilo openfhe; do bash "$peers/run.sh" $lib $s $T "" all $REPS; done
  bash "$peers/run.sh" openfhe $s $T dnum3 all $REPS
done
python3 "$here/peer_ratios.py" results

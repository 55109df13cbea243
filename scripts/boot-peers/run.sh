#!/usr/bin/env bash
# Usage: run.sh THREADS [REPS]
# Runs the CKKS bootstrapping peers one after the other (never two at once) with THREADS threads
# (OMP_NUM_THREADS for OpenFHE, thread_count for DESILO) and REPS timed bootstraps (default 3),
# each under guard.py (killed at BOOT_PEERS_LIMIT_GB of RSS, default 20, or when the machine's
# MemAvailable drops under BOOT_PEERS_MIN_AVAIL_GB, default 1.5).
# stdout: exactly one JSON object per run, one per line (nothing else); progress goes to the logs.
# Environment:
#   VEIL_PEERS          where the venvs live (default /tmp/veil-peers): venv310 (openfhe), venv311 (desilofhe)
#   BOOT_PEERS_RUNS     which runs, in order (default "openfhe desilo desilo-small"):
#                         openfhe      OpenFHE; BOOT_OPENFHE_LEVELS levels after bootstrapping (default 6),
#                                      BOOT_OPENFHE_DNUM digits (default 0 = smallest that passes 128-bit)
#                         desilo       DESILO default bootstrap key
#                         desilo-small DESILO small bootstrap key + roll key (lighter variant)
#                         desilo-size-small  DESILO create_bootstrap_key(size="small")
#   BOOT_PEERS_LOGS     log directory (default $VEIL_PEERS/boot-logs)
#   BOOT_PEERS_TIMEOUT  seconds per run (default 1800)
#   BOOT_PEERS_WARMUP   untimed bootstraps before the REPS timed ones (default 1)
set -u
here=$(cd "$(dirname "$0")" && pwd)
T=${1:?usage: run.sh THREADS [REPS]}
REPS=${2:-3}
P=${VEIL_PEERS:-/tmp/veil-peers}
LOGS=${BOOT_PEERS_LOGS:-$P/boot-logs}
RUNS=${BOOT_PEERS_RUNS:-openfhe desilo desilo-small}
LIMIT=${BOOT_PEERS_LIMIT_GB:-20}
AVAIL=${BOOT_PEERS_MIN_AVAIL_GB:-1.5}
TMO=${BOOT_PEERS_TIMEOUT:-1800}
mkdir -p "$LOGS"
export OMP_NUM_THREADS=$T MKL_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T PYTHONDONTWRITEBYTECODE=1
GUARD_PY=$(command -v python3 || echo "$P/venv311/bin/python")

one() { # name lib venv-python variant script args...
  local name=$1 lib=$2 py=$3 variant=$4; shift 4
  local log="$LOGS/${name}_t${T}.log"
  { echo "### $name threads=$T reps=$REPS start $(date '+%F %T') $(uptime)"; } > "$log"
  if [ ! -x "$py" ]; then
    printf '{"lib": "%s", "variant": "%s", "threads": %s, "status": "error: %s missing (run the peers setup)"}\n' \
      "$lib" "$variant" "$T" "$py"
    return
  fi
  "$GUARD_PY" "$here/guard.py" --lib "$lib" --variant "$variant" --threads "$T" \
    --limit-gb "$LIMIT" --min-avail-gb "$AVAIL" --timeout "$TMO" --log "$log" -- \
    "$py" "$here/$@" --threads "$T" --reps "$REPS" --warmup "${BOOT_PEERS_WARMUP:-1}" | tee -a "$log.json" | tail -1
  echo "### end $(date '+%F %T') $(uptime)" >> "$log"
}

for r in $RUNS; do
  case $r in
    openfhe)           one openfhe openfhe "$P/venv310/bin/python" "levels${BOOT_OPENFHE_LEVELS:-6}" boot_openfhe.py \
                         --levels-after "${BOOT_OPENFHE_LEVELS:-6}" --dnum "${BOOT_OPENFHE_DNUM:-0}" ;;
    desilo)            one desilo desilo "$P/venv311/bin/python" default boot_desilo.py --variant default ;;
    desilo-small)      one desilo-small desilo-small-key "$P/venv311/bin/python" small-key boot_desilo.py --variant small-key ;;
    desilo-size-small) one desilo-size-small desilo-size-small "$P/venv311/bin/python" size-small boot_desilo.py --variant size-small ;;
    *) printf '{"lib": "%s", "threads": %s, "status": "error: unknown run"}\n' "$r" "$T" ;;
  esac
done

#!/usr/bin/env bash
# What watching a job costs it (docs/dashboard.md, docs/benchmarks.md "The dashboard's cost"):
# the same elastic cnn job, 4 workers on this machine, alternated REPS times between
#   off:     CDT_LIVE=0 (the workers publish nothing) and no dashboard
#   watched: the workers publish their live documents and `cann-dashboard cluster` polls the
#            job's store every second while a scraper reads /metrics every second
# and the median samples/s of each (the job's own `samples_per_s`).
#
# Usage: bench/run_dashboard_cost.sh [--reps N] [--steps N] [--nproc N]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLI=$ROOT/build/bin/cann-dist-train
DASH=$ROOT/build/bin/cann-dashboard
REPS=3 STEPS=500 NPROC=4
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=$ROOT/bench/results/dashboard-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 XDG_RUNTIME_DIR=$OUT/run CDT_JOB_ID=cost
mkdir -p "$XDG_RUNTIME_DIR"
run() {  # $1 = off | watched, $2 = rep
  local json=$OUT/$1-$2.json dash_pid="" scrape_pid=""
  if [ "$1" = watched ]; then
    "$DASH" cluster --port 0 > "$OUT/$1-$2.dashboard.log" 2>&1 &
    dash_pid=$!
    sleep 0.5
    local port
    port=$(grep -o '127.0.0.1:[0-9]*' "$OUT/$1-$2.dashboard.log" | head -1 | cut -d: -f2)
    (while sleep 1; do curl -s "http://127.0.0.1:$port/metrics" > /dev/null || true; done) &
    scrape_pid=$!
    live=1
  else
    live=0
  fi
  CDT_LIVE=$live "$CLI" elastic --nproc-per-node "$NPROC" -- --model cnn --steps "$STEPS" \
    --batch-size 32 --json "$json" > "$OUT/$1-$2.log" 2>&1
  [ -n "$scrape_pid" ] && kill "$scrape_pid" 2>/dev/null || true
  [ -n "$dash_pid" ] && kill "$dash_pid" 2>/dev/null && wait "$dash_pid" 2>/dev/null || true
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['samples_per_s'])" "$json"
}
for r in $(seq 1 "$REPS"); do
  for mode in off watched; do
    sps=$(run $mode "$r")
    echo "$mode $r $sps" | tee -a "$OUT/samples_per_s.txt"
  done
done
python3 - "$OUT/samples_per_s.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
off = [float(r[2]) for r in rows if r[0] == "off"]
on = [float(r[2]) for r in rows if r[0] == "watched"]
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"off     median {m_off:.1f} samples/s  {off}")
print(f"watched median {m_on:.1f} samples/s  {on}")
print(f"watched / off = {m_on / m_off:.3f}")
PY
echo "results: $OUT"

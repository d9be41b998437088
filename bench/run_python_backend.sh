#!/usr/bin/env bash
# The torch.distributed backend "cdt" (python/cann_dist) against Gloo with the same DDP script
# (bench/peers/ddp_baseline.py, only --backend changed): throughput and loss curves, on this
# machine, alternated (gloo then cdt on odd repetitions, cdt then gloo on even), medians of REPS.
#
#   bash bench/run_python_backend.sh [--reps 3] [--ranks "2 4"] [--steps 200] [--batch-size 64]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3 RANKS="2 4" STEPS=200 BATCH=64
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    *) echo "run_python_backend: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -f build/python/cann_dist/__init__.py ] || { echo "run_python_backend: build first (make build)" >&2; exit 2; }
export PYTHONPATH=$PWD/build/python
out=bench/results/python-backend-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
for n in $RANKS; do
  for i in $(seq 1 "$REPS"); do
    order="gloo cdt"; [ $((i % 2)) = 0 ] && order="cdt gloo"
    for b in $order; do
      /usr/bin/python3 bench/peers/ddp_baseline.py --backend "$b" --nproc-per-node "$n" \
        --steps "$STEPS" --batch-size "$BATCH" --seed 1 --json "$out/$b-$n-$i.json" > "$out/$b-$n-$i.log" 2>&1
    done
  done
done
/usr/bin/python3 - "$out" "$RANKS" "$REPS" <<'PY'
import json, statistics, sys
out, ranks, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
for n in ranks:
    rate = {b: [json.load(open(f"{out}/{b}-{n}-{i}.json"))["samples_per_s"] for i in range(1, reps + 1)]
            for b in ("gloo", "cdt")}
    g = json.load(open(f"{out}/gloo-{n}-1.json"))["loss_curve"]
    c = json.load(open(f"{out}/cdt-{n}-1.json"))["loss_curve"]
    diff = max(abs(x[1] - y[1]) for x, y in zip(g, c))
    mg, mc = statistics.median(rate["gloo"]), statistics.median(rate["cdt"])
    print(f"{n} ranks: gloo {mg:.1f} samples/s ({' / '.join(f'{x:.1f}' for x in rate['gloo'])}), "
          f"cdt {mc:.1f} ({' / '.join(f'{x:.1f}' for x in rate['cdt'])}): cdt/gloo {mc / mg:.2f}; "
          f"loss curves: {len(c)} steps, max |diff| {diff:.2e}")
PY

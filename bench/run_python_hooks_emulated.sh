#!/usr/bin/env bash
# The Python front end's adaptive compression hook where the network is the bottleneck:
# bench/peers/ddp_baseline.py (PyTorch DDP, the cnn on Fashion-MNIST, batch 64 per rank) on two
# emulated nodes (tools/emulate-cluster, one rank each) joined by a slow link, with
#   --backend cdt --cdt-hook adaptive    (cann_dist.hooks.compress("adaptive"))
#   --backend gloo --fp16-hook            (PyTorch's fp16_compress_hook, what DDP users reach for)
# the same steps, alternated, REPS of each; throughput and test accuracy at the last step.
# Needs root (network namespaces).
#
#   sudo bash bench/run_python_hooks_emulated.sh [--link 20mbit] [--steps 300] [--reps 3]
set -euo pipefail
cd "$(dirname "$0")/.."
LINK=20mbit STEPS=300 REPS=3 BATCH=64
while [ $# -gt 0 ]; do
  case "$1" in
    --link) LINK=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    *) echo "run_python_hooks_emulated: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run_python_hooks_emulated: needs root (tools/emulate-cluster)" >&2; exit 2; }
[ -f build/python/cann_dist/__init__.py ] || { echo "run_python_hooks_emulated: build first (make build)" >&2; exit 2; }
export PYTHONPATH=$PWD/build/python
out=bench/results/python-hooks-emulated-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out; link $LINK, $STEPS steps"
for i in $(seq 1 "$REPS"); do
  order="adaptive fp16"; [ $((i % 2)) = 0 ] && order="fp16 adaptive"
  for kind in $order; do
    if [ "$kind" = adaptive ]; then args=(--backend cdt --cdt-hook adaptive); else args=(--backend gloo --fp16-hook); fi
    tools/emulate-cluster --nodes 2 --link "$LINK" -- /usr/bin/python3 "$PWD/bench/peers/ddp_baseline.py" \
      "${args[@]}" --nproc-per-node 1 --steps "$STEPS" --batch-size "$BATCH" --seed 1 --threads 1 \
      --json "$PWD/$out/$kind-$i.json" > "$out/$kind-$i.log" 2>&1 || echo "   $kind $i failed: see $out/$kind-$i.log"
    /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'   {sys.argv[2]} {sys.argv[3]}: {r[\"samples_per_s\"]:.1f} samples/s, test accuracy {r[\"test_accuracy\"]:.4f}')" \
      "$out/$kind-$i.json" "$kind" "$i" 2>/dev/null || true
  done
done
/usr/bin/python3 - "$out" "$REPS" <<'PY'
import json, os, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
runs = {k: [json.load(open(f"{out}/{k}-{i}.json")) for i in range(1, reps + 1)
            if os.path.exists(f"{out}/{k}-{i}.json")] for k in ("adaptive", "fp16")}
rate = {k: statistics.median(r["samples_per_s"] for r in v) for k, v in runs.items() if v}
acc = {k: statistics.median(r["test_accuracy"] for r in v) for k, v in runs.items() if v}
for k in runs:
    rates = " / ".join("%.1f" % r["samples_per_s"] for r in runs[k])
    accs = " / ".join("%.4f" % r["test_accuracy"] for r in runs[k])
    print(f"{k}: samples/s {rates} (median {rate[k]:.1f}); test accuracy {accs} (median {acc[k]:.4f})")
if len(rate) == 2:
    print(f"adaptive / fp16 hook: {rate['adaptive'] / rate['fp16']:.2f}x throughput; "
          f"accuracy {100 * (acc['adaptive'] - acc['fp16']):+.2f} pp")
PY

#!/usr/bin/env bash
# FSDP on the "cdt" backend against Gloo with the same script (bench/peers/fsdp_train.py, only
# --backend changed; a 4-layer transformer, width 256, FULL_SHARD): throughput and loss curves,
# alternated (gloo then cdt on odd repetitions, cdt then gloo on even), medians of REPS. Needs a
# PyTorch 2.x build: BUILD is a `make test-torch2` tree, PYTHON its environment's Python.
#
#   bash bench/run_fsdp_peers.sh [--reps 3] [--ranks "2 4"] [--steps 30]
#        [--build build-torch2.11.0] [--python ~/.cache/cann-dist-train/torch-2.11.0/bin/python]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3 RANKS="2 4" STEPS=30 BUILD=build-torch2.11.0 PYTHON=$HOME/.cache/cann-dist-train/torch-2.11.0/bin/python
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --python) PYTHON=$2; shift 2 ;;
    *) echo "run_fsdp_peers: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -f "$BUILD/python/cann_dist/__init__.py" ] || { echo "run_fsdp_peers: no cann_dist in $BUILD (make test-torch2)" >&2; exit 2; }
[ -x "$PYTHON" ] || { echo "run_fsdp_peers: no Python at $PYTHON (bash scripts/install-torch.sh 2.11.0)" >&2; exit 2; }
export PYTHONPATH=$(cd "$BUILD" && pwd)/python OMP_NUM_THREADS=1  # BUILD relative or absolute
out=bench/results/fsdp-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out ($("$PYTHON" -c 'import torch; print("torch", torch.__version__)'))"
for n in $RANKS; do
  for i in $(seq 1 "$REPS"); do
    order="gloo cdt"; [ $((i % 2)) = 0 ] && order="cdt gloo"
    for b in $order; do
      "$PYTHON" -m torch.distributed.run --nproc-per-node "$n" --master-port $((29600 + RANDOM % 1000)) \
        bench/peers/fsdp_train.py --backend "$b" --steps "$STEPS" --json "$out/$b-$n-$i.json" \
        > "$out/$b-$n-$i.log" 2>&1 || { echo "run_fsdp_peers: $b on $n ranks failed: $out/$b-$n-$i.log" >&2; exit 1; }
    done
  done
done
"$PYTHON" - "$out" "$RANKS" "$REPS" <<'PY'
import json, statistics, sys
out, ranks, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
for n in ranks:
    runs = {b: [json.load(open(f"{out}/{b}-{n}-{i}.json")) for i in range(1, reps + 1)] for b in ("gloo", "cdt")}
    rate = {b: [r["samples_per_s"] for r in runs[b]] for b in runs}
    diff = max(abs(x - y) for x, y in zip(runs["gloo"][0]["losses"], runs["cdt"][0]["losses"]))
    mg, mc = statistics.median(rate["gloo"]), statistics.median(rate["cdt"])
    print(f"{n} ranks ({runs['cdt'][0]['parameters']} parameters): gloo {mg:.1f} samples/s "
          f"({' / '.join(f'{x:.1f}' for x in rate['gloo'])}), cdt {mc:.1f} "
          f"({' / '.join(f'{x:.1f}' for x in rate['cdt'])}): cdt/gloo {mc / mg:.2f}; "
          f"loss curves: {len(runs['cdt'][0]['losses'])} steps, max |diff| {diff:.2e}")
PY

#!/usr/bin/env bash
# Recovery from a killed worker (issue 6 acceptance): the cnn on Fashion-MNIST, 4 workers on this
# machine, per-rank batch 32. One fault-free elastic run, then --runs runs each killing (SIGKILL)
# a random worker at a random step; rto_s, lost steps and test accuracy against the fault-free run.
# Beside it, the same failure under torchrun --max-restarts with DDP (bench/peers/torchrun_elastic.py,
# checkpoint every 2 steps), rto by the same definition. Then the cost of elastic mode's per-step
# snapshots: `train` and `train --elastic` alternated, fault-free.
#
#   bash bench/run_elastic_recovery.sh [--runs 10] [--epochs 1] [--torchrun-runs 3] [--overhead-reps 3]
#                                      [--spare-runs 3] [--seed 7]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
RUNS=10 EPOCHS=1 TRUNS=3 OREPS=3 SEED=7 SRUNS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --torchrun-runs) TRUNS=$2; shift 2 ;;
    --overhead-reps) OREPS=$2; shift 2 ;;
    --spare-runs) SRUNS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/elastic-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
RANDOM=$SEED
TRAIN=(--model cnn --dataset fashion-mnist --epochs "$EPOCHS" --batch-size 32 --seed 1 --no-progress)
# 60000 samples / (4 x 32) per step
STEPS=$(( (60000 + 127) / 128 ))
run_ours() {  # name, extra elastic options...
  local name=$1; shift
  "$BIN/cann-dist-train" elastic --nproc-per-node 4 "$@" -- "${TRAIN[@]}" --json "$out/$name.json" \
      > "$out/$name.txt" 2>&1 || { echo "   $name failed: see $out/$name.txt"; return 0; }
  tr '\r' '\n' < "$out/$name.txt" | grep -h "^elastic:\|test accuracy" | sed 's/^/   /' || true
}
echo "== fault-free"
run_ours nofault
for i in $(seq 1 "$RUNS"); do
  worker=$(( RANDOM % 4 )) step=$(( 20 + RANDOM % (STEPS * ${EPOCHS%.*} - 40) ))
  echo "== kill worker $worker at step $step"
  run_ours "kill$i" --inject "kill:$worker@$step"
done
for i in $(seq 1 "$SRUNS"); do
  worker=$(( RANDOM % 4 )) step=$(( 20 + RANDOM % (STEPS * ${EPOCHS%.*} - 40) ))
  echo "== one hot spare; kill worker $worker at step $step"
  run_ours "spare$i" --spares 1 --inject "kill:$worker@$step"
done
for i in $(seq 1 "$TRUNS"); do
  rank=$(( RANDOM % 4 )) step=$(( 20 + RANDOM % 160 ))
  echo "== torchrun: kill rank $rank at step $step"
  rm -rf "$out/torchrun-ckpt$i"
  timeout 600 /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --max_restarts 1 \
      --monitor_interval 0.1 --redirects 1 --tee 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29520 \
      bench/peers/torchrun_elastic.py --steps 200 --kill-rank "$rank" --kill-step "$step" \
      --checkpoint-dir "$out/torchrun-ckpt$i" --json "$out/torchrun$i.json" > "$out/torchrun$i.txt" 2>&1 ||
    echo "   torchrun run $i failed: see $out/torchrun$i.txt"
  grep -h "torchrun: {" "$out/torchrun$i.txt" | sed 's/^/   /' || true
done
for i in $(seq 1 "$OREPS"); do
  for mode in plain elastic; do
    flag=(); [ "$mode" = elastic ] && flag=(--elastic)
    "$BIN/cann-dist-train" train "${flag[@]}" --nproc-per-node 4 --model cnn --dataset fashion-mnist \
        --steps 300 --batch-size 32 --seed 1 --no-progress --json "$out/overhead-$mode$i.json" \
        > "$out/overhead-$mode$i.txt" 2>&1 || echo "   overhead run $mode $i failed"
  done
done
python3 - "$out" "$RUNS" "$TRUNS" "$OREPS" "$SRUNS" <<'PY'
import json, os, statistics, sys
d, runs, truns, oreps, sruns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def load(name):
    p = os.path.join(d, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
base = load("nofault")
print("| run | lost worker | step | rto_s | detected_after_s | lost steps | curve gaps | test accuracy | vs fault-free (pp) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
rtos, spare_rtos = [], []
for name in [f"kill{i}" for i in range(1, runs + 1)] + [f"spare{i}" for i in range(1, sruns + 1)]:
    r = load(name)
    if not r or not r["recoveries"]:
        print(f"| {name} | failed | | | | | | | |"); continue
    x = r["recoveries"][0]
    steps = [s for s, _ in r["loss_curve"]]
    gaps = sum(1 for a, b in zip(steps, steps[1:]) if b != a + 1)  # 0 = every step once
    (spare_rtos if name.startswith("spare") else rtos).append(x["rto_s"])
    delta = "" if not base else f"{100 * (r['test_accuracy'] - base['test_accuracy']):+.2f}"
    print(f"| {name} (world {x['world_before']}->{x['world_after']}) | {x['lost_workers'][0]} | {x['failed_step']} | {x['rto_s']:.3f} | "
          f"{x['detected_after_s']:.3f} | {x['lost_steps']} | {gaps} | {r['test_accuracy']:.4f} | {delta} |")
if base:
    print(f"\nfault-free: test accuracy {base['test_accuracy']:.4f}, {base['samples_per_s']:.0f} samples/s")
if rtos:
    print(f"ours: median rto_s {statistics.median(rtos):.3f} (min {min(rtos):.3f}, max {max(rtos):.3f}) over {len(rtos)} kills")
if spare_rtos:
    print(f"with one hot spare: median rto_s {statistics.median(spare_rtos):.3f} (max {max(spare_rtos):.3f}) over {len(spare_rtos)} kills")
tr = [load(f"torchrun{i}") for i in range(1, truns + 1)]
tr = [t["rto_s"] for t in tr if t and "rto_s" in t]
if tr:
    print(f"torchrun --max-restarts 1 (DDP, checkpoint every 2 steps): median rto_s {statistics.median(tr):.3f} "
          f"(min {min(tr):.3f}, max {max(tr):.3f}) over {len(tr)} kills")
plain = [load(f"overhead-plain{i}") for i in range(1, oreps + 1)]
el = [load(f"overhead-elastic{i}") for i in range(1, oreps + 1)]
plain = [p["samples_per_s"] for p in plain if p]
el = [p["samples_per_s"] for p in el if p]
if plain and el:
    mp, me = statistics.median(plain), statistics.median(el)
    print(f"snapshot overhead: train {mp:.1f} samples/s, train --elastic {me:.1f} (median of {len(el)}): "
          f"{100 * (1 - me / mp):+.1f}% slower")
PY

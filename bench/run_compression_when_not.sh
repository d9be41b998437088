#!/usr/bin/env bash
# Does `--compress adaptive` know when not to compress? Where the network is fast, adaptive must
# train as fast as uncompressed training (issue: >= 0.95x on loopback; the MLSys'22 study "On the
# utility of gradient compression" found compression slower than a tuned allreduce in most
# realistic setups). Alternates `--compress adaptive` and `--compress none`, REPS times, same
# seed and steps; prints each run's samples/s, the medians, their ratio, the per-repetition ratios,
# and what the controller chose at its last decision.
#
# On loopback (the default): --nproc workers on this machine. With --link L: two emulated nodes
# (tools/emulate-cluster, needs root), one worker each, over links of rate L; --cpus-per-node C
# binds each node to C CPUs of its own, as in run_compression_efficiency.sh.
#
#   bash bench/run_compression_when_not.sh [--nproc 4] [--batch-size 32] [--steps 600] [--reps 5]
#   sudo bash bench/run_compression_when_not.sh --link 1gbit --cpus-per-node 1 --batch-size 64
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
NPROC=4 BATCH=32 STEPS=600 REPS=5 LINK= CPUS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) NPROC=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --cpus-per-node) CPUS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/compress-when-not-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
printf 'link=%s nproc=%s batch=%s steps=%s reps=%s cpus_per_node=%s\n' "${LINK:-loopback}" "$NPROC" \
    "$BATCH" "$STEPS" "$REPS" "$CPUS" > "$out/setup.txt"
common=(--model cnn --steps "$STEPS" --batch-size "$BATCH" --seed 1 --no-progress)
run() {  # run NAME COMPRESS
  local json=$(pwd)/$out/$1.json
  if [ -z "$LINK" ]; then
    "$BIN/cann-dist-train" train "${common[@]}" --nproc-per-node "$NPROC" --compress "$2" \
        --json "$json" > "$out/$1.txt" 2>&1
  else
    local bind=(); [ "$CPUS" = 0 ] || bind=(--cpus-per-node "$CPUS")
    local threads=$CPUS; [ "$CPUS" -gt 0 ] || threads=$(( $(nproc) / 2 )); [ "$threads" -ge 1 ] || threads=1
    tools/emulate-cluster --nodes 2 --link "$LINK" "${bind[@]}" -- "$BIN/cann-dist-train" train \
        "${common[@]}" --nproc-per-node 1 --threads "$threads" --compress "$2" --json "$json" \
        > "$out/$1.txt" 2>&1
  fi
}
for i in $(seq 1 "$REPS"); do
  run "adaptive_$i" adaptive
  run "none_$i" none
  echo "repetition $i of $REPS done"
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
def runs(kind):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{d}/{kind}_*.json"),
                                               key=lambda p: int(p.rsplit("_", 1)[1][:-5]))]
a, n = runs("adaptive"), runs("none")
ta, tn = [r["samples_per_s"] for r in a], [r["samples_per_s"] for r in n]
print(f"results in {d}")
print("adaptive samples/s:    ", " / ".join(f"{x:.1f}" for x in ta))
print("uncompressed samples/s:", " / ".join(f"{x:.1f}" for x in tn))
print(f"adaptive / uncompressed (medians): {statistics.median(ta) / statistics.median(tn):.3f} "
      f"(per repetition: {' / '.join(f'{x / y:.2f}' for x, y in zip(ta, tn))})")
print("adaptive's volume reduction:", " / ".join(f"{100 * r['compression']['volume_reduction']:.1f}%" for r in a))
print("adaptive's last decision:", " / ".join(
    "step {0} {1} {2}".format(*r["compression"]["phases"][-1][:3]) for r in a))
print("test accuracy, adaptive / uncompressed:", " / ".join(f"{r['test_accuracy']:.4f}" for r in a),
      "|", " / ".join(f"{r['test_accuracy']:.4f}" for r in n))
PY

#!/usr/bin/env bash
# What checkpoints cost (issue 6 acceptance): the cnn on Fashion-MNIST, 4 workers, per-rank batch 32.
#  1. Sizes: a checkpoint after every step, incremental (a full one every 10): the increment one
#     step after a full checkpoint against the full one, per codec.
#     Also zstd with --checkpoint-quantize int8 (lossy increments).
#  2. Quantised resume: --resume-steps steps uninterrupted, against the same run stopped half-way
#     and resumed from a quantised increment (final loss and test accuracy of both).
#  3. Time: `train` without checkpoints and with one every --every steps (asynchronous), alternated
#     --reps times; the throughput ratio, and the training thread's own share (snapshot + waiting
#     for the previous write) of the wall time.
#
#   bash bench/run_checkpoint_cost.sh [--steps 300] [--every 10] [--reps 3] [--resume-steps 600]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
STEPS=300 EVERY=10 REPS=3 RESUME_STEPS=600
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --resume-steps) RESUME_STEPS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/checkpoint-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
TRAIN=(--nproc-per-node 4 --model cnn --dataset fashion-mnist --batch-size 32 --seed 1 --no-progress)
for variant in zstd lz4 none zstd-int8; do
  codec=${variant%-int8} quant=none
  [ "$variant" != "$codec" ] && quant=int8
  "$BIN/cann-dist-train" train "${TRAIN[@]}" --steps 12 --checkpoint-dir "$out/sizes-$variant" \
      --checkpoint-every 1 --checkpoint-incremental --checkpoint-full-every 10 --checkpoint-keep 10 \
      --checkpoint-codec "$codec" --checkpoint-quantize "$quant" --json "$out/sizes-$variant.json" \
      > "$out/sizes-$variant.txt" 2>&1
done
# Quantised resume: a checkpoint every step (a full one every 10), so that the
# newest at the stop is an increment; then resume from it.
half=$((RESUME_STEPS / 2))
QUANT=(--checkpoint-incremental --checkpoint-full-every 10 --checkpoint-quantize int8 --checkpoint-every 1)
"$BIN/cann-dist-train" train "${TRAIN[@]}" --steps "$RESUME_STEPS" --json "$out/resume-whole.json" \
    > "$out/resume-whole.txt" 2>&1
"$BIN/cann-dist-train" train "${TRAIN[@]}" --steps "$RESUME_STEPS" --stop-after "$half" "${QUANT[@]}" \
    --checkpoint-dir "$out/resume-ckpt" --json "$out/resume-first.json" > "$out/resume-first.txt" 2>&1
"$BIN/cann-dist-train" train "${TRAIN[@]}" --steps "$RESUME_STEPS" --resume "${QUANT[@]}" \
    --checkpoint-dir "$out/resume-ckpt" --json "$out/resume-second.json" > "$out/resume-second.txt" 2>&1
for i in $(seq 1 "$REPS"); do
  for mode in plain ckpt; do
    extra=(); [ "$mode" = ckpt ] && extra=(--checkpoint-dir "$out/time-ckpt$i" --checkpoint-every "$EVERY")
    "$BIN/cann-dist-train" train "${TRAIN[@]}" --steps "$STEPS" "${extra[@]}" --json "$out/time-$mode$i.json" \
        > "$out/time-$mode$i.txt" 2>&1
  done
done
python3 - "$out" "$REPS" <<'PY'
import glob, json, os, re, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
print("| codec | state bytes | full checkpoint | increment 1 step after it | ratio | increment 5 steps after |")
print("|---|---:|---:|---:|---:|---:|")
for codec in ("zstd", "lz4", "none", "zstd-int8"):
    files = sorted(glob.glob(os.path.join(d, f"sizes-{codec}", "*.cdtc")))
    size = {int(re.search(r"ckpt-(\d+)", f).group(1)): os.path.getsize(f) for f in files}
    kind = {int(re.search(r"ckpt-(\d+)", f).group(1)): "full" in f for f in files}
    full = min(s for s in size if kind[s])
    st = json.load(open(os.path.join(d, f"sizes-{codec}.json")))["checkpoints"]["state_bytes"]
    print(f"| {codec} | {st} | {size[full]} | {size[full + 1]} | {size[full + 1] / size[full]:.2f} | "
          f"{size.get(full + 5, 0)} |")
w, a, b = (json.load(open(os.path.join(d, f"resume-{k}.json"))) for k in ("whole", "first", "second"))
print(f"\nquantised resume: uninterrupted loss {w['final_loss']:.4f}, accuracy {w['test_accuracy']:.4f}; "
      f"stopped after step {a['steps']} and resumed from {os.path.basename(b['resumed_from'])}: "
      f"loss {b['final_loss']:.4f}, accuracy {b['test_accuracy']:.4f} "
      f"({100 * (b['test_accuracy'] - w['test_accuracy']):+.2f} pp); largest restore error written "
      f"{a['checkpoints']['max_abs_error']:.3g}")
plain = [json.load(open(os.path.join(d, f"time-plain{i}.json")))["samples_per_s"] for i in range(1, reps + 1)]
runs = [json.load(open(os.path.join(d, f"time-ckpt{i}.json"))) for i in range(1, reps + 1)]
ck = [r["samples_per_s"] for r in runs]
own = [(r["checkpoints"]["capture_s"] + r["checkpoints"]["blocked_s"]) / r["wall_s"] for r in runs]
print(f"\nthroughput: no checkpoints {statistics.median(plain):.1f} samples/s, with checkpoints "
      f"{statistics.median(ck):.1f} (medians of {reps}): {100 * (1 - statistics.median(ck) / statistics.median(plain)):+.1f}% slower")
print(f"training thread's own checkpoint time: {100 * statistics.median(own):.2f}% of wall "
      f"(snapshot + waiting for the previous write; {runs[0]['checkpoints']['written']} checkpoints per run)")
PY

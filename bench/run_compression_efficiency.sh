#!/usr/bin/env bash
# Scaling efficiency of compressed training on a slow link: `train --compress adaptive` on
# tools/emulate-cluster (2 nodes x 1 worker) alternated with one worker alone, REPS times;
# efficiency = median throughput / (2 x median single-worker throughput). Two controls in every
# repetition: two lone workers computing at once, no communication (what sharing this machine's
# cores costs by itself), and the same two emulated nodes training *uncompressed on an unshaped
# link* (what synchronous data parallelism costs here with the fastest network there is: the
# ceiling compression can bring a slow link back to). Needs root.
#
#   sudo bash bench/run_compression_efficiency.sh [--link 20mbit] [--batch-size 64] [--steps 300]
#                                                 [--reps 3] [--compress adaptive]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
LINK=20mbit BATCH=64 STEPS=300 REPS=3 COMPRESS=adaptive
while [ $# -gt 0 ]; do
  case "$1" in
    --link) LINK=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --compress) COMPRESS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/compress-eff-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
THREADS=$(( $(nproc) / 2 )); [ "$THREADS" -ge 1 ] || THREADS=1
common=(--model cnn --nproc-per-node 1 --steps "$STEPS" --batch-size "$BATCH" --seed 1 --threads "$THREADS" --no-progress)
for i in $(seq 1 "$REPS"); do
  tools/emulate-cluster --nodes 2 --link "$LINK" -- "$BIN/cann-dist-train" train "${common[@]}" \
      --compress "$COMPRESS" --json "$(pwd)/$out/compressed_$i.json" > "$out/compressed_$i.txt" 2>&1
  "$BIN/cann-dist-train" train "${common[@]}" --json "$(pwd)/$out/single_$i.json" > "$out/single_$i.txt" 2>&1
  tools/emulate-cluster --nodes 2 -- "$BIN/cann-dist-train" train "${common[@]}" \
      --compress none --json "$(pwd)/$out/unshaped_$i.json" > "$out/unshaped_$i.txt" 2>&1
  for k in 1 2; do
    "$BIN/cann-dist-train" train "${common[@]}" --json "$(pwd)/$out/concurrent_${i}_$k.json" \
        > "$out/concurrent_${i}_$k.txt" 2>&1 &
  done
  wait
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
c = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/compressed_*.json"))]
s = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/single_*.json"))]
print(f"results in {d}")
print("compressed, 2 workers:", ", ".join(f"{x:.1f}" for x in c))
print("single worker:        ", ", ".join(f"{x:.1f}" for x in s))
w = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/concurrent_*.json"))]
print("two lone workers at once, each:", ", ".join(f"{x:.1f}" for x in w))
u = [json.load(open(p))["samples_per_s"] for p in sorted(glob.glob(d + "/unshaped_*.json"))]
print("uncompressed, 2 workers, unshaped link:", ", ".join(f"{x:.1f}" for x in u))
print(f"scaling efficiency (medians): {statistics.median(c) / (2 * statistics.median(s)):.3f}")
print(f"uncompressed on an unshaped link, its scaling efficiency: {statistics.median(u) / (2 * statistics.median(s)):.3f}; "
      f"compressed on this link against it: {statistics.median(c) / statistics.median(u):.3f} "
      f"(per repetition: {', '.join(f'{a / b:.2f}' for a, b in zip(c, u))})")
print(f"against two lone workers at once (no communication, same sharing): "
      f"{statistics.median(c) / (2 * statistics.median(w)):.3f}; their own ratio to one alone "
      f"{statistics.median(w) / statistics.median(s):.3f}")
PY

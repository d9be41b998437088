#!/usr/bin/env bash
# Accuracy of every compressor against uncompressed training: the cnn on Fashion-MNIST, 4 workers
# on this machine, 3 epochs, per-rank batch 32 (issue acceptance: fixed compressors within 1.0 pp,
# adaptive within 0.3 pp with >= 90% less volume). One run each; prints a Markdown table.
#
#   bash bench/run_compression_accuracy.sh [--epochs 3] [--nproc 4] [--only "none powersgd"]
#                                          [--extra "ARGS for every run"]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
EPOCHS=3 NPROC=4 ONLY="none fp16 bf16 int8 topk randomk powersgd signsgd adaptive" EXTRA=
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/compress-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
for c in $ONLY; do
  echo "== $c"
  "$BIN/cann-dist-train" train --model cnn --dataset fashion-mnist --nproc-per-node "$NPROC" \
      --epochs "$EPOCHS" --batch-size 32 --seed 1 --compress "$c" $EXTRA --no-progress \
      --json "$out/$c.json" > "$out/$c.txt" 2>&1 || { echo "   failed: see $out/$c.txt"; continue; }
  tail -n 4 "$out/$c.txt" | sed 's/^/   /'
done
python3 - "$out" $ONLY <<'PY'
import json, os, sys
d, names = sys.argv[1], sys.argv[2:]
runs = {n: json.load(open(os.path.join(d, n + ".json"))) for n in names if os.path.exists(os.path.join(d, n + ".json"))}
base = runs.get("none", {}).get("test_accuracy")
print("| compressor | test accuracy | vs none (pp) | volume reduction | residual % | samples/s |")
print("|---|---:|---:|---:|---:|---:|")
for n, r in runs.items():
    c = r["compression"]
    delta = "" if base is None else f"{100 * (r['test_accuracy'] - base):+.2f}"
    print(f"| {n} | {r['test_accuracy']:.4f} | {delta} | {100 * c['volume_reduction']:.1f}% | "
          f"{c['residual_pct']:.1f} | {r['samples_per_s']:.0f} |")
PY

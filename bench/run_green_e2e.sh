#!/usr/bin/env bash
# Green end to end (issue 7 acceptance): the cnn on Fashion-MNIST, one epoch, trained twice —
# straight through, and with `green --carbon-aware` on a real grid trace time-scaled so that the
# plan's pauses happen for real (one trace hour = --time-scale seconds). Checks: the green run
# pauses through the dirty hours of its plan, reaches the same test accuracy, its reported carbon
# is within 10% of the plan, and `cert verify` passes on the report and fails on a one-byte change.
#
#   bash bench/run_green_e2e.sh [--trace knowledge_base/carbon_traces/CISO_2022.csv]
#        [--start 2022-03-14T02:00:00Z] [--deadline 24] [--time-scale 10] [--nproc 1] [--epochs 1]
#        [--strategy suspend-resume|elastic|weighted] [--min-workers A --max-workers B]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(pwd)/${BIN:-build/bin}
TRACE=knowledge_base/carbon_traces/CISO_2022.csv START=2022-03-14T02:00:00Z DEADLINE=24 SCALE=10 NPROC=1 EPOCHS=1
STRATEGY=suspend-resume RANGE=()
while [ $# -gt 0 ]; do
  case "$1" in
    --trace) TRACE=$2; shift 2 ;;
    --start) START=$2; shift 2 ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    --time-scale) SCALE=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --strategy) STRATEGY=$2; shift 2 ;;
    --min-workers|--max-workers) RANGE+=("$1" "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=bench/results/green-e2e-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
TRAIN=(--nproc-per-node "$NPROC" --model cnn --dataset fashion-mnist --epochs "$EPOCHS" --batch-size 64 --seed 1 --no-progress)
"$BIN/cann-dist-train" train "${TRAIN[@]}" --json "$out/unpaused.json" > "$out/unpaused.txt" 2>&1
export CDT_SIGNING_KEY=$out/signing.key
"$BIN/cann-dist-train" green --carbon-aware --trace "$TRACE" --start "$START" --deadline "$DEADLINE" \
    --time-scale "$SCALE" --strategy "$STRATEGY" "${RANGE[@]}" --certify --report-dir "$out/green" --run-id e2e -- "${TRAIN[@]}" > "$out/green.txt" 2>&1
"$BIN/cann-dist-train" cert verify --report "$out/green/green_report.json" > "$out/verify-original.txt"
cp "$out/green/green_report.json" "$out/changed.json"
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); i=b.index(b'carbon_kg')+14; b[i]=b[i]^1; open(p,'wb').write(b)" "$out/changed.json"
if "$BIN/cann-dist-train" cert verify --report "$out/changed.json" --cert "$out/green/green_report.json.cert" > "$out/verify-changed.txt"; then
  changed=passed
else
  changed=failed
fi
python3 - "$out" "$changed" <<'PY'
import json, sys
d, changed = sys.argv[1], sys.argv[2]
u = json.load(open(f"{d}/unpaused.json")); g = json.load(open(f"{d}/green/green_report.json"))
plan = g["plan"]["slots"]; actual = g["actual"]
print(f"unpaused test accuracy {u['test_accuracy']:.4f}; carbon-aware {g['final_test_accuracy']:.4f}")
print(f"plan ({g['plan']['strategy']}): {len(plan)} slot(s); actual runs: " +
      ", ".join(f"{a['start']} +{a['hours']:.2f} h x{a['workers']}" for a in actual))
hi = g["intensity"] if "intensity" in g else None
print(f"carbon {g['carbon_kg']*1000:.3f} g vs plan {g['plan']['carbon_kg']*1000:.3f} g: "
      f"{100*g['plan_vs_actual']['deviation']:+.1f}%; carbon-agnostic {g['baseline_carbon_kg']*1000:.3f} g, "
      f"reduction {100*g['reduction']:.1f}%")
print(f"energy {g['energy_kwh']*1000:.2f} Wh (modelled: {g['energy_modelled']}); cert verify: original "
      f"{open(f'{d}/verify-original.txt').read().split(':')[1].strip()}, one byte changed: {changed}")
PY

#!/usr/bin/env bash
# The predictor's recovery figures against the elastic benchmark (docs/benchmarks.md, "The
# predictor"): --kills runs of `elastic --nproc-per-node 4 --inject kill:W@S` (cnn, batch 32, a
# random worker and step), one run with a hung worker (`hang:1@100`, --timeout 5), and
# `predict` for the same job (a profile of the cnn, this host's levels from topo-scan, the silent-
# peer timeout of 5 s); prints measured medians against the predicted RTO and redone work.
#
#   bash bench/run_predictor_recovery.sh [--kills 5] [--profile FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/require_torch.sh
BIN=$(pwd)/${BIN:-build/bin}
KILLS=5 PROFILE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) KILLS=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=$(pwd)/bench/results/predictor-recovery-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
CDT="$BIN/cann-dist-train"
if [ -z "$PROFILE" ]; then
  PROFILE=$out/cnn.profile.json
  "$CDT" profile --model cnn --batch-sizes 16,32,64 --json "$PROFILE" > "$out/profile.txt" 2>&1
fi
"$CDT" topo-scan --nproc-per-node 4 --cache-dir none --json "$out/topo4.json" > "$out/topo4.txt" 2>&1
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
lv = {l["name"]: l for l in json.load(open(f"{out}/topo4.json"))["levels"]}
d = {"format": "cdt-cluster-profile", "version": 1, "name": "loopback-4", "nodes": 1, "ranks_per_node": 4,
     "device": "host CPU", "host_cores": os.cpu_count(), "one_host": True,
     "intra": {k: lv["intra"][k] for k in ("alpha_us", "beta_GBps", "node_GBps")},
     "recovery": {"heartbeat_timeout_s": 5}, "faults": {"node_mtbf_hours": 1}}
if "shm" in lv: d["shm"] = {k: lv["shm"][k] for k in ("alpha_us", "beta_GBps")}
json.dump(d, open(f"{out}/loopback-4.cluster.json", "w"), indent=1)
PY
"$CDT" predict --model "$PROFILE" --cluster "$out/loopback-4.cluster.json" --batch-size 32 \
    --json "$out/predicted.json" > "$out/predicted.txt"
grep 'in-process' "$out/predicted.txt" | sed 's/^ */  predicted: /'
for k in $(seq 1 "$KILLS"); do
  w=$(( RANDOM % 4 )); s=$(( 50 + RANDOM % 150 ))
  "$CDT" elastic --nproc-per-node 4 --inject "kill:$w@$s" -- --model cnn --steps 250 --batch-size 32 \
      --seed 1 --no-progress --json "$out/kill$k.json" > "$out/kill$k.txt" 2>&1 || echo "  kill $k failed"
  echo "  kill $k (worker $w at step $s): $(python3 -c "import json; r=json.load(open('$out/kill$k.json'))['recoveries'][0]; print(f\"rto {r['rto_s']:.3f} s, detected after {r['detected_after_s']:.3f} s, {r['lost_steps']} step(s) redone\")")"
done
"$CDT" elastic --nproc-per-node 4 --timeout 5 --inject hang:1@100 -- --model cnn --steps 250 --batch-size 32 \
    --seed 1 --no-progress --json "$out/hang.json" > "$out/hang.txt" 2>&1 || echo "  hang run failed"
python3 - "$out" "$KILLS" <<'PY'
import json, os, statistics, sys
out, kills = sys.argv[1], int(sys.argv[2])
p = json.load(open(f"{out}/predicted.json"))["recovery"]["ours"]
step = json.load(open(f"{out}/predicted.json"))["step_s"]
rs = [json.load(open(f"{out}/kill{k}.json"))["recoveries"][0] for k in range(1, kills + 1)
      if os.path.exists(f"{out}/kill{k}.json")]
print("| failure | measured RTO (median; min-max) | predicted RTO | measured work redone | predicted |")
print("|---|---:|---:|---:|---:|")
rto = [r["rto_s"] for r in rs]
print(f"| worker killed (SIGKILL), {len(rs)} runs | {statistics.median(rto):.3f} s ({min(rto):.3f}-{max(rto):.3f}) "
      f"| {p['rto_crash_s']:.3f} s | {statistics.median(r['lost_steps'] for r in rs)} step(s) | 1 step ({step * 1e3:.1f} ms) |")
if os.path.exists(f"{out}/hang.json"):
    h = json.load(open(f"{out}/hang.json"))["recoveries"][0]
    print(f"| worker hung (SIGSTOP), --timeout 5 | {h['rto_s']:.3f} s | {p['rto_hang_s']:.3f} s | {h['lost_steps']} step(s) | 1 step |")
PY

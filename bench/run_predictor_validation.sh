#!/usr/bin/env bash
# The predictor against measurements on this machine (docs/benchmarks.md, "The predictor"):
# profiles the cnn and the moe-transformer (`cann-dist-train profile`), measures this host's
# same-node link levels (`topo-scan`), then for each configuration below trains for real
# (loopback, or tools/emulate-cluster with shaped links) and predicts it (`cann-dist-train
# predict` with a cluster profile written for it), --reps times alternated; prints the table of
# medians and errors. Emulated configurations need root (skipped without it).
#
#   bash bench/run_predictor_validation.sh [--reps 3] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/require_torch.sh
BIN=$(pwd)/${BIN:-build/bin}
REPS=3 QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out=$(pwd)/bench/results/predictor-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "results in $out"
CDT=("$BIN/cann-dist-train")

# Profiles and this host's levels.
"${CDT[@]}" profile --model cnn --batch-sizes 16,32,64 --json "$out/cnn.profile.json" > "$out/cnn.profile.txt" 2>&1
"${CDT[@]}" profile --model moe-transformer --batch-sizes 16,32 --json "$out/moe.profile.json" > "$out/moe.profile.txt" 2>&1
grep '^profile' "$out/cnn.profile.txt" "$out/moe.profile.txt" | sed 's/^/  /'
for n in 2 3 4; do
  "${CDT[@]}" topo-scan --nproc-per-node $n --cache-dir none --json "$out/topo$n.json" > "$out/topo$n.txt" 2>&1
done

# name model nodes ranks-per-node link compress steps (link "-" = loopback)
configs=(
  "loop1-cnn cnn 1 1 - none 300"
  "loop2-cnn cnn 1 2 - none 300"
  "loop3-cnn cnn 1 3 - none 300"
  "loop4-cnn cnn 1 4 - none 300"
  "loop4-cnn-fp16 cnn 1 4 - fp16 300"
  "loop2-moe moe-transformer 1 2 - none 200"
  "loop4-moe moe-transformer 1 4 - none 200"
  "emu2-1gbit-cnn cnn 2 1 1gbit none 200"
  "emu2-100mbit-cnn cnn 2 1 100mbit none 100"
  "emu2-20mbit-cnn cnn 2 1 20mbit none 40"
  "emu2-20mbit-cnn-fp16 cnn 2 1 20mbit fp16 60"
  "emu3-100mbit-cnn cnn 3 1 100mbit none 100"
  "emu3-1gbit-moe moe-transformer 3 1 1gbit none 150"
  "emu2-100mbit-moe-fp16 moe-transformer 2 1 100mbit fp16 100"
)
[ "$QUICK" = 1 ] && configs=("${configs[1]}" "${configs[3]}" "${configs[8]}")
if [ "$(id -u)" != 0 ]; then
  echo "not root: the emulated configurations are skipped"
  configs=($(printf '%s\n' "${configs[@]}" | grep -v '^emu' | tr ' ' '~')); configs=("${configs[@]//\~/ }")
fi

# A cluster profile for one configuration (docs/predict.md): loopback levels from topo-scan,
# shaped links from the knowledge base's "tbf" NICs; every emulated node shares this host.
cluster() {  # name nodes rpn link
  python3 - "$out" "$@" <<'PY'
import json, os, sys
out, name, nodes, rpn, link = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
d = {"format": "cdt-cluster-profile", "version": 1, "name": name, "nodes": nodes, "ranks_per_node": rpn,
     "device": "host CPU", "host_cores": os.cpu_count(), "one_host": True}
if rpn > 1:
    lv = {l["name"]: l for l in json.load(open(f"{out}/topo{rpn}.json"))["levels"]}
    d["intra"] = {k: lv["intra"][k] for k in ("alpha_us", "beta_GBps", "node_GBps")}
    if "shm" in lv: d["shm"] = {k: lv["shm"][k] for k in ("alpha_us", "beta_GBps")}
if nodes > 1:
    d["nic"] = "tbf " + link
    d["threads_per_rank"] = 1
json.dump(d, open(f"{out}/{name}.cluster.json", "w"), indent=1)
PY
}

for c in "${configs[@]}"; do
  read -r name model nodes rpn link compress steps <<< "$c"
  cluster "$name" "$nodes" "$rpn" "$link"
  prof=$out/cnn.profile.json; [ "$model" = moe-transformer ] && prof=$out/moe.profile.json
  "${CDT[@]}" predict --model "$prof" --cluster "$out/$name.cluster.json" --batch-size 32 \
      --compress "$compress" --json "$out/$name.predicted.json" > "$out/$name.predicted.txt" 2>&1
done
for rep in $(seq 1 "$REPS"); do
  for c in "${configs[@]}"; do
    read -r name model nodes rpn link compress steps <<< "$c"
    args=(train --model "$model" --nproc-per-node "$rpn" --batch-size 32 --steps "$steps" --compress "$compress"
          --no-progress --json "$out/$name.measured$rep.json")
    if [ "$nodes" = 1 ]; then
      "${CDT[@]}" "${args[@]}" > "$out/$name.measured$rep.txt" 2>&1 || echo "  $name rep $rep failed"
    else
      tools/emulate-cluster --nodes "$nodes" --link "$link" -- "${CDT[@]}" "${args[@]}" --threads 1 \
          > "$out/$name.measured$rep.txt" 2>&1 || echo "  $name rep $rep failed"
    fi
    echo "  rep $rep $name: $(grep -o '[0-9.]* samples/s' "$out/$name.measured$rep.txt" | tail -1)"
  done
done

python3 - "$out" "$REPS" "${configs[@]}" <<'PY'
import json, os, statistics, sys
out, reps, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = []
print("| configuration | model | ranks | link | compression | measured samples/s (median; min-max) | predicted | error | predicted sync wait | measured sync wait |")
print("|---|---|---:|---|---|---:|---:|---:|---:|---:|")
for c in configs:
    name, model, nodes, rpn, link, compress, steps = c.split()
    m = [json.load(open(f"{out}/{name}.measured{r}.json")) for r in range(1, reps + 1)
         if os.path.exists(f"{out}/{name}.measured{r}.json")]
    if not m: continue
    p = json.load(open(f"{out}/{name}.predicted.json"))
    sps = [x["samples_per_s"] for x in m]
    med = statistics.median(sps)
    err = p["samples_per_s"] / med - 1
    rows.append((name, err))
    wait = statistics.median(x["sync_wait_fraction"] for x in m)
    where = "loopback" if link == "-" else f"{nodes} nodes, {link}"
    print(f"| {name} | {model} | {int(nodes) * int(rpn)} | {where} | {compress} | {med:.1f} ({min(sps):.1f}-{max(sps):.1f}) "
          f"| {p['samples_per_s']:.1f} | {100 * err:+.1f}% | {100 * p['sync_wait_fraction']:.1f}% | {100 * wait:.1f}% |")
inside = sum(1 for _, e in rows if abs(e) <= 0.15)
print(f"\n{inside} of {len(rows)} configurations within 15%; median |error| "
      f"{100 * statistics.median(abs(e) for _, e in rows):.1f}%")
json.dump({"configs": [{"name": n, "error": e} for n, e in rows]}, open(f"{out}/summary.json", "w"), indent=1)
PY

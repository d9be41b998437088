#!/usr/bin/env bash
# What `--encrypt` costs (issue 41): `bench allreduce` with and without it, alternated, REPS times
# (bench/rotate.sh), on loopback (CDT_SHM=0: every byte over sealed TCP; --nproc ranks) and on the
# emulated cluster (tools/emulate-cluster, root: --nodes nodes of one rank each joined by --link).
# Prints per size the median busbw of each and the ratio sealed/plain.
#
#   bash bench/run_encrypt_cost.sh [--where loopback|emulated|both] [--nproc 4] [--nodes 2]
#                                  [--link 1gbit] [--reps 5] [--min-bytes 64K] [--max-bytes 64M]
#                                  [--iters 20]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rotate.sh
BIN=$(pwd)/${BIN:-build/bin}
WHERE=both NPROC=4 NODES=2 LINK=1gbit REPS=5 MIN=64K MAX=64M ITERS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --where) WHERE=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --min-bytes) MIN=$2; shift 2 ;;
    --max-bytes) MAX=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    *) echo "run_encrypt_cost: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
out=bench/results/encrypt-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "where=$WHERE nproc=$NPROC nodes=$NODES link=$LINK reps=$REPS iters=$ITERS $(git rev-parse --short HEAD)" \
  > "$out/setup.txt"
common=(bench allreduce --algo auto --min-bytes "$MIN" --max-bytes "$MAX" --iters "$ITERS")
loop() {  # $1 rep, $2 plain|sealed
  local flag=(); [ "$2" = sealed ] && flag=(--encrypt)
  CDT_SHM=0 "$BIN/cann-dist-train" "${common[@]}" --nproc-per-node "$NPROC" "${flag[@]}" \
    --json "$(pwd)/$out/loopback-$2-$1.json" > "$out/loopback-$2-$1.txt" 2>&1
}
emul() {
  local flag=(); [ "$2" = sealed ] && flag=(--encrypt)
  tools/emulate-cluster --nodes "$NODES" --link "$LINK" -- "$BIN/cann-dist-train" "${common[@]}" \
    --nproc-per-node 1 "${flag[@]}" --json "$(pwd)/$out/emulated-$2-$1.json" \
    > "$out/emulated-$2-$1.txt" 2>&1
}
loopback_plain() { loop "$1" plain; }
loopback_sealed() { loop "$1" sealed; }
emulated_plain() { emul "$1" plain; }
emulated_sealed() { emul "$1" sealed; }
steps=()
[ "$WHERE" != emulated ] && steps+=(loopback_plain loopback_sealed)
[ "$WHERE" != loopback ] && steps+=(emulated_plain emulated_sealed)
run_rotated "$REPS" "${steps[@]}"
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
print(f"results in {d}")
for where in ("loopback", "emulated"):
    rows = {}
    for mode in ("plain", "sealed"):
        for p in sorted(glob.glob(f"{d}/{where}-{mode}-*.json")):
            try:
                doc = json.load(open(p))
            except ValueError:
                continue
            for r in doc["results"]:
                rows.setdefault(r["bytes"], {}).setdefault(mode, []).append(r["busbw_GBps"])
    if not rows:
        continue
    print(f"{where}: {'bytes':>10} {'plain':>8} {'sealed':>8} {'sealed/plain':>12}  (median busbw GB/s)")
    for size, by in sorted(rows.items()):
        if "plain" not in by or "sealed" not in by:
            continue
        p, s = statistics.median(by["plain"]), statistics.median(by["sealed"])
        print(f"{where}: {size:>10} {p:8.3f} {s:8.3f} {s / p:12.3f}   ({len(by['plain'])} + {len(by['sealed'])} runs)")
PY

#!/usr/bin/env bash
# Two builds of cann-dist-train, one `bench allreduce` command, alternated (A then B on odd
# repetitions, B then A on even ones): what a change does to collective bandwidth, measured in the
# same hour. Prints, per size, each build's median busbw and the ratio B/A, and each build's median
# wall time of the whole command (start-up, rendezvous and handshakes included).
#
#   bash bench/ab_allreduce.sh --a OLD/cann-dist-train --b NEW/cann-dist-train [--reps 5] \
#        -- --nproc-per-node 4 --algo auto --min-bytes 64K --max-bytes 64M --iters 20
set -euo pipefail
cd "$(dirname "$0")/.."
A="" B="" REPS=5
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$(realpath "$2"); shift 2 ;;
    --b) B=$(realpath "$2"); shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ab_allreduce: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$A" ] && [ -x "$B" ] || { echo "ab_allreduce: --a and --b must name two cann-dist-train binaries" >&2; exit 2; }
out=bench/results/ab-allreduce-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
printf 'a=%s\nb=%s\nargs=%s\n' "$A" "$B" "$*" > "$out/setup.txt"
for i in $(seq 1 "$REPS"); do
  order="a b"; [ $((i % 2)) = 0 ] && order="b a"
  for v in $order; do
    bin=$A; [ "$v" = b ] && bin=$B
    t0=$EPOCHREALTIME
    "$bin" bench allreduce "$@" --json "$(pwd)/$out/$v-$i.json" > "$out/$v-$i.txt" 2>&1
    echo "$t0 $EPOCHREALTIME" > "$out/$v-$i.wall"
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
print(f"results in {d}")
rows = {}
for v in ("a", "b"):
    for p in sorted(glob.glob(f"{d}/{v}-*.json")):
        for r in json.load(open(p))["results"]:
            rows.setdefault((r["algo"], r["bytes"]), {}).setdefault(v, []).append(r["busbw_GBps"])
print(f"{'algo':>6} {'bytes':>10} {'a busbw':>9} {'b busbw':>9} {'b/a':>6}")
ratios = []
for (algo, size), by in sorted(rows.items()):
    a, b = statistics.median(by["a"]), statistics.median(by["b"])
    ratios.append(b / a)
    print(f"{algo:>6} {size:>10} {a:9.3f} {b:9.3f} {b / a:6.3f}")
print(f"median ratio b/a over sizes: {statistics.median(ratios):.3f}")
for v in ("a", "b"):
    w = [float(e) - float(s) for s, e in
         (open(p).read().split() for p in sorted(glob.glob(f"{d}/{v}-*.wall")))]
    print(f"{v}: whole command median {statistics.median(w):.2f} s ({' / '.join(f'{x:.2f}' for x in w)})")
PY

#!/usr/bin/env bash
# Multi-node tests on tools/emulate-cluster (network namespaces, shaped links). Needs root: exits 77
# (CTest: skipped) with a message otherwise.
#   emulated_cluster_test.sh BIN_DIR
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
emulate="$root/tools/emulate-cluster"
if [ "$(id -u)" != "0" ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "SKIP: the emulated cluster needs root and iproute2 (ip, tc)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check NAME CONDITION_EXIT_CODE
  if [ "$2" = 0 ]; then echo "PASS $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}
before=$(ip netns list | grep -c '^cdt' || true)

# 1. Two nodes x two ranks on 1 Gbit/s links: every algorithm, every element checked.
"$emulate" --nodes 2 --link 1gbit -- "$bin/cann-dist-train" bench allreduce --nproc-per-node 2 \
    --algo all --min-bytes 4K --max-bytes 256K --iters 3 --check --json "$tmp/two.json" > "$tmp/two.log" 2>&1
rc=$?
grep -q '"world_size": 4' "$tmp/two.json" 2>/dev/null && grep -q '"nodes": 2' "$tmp/two.json"
check "2 nodes x 2 ranks, all algorithms checked (rc=$rc)" $(( rc | $? ))
[ $rc = 0 ] || cat "$tmp/two.log"

# 2. Unequal ranks per node (1 and 3) and three nodes with one slower link.
"$emulate" --nodes 2 --link 1gbit -- sh -c 'exec "$0" bench allreduce --nproc-per-node $([ "$CDT_NODE_RANK" = 0 ] && echo 1 || echo 3) --algo all --min-bytes 4K --max-bytes 256K --iters 3 --check' \
    "$bin/cann-dist-train" > "$tmp/unequal.log" 2>&1
rc=$?; check "2 nodes with 1 and 3 ranks (rc=$rc)" $rc
[ $rc = 0 ] || cat "$tmp/unequal.log"
"$emulate" --nodes 3 --link 1gbit --link-of 2=300mbit -- "$bin/cann-dist-train" bench allreduce \
    --nproc-per-node 2 --algo all --min-bytes 4K --max-bytes 64K --iters 3 --check > "$tmp/three.log" 2>&1
rc=$?; check "3 nodes, node 2 at 300 Mbit/s (rc=$rc)" $rc
[ $rc = 0 ] || cat "$tmp/three.log"

# 3. A failing node makes the tool fail, and nothing is left behind.
"$emulate" --nodes 2 -- sh -c 'exit $CDT_NODE_RANK' > "$tmp/fail.log" 2>&1
rc=$?; check "failing node propagates (rc=$rc)" $([ $rc = 1 ] && echo 0 || echo 1)
after=$(ip netns list | grep -c '^cdt' || true)
check "namespaces cleaned up ($before before, $after after)" $([ "$before" = "$after" ] && echo 0 || echo 1)

# 4. Bad input is refused with a message.
"$emulate" --nodes 2 --link-of 5=1gbit -- true > "$tmp/bad.log" 2>&1
rc=$?; check "--link-of outside the node range refused (rc=$rc)" $([ $rc = 2 ] && grep -q 'only 2 nodes' "$tmp/bad.log" && echo 0 || echo 1)
"$emulate" --nodes 2 --cpus-per-node $(( $(nproc) + 1 )) -- true > "$tmp/badcpu.log" 2>&1
rc=$?; check "--cpus-per-node past this machine refused (rc=$rc)" $([ $rc = 2 ] && grep -q 'needs' "$tmp/badcpu.log" && echo 0 || echo 1)

# 4b. --cpus-per-node binds each node to CPUs of its own (as a real node has), in order.
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  "$emulate" --nodes 2 --cpus-per-node 1 -- sh -c 'taskset -pc $$ > "$0/cpus.$CDT_NODE_RANK"' "$tmp" > "$tmp/cpus.log" 2>&1
  rc=$?
  mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  first=${mine%%[-,]*}
  a=$(sed 's/.*: //' "$tmp/cpus.0" 2>/dev/null) b=$(sed 's/.*: //' "$tmp/cpus.1" 2>/dev/null)
  check "--cpus-per-node 1: node 0 on CPU $a, node 1 on CPU $b (rc=$rc)" $([ $rc = 0 ] && [ "$a" = "$first" ] && [ -n "$b" ] && [ "$b" != "$a" ] && echo 0 || echo 1)
fi

# 5. Elastic: node 1's link is cut for 10 s at step 40. Node 0 trains on alone (the silent-peer
#    timeout, 3 s, detects it); node 1's worker rejoins when its link is back, and the group grows
#    back to two (docs/elastic.md). The job must outlive the cut and the rejoin by a margin: on a
#    machine where node 0 alone ran 3,000 steps in 29 s, a 20 s cut left it finished before
#    node 1 was back (CI, 2026-12-03).
"$emulate" --nodes 2 -- "$bin/cann-dist-train" elastic --nproc-per-node 1 --timeout 3 --inject cut:1@40+10 -- \
    --model cnn --dataset synthetic --synthetic-samples 4000 --steps 4000 --batch-size 16 --threads 1 \
    --no-progress --json "$tmp/cut.json" > "$tmp/cut.log" 2>&1
rc=$?
python3 - "$tmp/cut.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["recoveries"]
assert d["world_size"] == 2 and d["params_consistent"], d
assert len(r) == 2, r
assert (r[0]["world_before"], r[0]["world_after"], r[0]["lost_workers"]) == (2, 1, [1]), r[0]
assert (r[1]["world_before"], r[1]["world_after"]) == (1, 2), r[1]
print(f"   shrank in {r[0]['rto_s']:.2f} s, grew back in {r[1]['rto_s']:.2f} s at step {r[1]['resumed_step']}")
PY
check "elastic: a node cut off for 10 s is left behind and rejoins (rc=$rc)" $(( rc | $? ))
[ $rc = 0 ] || cat "$tmp/cut.log"

# 6. Elastic, --nnodes 2:3: nodes 0 and 1 start the job; node 2's worker is admitted at a step
#    boundary and the group grows to three.
"$emulate" --nodes 3 -- "$bin/cann-dist-train" elastic --nproc-per-node 1 --nnodes 2:3 --timeout 5 -- \
    --model cnn --dataset synthetic --synthetic-samples 4000 --steps 200 --batch-size 16 --threads 1 \
    --no-progress --json "$tmp/grow.json" > "$tmp/grow.log" 2>&1
rc=$?
python3 - "$tmp/grow.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["recoveries"]
assert d["world_size"] == 3 and d["params_consistent"], d
assert len(r) == 1 and (r[0]["world_before"], r[0]["world_after"], r[0]["lost_workers"]) == (2, 3, []), r
PY
check "elastic --nnodes 2:3: a third node joins the running job (rc=$rc)" $(( rc | $? ))
[ $rc = 0 ] || cat "$tmp/grow.log"

echo "$(( 7 + 1 - failures )) passed, $failures failed"
[ $failures = 0 ]

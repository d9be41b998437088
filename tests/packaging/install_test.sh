#!/usr/bin/env bash
# Installs the engine as its users do and uses it from outside the checkout (docs/library.md,
# docs/python.md "Installing"):
#  1. `cmake --install` of the runtime and dev components into a fresh prefix: the installed
#     command finds its knowledge base beside itself, and a C++ program of the user's own
#     (examples/cpp/find_package) builds with find_package(CannDistTrain) and runs 3 ranks under
#     the installed launcher, and a program that trains through the library (data-parallel
#     logistic regression) ends with a lower loss and the same parameters on every rank;
#  2. `pip wheel .` and `pip install` of the wheel into a fresh virtual environment: the console
#     scripts, the knowledge base, py.typed and the stub are there, and a plain torch script with
#     the "cdt" backend runs 2 ranks under the installed `cann-dist-train launch`.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR PYTHON. Exit 77 (skipped) without python3-venv.
set -euo pipefail
build=$(cd "$1" && pwd); src=$(cd "$2" && pwd); python=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
"$python" -c "import venv, ensurepip" 2>/dev/null || { echo "SKIP: $python has no venv/ensurepip (python3-venv)"; exit 77; }
tmp=$(mktemp -d /tmp/cdt-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"  # nothing below may find the checkout by accident
unset CDT_KNOWLEDGE_BASE PYTHONPATH CDT_CLI

echo "== cmake --install (runtime, dev) into $tmp/prefix"
for component in runtime dev; do
  cmake --install "$build" --prefix "$tmp/prefix" --component "$component" > /dev/null
done
for f in bin/cann-dist-train bin/cann-dashboard include/cdt/communicator.h include/cdt/tcp_store.h \
         lib/cmake/CannDistTrain/CannDistTrainConfig.cmake share/cann-dist-train/knowledge_base/hardware_profiles/devices.json; do
  [ -e "$tmp/prefix/$f" ] || fail "cmake --install left out $f"
done
ls "$tmp"/prefix/lib*/libcdt.so > /dev/null || fail "cmake --install left out libcdt.so"
"$tmp/prefix/bin/cann-dist-train" --version | grep -q '^cann-dist-train [0-9]' || fail "--version"
# A name resolved in the knowledge base: found beside the installed binary, not in the checkout.
"$tmp/prefix/bin/cann-dist-train" predict --model resnet101-p100 --cluster dgx-a100-64-ib-hdr \
    --trials 1 --json "$tmp/predict.json" > "$tmp/predict.log" 2>&1 || { cat "$tmp/predict.log"; fail "installed predict"; }
grep -q "$tmp/prefix/share/cann-dist-train/knowledge_base\|resnet101" "$tmp/predict.log" "$tmp/predict.json" \
  || fail "installed predict did not read the installed knowledge base"

echo "== find_package(CannDistTrain): examples/cpp/find_package"
cmake -S "$src/examples/cpp/find_package" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  > "$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "configuring a find_package consumer"; }
cmake --build "$tmp/consumer" > "$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "building it"; }
"$tmp/prefix/bin/cann-dist-train" launch --nproc-per-node 3 -- "$tmp/consumer/allreduce_ranks" \
  > "$tmp/ranks.log" 2>&1 || { cat "$tmp/ranks.log"; fail "3 ranks of the consumer under the installed launcher"; }
[ "$(grep -c ': ok (cdt ' "$tmp/ranks.log")" = 3 ] || { cat "$tmp/ranks.log"; fail "not every rank said ok"; }
# A program that trains through the library: data-parallel logistic regression, 3 ranks.
"$tmp/prefix/bin/cann-dist-train" launch --nproc-per-node 3 -- "$tmp/consumer/train_ranks" \
  > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "3 ranks training through the installed library"; }
[ "$(grep -c 'parameters identical on every rank' "$tmp/train.log")" = 3 ] || { cat "$tmp/train.log"; fail "training ranks disagree"; }
grep 'rank 0 of 3' "$tmp/train.log"

echo "== pip wheel . and a virtual environment"
# --system-site-packages: the torch the extension was built against (Debian's, or the environment
# CDT_TORCH_PYTHON names) and setuptools/wheel; the wheel reuses the build tree.
"$python" -m venv --system-site-packages "$tmp/venv" > /dev/null
# A venv made from a venv's Python sees the base interpreter's packages, not that venv's (where a
# PyPI torch lives, scripts/install-torch.sh): a .pth puts them ahead of the system's.
parent=$("$python" -c 'import sys, sysconfig; print(sysconfig.get_paths()["purelib"] if sys.prefix != sys.base_prefix else "")')
if [ -n "$parent" ]; then
  echo "$parent" > "$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cdt-parent-env.pth"
fi
CDT_BUILD_DIR="$build" "$tmp/venv/bin/python" -m pip wheel --no-deps --no-build-isolation \
    -w "$tmp/wheel" "$src" > "$tmp/wheel.log" 2>&1 || { tail -40 "$tmp/wheel.log"; fail "pip wheel"; }
wheel=$(ls "$tmp"/wheel/cann_dist-*.whl)
"$python" - "$wheel" <<'PY' || fail "the wheel's contents"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["cann_dist/py.typed", "cann_dist/_C.pyi", "cann_dist/bin/cann-dist-train", "cann_dist/bin/cann-dashboard",
        "cann_dist/share/cann-dist-train/knowledge_base/carbon_traces/CISO_2022.csv", "cann_dist/_commands.py"]
missing = [n for n in need if n not in names] + ([] if any(n.startswith("cann_dist/_C") and n.endswith(".so") for n in names) else ["cann_dist/_C*.so"])
print("wheel:", sys.argv[1].rsplit("/", 1)[-1], len(names), "files", "missing:", missing or "none")
sys.exit(1 if missing else 0)
PY
"$tmp/venv/bin/python" -m pip install --no-deps "$wheel" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "pip install of the wheel"; }
"$tmp/venv/bin/cann-dist-train" --version | grep -q '^cann-dist-train [0-9]' || fail "the wheel's cann-dist-train --version"
"$tmp/venv/bin/cann-dashboard" --help > /dev/null || fail "the wheel's cann-dashboard --help"
"$tmp/venv/bin/python" - "$tmp/venv" <<'PY' || fail "the installed package"
import os, sys
import cann_dist, cann_dist.green
assert cann_dist.__file__.startswith(sys.argv[1]), cann_dist.__file__
kb = cann_dist.green.knowledge_base()
assert kb.startswith(sys.argv[1]) and os.path.isfile(os.path.join(kb, "carbon_traces", "CISO_2022.csv")), kb
print("cann_dist", cann_dist.__version__, "from", os.path.dirname(cann_dist.__file__), "knowledge base", kb)
PY
cat > "$tmp/plain.py" <<'PY'
import torch, torch.distributed as dist
import cann_dist  # noqa: F401
dist.init_process_group("cdt")
t = torch.full((1000,), float(dist.get_rank() + 1))
dist.all_reduce(t)
assert torch.all(t == 3.0), t[:4]
print(f"rank {dist.get_rank()} ok")  # one write: the ranks share the output
dist.destroy_process_group()
PY
"$tmp/venv/bin/cann-dist-train" launch --nproc-per-node 2 -- "$tmp/venv/bin/python" "$tmp/plain.py" \
  > "$tmp/plain.log" 2>&1 || { cat "$tmp/plain.log"; fail "2 ranks of a torch script under the wheel's launcher"; }
# The ranks share one output and may interleave within a line: count each rank's word once.
[ "$(grep -o 'rank [0-9]* ok' "$tmp/plain.log" | sort -u | wc -l)" = 2 ] || { cat "$tmp/plain.log"; fail "not every rank said ok"; }
echo "PASS: cmake --install, find_package, pip wheel, pip install"

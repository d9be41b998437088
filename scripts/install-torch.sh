#!/usr/bin/env bash
# Makes a Python virtual environment with PyTorch VERSION from PyPI, for building and testing the
# engine and cann_dist against PyTorch 2.x (Debian's python3-torch is 1.13; docs/python.md,
# "PyTorch versions"). Idempotent: an environment that already imports torch VERSION is kept.
#
#   bash scripts/install-torch.sh 2.11.0            # -> prints the environment's python
#   cmake -S . -B build-torch2 -DCDT_TORCH_PYTHON=$(bash scripts/install-torch.sh 2.11.0)
#
# The environment is ${CDT_TORCH_ENVS:-$HOME/.cache/cann-dist-train}/torch-VERSION, made with
# Debian's /usr/bin/python3 (the Python the rest of the build uses). Beside torch it holds the
# pybind11 whose headers torch bundles (an extension shares pybind11's type registry with torch
# only at the same version), pytest and numpy. PyPI's Linux wheels are the CUDA ones: about 5 GB
# with their NVIDIA libraries, which import on a machine without a GPU.
set -euo pipefail

version="${1:?usage: install-torch.sh VERSION (for example 2.11.0)}"
root="${CDT_TORCH_ENVS:-$HOME/.cache/cann-dist-train}"
env="$root/torch-$version"
python="$env/bin/python"

if [ -x "$python" ] && "$python" -c "import sys, torch, pybind11, pytest
sys.exit(0 if torch.__version__.split('+')[0] == '$version' else 1)" 2>/dev/null; then
  echo "$python"
  exit 0
fi

mkdir -p "$root"
echo "install-torch: making $env with torch==$version from PyPI (a few minutes)" >&2
rm -rf "$env"
/usr/bin/python3 -m venv "$env" >&2
"$python" -m pip install --quiet --upgrade pip >&2 || true
if ! "$python" -m pip install --quiet "torch==$version" numpy pytest >&2; then
  echo "install-torch: pip could not install torch==$version (is PyPI reachable? pip's own" \
       "message is above)" >&2
  exit 1
fi
# The pybind11 torch's headers are: torch/include/pybind11/detail/common.h.
pybind_version=$("$python" - <<'EOF'
import os, re, torch
h = open(os.path.join(os.path.dirname(torch.__file__), "include", "pybind11", "detail", "common.h")).read()
print(".".join(re.search(r"#define PYBIND11_VERSION_%s (\d+)" % k, h).group(1) for k in ("MAJOR", "MINOR", "MICRO")))
EOF
)
"$python" -m pip install --quiet "pybind11==$pybind_version" >&2
echo "install-torch: $("$python" -c 'import torch; print("torch", torch.__version__)'), pybind11 $pybind_version" >&2
echo "$python"

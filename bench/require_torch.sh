# Sourced by the benchmarks that run the PyTorch DDP baseline (bench/peers/ddp_baseline.py): stop
# before the first run, naming what is missing and how to install it. (Without it the baseline
# failed after our own runs had taken minutes, with "No module named 'numpy'".)
# Debian's interpreter, as the benchmarks call it: another python3 may come first on PATH.
if ! /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then
  echo "$(basename "$0"): the PyTorch DDP baseline needs python3-torch and python3-numpy;" \
       "install them with 'bash scripts/install-deps.sh --bench' (as root), then run this again" >&2
  exit 2
fi

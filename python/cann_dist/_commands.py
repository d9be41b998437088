"""The console scripts of the wheel (setup.py): `cann-dist-train` and `cann-dashboard` run the
engine's programs installed beside this package (cann_dist/bin), with the same arguments."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: {path} is missing: this cann_dist was installed without its commands "
                 "(build the wheel with `pip wheel .` from the checkout, or use build/bin/)")
    os.execv(path, [path] + sys.argv[1:])


def cann_dist_train():
    _exec("cann-dist-train")


def cann_dashboard():
    _exec("cann-dashboard")

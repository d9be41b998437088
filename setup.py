"""`pip wheel .` / `pip install .`: the Python front end with the engine's commands (docs/python.md,
"Installing").

The wheel carries cann_dist (the extension cann_dist._C, built by CMake for the Python running pip
against the torch that Python imports), the commands `cann-dist-train` and `cann-dashboard` (the
CMake install component "runtime", under cann_dist/bin, started by the console scripts of
cann_dist._commands) and the knowledge base they and cann_dist.green read (cann_dist/share). It is
a wheel for this machine's libraries (Debian 12's, or the torch of a virtual environment), not a
manylinux one.

Building needs what `make build` needs (scripts/install-deps.sh) and, without build isolation,
setuptools and wheel: `pip wheel --no-deps --no-build-isolation .`. CDT_BUILD_DIR reuses a
configured build tree (e.g. build/, used as it was configured) instead of a fresh one under pip's
temporaries;
CDT_TORCH_PYTHON builds against that Python's pip-installed torch (PyTorch 2.x,
scripts/install-torch.sh).
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["cdt_python", "cann-dist-train", "cann-dashboard"]


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("CDT_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):  # a tree given is used as configured
            configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                         "-DPython3_EXECUTABLE=" + sys.executable]
            if os.environ.get("CDT_TORCH_PYTHON"):
                configure.append("-DCDT_TORCH_PYTHON=" + os.environ["CDT_TORCH_PYTHON"])
            subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target"] + TARGETS)
        built = glob.glob(os.path.join(build, "python", "cann_dist", "_C*.so"))
        if not built:
            raise RuntimeError(f"cmake built no cann_dist/_C*.so under {build}: is python3-torch installed?")
        target = self.get_ext_fullpath(ext.name)
        package = os.path.dirname(target)
        os.makedirs(package, exist_ok=True)
        shutil.copyfile(built[0], target)
        # The commands and the knowledge base, as `cmake --install` lays them out (cmake/install.cmake),
        # stripped of debug information.
        stage = os.path.join(os.path.abspath(self.build_temp), "runtime")
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", build, "--component", "runtime", "--prefix", stage,
                               "--strip"])
        for sub in ("bin", "share"):
            shutil.rmtree(os.path.join(package, sub), ignore_errors=True)
            shutil.copytree(os.path.join(stage, sub), os.path.join(package, sub))


def build_base():
    # setuptools' own build/ would land inside the CMake tree of the same name at the checkout's root.
    tree = os.environ.get("CDT_BUILD_DIR")
    return os.path.join(tree, "setuptools") if tree else "build-setuptools"


setup(
    name="cann-dist",
    version="0.1.0",
    description="cann-dist-train's engine for PyTorch: the torch.distributed backend \"cdt\" and its commands",
    package_dir={"": "python"},
    packages=["cann_dist", "cann", "cann.distributed"],
    package_data={"cann_dist": ["py.typed", "_C.pyi"]},
    ext_modules=[Extension("cann_dist._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["cann-dist-train = cann_dist._commands:cann_dist_train",
                                      "cann-dashboard = cann_dist._commands:cann_dashboard"]},
    options={"build": {"build_base": build_base()}},
    python_requires=">=3.9",
    zip_safe=False,
)

"""`pip install --no-deps --no-build-isolation .`: the Python front end (docs/python.md).

The extension (cann_dist._C) is the CMake target cdt_python: this builds it with CMake for the
Python running pip (it needs Debian's python3-torch, python3-pybind11 and python3-dev, as `make
build` does: scripts/install-deps.sh) and installs it with the pure-Python packages of python/.
CDT_BUILD_DIR reuses a build tree (e.g. build/) instead of a fresh one under pip's temporaries.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("CDT_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                               "-DPython3_EXECUTABLE=" + sys.executable])
        subprocess.check_call(["cmake", "--build", build, "--target", "cdt_python",
                               "-j", str(os.cpu_count() or 1)])
        built = glob.glob(os.path.join(build, "python", "cann_dist", "_C*.so"))
        if not built:
            raise RuntimeError(f"cmake built no cann_dist/_C*.so under {build}: is python3-torch installed?")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="cann-dist",
    version="0.1.0",
    description="cann-dist-train's engine for PyTorch: the torch.distributed backend \"cdt\"",
    package_dir={"": "python"},
    packages=["cann_dist", "cann", "cann.distributed"],
    ext_modules=[Extension("cann_dist._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
)

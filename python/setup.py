"""Builds the optional _xputimer_native extension; everything else is in
pyproject.toml. The extension is skipped (with a message) when the compiler,
the Python headers or pybind11 are missing, or when XPU_NO_NATIVE=1: the
package is pure Python + ctypes and works without it."""

import os
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _pybind11_include():
    try:
        import pybind11
        return pybind11.get_include()
    except ImportError:
        pass
    dirs = [sysconfig.get_paths()["include"], "/usr/include", "/usr/local/include"]
    # PyTorch ships the pybind11 headers (torch/include/pybind11); GPU
    # machines have torch but rarely pybind11. Located without importing torch.
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.submodule_search_locations:
            dirs.append(os.path.join(list(spec.submodule_search_locations)[0], "include"))
    except Exception:
        pass
    for d in dirs:
        if os.path.isfile(os.path.join(d, "pybind11", "pybind11.h")):
            return d
    return None


def _abi_include():
    # The package ships inside the repository: <repo>/python -> <repo>/include.
    d = os.path.normpath(os.path.join(HERE, "..", "include"))
    return d if os.path.isfile(os.path.join(d, "xpu", "ring.h")) else None


class OptionalBuildExt(build_ext):
    def run(self):
        try:
            super().run()
        except Exception as exc:  # compiler missing, etc.
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._skip(exc)

    @staticmethod
    def _skip(exc):
        sys.stderr.write("xputimer: skipping the optional _xputimer_native extension (%s); "
                         "the pure-Python package is complete without it\n" % (exc,))


ext_modules = []
pb_inc, abi_inc = _pybind11_include(), _abi_include()
py_h = os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
if os.environ.get("XPU_NO_NATIVE") == "1":
    sys.stderr.write("xputimer: XPU_NO_NATIVE=1, not building _xputimer_native\n")
elif pb_inc and abi_inc and py_h:
    ext_modules.append(Extension(
        "xputimer._xputimer_native",
        sources=["src/native_module.cc", "src/ring_reader.cc"],
        include_dirs=[pb_inc, abi_inc, os.path.join(HERE, "src")],
        extra_compile_args=["-std=c++17", "-fvisibility=hidden", "-O2", "-g0"],
        libraries=["dl"],
        language="c++",
    ))
else:
    sys.stderr.write("xputimer: pybind11 (%s), include/xpu (%s) or Python.h (%s) missing; "
                     "installing the pure-Python package only\n" % (pb_inc, abi_inc, py_h))

setup(ext_modules=ext_modules, cmdclass={"build_ext": OptionalBuildExt})

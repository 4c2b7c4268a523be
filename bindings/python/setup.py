"""Builds the deepinfer package: the SWIG module deepinfer._native (from deepinfer.i) on the
installed C library, plus the pure-Python package.

Normally run by build_wheel.sh (which also bundles the library); it reads:
  DEEPINFER_PREFIX          where include/deepinfer.h and lib/libdeepinfer.so are (default: the
                            pkg-config module deepinfer, else the system's)
  DEEPINFER_LIBDIR          the library's folder when not PREFIX/lib (e.g. lib/x86_64-linux-gnu)
  DEEPINFER_EXTRA_PYTHONS   more CPython interpreters (paths, space-separated) to compile the
                            module for too; the wheel then carries one module per version
  DEEPINFER_WHEEL_PLATFORM  the wheel's platform tag (build_wheel.sh checks what it claims)
A deepinfer/_libs folder (bundled libraries) gives the module the runpath $ORIGIN/_libs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def _pkg_config(*args: str) -> list:
    try:
        return shlex.split(subprocess.check_output(["pkg-config", *args, "deepinfer"], text=True))
    except (OSError, subprocess.CalledProcessError):
        return []


def _library_paths() -> tuple:
    prefix = os.environ.get("DEEPINFER_PREFIX")
    if prefix:
        return [os.path.join(prefix, "include")], [os.environ.get("DEEPINFER_LIBDIR") or os.path.join(prefix, "lib")]
    incs = [f[2:] for f in _pkg_config("--cflags-only-I")]
    libs = [f[2:] for f in _pkg_config("--libs-only-L")]
    return incs, libs


INCLUDE_DIRS, LIBRARY_DIRS = _library_paths()


def _header_version() -> str:
    """The package's version is the library's: read from the deepinfer.h it is built against."""
    for d in INCLUDE_DIRS + ["/usr/include", "/usr/local/include"]:
        path = os.path.join(d, "deepinfer.h")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            parts = [re.search(rf"#define DI_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
            return ".".join(parts)
    raise SystemExit("setup.py: deepinfer.h not found (set DEEPINFER_PREFIX to the library's install prefix)")


BUNDLED = os.path.isdir(os.path.join(HERE, "deepinfer", "_libs"))
LINK_ARGS = ["-Wl,-rpath,$ORIGIN/_libs", "-Wl,--enable-new-dtags"] if BUNDLED else []
EXTRA_PYTHONS = os.environ.get("DEEPINFER_EXTRA_PYTHONS", "").split()

native = Extension(
    "deepinfer._native",
    sources=["deepinfer.i"],
    swig_opts=["-threads"] + [f"-I{d}" for d in INCLUDE_DIRS],
    include_dirs=INCLUDE_DIRS,
    library_dirs=LIBRARY_DIRS,
    libraries=["deepinfer"],
    extra_compile_args=["-Wno-unused-parameter", "-Wno-missing-field-initializers"],
    extra_link_args=LINK_ARGS,
)


def _interpreter(python: str) -> dict:
    script = (
        "import json, sys, sysconfig; print(json.dumps({'include': sysconfig.get_paths()['include'], "
        "'suffix': sysconfig.get_config_var('EXT_SUFFIX'), "
        "'tag': 'cp%d%d' % sys.version_info[:2], 'impl': sys.implementation.name}))"
    )
    info = json.loads(subprocess.check_output([python, "-c", script], text=True))
    if info["impl"] != "cpython" or not os.path.exists(os.path.join(info["include"], "Python.h")):
        raise SystemExit(f"setup.py: {python} is not a CPython with its headers (Python.h)")
    return info


class BuildExt(build_ext):
    """Builds the module for this interpreter, then for each of DEEPINFER_EXTRA_PYTHONS."""

    def run(self) -> None:
        super().run()
        for python in EXTRA_PYTHONS:
            self._build_for(_interpreter(python))

    def _build_for(self, info: dict) -> None:
        from distutils.ccompiler import new_compiler
        from distutils.sysconfig import customize_compiler

        wrap = os.path.join(HERE, "deepinfer_wrap.c")  # made by the first build's SWIG run
        compiler = new_compiler(verbose=self.verbose, dry_run=self.dry_run, force=self.force)
        customize_compiler(compiler)
        compiler.set_include_dirs([info["include"]] + INCLUDE_DIRS)
        objects = compiler.compile(
            [wrap], output_dir=os.path.join(self.build_temp, info["tag"]), extra_postargs=native.extra_compile_args
        )
        target = os.path.join(self.build_lib, "deepinfer", "_native" + info["suffix"])
        compiler.link_shared_object(
            objects, target, libraries=native.libraries, library_dirs=LIBRARY_DIRS, extra_postargs=LINK_ARGS
        )


class BdistWheel(bdist_wheel):
    """Tags the wheel with every interpreter it carries a module for, and the platform it was
    checked for (build_wheel.sh)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self) -> tuple:
        impl, abi, plat = super().get_tag()
        extra = [_interpreter(p)["tag"] for p in EXTRA_PYTHONS]
        tags = [impl] + [t for t in extra if t != impl]
        if len(tags) > 1:
            impl = abi = ".".join(sorted(tags))
        return impl, abi, os.environ.get("DEEPINFER_WHEEL_PLATFORM", plat)


setup(
    version=_header_version(),
    packages=["deepinfer"],
    package_data={"deepinfer": ["py.typed", "_native.pyi", "_libs/*", "models/demo/*"]},
    ext_modules=[native],
    cmdclass={"build_ext": BuildExt, "bdist_wheel": BdistWheel},
    zip_safe=False,
)

if __name__ == "__main__" and len(sys.argv) == 1:
    print(__doc__)

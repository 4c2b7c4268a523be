"""Loads the native module and checks the library it found.

The extension module links libdeepinfer.so.0. A wheel carries the library (and the CUDA backend
module) in ``deepinfer/_libs``, found through the extension's ``$ORIGIN/_libs`` runpath; a build
against a system library (e.g. Debian's python3-deepinfer) has no runpath and the dynamic loader
finds the system's libdeepinfer.so.0.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import List

from . import errors

# A bundled library is loaded first, by its full path: the extension's $ORIGIN runpath ranks below
# LD_LIBRARY_PATH, which could otherwise hand it another build's libdeepinfer.so.0.
_BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_libs", "libdeepinfer.so.0")
if os.path.exists(_BUNDLED):
    import ctypes

    ctypes.CDLL(_BUNDLED, mode=ctypes.RTLD_GLOBAL)

try:
    from . import _native as native  # the SWIG module (deepinfer.i)
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"deepinfer: cannot load its native module ({e}). The wheel bundles libdeepinfer.so.0; "
        "a build without it needs the system's libdeepinfer.so.0 (e.g. Debian's libdeepinfer0)."
    ) from e

native._set_error_factory(errors.error_from_code)

#: The version of this package: the library version it was built against.
BUILT_VERSION = f"{native.DI_VERSION_MAJOR}.{native.DI_VERSION_MINOR}.{native.DI_VERSION_PATCH}"


def _check_library() -> None:
    abi = native.di_abi_version()
    if abi != native.DI_ABI_VERSION:
        raise ImportError(
            f"deepinfer: the loaded libdeepinfer has ABI {abi} (version {native.di_version()}) but this package "
            f"was built for ABI {native.DI_ABI_VERSION} (version {BUILT_VERSION}); install matching versions"
        )
    needed = (native.DI_VERSION_MAJOR << 16) | (native.DI_VERSION_MINOR << 8)
    if native.di_version_number() < needed:
        raise ImportError(
            f"deepinfer: this package needs libdeepinfer >= {native.DI_VERSION_MAJOR}.{native.DI_VERSION_MINOR}, "
            f"but the loaded library is {native.di_version()}"
        )


_check_library()

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_cuda_preloaded = False


def bundled_library_dir() -> str | None:
    """The folder of the bundled libdeepinfer.so.0, or None when the system's library is used."""
    d = os.path.join(_PACKAGE_DIR, "_libs")
    return d if os.path.isdir(d) else None


def bundled_demo_model() -> str | None:
    """The demo model shipped inside the package, or None when this installation ships none."""
    d = os.path.join(_PACKAGE_DIR, "models", "demo")
    return d if os.path.isfile(os.path.join(d, "config.json")) else None


def _nvidia_library_dirs() -> List[str]:
    """Library folders of NVIDIA's CUDA wheels (nvidia-cuda-runtime, nvidia-cublas) on sys.path."""
    found: List[str] = []
    for entry in sys.path:
        base = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(base):
            continue
        for pattern in ("cu13/lib", "cuda_runtime/lib", "cublas/lib"):
            found.extend(d for d in glob.glob(os.path.join(base, pattern)) if d not in found)
    return found


def preload_cuda_libraries() -> None:
    """Makes the CUDA libraries of NVIDIA's pip wheels visible to the CUDA backend module.

    The backend module needs libcudart.so.13 and libcublas.so.13. System installs (/usr/local/cuda
    on the loader's path, or LD_LIBRARY_PATH) are found by the dynamic loader; NVIDIA's wheels put
    them inside site-packages, where it does not look. Loading them here first (by full path, with
    RTLD_GLOBAL) lets the module's own load find them by their sonames. Nothing happens when the
    package bundles no CUDA module or the libraries are already loadable.
    """
    global _cuda_preloaded
    if _cuda_preloaded:
        return
    _cuda_preloaded = True
    libs = bundled_library_dir()
    if libs is None or not os.path.exists(os.path.join(libs, "libdeepinfer-cuda.so.0")):
        return
    import ctypes

    for soname in ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13"):
        try:
            ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
            continue
        except OSError:
            pass
        for d in _nvidia_library_dirs():
            path = os.path.join(d, soname)
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass
                break

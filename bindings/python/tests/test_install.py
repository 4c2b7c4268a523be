"""The package under test is the installed wheel, with its bundled library."""

import os

import pytest

import deepinfer
from deepinfer import _lib

from conftest import make_engine


def test_runs_the_installed_package_not_the_source_tree():
    source = os.path.dirname(os.path.abspath(os.environ.get("DEEPINFER_TEST_README", __file__)))
    installed = os.path.dirname(os.path.abspath(deepinfer.__file__))
    assert installed != os.path.join(source, "deepinfer")
    assert any(name.startswith("_native.cpython-") for name in os.listdir(installed))  # a built package


def test_versions_match_the_library():
    assert deepinfer.__version__ == deepinfer.library_version() == "0.2.0"
    assert _lib.native.di_abi_version() == _lib.native.DI_ABI_VERSION == 0


def test_typed_package():
    assert os.path.exists(os.path.join(os.path.dirname(deepinfer.__file__), "py.typed"))


def test_loads_one_library_the_bundled_one_when_bundled():
    with open("/proc/self/maps") as f:
        loaded = {line.split()[-1] for line in f if "libdeepinfer.so" in line}
    assert len(loaded) == 1
    libs = _lib.bundled_library_dir()
    if libs is None:  # built with --system-library: the system's copy
        assert not next(iter(loaded)).startswith(os.path.dirname(deepinfer.__file__))
    else:
        assert loaded == {os.path.realpath(os.path.join(libs, "libdeepinfer.so.0"))}


def test_default_model_is_the_bundled_demo():
    demo = _lib.bundled_demo_model()
    if demo is None:
        pytest.skip("this build bundles no demo model (--no-demo)")
    if os.environ.get("DEEPINFER_TEST_MODEL") or os.environ.get("DEEPINFER_MODEL"):
        return
    with make_engine() as e:
        assert e.info.model == demo
        assert e.info.layers == 6 and e.info.vocab_size == 4096


def test_wheel_metadata():
    from importlib import metadata

    assert metadata.version("deepinfer") == deepinfer.__version__
    assert metadata.metadata("deepinfer")["Requires-Python"] == ">=3.11"

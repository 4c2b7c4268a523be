"""The package under test is the installed wheel, with its bundled library."""

import os

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


def test_loads_the_bundled_library():
    libs = _lib.bundled_library_dir()
    assert libs is not None, "the wheel bundles libdeepinfer.so.0"
    assert os.path.exists(os.path.join(libs, "libdeepinfer.so.0"))
    with open("/proc/self/maps") as f:
        loaded = {line.split()[-1] for line in f if "libdeepinfer.so" in line}
    assert loaded == {os.path.realpath(os.path.join(libs, "libdeepinfer.so.0"))}


def test_default_model_is_the_bundled_demo():
    demo = _lib.bundled_demo_model()
    assert demo is not None
    if os.environ.get("DEEPINFER_TEST_MODEL") or os.environ.get("DEEPINFER_MODEL"):
        return
    with make_engine() as e:
        assert e.info.model == demo
        assert e.info.layers == 6 and e.info.vocab_size == 4096

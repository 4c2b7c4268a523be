"""Fixtures of the Python SDK tests, which run against the INSTALLED package (bindings/python/test.sh).

Environment:
  DEEPINFER_TEST_DEVICE        cpu (default) or cuda: the device every engine of the tests uses
  DEEPINFER_TEST_MODEL         a model directory (default: the demo model the wheel bundles)
  DEEPINFER_TEST_CLI           the `deepinfer` command to compare with (tests needing it skip without)
  DEEPINFER_TEST_LIBRARY_PATH  LD_LIBRARY_PATH for that command
  DEEPINFER_TEST_README        the README whose quick start is run
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

import pytest

import deepinfer

DEVICE = os.environ.get("DEEPINFER_TEST_DEVICE", "cpu")
MODEL: Optional[str] = os.environ.get("DEEPINFER_TEST_MODEL") or None
CLI = os.environ.get("DEEPINFER_TEST_CLI") or None
# On a GPU a sequence's logits may differ in their last bits with the batch it runs in, so exact
# equality across differently batched runs is a CPU property (deepinfer.h, "Seeds").
EXACT_ACROSS_BATCHES = DEVICE == "cpu"


def make_engine(**kw) -> deepinfer.Engine:
    kw.setdefault("device", DEVICE)
    kw.setdefault("progress", False)
    return deepinfer.Engine(MODEL, **kw)


@pytest.fixture(scope="session")
def engine():
    e = make_engine()
    yield e
    e.close()


@pytest.fixture
def greedy() -> deepinfer.SamplingParams:
    return deepinfer.SamplingParams(temperature=0, max_tokens=16)


def wait_idle(engine: deepinfer.Engine, seconds: float = 10.0) -> int:
    """Waits until the engine runs no generation (cancelling and releasing are asynchronous);
    returns how many still run."""
    end = time.monotonic() + seconds
    while engine.stats().running_generations and time.monotonic() < end:
        time.sleep(0.01)
    return engine.stats().running_generations


def run_cli(args: List[str], **kw) -> subprocess.CompletedProcess:
    if CLI is None:
        pytest.skip("no deepinfer command given (DEEPINFER_TEST_CLI)")
    env = dict(os.environ)
    if os.environ.get("DEEPINFER_TEST_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["DEEPINFER_TEST_LIBRARY_PATH"]
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=120, **kw)


def run_python(code: str, *args: str, timeout: float = 120, env: Optional[Dict[str, str]] = None, **kw) -> subprocess.CompletedProcess:
    """Runs code in a fresh interpreter of the test environment."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=full_env, **kw)

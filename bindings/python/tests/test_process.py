"""Whole processes: Ctrl-C, interpreter exit, the command line, the load progress bar, the README."""

import json
import os
import pty
import re
import signal
import subprocess
import sys

import pytest

from conftest import CLI, DEVICE, MODEL, run_cli, run_python

ENGINE = f"deepinfer.Engine({MODEL!r}, device={DEVICE!r}, progress=False)"

INTERRUPTED = """
import signal, sys, time, deepinfer
# Python raises KeyboardInterrupt only where SIGINT was not ignored when it started, and a test run
# started in the background by a shell without job control passes it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
e = ENGINE
p = deepinfer.SamplingParams(temperature=0, max_tokens=1900, ignore_eos=True)
print("ready", flush=True)
try:
    if sys.argv[1] == "generate":
        e.generate(["Hello", "World"], p)
    else:
        for d in e.stream("Hello", p):
            pass
    print("finished", flush=True)
except KeyboardInterrupt:
    end = time.monotonic() + 10
    while e.stats().running_generations and time.monotonic() < end:
        time.sleep(0.01)
    s = e.stats()
    print("interrupted", s.running_generations, s.generated_tokens, flush=True)
    e.generate("Hi", deepinfer.SamplingParams(max_tokens=2))  # still serving
    print("serving", flush=True)
"""


@pytest.mark.parametrize("how", ["generate", "stream"])
def test_ctrl_c_raises_keyboard_interrupt_and_cancels(how):
    code = INTERRUPTED.replace("ENGINE", ENGINE)
    p = subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    import time

    time.sleep(0.3)  # inside the blocking call
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    lines = out.split("\n")
    assert lines[0].startswith("interrupted "), out
    _, running, generated = lines[0].split()
    assert int(running) == 0
    assert int(generated) < (2 if how == "generate" else 1) * 1900  # cancelled before the end
    assert lines[1] == "serving"


EXITING = """
import asyncio, sys, threading, deepinfer
e = ENGINE
p = deepinfer.SamplingParams(temperature=0, max_tokens=1900, ignore_eos=True)
threading.Thread(target=lambda: e.generate(["a", "b"], p), daemon=True).start()
stream = e.stream("Hello", p)
next(stream)
session = e.session()
session.add_text("Hi")
live = session.stream(p)
next(live)

async def partly():
    s = e.astream("Hello", p)
    await s.__anext__()
    return s

kept = asyncio.run(partly())
print("exiting", e.stats().running_generations, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
"""


@pytest.mark.parametrize("how", ["exit", "return"])
def test_interpreter_exit_with_generations_running(how):
    r = run_python(EXITING.replace("ENGINE", ENGINE), how, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("exiting ") and int(r.stdout.split()[1]) >= 3
    assert "Traceback" not in r.stderr and "Fatal" not in r.stderr


def test_module_cli_mirrors_deepinfer_generate():
    from deepinfer import _lib

    model = MODEL or _lib.bundled_demo_model()
    if model is None:
        pytest.skip("no model: set DEEPINFER_TEST_MODEL")
    args = ["generate", "--model", model, "--device", DEVICE, "--prompt", "Hello world", "--temperature", "0",
            "--max-tokens", "20"]  # fmt: skip
    py = run_python("import runpy; runpy.run_module('deepinfer', run_name='__main__')", *args)
    assert py.returncode == 0, py.stderr
    assert py.stdout.startswith("Hello world") and len(py.stdout) > len("Hello world\n")
    assert re.match(r"loading .* \.\.\. 6 layers, hidden 256, vocab 4096 on " + DEVICE, py.stderr)
    if CLI is None:
        return
    ref = run_cli(args)
    assert ref.returncode == 0, ref.stderr
    assert py.stdout == ref.stdout
    jargs = args[:7] + ["--max-tokens", "20", "--json", "--seed", "5", "--n", "2", "--logprobs", "2", "--stop", "e"]
    pj = run_python("import sys, deepinfer._cli as c; sys.exit(c.main(sys.argv[1:]))", *jargs)
    cj = run_cli(jargs)
    assert pj.returncode == cj.returncode == 0, pj.stderr + cj.stderr
    parse = lambda text: [json.loads(line) for line in text.splitlines() if line]  # noqa: E731
    assert parse(pj.stdout) == parse(cj.stdout)


def test_module_cli_chat_and_errors():
    model = ["--model", MODEL] if MODEL else []
    r = run_python("import sys, deepinfer._cli as c; sys.exit(c.main(sys.argv[1:]))",
                   "chat", *model, "--device", DEVICE, "--message", "Hi", "--message", "Again", "--max-tokens", "4")  # fmt: skip
    assert r.returncode == 0, r.stderr
    bad = run_python("import sys, deepinfer._cli as c; sys.exit(c.main(sys.argv[1:]))",
                     "generate", "--model", "/no/such/model", "--prompt", "x")  # fmt: skip
    assert bad.returncode == 1 and "deepinfer: not found: cannot open /no/such/model/config.json" in bad.stderr


def test_progress_bar_only_on_a_terminal():
    code = f"import deepinfer; deepinfer.Engine({MODEL!r}, device={DEVICE!r}).close(); print('done')"
    plain = run_python(code)
    assert plain.returncode == 0 and "loading" not in plain.stderr
    main, child = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=child, text=True)
    os.close(child)
    out, _ = p.communicate(timeout=60)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert p.returncode == 0 and out.strip() == "done"
    assert re.search(rb"loading \S+ \[#+-*\] +\d+%", shown), shown


def test_readme_quick_start_works_as_written(tmp_path):
    readme = os.environ.get("DEEPINFER_TEST_README")
    if not readme:
        pytest.skip("DEEPINFER_TEST_README not set")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"<!-- quick start -->\s*```python\n(.*?)```", text, re.S)
    assert block, "the README has a quick start block"
    r = run_python(block.group(1), timeout=120, cwd=tmp_path, env={"DEEPINFER_MODEL": MODEL} if MODEL else None)
    assert r.returncode == 0, r.stderr
    shown = re.search(r"<!-- quick start output -->\s*```\n(.*?)```", text, re.S)
    assert shown, "the README shows the quick start's output"
    if DEVICE == "cpu" and MODEL is None:
        assert r.stdout == shown.group(1)
    else:
        assert r.stdout.strip()


def test_example_runs():
    example = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("DEEPINFER_TEST_README", "."))), "examples",
                           "chat_server_sketch.py")  # fmt: skip
    if not os.path.exists(example):
        pytest.skip("the example is not beside the README")
    r = subprocess.run([sys.executable, example] + ([MODEL] if MODEL else []), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("context:") == 3 and "EngineStats(" in r.stdout

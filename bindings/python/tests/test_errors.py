"""Every error path raises the class of its code, with the library's message."""

import pickle

import pytest

import deepinfer
from deepinfer import SamplingParams
from deepinfer.errors import error_from_code

from conftest import DEVICE, MODEL, make_engine, run_cli


def test_missing_model_directory(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(deepinfer.NotFound) as e:
        deepinfer.Engine(missing, device=DEVICE, progress=False)
    assert e.value.code == 2 and str(e.value).startswith(f"cannot open {missing}/config.json")
    r = run_cli(["generate", "--model", str(missing), "--prompt", "x"])
    assert r.returncode == 1 and f"deepinfer: not found: {e.value.message}" in r.stderr


def test_malformed_model(tmp_path):
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(deepinfer.ModelFormatError) as e:
        deepinfer.Engine(tmp_path, device=DEVICE, progress=False)
    assert e.value.code == 3 and "config.json" in str(e.value)


def test_bad_engine_settings():
    with pytest.raises(deepinfer.InvalidArgument, match='unknown option "no_such_option"'):
        make_engine(no_such_option=1)
    with pytest.raises(deepinfer.InvalidArgument, match="threads=-1"):
        make_engine(threads=-1)
    with pytest.raises(deepinfer.InvalidArgument, match="device"):
        make_engine(device="tpu")


def test_bad_sampling_value(engine):
    with pytest.raises(deepinfer.InvalidArgument, match=r"^top_p=1.5 is outside \(0, 1\]$"):
        SamplingParams(top_p=1.5)
    with pytest.raises(deepinfer.InvalidArgument, match="allowed"):  # ids are checked at generate
        engine.generate("Hi", SamplingParams(allowed_token_ids=[10**6]))
    engine.generate("Hi", SamplingParams(max_tokens=2))  # still serving


def test_bad_grammar():
    with pytest.raises(deepinfer.GrammarError, match="missing"):
        SamplingParams(regex="(")


def test_bad_prompt(engine):
    with pytest.raises(deepinfer.InvalidArgument):
        engine.generate([[5, 10**7]])  # a token id outside the vocabulary
    with pytest.raises(deepinfer.InvalidArgument):
        engine.generate([b"bytes"])
    with pytest.raises(deepinfer.CapacityError):
        engine.generate([[5] * 3000], SamplingParams(max_tokens=1))  # longer than the context


def test_state_error_while_generating(engine):
    with engine.session() as s:
        s.add_text("Hello")
        stream = s.stream(SamplingParams(temperature=0, max_tokens=500, ignore_eos=True))
        next(stream)
        with pytest.raises(deepinfer.StateError):
            s.add_text("more")
        stream.close()


def test_use_after_close():
    e = make_engine()
    s = e.session()
    s.add_text("Hello")
    e.close()
    e.close()  # idempotent
    assert e.closed and "closed" in repr(e)
    with pytest.raises(deepinfer.Closed):
        e.generate("Hi")
    with pytest.raises(deepinfer.Closed):
        e.stats()
    with pytest.raises(deepinfer.Closed) as err:
        s.generate(SamplingParams(max_tokens=2))  # the session's call: the library's message
    assert err.value.code == 14 and str(err.value)
    s.close()
    with pytest.raises(deepinfer.Closed):
        s.add_text("x")


def test_progress_callback_exceptions_abort_the_load():
    calls = []

    def stop(done, total):
        calls.append((done, total))
        raise RuntimeError("stop loading")

    with pytest.raises(RuntimeError, match="stop loading"):
        deepinfer.Engine(MODEL, device=DEVICE, progress=stop)
    assert len(calls) == 1

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        deepinfer.Engine(MODEL, device=DEVICE, progress=interrupt)
    seen = []
    with deepinfer.Engine(MODEL, device=DEVICE, progress=lambda d, t: seen.append((d, t))) as e:
        assert seen and seen[-1][0] == seen[-1][1] > 0
        e.generate("Hi", SamplingParams(max_tokens=2))


def test_one_class_per_code():
    classes = {
        1: deepinfer.InvalidArgument, 2: deepinfer.NotFound, 3: deepinfer.ModelFormatError, 4: deepinfer.Unsupported,
        5: deepinfer.OutOfMemory, 6: deepinfer.CapacityError, 7: deepinfer.BufferTooSmall, 8: deepinfer.Cancelled,
        9: deepinfer.GrammarError, 10: deepinfer.IoError, 11: deepinfer.BackendError, 12: deepinfer.StateError,
        13: deepinfer.Timeout, 14: deepinfer.Closed, 15: deepinfer.InvalidHandle, 100: deepinfer.InternalError,
    }  # fmt: skip
    for code, cls in classes.items():
        e = error_from_code(code, "msg")
        assert type(e) is cls and e.code == code and e.message == "msg" and isinstance(e, deepinfer.DeepInferError)
        assert type(pickle.loads(pickle.dumps(e))) is cls
    unknown = error_from_code(4242, "from a newer library")
    assert type(unknown) is deepinfer.DeepInferError and unknown.code == 4242


def test_low_level_module_rejects_stale_handles(engine):
    from deepinfer import _native

    sp = _native.di_sampling_create()
    _native.di_sampling_free(sp)
    with pytest.raises(deepinfer.InvalidHandle):
        _native.di_sampling_set_top_k(sp, 3)
    with pytest.raises(deepinfer.InvalidHandle):
        _native.di_session_create(sp)  # a handle of another kind
    with pytest.raises(TypeError):
        _native.di_sampling_set_top_k("nope", 3)


def test_library_version_mismatch_is_reported(monkeypatch):
    from deepinfer import _lib

    monkeypatch.setattr(_lib.native, "di_abi_version", lambda: 1)
    with pytest.raises(ImportError, match=r"loaded libdeepinfer has ABI 1 .* built for ABI 0"):
        _lib._check_library()
    monkeypatch.undo()
    monkeypatch.setattr(_lib.native, "di_version_number", lambda: 0x000100)
    with pytest.raises(ImportError, match=r"needs libdeepinfer >= 0.2"):
        _lib._check_library()


def test_unknown_finish_reasons_are_shown_as_such():
    from deepinfer.outputs import finish_reason_name

    assert [finish_reason_name(r) for r in range(5)] == [None, "stop", "length", "cancelled", "error"]
    assert finish_reason_name(42) == "unknown(42)"


def test_closing_the_engine_ends_running_streams():
    import asyncio
    import threading

    e = make_engine()
    p = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)
    stream = e.stream("Hello", p)
    next(stream)
    ended = []
    reader = threading.Thread(target=lambda: ended.extend(stream))
    reader.start()

    async def main():
        s = e.astream("Hello", p)
        await s.__anext__()
        e.close()
        return [d async for d in s]

    rest = asyncio.run(main())
    reader.join(timeout=30)
    assert ended[-1].finish_reason == "cancelled" and rest[-1].finish_reason == "cancelled"
    with pytest.raises(deepinfer.Closed):
        e.stream("Hello", p)


def test_engine_is_closed_in_a_forked_child(engine):
    import os

    pid = os.fork()
    if pid == 0:  # the child: the engine's threads do not exist here
        code = 3
        try:
            engine.generate("Hi", SamplingParams(max_tokens=2))
        except deepinfer.Closed:
            code = 0
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert engine.generate("Hi", SamplingParams(max_tokens=2))[0].finished  # the parent's still serves


def test_log_levels():
    for level in ("debug", "info", "warn", "error", "off", "warn"):
        deepinfer.set_log_level(level)
    with pytest.raises(deepinfer.InvalidArgument):
        deepinfer.set_log_level("loud")

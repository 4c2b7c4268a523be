"""Blocking streams: deltas, their end, cancellation."""

import threading

import pytest

from deepinfer import SamplingParams, StreamDelta

from conftest import EXACT_ACROSS_BATCHES, wait_idle


def test_deltas_concatenate_to_the_full_output(engine, greedy):
    whole = engine.generate("Hello world", greedy)[0].outputs[0]
    deltas = list(engine.stream("Hello world", greedy))
    assert all(isinstance(d, StreamDelta) for d in deltas)
    assert "".join(d.text for d in deltas) == whole.text
    assert [t for d in deltas for t in d.token_ids] == whole.token_ids
    assert deltas[-1].finished and deltas[-1].finish_reason == whole.finish_reason
    assert not any(d.finished for d in deltas[:-1])
    assert deltas[-1].usage == whole.usage


def test_n_completions_interleave_and_each_concatenates(engine):
    p = SamplingParams(temperature=1.0, seed=5, n=3, max_tokens=12, ignore_eos=True)
    texts, ends = {0: "", 1: "", 2: ""}, {}
    for d in engine.stream("The answer is", p):
        texts[d.index] += d.text
        if d.finished:
            ends[d.index] = d.finish_reason
    assert ends == {0: "length", 1: "length", 2: "length"}
    if EXACT_ACROSS_BATCHES:
        whole = engine.generate("The answer is", p)[0]
        assert texts == {c.index: c.text for c in whole.outputs}


def test_result_after_partial_iteration(engine, greedy):
    s = engine.stream("Hello world", greedy)
    first = next(s)
    rest = s.result()
    assert rest.outputs[0].text.startswith(first.text)
    assert rest.outputs[0].text == engine.generate("Hello world", greedy)[0].outputs[0].text


def test_explicit_cancel_ends_the_stream_with_cancelled(engine):
    p = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)
    s = engine.stream("Hello", p)
    got = [next(s) for _ in range(3)]
    s.cancel()
    rest = list(s)
    assert rest and rest[-1].finish_reason == "cancelled"
    assert len(got) + len(rest) < 1500
    assert wait_idle(engine) == 0


def test_cancel_from_another_thread(engine):
    s = engine.stream("Hello", SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True))
    next(s)
    t = threading.Timer(0.05, s.cancel)
    t.start()
    deltas = list(s)
    t.join()
    assert deltas[-1].finish_reason == "cancelled"
    assert wait_idle(engine) == 0


def test_leaving_early_cancels(engine):
    with engine.stream("Hello", SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)) as s:
        for i, _ in enumerate(s):
            if i == 2:
                break
    assert wait_idle(engine) == 0
    with pytest.raises(StopIteration):
        next(s)


def test_a_stream_keeps_its_engine_open():
    from conftest import make_engine

    deltas = list(make_engine().stream("Hello", SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)))
    assert deltas[-1].finish_reason == "length"  # the engine, unreferenced but for the stream, was not closed
    assert sum(len(d.token_ids) for d in deltas) == 40

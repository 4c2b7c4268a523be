"""Blocking generation: equality with the C command line, batching, seeds, stops, logprobs."""

import pytest

import deepinfer
from deepinfer import SamplingParams

from conftest import DEVICE, EXACT_ACROSS_BATCHES, run_cli

PROMPTS = ["Hello world", "The sky is", "def f(x):"]


def test_greedy_equals_deepinfer_generate(engine):
    params = SamplingParams(temperature=0, max_tokens=24)
    if EXACT_ACROSS_BATCHES:
        outs = engine.generate(PROMPTS, params)  # submitted together: batched
    else:
        outs = [engine.generate(p, params)[0] for p in PROMPTS]  # batch 1, as the command runs
    for prompt, out in zip(PROMPTS, outs):
        r = run_cli(["generate", "--model", engine.info.model, "--device", DEVICE, "--prompt", prompt,
                     "--temperature", "0", "--max-tokens", "24", "--no-echo"])  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stdout == out.outputs[0].text + "\n"
        assert out.prompt == prompt
        assert out.outputs[0].finish_reason in ("length", "stop")


@pytest.mark.skipif(not EXACT_ACROSS_BATCHES, reason="exact across batches on the CPU only")
def test_batch_equals_alone(engine, greedy):
    together = engine.generate(PROMPTS, greedy)
    for prompt, out in zip(PROMPTS, together):
        assert engine.generate(prompt, greedy)[0].outputs[0].token_ids == out.outputs[0].token_ids


def test_token_prompt_equals_text_prompt(engine, greedy):
    ids = engine.tokenizer.encode("Hello world")
    by_text = engine.generate("Hello world", greedy)[0]
    by_ids = engine.generate(ids, greedy)[0]
    assert by_ids.prompt_token_ids == by_text.prompt_token_ids == ids
    assert by_ids.outputs[0].token_ids == by_text.outputs[0].token_ids
    assert engine.tokenizer.decode(by_text.outputs[0].token_ids) == by_text.outputs[0].text


def test_one_params_per_prompt(engine):
    a = SamplingParams(temperature=0, max_tokens=3)
    b = SamplingParams(temperature=0, max_tokens=7)
    outs = engine.generate(["Hello", "World"], [a, b])
    assert [o.outputs[0].usage.completion_tokens for o in outs] == [3, 7]
    with pytest.raises(deepinfer.InvalidArgument):
        engine.generate(["Hello", "World"], [a])


def test_seeded_sampling_repeats(engine):
    p = SamplingParams(temperature=1.0, seed=1234, max_tokens=24, ignore_eos=True)
    first = engine.generate("Once upon a time", p)[0].outputs[0]
    again = engine.generate("Once upon a time", p)[0].outputs[0]
    assert first.token_ids == again.token_ids and first.seed == 1234
    other = engine.generate("Once upon a time", SamplingParams(temperature=1.0, seed=4321, max_tokens=24, ignore_eos=True))
    assert other[0].outputs[0].token_ids != first.token_ids


def test_unseeded_output_replays_with_its_reported_seed(engine):
    out = engine.generate("Once", SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True))[0]
    assert out.seed is not None and out.outputs[0].seed == out.seed
    replay = engine.generate("Once", SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True, seed=out.seed))[0]
    assert replay.outputs[0].token_ids == out.outputs[0].token_ids


@pytest.mark.skipif(not EXACT_ACROSS_BATCHES, reason="exact across batches on the CPU only")
def test_n_completions_replay_alone_through_first_completion(engine):
    p = SamplingParams(temperature=1.0, seed=77, n=3, max_tokens=16, ignore_eos=True)
    out = engine.generate("The answer is", p)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1
    for c in out.outputs:
        alone = SamplingParams(temperature=1.0, seed=77, n=1, first_completion=c.index, max_tokens=16, ignore_eos=True)
        assert engine.generate("The answer is", alone)[0].outputs[0].token_ids == c.token_ids


def test_stop_string_ends_the_output_before_it(engine, greedy):
    text = engine.generate("Hello world", greedy)[0].outputs[0].text
    stop = text[4:7]
    cut = text[: text.index(stop)]
    out = engine.generate("Hello world", SamplingParams(temperature=0, max_tokens=16, stop=[stop]))[0].outputs[0]
    assert out.text == cut and out.finish_reason == "stop"
    kept = SamplingParams(temperature=0, max_tokens=16, stop=stop, include_stop_str_in_output=True)
    assert engine.generate("Hello world", kept)[0].outputs[0].text == cut + stop


def test_stop_token_ends_the_output_after_it(engine, greedy):
    ids = engine.generate("Hello world", greedy)[0].outputs[0].token_ids
    p = SamplingParams(temperature=0, max_tokens=16, stop_token_ids=[ids[4]])
    out = engine.generate("Hello world", p)[0].outputs[0]
    assert out.token_ids == ids[: ids.index(ids[4]) + 1] and out.finish_reason == "stop"


def test_length_and_usage(engine):
    out = engine.generate("Hello", SamplingParams(temperature=0, max_tokens=5, ignore_eos=True))[0]
    c = out.outputs[0]
    assert c.finish_reason == "length" and len(c.token_ids) == 5
    assert c.usage == deepinfer.Usage(len(out.prompt_token_ids), 5, 0)
    assert out.usage.completion_tokens == 5 and out.finished


def test_logprobs(engine):
    p = SamplingParams(temperature=0, max_tokens=6, logprobs=3, prompt_logprobs=2)
    out = engine.generate("Hello world", p)[0]
    c = out.outputs[0]
    assert [t.token_id for t in c.logprobs] == c.token_ids
    for t in c.logprobs:
        assert t.rank == 1 and len(t.top) == 3 and t.top[0][0] == t.token_id and t.logprob <= 0
        assert t.top[0][1] >= t.top[1][1] >= t.top[2][1]
    assert [t.token_id for t in out.prompt_logprobs] == out.prompt_token_ids[1:]
    assert all(len(t.top) == 2 and t.rank >= 1 for t in out.prompt_logprobs)
    assert engine.generate("Hello", SamplingParams(temperature=0, max_tokens=2))[0].outputs[0].logprobs is None


def test_allowed_tokens_and_logit_bias_reach_the_library(engine):
    only = engine.generate("Hello", SamplingParams(temperature=0, max_tokens=6, allowed_token_ids=[57]))[0]
    assert only.outputs[0].token_ids == [57] * 6
    pushed = engine.generate("Hello", SamplingParams(temperature=0, max_tokens=4, logit_bias={58: 100.0}))[0]
    assert pushed.outputs[0].token_ids == [58] * 4


def test_defaults_come_from_generation_config(engine):
    d = engine.default_sampling_params()
    assert (d.temperature, d.top_p, d.max_tokens) == (0.8, 0.95, 128)
    out = engine.generate("Hi")[0]  # no params: these defaults
    assert 1 <= out.outputs[0].usage.completion_tokens <= 128


def test_info_stats_and_tokenizer(engine, greedy):
    info = engine.info
    assert info.device == DEVICE and info.has_tokenizer and info.eos_token_ids == [1]
    assert info.max_context == 2048 and info.parameters > 9_000_000 and info.weight_dtype in ("f32", "bf16")
    before = engine.stats()
    engine.generate(["a", "b"], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    after = engine.stats()
    assert after.generated_tokens - before.generated_tokens >= 8 and after.steps > before.steps
    tok = engine.tokenizer
    assert tok.vocab_size == 4096
    assert tok.decode(tok.encode("Hello world")) == "Hello world"
    standalone = deepinfer.Tokenizer.from_file(info.model)
    assert standalone.encode("Hello world") == tok.encode("Hello world")
    assert len(standalone.encode("<｜begin▁of▁sentence｜>", special=True)) < len(standalone.encode("<｜begin▁of▁sentence｜>"))
    assert "vocab_size=4096" in repr(tok)
    assert repr(engine) == f"Engine(model={info.model!r}, device={DEVICE!r})"


def test_empty_prompt_list(engine):
    assert engine.generate([]) == []

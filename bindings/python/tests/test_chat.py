"""Chat: OpenAI-style messages, tools, sessions that keep state between turns."""

import json

import pytest

import deepinfer
from deepinfer import SamplingParams

GREEDY = dict(temperature=0, max_tokens=12)


def decoded_prompt(engine, out):
    return engine.tokenizer.decode(out.prompt_token_ids)


def test_chat_equals_a_session_turn(engine):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    out = engine.chat(messages, SamplingParams(**GREEDY))
    assert out.prompt == messages and out.outputs[0].finish_reason in ("stop", "length")
    with engine.session(system="Be brief.") as s:
        assert s.chat("Hi there", SamplingParams(**GREEDY)).outputs[0].token_ids == out.outputs[0].token_ids
    parts = [{"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
             {"role": "user", "content": "Hi there"}]  # fmt: skip
    assert engine.chat(parts, SamplingParams(**GREEDY)).outputs[0].token_ids == out.outputs[0].token_ids
    streamed = "".join(d.text for d in engine.chat_stream(messages, SamplingParams(**GREEDY)))
    assert streamed == out.outputs[0].text


def test_tools_and_tool_calls_reach_the_prompt(engine):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny"},
    ]  # fmt: skip
    out = engine.chat(messages, SamplingParams(**GREEDY), tools=tools)
    prompt = decoded_prompt(engine, out)
    assert "get_weather" in prompt and json.dumps({"city": "Paris"}) in prompt and "sunny" in prompt
    assert prompt.index("You help.") < prompt.index("## Tools") < prompt.index("Weather in Paris?")
    plain = engine.chat(messages, SamplingParams(**GREEDY))
    assert "## Tools" not in decoded_prompt(engine, plain)


def test_bad_messages(engine):
    with pytest.raises(deepinfer.InvalidArgument, match="unknown role 'robot'"):
        engine.chat([{"role": "robot", "content": "beep"}])
    with pytest.raises(deepinfer.InvalidArgument, match="no content"):
        engine.chat([{"role": "user"}])
    with pytest.raises(deepinfer.InvalidArgument):
        engine.chat(["not a dict"])


def test_session_keeps_state_between_turns(engine):
    p = SamplingParams(**GREEDY)
    with engine.session(system="Be brief.") as s:
        first = s.chat("Hello", p)
        n1 = s.context_length
        assert first.outputs[0].usage.cached_tokens == 0
        second = s.chat("And then?", p)
        # The second turn reuses the state of the first turn instead of recomputing it.
        assert second.outputs[0].usage.cached_tokens >= len(first.prompt_token_ids) > 0
        assert s.context_length > n1
        ids, reply = s.context_tokens, first.outputs[0].token_ids
        assert any(ids[i : i + len(reply)] == reply for i in range(len(ids)))  # the reply joined the chat
        s.reset()
        assert s.context_length == 0


def test_keep_cancelled_output(engine):
    p = SamplingParams(temperature=0, max_tokens=1000, ignore_eos=True)
    for keep in (False, True):
        with engine.session(keep_cancelled_output=keep) as s:
            assert s.keep_cancelled_output is keep
            s.add_text("Hello")
            before = s.context_length
            stream = s.stream(p)
            got = [next(stream) for _ in range(3)]
            stream.cancel()
            rest = list(stream)
            assert rest[-1].finish_reason == "cancelled"
            produced = sum(len(d.token_ids) for d in got + rest)
            assert s.context_length == (before + produced if keep else before)
            s.add_text(" again")  # the session is usable again
            assert s.generate(SamplingParams(max_tokens=2)).finished


def test_raw_session(engine, greedy):
    with engine.session() as s:
        s.add_tokens(engine.tokenizer.encode("Hello"))
        s.add_text(" world")
        out = s.generate(greedy)
        assert out.outputs[0].text == engine.generate("Hello world", greedy)[0].outputs[0].text
        assert "".join(d.text for d in s.stream(SamplingParams(temperature=0, max_tokens=4)))

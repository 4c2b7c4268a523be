"""asyncio: streams driven by the completion queue's file descriptor, on one thread."""

import asyncio
import threading

import pytest

from deepinfer import SamplingParams

from conftest import EXACT_ACROSS_BATCHES


async def wait_idle(engine, seconds=10.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while engine.stats().running_generations and loop.time() < end:
        await asyncio.sleep(0.01)
    return engine.stats().running_generations


def test_astream_and_agenerate_match_blocking(engine, greedy):
    whole = engine.generate(["Hello world", "The sky is"], greedy)

    async def main():
        deltas = [d async for d in engine.astream("Hello world", greedy)]
        outs = await engine.agenerate(["Hello world", "The sky is"], greedy)
        chat = await engine.achat([{"role": "user", "content": "Hi"}], greedy)
        chat_stream = "".join([d.text async for d in engine.achat_stream([{"role": "user", "content": "Hi"}], greedy)])
        return deltas, outs, chat, chat_stream

    deltas, outs, chat, chat_stream = asyncio.run(main())
    assert "".join(d.text for d in deltas) == whole[0].outputs[0].text and deltas[-1].finished
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in whole]
    assert chat_stream == chat.outputs[0].text == engine.chat([{"role": "user", "content": "Hi"}], greedy).outputs[0].text


def test_64_concurrent_streams_on_one_thread(engine):
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    prompts = [f"Item {i}:" for i in range(64)]
    expected = {o.prompt: o.outputs[0].text for o in engine.generate(prompts, params)}
    threads = threading.active_count()

    async def one(prompt):
        text = ""
        async for d in engine.astream(prompt, params):
            text += d.text
            assert threading.active_count() == threads  # no thread per request
        return prompt, text

    async def main():
        return await asyncio.gather(*(one(p) for p in prompts))

    results = dict(asyncio.run(main()))
    assert len(results) == 64
    if EXACT_ACROSS_BATCHES:
        assert results == expected
    assert not engine._hubs  # the shared queue went with the last stream


def test_task_cancellation_cancels_the_generation(engine):
    params = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)

    async def consume(seen):
        async for _ in engine.astream("Hello", params):
            seen.append(1)

    async def main():
        seen = []
        task = asyncio.create_task(consume(seen))
        while len(seen) < 3:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await wait_idle(engine) == 0
        gen_task = asyncio.create_task(engine.agenerate(["a", "b"], params))
        await asyncio.sleep(0.05)
        gen_task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gen_task
        assert await wait_idle(engine) == 0
        return len(seen)

    assert asyncio.run(main()) < 1500
    assert not engine._hubs


def test_stream_cancel_and_aclose(engine):
    params = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)

    async def main():
        s = engine.astream("Hello", params)
        await s.__anext__()
        s.cancel()
        rest = [d async for d in s]
        assert rest[-1].finish_reason == "cancelled"
        async with engine.astream("Hello", params) as s2:
            await s2.__anext__()
        assert await wait_idle(engine) == 0
        with engine.session() as chat:
            out = await chat.achat("Hi", SamplingParams(temperature=0, max_tokens=4))
            more = "".join([d.text async for d in chat.achat_stream("Again", SamplingParams(temperature=0, max_tokens=4))])
            assert out.outputs[0].text and more and chat.context_length > 0

    asyncio.run(main())


def test_an_async_stream_keeps_its_engine_open():
    from conftest import make_engine

    async def main():
        return [d async for d in make_engine().astream("Hello", SamplingParams(temperature=0, max_tokens=40, ignore_eos=True))]

    deltas = asyncio.run(main())
    assert deltas[-1].finish_reason == "length" and sum(len(d.token_ids) for d in deltas) == 40

"""Many threads on one engine."""

import threading

from deepinfer import SamplingParams

from conftest import EXACT_ACROSS_BATCHES, wait_idle


def test_8_threads_share_one_engine(engine):
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    prompts = [f"Thread {i} says" for i in range(8)]
    expected = {p: engine.generate(p, params)[0].outputs[0].text for p in prompts}
    results, errors = {}, []
    barrier = threading.Barrier(8)

    def work(prompt):
        try:
            barrier.wait()
            for _ in range(3):
                text = engine.generate(prompt, params)[0].outputs[0].text
                streamed = "".join(d.text for d in engine.stream(prompt, params))
                results.setdefault(prompt, set()).update({text, streamed})
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results) == sorted(prompts)
    if EXACT_ACROSS_BATCHES:
        assert results == {p: {expected[p]} for p in prompts}
    assert wait_idle(engine) == 0

"""Nothing leaks over many create/generate/free cycles (RSS and Python objects stay bounded)."""

import gc

from deepinfer import SamplingParams

from conftest import make_engine


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def cycle(engine, i):
    p = SamplingParams(temperature=0.5, seed=i, max_tokens=4, stop=["zz"])
    out = engine.generate(f"Hello {i % 7}", p)[0]
    with engine.session() as s:
        s.add_text("Hi")
        for _ in s.stream(p):
            pass
    assert out.outputs[0].usage.completion_tokens >= 1


def test_1000_cycles_keep_memory_bounded(engine):
    for i in range(200):  # warm-up: allocator pools, grammar and handle tables reach their size
        cycle(engine, i)
    gc.collect()
    rss, objects = rss_bytes(), len(gc.get_objects())
    for i in range(200, 1000):
        cycle(engine, i)
    gc.collect()
    grown = rss_bytes() - rss
    # Measured: 0 bytes; with the events of a cycle left unfreed, about 2 MB (and a leaked session
    # or queue costs more than its events).
    assert grown < 1024 * 1024, f"RSS grew by {grown} bytes over 800 cycles"
    assert len(gc.get_objects()) - objects < 500


def test_engine_create_close_cycles_keep_memory_bounded():
    def once():
        with make_engine() as e:
            e.generate("Hi", SamplingParams(max_tokens=2))

    for _ in range(3):
        once()
    gc.collect()
    rss = rss_bytes()
    for _ in range(12):
        once()
    gc.collect()
    grown = rss_bytes() - rss
    # The weights alone are ~37 MB an engine: a leaked engine would show many times over.
    assert grown < 40 * 1024 * 1024, f"RSS grew by {grown} bytes over 12 engines"

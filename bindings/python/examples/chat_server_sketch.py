"""Many conversations at once on one engine, with asyncio: each task streams its own replies from
its own Session (the model's state stays on the engine between turns), all on one thread.

    python examples/chat_server_sketch.py [MODEL_DIR]
"""

import asyncio
import sys

import deepinfer


async def conversation(engine: deepinfer.Engine, name: str, turns: list) -> str:
    params = deepinfer.SamplingParams(temperature=0.7, seed=len(name), max_tokens=24)
    lines = []
    with engine.session(system=f"You are {name}.") as chat:
        for message in turns:
            reply = ""
            async for delta in chat.achat_stream(message, params):
                reply += delta.text
            lines.append(f"[{name}] > {message}\n[{name}] {reply.strip()}")
        lines.append(f"[{name}] context: {chat.context_length} tokens")
    return "\n".join(lines)


async def main(model: str | None) -> None:
    with deepinfer.Engine(model) as engine:
        talks = [
            conversation(engine, "Ada", ["Hello!", "What is a loop?"]),
            conversation(engine, "Linus", ["Hi.", "Tabs or spaces?"]),
            conversation(engine, "Grace", ["Good morning.", "Tell me about bugs."]),
        ]
        for transcript in await asyncio.gather(*talks):
            print(transcript)
        print(engine.stats())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))

"""``python -m deepinfer generate|chat``: a thin command line mirroring ``deepinfer generate`` and
``deepinfer chat`` (same flags, same output), on the Python package."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from . import Engine, SamplingParams
from ._lib import native
from .errors import DeepInferError, InvalidArgument
from .outputs import StreamDelta


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="Model directory (default: $DEEPINFER_MODEL, else the bundled demo model)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto, cpu or cuda")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: one per core)")
    p.add_argument("--dummy-weights", action="store_true", help="Random weights from the model's config alone")
    p.add_argument("--batch-invariant", action="store_true",
                   help="Each sequence's output the same whatever else runs beside it (option batch_invariant)")  # fmt: skip
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="Engine option (repeatable; also $DEEPINFER_OPTIONS)")  # fmt: skip
    s = p.add_argument_group("Sampling")
    s.add_argument("--temperature", type=float, help="Sampling temperature; 0 = greedy")
    s.add_argument("--top-k", type=int, help="Keep the k most likely tokens (0: off)")
    s.add_argument("--top-p", type=float, help="Nucleus sampling mass in (0, 1]")
    s.add_argument("--min-p", type=float, help="Drop tokens below min_p times the top probability")
    s.add_argument("--repetition-penalty", type=float, help="Penalty for tokens of the prompt and output (1: off)")
    s.add_argument("--presence-penalty", type=float, help="Penalty for tokens already generated, in [-2, 2]")
    s.add_argument("--frequency-penalty", type=float, help="Penalty per occurrence in the output, in [-2, 2]")
    s.add_argument("--max-tokens", type=int, help="Most tokens to generate")
    s.add_argument("--min-tokens", type=int, help="Fewest tokens before EOS or a stop may end generation")
    s.add_argument("--n", type=int, help="Completions to generate")
    s.add_argument("--first-completion", type=int, help="Random stream of the first completion")
    s.add_argument("--seed", type=int, help="Seed (the same seed repeats the output exactly)")
    s.add_argument("--stop", action="append", default=[], help="Stop string (repeatable)")
    s.add_argument("--stop-token", type=int, action="append", default=[], help="Stop token id (repeatable)")
    s.add_argument("--ignore-eos", action="store_true", help="Do not stop at end-of-sequence tokens")
    s.add_argument("--logprobs", type=int, help="Report the top-N logprobs of each token (with --json)")
    p.add_argument("--json", action="store_true", help="Print one JSON object per event instead of text")
    g = p.add_argument_group("Structured output").add_mutually_exclusive_group()
    g.add_argument("--regex", help="Constrain the output to match this regular expression")
    g.add_argument("--json-schema", metavar="FILE", help="Constrain the output to a JSON Schema (file)")
    g.add_argument("--ebnf", metavar="FILE", help="Constrain the output to an EBNF/GBNF grammar (file, rule root)")
    p.add_argument("--compact-json", action="store_true", help="With --json-schema: no whitespace between JSON tokens")


def _options(a: argparse.Namespace) -> Dict[str, Any]:
    items: List[str] = [i for i in os.environ.get("DEEPINFER_OPTIONS", "").split(",") if i]
    items += a.option
    options: Dict[str, Any] = {}
    for kv in items:
        key, eq, value = kv.partition("=")
        if not eq and kv in a.option:
            raise InvalidArgument(f"--option {kv}: expected key=value")
        options[key] = value
    if a.dummy_weights:
        options["dummy_weights"] = "1"
    if a.batch_invariant:
        options["batch_invariant"] = "1"
    return options


def _open_engine(a: argparse.Namespace) -> Engine:
    model = a.model or os.environ.get("DEEPINFER_MODEL") or None
    shown = model or "the bundled demo model"
    sys.stderr.write(f"loading {shown} ...")
    sys.stderr.flush()
    t0 = time.monotonic()
    try:
        engine = Engine(model, a.device, threads=a.threads, progress=None, **_options(a))
    except BaseException:
        sys.stderr.write(" failed\n")
        raise
    i = engine.info
    sys.stderr.write(f" {i.layers} layers, hidden {i.hidden_size}, vocab {i.vocab_size} on {i.device}, {time.monotonic() - t0:.2f} s\n")
    return engine


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _sampling(engine: Engine, a: argparse.Namespace) -> SamplingParams:
    sp = engine.default_sampling_params()
    for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
                 "max_tokens", "min_tokens", "n", "first_completion", "seed", "logprobs"):  # fmt: skip
        value = getattr(a, name)
        if value is not None:
            setattr(sp, name, value)
    sp.stop = a.stop
    sp.stop_token_ids = a.stop_token
    sp.ignore_eos = a.ignore_eos
    if a.regex is not None:
        sp.set_structured_output(regex=a.regex)
    elif a.json_schema:
        sp.set_structured_output(json_schema=_read(a.json_schema), compact_json=a.compact_json)
    elif a.ebnf:
        sp.set_structured_output(ebnf=_read(a.ebnf))
    return sp


def _event_json(d: StreamDelta) -> Dict[str, Any]:
    if d.prompt_logprobs is not None:
        kind = "prompt_logprobs"
    else:
        kind = "finished" if d.finished else "tokens"
    j: Dict[str, Any] = {"event": kind, "completion": d.index, "tokens": d.token_ids, "text": d.text}
    lps = d.prompt_logprobs if d.prompt_logprobs is not None else d.logprobs
    if lps is not None:
        j["logprobs"] = [
            {"token": t.token_id, "logprob": t.logprob, "rank": t.rank, "top": [{"token": i, "logprob": p} for i, p in t.top]}
            for t in lps
        ]
    if d.finished:
        j["finish_reason"] = d.finish_reason
        u = d.usage
        j["usage"] = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "cached_tokens": u.cached_tokens} if u else {}
        j["seed"] = d.seed
        if d.error is not None:
            j["error"] = d.error.message
    return j


def _print_stream(stream, as_json: bool) -> Optional[DeepInferError]:
    """Prints a stream like the C command line does; returns the error of a failed completion."""
    failure = None
    last = 0
    out = sys.stdout
    for d in stream:
        if as_json:
            out.write(json.dumps(_event_json(d), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n")
        elif d.text or d.token_ids:
            if d.index != last:
                out.write(f"\n--- completion {d.index} ---\n")
                last = d.index
            out.write(d.text)
        out.flush()
        if d.error is not None:
            failure = d.error
    if not as_json:
        out.write("\n")
    out.flush()
    return failure


def _generate(a: argparse.Namespace) -> None:
    given = [x is not None for x in (a.prompt, a.prompt_file, a.ids)]
    if sum(given) != 1:
        raise InvalidArgument("give one of --prompt, --prompt-file or --ids")
    with _open_engine(a) as engine:
        prompt: Any
        if a.ids is not None:
            try:
                prompt = [int(w) for w in a.ids.split()]
            except ValueError:
                raise InvalidArgument(f"--ids: {a.ids!r} is not a list of token ids") from None
        else:
            prompt = a.prompt if a.prompt is not None else _read(a.prompt_file)
            if a.echo and not a.json:
                sys.stdout.write(prompt)
        failure = _print_stream(engine.stream(prompt, _sampling(engine, a), special=a.special), a.json)
        if failure is not None:
            raise failure


def _chat(a: argparse.Namespace) -> None:
    with _open_engine(a) as engine, engine.session(system=a.system, keep_cancelled_output=True) as session:
        sp = _sampling(engine, a)

        def turn(message: str) -> None:
            failure = _print_stream(session.chat_stream(message, sp), a.json)
            if failure is not None:
                raise failure

        if a.message:
            for m in a.message:
                turn(m)
            return
        sys.stderr.write("Type a message and press Enter (an empty line or end of input quits).\n")
        while True:
            sys.stderr.write("> ")
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line or line == "\n":
                return
            turn(line.rstrip("\n"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deepinfer", description="DeepInfer from Python")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="Generate text from a prompt, streaming it to stdout")
    _engine_args(g)
    g.add_argument("--prompt", help="Prompt text")
    g.add_argument("--prompt-file", help="File holding the prompt text")
    g.add_argument("--ids", help="Prompt as space-separated token ids")
    g.add_argument("--special", action="store_true", help="Recognise control tokens written in the prompt")
    g.add_argument("--no-echo", dest="echo", action="store_false", help="Do not print the prompt before the output")
    c = sub.add_parser("chat", help="Chat with the model (interactive, or --message for single turns)")
    _engine_args(c)
    c.add_argument("--system", help="System prompt")
    c.add_argument("--message", action="append", default=[], help="A user message; repeat for several turns")
    a = parser.parse_args(argv)
    try:
        (_generate if a.command == "generate" else _chat)(a)
    except DeepInferError as e:
        sys.stdout.flush()
        sys.stderr.write(f"deepinfer: {native.di_code_name(e.code)}: {e.message}\n")
        return 1
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 130
    return 0

"""The engine: a loaded model serving generations to any number of threads and tasks."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union, cast

from . import _generation as gen
from ._closing import Closing
from ._lib import bundled_demo_model, native, preload_cuda_libraries
from ._progress import LoadProgressBar
from .errors import Closed, InvalidArgument, InvalidHandle
from .outputs import RequestOutput
from .sampling import SamplingParams
from .session import Message, Session, add_chat_messages
from .tokenizer import Tokenizer

__all__ = ["Engine", "EngineInfo", "EngineStats", "Prompt"]

#: A prompt: text, or token ids.
Prompt = Union[str, Sequence[int]]
ParamsArg = Union[SamplingParams, Sequence[SamplingParams], None]

_DEVICES = {"auto": native.DI_DEVICE_AUTO, "cpu": native.DI_DEVICE_CPU, "cuda": native.DI_DEVICE_CUDA}
_DEVICE_NAMES = {native.DI_DEVICE_CPU: "cpu", native.DI_DEVICE_CUDA: "cuda"}
_open_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    # Stops running generations before the interpreter tears down (the library would at exit too).
    for engine in list(_open_engines):
        engine.close()


@dataclass(frozen=True)
class EngineInfo:
    """Facts about the engine and its model."""

    device: str  #: "cpu" or "cuda" (what "auto" chose)
    model: str  #: the model directory
    layers: int
    hidden_size: int
    attention_heads: int
    routed_experts: int  #: per MoE layer
    experts_per_token: int
    vocab_size: int  #: the width of the logits
    max_position: int  #: the model's longest context
    parameters: int
    weight_bytes: int  #: bytes the weights take on the device
    weight_dtype: str  #: e.g. "bf16" or "f32"
    max_context: int  #: longest context of one sequence in this engine
    capacity_tokens: int  #: tokens of context the state memory holds in all
    eos_token_ids: List[int]
    has_tokenizer: bool
    library_version: str


@dataclass(frozen=True)
class EngineStats:
    """A snapshot of the engine's bookkeeping (``engine.stats()``)."""

    running_sequences: int  #: completions with model state, being computed
    waiting_sequences: int  #: completions submitted and not started (or preempted)
    running_generations: int  #: generations submitted and not finished
    resident_sessions: int  #: idle sessions whose state is kept for their next turn
    state_bytes_used: int
    state_bytes_total: int
    prompt_tokens: int  #: context tokens processed since the engine started
    generated_tokens: int  #: tokens sampled since the engine started
    steps: int  #: engine steps (forwards)
    preemptions: int  #: sequences whose state was given up to make room
    step_microseconds: int  #: time spent in steps


_STATS = {
    "running_sequences": native.DI_STAT_RUNNING_SEQUENCES,
    "waiting_sequences": native.DI_STAT_WAITING_SEQUENCES,
    "running_generations": native.DI_STAT_RUNNING_GENERATIONS,
    "resident_sessions": native.DI_STAT_RESIDENT_SESSIONS,
    "state_bytes_used": native.DI_STAT_STATE_BYTES_USED,
    "state_bytes_total": native.DI_STAT_STATE_BYTES_TOTAL,
    "prompt_tokens": native.DI_STAT_PROMPT_TOKENS,
    "generated_tokens": native.DI_STAT_GENERATED_TOKENS,
    "steps": native.DI_STAT_STEPS,
    "preemptions": native.DI_STAT_PREEMPTIONS,
    "step_microseconds": native.DI_STAT_STEP_MICROSECONDS,
}

_MODEL_INFO = {
    "layers": native.DI_MODEL_LAYERS,
    "hidden_size": native.DI_MODEL_HIDDEN_SIZE,
    "attention_heads": native.DI_MODEL_ATTENTION_HEADS,
    "routed_experts": native.DI_MODEL_ROUTED_EXPERTS,
    "experts_per_token": native.DI_MODEL_EXPERTS_PER_TOKEN,
    "vocab_size": native.DI_MODEL_VOCAB_SIZE,
    "max_position": native.DI_MODEL_MAX_POSITION,
    "parameters": native.DI_MODEL_PARAMETERS,
    "weight_bytes": native.DI_MODEL_WEIGHT_BYTES,
}


def _no_progress(done: int, total: int) -> None:
    return None


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class Engine(Closing):
    """A model loaded for generation, shared by any number of threads and asyncio tasks.

    Args:
        model: the model directory (config.json, *.safetensors, tokenizer.json). Default:
            ``$DEEPINFER_MODEL``, else the demo model the package bundles (a wheel ships one).
        device: "auto" (CUDA when its backend module, the CUDA libraries, a driver and a GPU are
            there, else the CPU), "cpu", "cuda" or "cuda:N" (GPU N).
        threads: CPU worker threads (0 or None: one per core).
        max_sequences: sequences the engine keeps state for at once (default 64).
        max_context: longest context of one sequence in tokens (default: the model's maximum).
        state_memory: bytes for the shared pool of model state (default: automatic).
        state_memory_fraction: on a GPU, the share of free memory automatic state memory takes.
        max_batched_tokens: tokens processed per engine step (default 2048).
        seed: seed of the engine's own generator, from which generations without a seed draw.
        progress: the load progress display: None shows a bar on stderr when it is a terminal,
            True always, False never; a callable is called with (bytes loaded, bytes in all) and
            may raise to abort the load.
        **options: engine and backend settings by name (``deepinfer options`` lists them), e.g.
            ``graphs=False``, ``cuda_module="/path/libdeepinfer-cuda.so.0"``; booleans become 1/0.

    Raises:
        NotFound: the model directory or a file in it is missing.
        ModelFormatError: a model file is malformed.
        Unsupported: device="cuda" where CUDA is unavailable (the message says what is missing).
        InvalidArgument: a bad setting (the message names it).
        KeyboardInterrupt: Ctrl-C during the load (which is aborted).

    Use it as a context manager, or call ``close()``: closing cancels running generations (their
    streams end with "cancelled" completions) and frees the model.
    """

    def __init__(
        self,
        model: Union[str, os.PathLike, None] = None,
        device: str = "auto",
        *,
        threads: Optional[int] = None,
        max_sequences: Optional[int] = None,
        max_context: Optional[int] = None,
        state_memory: Optional[int] = None,
        state_memory_fraction: Optional[float] = None,
        max_batched_tokens: Optional[int] = None,
        seed: Optional[int] = None,
        progress: Union[bool, Callable[[int, int], Any], None] = None,
        **options: Any,
    ) -> None:
        self._handle = 0
        self._lock = threading.Lock()
        self._tokenizer: Optional[Tokenizer] = None
        self._info: Optional[EngineInfo] = None
        self._hubs: Dict[Any, Any] = {}
        self._model = self._resolve_model(model)
        kind, ordinal = self._parse_device(device)
        if ordinal is not None:
            options.setdefault("cuda_device", ordinal)
        if kind != native.DI_DEVICE_CPU:
            preload_cuda_libraries()
        cfg = native.di_engine_config_create()
        bar: Optional[LoadProgressBar] = None
        try:
            native.di_engine_config_set_model_path(cfg, self._model)
            native.di_engine_config_set_device(cfg, kind)
            settings = (
                (native.di_engine_config_set_threads, threads),
                (native.di_engine_config_set_max_sequences, max_sequences),
                (native.di_engine_config_set_max_context, max_context),
                (native.di_engine_config_set_state_memory, state_memory),
                (native.di_engine_config_set_state_memory_fraction, state_memory_fraction),
                (native.di_engine_config_set_max_batched_tokens, max_batched_tokens),
                (native.di_engine_config_set_seed, seed),
            )
            for setter, value in settings:
                if value is not None:
                    setter(cfg, value)
            for key, value in options.items():
                native.di_engine_config_set_option(cfg, key, _option_text(value))
            if callable(progress) and not isinstance(progress, bool):
                native.di_engine_config_set_progress_callback(cfg, progress)
            elif progress or (progress is None and sys.stderr is not None and sys.stderr.isatty()):
                bar = LoadProgressBar(os.path.basename(os.path.normpath(self._model)))
                native.di_engine_config_set_progress_callback(cfg, bar)
            else:
                # Still called back: the module checks for Ctrl-C at each call, aborting the load.
                native.di_engine_config_set_progress_callback(cfg, _no_progress)
            try:
                self._handle = native.di_engine_create(cfg)
            finally:
                if bar is not None:
                    bar.finish()
        finally:
            native.di_engine_config_free(cfg)
        _open_engines.add(self)

    @staticmethod
    def _resolve_model(model: Union[str, os.PathLike, None]) -> str:
        if model is not None:
            return os.fspath(model)
        env = os.environ.get("DEEPINFER_MODEL")
        if env:
            return env
        demo = bundled_demo_model()
        if demo is None:
            raise InvalidArgument("no model given: pass Engine(model=...) or set DEEPINFER_MODEL (this installation bundles no demo model)")
        return demo

    @staticmethod
    def _parse_device(device: str) -> tuple:
        name, _, ordinal = str(device).partition(":")
        if name not in _DEVICES or (ordinal and (name != "cuda" or not ordinal.isdigit())):
            raise InvalidArgument(f"device {device!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
        return _DEVICES[name], (int(ordinal) if ordinal else None)

    # -- life ---------------------------------------------------------------------------------------

    @property
    def handle(self) -> int:
        """The di_engine handle (for the low-level module deepinfer._native)."""
        if not self._handle:
            raise Closed("the engine is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return not self._handle

    def close(self) -> None:
        """Cancels every running generation, stops the engine and frees the model. Streams of
        running generations end with "cancelled" completions. Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, 0
            tokenizer, self._tokenizer = self._tokenizer, None
        if tokenizer is not None:
            tokenizer.close()
        if handle and native is not None:
            native.di_engine_free(handle)
        _open_engines.discard(self)

    def __repr__(self) -> str:
        if self.closed:
            return f"Engine(model={self._model!r}, closed)"
        return f"Engine(model={self._model!r}, device={self.info.device!r})"

    @contextlib.contextmanager
    def _calling(self):
        """Turns the library's 'invalid handle' for an engine closed meanwhile into Closed."""
        try:
            yield self.handle
        except InvalidHandle as e:
            if self.closed:
                raise Closed("the engine was closed") from e
            raise

    # -- facts ----------------------------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        """The device and the model's facts."""
        if self._info is None:
            with self._calling() as h:
                facts = {name: native.di_engine_model_info(h, key) for name, key in _MODEL_INFO.items()}
                facts["vocab_size"] = native.di_engine_vocab_size(h)
                device = native.di_engine_device(h)
                self._info = EngineInfo(
                    device=_DEVICE_NAMES.get(device, f"unknown({device})"),
                    model=self._model,
                    weight_dtype=native.di_engine_weight_dtype(h),
                    max_context=native.di_engine_max_context(h),
                    capacity_tokens=native.di_engine_capacity_tokens(h),
                    eos_token_ids=native.di_engine_eos_tokens(h),
                    has_tokenizer=bool(native.di_engine_has_tokenizer(h)),
                    library_version=native.di_version(),
                    **facts,
                )
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (Unsupported when the model directory has none)."""
        with self._lock:
            if self._tokenizer is None:
                with self._calling() as h:
                    self._tokenizer = Tokenizer(native.di_engine_tokenizer(h))
            return self._tokenizer

    def stats(self) -> EngineStats:
        """A snapshot of the engine's bookkeeping."""
        with self._calling() as h:
            snap = native.di_engine_stats(h)
        try:
            return EngineStats(**{name: native.di_stats_get(snap, key) for name, key in _STATS.items()})
        finally:
            native.di_stats_free(snap)

    def default_sampling_params(self) -> SamplingParams:
        """The library's defaults overridden by the model's generation_config.json (what
        generations use when given no parameters)."""
        with self._calling() as h:
            return SamplingParams._adopt(native.di_engine_sampling_defaults(h))

    # -- requests ---------------------------------------------------------------------------------------

    def _params_list(self, params: ParamsArg, count: int) -> List[SamplingParams]:
        if params is None:
            params = self.default_sampling_params()
        if isinstance(params, SamplingParams):
            return [params] * count
        params = list(params)
        if len(params) != count:
            raise InvalidArgument(f"{len(params)} sampling parameters for {count} prompts")
        return params

    @staticmethod
    def _prompt_list(prompts: Union[Prompt, Sequence[Prompt]]) -> List[Prompt]:
        if isinstance(prompts, str):
            return [prompts]
        items = list(prompts)
        if items and all(isinstance(p, int) for p in items):
            return [cast(Sequence[int], items)]  # one prompt of token ids
        return cast(List[Prompt], items)

    def _request(self, prompt: Any, params: SamplingParams, add: Callable[[int], None]) -> gen.Request:
        with self._calling() as h:
            session = native.di_session_create(h)
        try:
            add(session)
            ids = native.di_session_context_tokens(session)
            return gen.Request(session, True, prompt, ids, params._handle)
        except BaseException:
            native.di_session_free(session)
            raise

    @staticmethod
    def _adder(prompt: Prompt, special: bool) -> Callable[[int], None]:
        if isinstance(prompt, str):
            flags = native.DI_TEXT_SPECIAL if special else native.DI_TEXT_PLAIN
            return lambda s: native.di_session_add_text(s, prompt, flags)
        if isinstance(prompt, (bytes, bytearray)):
            raise InvalidArgument("a prompt is text (str) or token ids, not bytes")
        return lambda s: native.di_session_add_tokens(s, list(prompt))

    def _requests(self, items: List[tuple]) -> List[gen.Request]:
        requests: List[gen.Request] = []
        try:
            for prompt, params, add in items:
                requests.append(self._request(prompt, params, add))
        except BaseException:
            for r in requests:
                gen._release(r)
            raise
        return requests

    @contextlib.contextmanager
    def _bound(self, params: List[SamplingParams]):
        """di_sampling handles for this engine, one per request (grammars compiled once per object)."""
        with contextlib.ExitStack() as stack:
            by_id: Dict[int, int] = {}
            for p in params:
                if id(p) not in by_id:
                    by_id[id(p)] = stack.enter_context(p._bind(self.handle))
            yield [by_id[id(p)] for p in params]

    def generate(
        self, prompts: Union[Prompt, Sequence[Prompt]], params: ParamsArg = None, *, special: bool = False
    ) -> List[RequestOutput]:
        """Generates for a prompt or a list of prompts (text, or token ids), all submitted at once
        so the engine batches them, and returns one RequestOutput per prompt, in order.

        Args:
            prompts: a prompt or a list of them.
            params: one SamplingParams for all, a list with one per prompt, or None for the
                model's defaults (``default_sampling_params()``).
            special: recognise control tokens written in text prompts (default: plain text).

        Ctrl-C raises KeyboardInterrupt within ~50 ms and cancels the generations.
        """
        plist = self._prompt_list(prompts)
        sps = self._params_list(params, len(plist))
        requests = self._requests([(p, sp, self._adder(p, special)) for p, sp in zip(plist, sps)])
        try:
            with self._bound(sps) as handles:
                return gen.run_blocking(requests, handles)
        finally:
            for r in requests:
                gen._release(r)

    def stream(self, prompt: Prompt, params: Optional[SamplingParams] = None, *, special: bool = False) -> gen.Stream:
        """Starts a generation and returns an iterator of its output deltas (StreamDelta), which
        ends by itself when the generation is over. For n > 1 the deltas of the completions
        interleave (``delta.index`` tells them apart)."""
        sp = self._params_list(params, 1)[0]
        return self._start_stream([(prompt, sp, self._adder(prompt, special))], sp)

    def _start_stream(self, items: List[tuple], sp: SamplingParams) -> gen.Stream:
        run = gen.SyncRun(self._requests(items), keepalive=self)  # releases the sessions if it fails
        try:
            with self._bound([sp]) as handles:
                run.start(handles)
        except BaseException:
            run.close()
            raise
        return gen.Stream(run)

    def chat(
        self,
        messages: Sequence[Message],
        params: Optional[SamplingParams] = None,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> RequestOutput:
        """Generates the assistant's reply to a conversation of OpenAI-style messages
        (``{"role": "system" | "user" | "assistant" | "tool", "content": ...}``; an assistant
        message without content may carry ``tool_calls``), encoded in the model's chat format.

        ``tools`` (OpenAI function definitions) are given to the model as a system message that
        lists them (the model's chat format has no place of its own for them). For several turns
        that keep the model's state, use ``engine.session()``.
        """
        sp = self._params_list(params, 1)[0]
        requests = self._requests([(list(messages), sp, lambda s: add_chat_messages(s, messages, tools))])
        try:
            with self._bound([sp]) as handles:
                return gen.run_blocking(requests, handles)[0]
        finally:
            gen._release(requests[0])

    def chat_stream(
        self,
        messages: Sequence[Message],
        params: Optional[SamplingParams] = None,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> gen.Stream:
        """Like chat(), streaming the reply."""
        sp = self._params_list(params, 1)[0]
        return self._start_stream([(list(messages), sp, lambda s: add_chat_messages(s, messages, tools))], sp)

    def session(self, *, system: Optional[str] = None, keep_cancelled_output: bool = False) -> Session:
        """A conversation whose model state stays on the engine between turns (see Session)."""
        return Session(self, system=system, keep_cancelled_output=keep_cancelled_output)

    # -- asyncio ---------------------------------------------------------------------------------------

    async def agenerate(
        self, prompts: Union[Prompt, Sequence[Prompt]], params: ParamsArg = None, *, special: bool = False
    ) -> List[RequestOutput]:
        """generate() for asyncio: awaits the outputs without blocking the loop. Cancelling the
        awaiting task cancels the generations."""
        plist = self._prompt_list(prompts)
        sps = self._params_list(params, len(plist))
        requests = self._requests([(p, sp, self._adder(p, special)) for p, sp in zip(plist, sps)])
        try:
            with self._bound(sps) as handles:
                return await gen.run_async(self._hubs, 0, requests, handles)
        finally:
            for r in requests:
                gen._release(r)

    def astream(self, prompt: Prompt, params: Optional[SamplingParams] = None, *, special: bool = False) -> gen.AsyncStream:
        """stream() for asyncio (call it in a coroutine): ``async for delta in engine.astream(p)``.
        Driven by the completion queue's file descriptor on the running loop; cancelling the task
        that iterates it cancels the generation."""
        sp = self._params_list(params, 1)[0]
        return self._start_astream([(prompt, sp, self._adder(prompt, special))], sp)

    def _start_astream(self, items: List[tuple], sp: SamplingParams) -> gen.AsyncStream:
        req = self._requests(items)[0]
        try:
            with self._bound([sp]) as handles:
                return gen.start_async_stream(self._hubs, 0, req, handles[0], keepalive=self)
        except BaseException:
            gen._release(req)
            raise

    async def achat(
        self,
        messages: Sequence[Message],
        params: Optional[SamplingParams] = None,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> RequestOutput:
        """chat() for asyncio."""
        sp = self._params_list(params, 1)[0]
        requests = self._requests([(list(messages), sp, lambda s: add_chat_messages(s, messages, tools))])
        try:
            with self._bound([sp]) as handles:
                return (await gen.run_async(self._hubs, 0, requests, handles))[0]
        finally:
            gen._release(requests[0])

    def achat_stream(
        self,
        messages: Sequence[Message],
        params: Optional[SamplingParams] = None,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> gen.AsyncStream:
        """chat_stream() for asyncio."""
        sp = self._params_list(params, 1)[0]
        return self._start_astream([(list(messages), sp, lambda s: add_chat_messages(s, messages, tools))], sp)


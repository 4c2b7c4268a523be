"""Running generations: events of sessions read from completion queues, blocking or with asyncio.

Blocking calls poll their queue in short slices, so the interpreter gets to run signal handlers
between them: Ctrl-C raises KeyboardInterrupt within a slice, and the generations are cancelled
on the way out. Async calls share one queue per (engine, event loop) whose file descriptor the
loop watches (``loop.add_reader``): no thread per request.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence

from ._closing import Closing
from ._lib import native
from .errors import DeepInferError
from .outputs import CompletionOutput, RequestOutput, StreamDelta, TokenLogprob, Usage, finish_reason_name

#: Longest wait of one blocking poll (milliseconds): how long Ctrl-C may take to be seen.
POLL_SLICE_MS = 50

_TOKENS = native.DI_EVENT_TOKENS
_FINISHED = native.DI_EVENT_FINISHED
_PROMPT_LOGPROBS = native.DI_EVENT_PROMPT_LOGPROBS
_DONE = native.DI_EVENT_DONE


def _logprobs(ev: int, tokens: Sequence[int]) -> List[TokenLogprob]:
    lps, ranks, tops = native.di_event_logprobs_view(ev)
    return [TokenLogprob(t, lp, r, top) for t, lp, r, top in zip(tokens, lps, ranks, tops)]


class Request:
    """One session's generation: accumulates its events into a RequestOutput."""

    __slots__ = ("session", "owned", "prompt", "prompt_token_ids", "want_logprobs", "want_prompt_logprobs",
                 "texts", "ids", "completions", "prompt_logprobs", "seed", "done", "started")  # fmt: skip

    def __init__(self, session: int, owned: bool, prompt: Any, prompt_token_ids: List[int], params_handle: int) -> None:
        self.session = session
        self.owned = owned  # freed with the run (else a deepinfer.Session's, kept)
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.want_logprobs = native.di_sampling_get_logprobs(params_handle) >= 0
        self.want_prompt_logprobs = native.di_sampling_get_prompt_logprobs(params_handle) >= 0
        n = native.di_sampling_get_n(params_handle)
        self.texts: List[List[str]] = [[] for _ in range(n)]
        self.ids: List[List[int]] = [[] for _ in range(n)]
        self.completions = [CompletionOutput(i, logprobs=[] if self.want_logprobs else None) for i in range(n)]
        self.prompt_logprobs: Optional[List[TokenLogprob]] = None
        self.seed: Optional[int] = None
        self.done = False
        self.started = False

    def _completion(self, i: int) -> CompletionOutput:
        while i >= len(self.completions):  # never beyond n, but an event is never dropped
            self.texts.append([])
            self.ids.append([])
            self.completions.append(CompletionOutput(len(self.completions)))
        return self.completions[i]

    def apply(self, ev: int, want_delta: bool) -> Optional[StreamDelta]:
        """Reads one event (the caller frees it); returns the delta a stream yields, if any."""
        kind = native.di_event_kind(ev)
        if kind == _DONE:
            self.done = True
            self.seed = native.di_event_seed(ev)
            return None
        if kind not in (_TOKENS, _FINISHED, _PROMPT_LOGPROBS):
            return None  # a kind added by a newer library
        index = native.di_event_completion(ev)
        tokens = native.di_event_tokens_view(ev)
        if kind == _PROMPT_LOGPROBS:
            self.prompt_logprobs = _logprobs(ev, tokens) if self.want_prompt_logprobs else []
            return StreamDelta(index, prompt_logprobs=self.prompt_logprobs) if want_delta else None
        c = self._completion(index)
        text = native.di_event_text_view(ev)
        lps = _logprobs(ev, tokens) if self.want_logprobs and tokens else None
        if text:
            self.texts[index].append(text)
        if tokens:
            self.ids[index].extend(tokens)
        if lps:
            if c.logprobs is None:
                c.logprobs = []
            c.logprobs.extend(lps)
        if kind == _TOKENS:
            return StreamDelta(index, text, tokens, lps) if want_delta else None
        c.finish_reason = finish_reason_name(native.di_event_finish_reason(ev))
        c.usage = Usage(*native.di_event_usage(ev))
        c.seed = native.di_event_seed(ev)
        c.error = native.di_event_error(ev)
        if not want_delta:
            return None
        return StreamDelta(index, text, tokens, lps, c.finish_reason, c.usage, c.seed, c.error)

    def result(self) -> RequestOutput:
        for c, parts, ids in zip(self.completions, self.texts, self.ids):
            c.text = "".join(parts)
            c.token_ids = list(ids)
        return RequestOutput(self.prompt, self.prompt_token_ids, list(self.completions), self.prompt_logprobs, self.seed)


def _release(req: Request) -> None:
    """Frees an owned session (freeing cancels its generation)."""
    if req.owned and req.session:
        session, req.session = req.session, 0
        native.di_session_free(session)


def _cancel(req: Request) -> None:
    if req.started and not req.done and req.session:
        try:
            native.di_session_cancel(req.session)
        except DeepInferError:
            pass  # freed meanwhile: nothing runs


# -- blocking -----------------------------------------------------------------------------------------


class SyncRun:
    """Generations of several sessions, read through one completion queue."""

    def __init__(self, requests: List[Request], keepalive: Any = None) -> None:
        self.requests = requests
        self.keepalive = keepalive  # the Engine: a running stream keeps it open
        self.queue = 0
        self.pending = 0
        self.closed = False
        try:
            self.queue = native.di_queue_create()
            for tag, req in enumerate(requests):
                native.di_session_set_queue(req.session, self.queue, tag)
        except BaseException:
            self.close()
            raise

    def start(self, params_handles: Sequence[int]) -> None:
        """Starts every generation at once (so the engine batches them)."""
        try:
            for req, sp in zip(self.requests, params_handles):
                native.di_session_generate(req.session, sp)
                req.started = True
                self.pending += 1
        except BaseException:
            self.close()
            raise

    def events(self, want_delta: bool) -> Iterator[Optional[StreamDelta]]:
        """Reads events until every generation is done, yielding what apply() returns."""
        while self.pending:
            ev, tag = native.di_queue_poll(self.queue, POLL_SLICE_MS)
            if not ev:
                continue
            try:
                req = self.requests[tag]
                delta = req.apply(ev, want_delta)
                if req.done:
                    self.pending -= 1
            finally:
                native.di_event_free(ev)
            yield delta

    def cancel(self) -> None:
        for req in self.requests:
            _cancel(req)

    def close(self) -> None:
        """Cancels what still runs and releases everything (a Session's session is detached once
        its generation is over, so it can generate again)."""
        if self.closed:
            return
        self.closed = True
        self.cancel()
        for req in self.requests:
            _release(req)
        borrowed = [r for r in self.requests if r.session and r.started and not r.done]
        if borrowed and self.queue:
            # A cancelled generation ends within a step; its DONE must be read before detaching.
            for _ in range(200):
                if all(r.done for r in borrowed):
                    break
                ev, tag = native.di_queue_poll(self.queue, POLL_SLICE_MS)
                if ev:
                    try:
                        self.requests[tag].apply(ev, False)
                    finally:
                        native.di_event_free(ev)
        for req in self.requests:
            if req.session:
                try:
                    native.di_session_set_queue(req.session, None, 0)
                except DeepInferError:
                    pass  # closed engine, or still generating after the wait: left attached
        native.di_queue_free(self.queue)
        self.queue = 0


class Stream(Closing, Iterator[StreamDelta]):
    """An iterator over the output of a running generation, as it is produced.

    It ends by itself when the generation is over. ``cancel()`` (from any thread) stops it: each
    unfinished completion then yields a last delta with finish_reason "cancelled". Use it as a
    context manager, or call ``close()``, to cancel and release it when leaving early. After the
    end, ``result()`` gives the whole output.
    """

    def __init__(self, run: SyncRun) -> None:
        self._run = run
        self._events = run.events(True)
        self._lock = threading.Lock()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> StreamDelta:
        if self._run.closed:
            raise StopIteration
        try:
            for delta in self._events:
                if delta is not None:
                    return delta
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def cancel(self) -> None:
        """Stops the generation (thread-safe); the iteration then ends with "cancelled" deltas."""
        with self._lock:
            if not self._run.closed:
                self._run.cancel()

    def close(self) -> None:
        """Cancels the generation if it still runs and releases its resources."""
        with self._lock:
            self._run.close()

    def result(self) -> RequestOutput:
        """Reads the rest of the stream and returns the whole output."""
        for _ in self:
            pass
        return self._run.requests[0].result()


def run_blocking(requests: List[Request], params_handles: Sequence[int]) -> List[RequestOutput]:
    """Runs the generations to their end and returns their outputs (cancelled on any exception,
    KeyboardInterrupt included)."""
    run = SyncRun(requests)
    try:
        run.start(params_handles)
        for _ in run.events(False):
            pass
    finally:
        run.close()
    return [r.result() for r in requests]


# -- asyncio ------------------------------------------------------------------------------------------


class _Slot:
    """The deltas of one request, waiting to be read by its task."""

    __slots__ = ("request", "items", "waiter", "finished")

    def __init__(self, request: Request, loop: asyncio.AbstractEventLoop) -> None:
        self.request = request
        self.items: Deque[StreamDelta] = collections.deque()
        self.waiter: Optional[asyncio.Future] = None
        self.finished: asyncio.Future = loop.create_future()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class Hub:
    """A completion queue shared by the async requests of one engine on one event loop."""

    #: Events read per wake-up before yielding to the loop (the fd stays readable).
    BURST = 256

    def __init__(self, owner: Dict, key: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._owner = owner
        self._key = key
        self.loop = loop
        self.queue = native.di_queue_create()
        self.fd = native.di_queue_fd(self.queue)
        self.slots: Dict[int, _Slot] = {}
        self._next_tag = 1
        loop.add_reader(self.fd, self._readable)

    def attach(self, req: Request, want_delta: bool) -> int:
        tag = self._next_tag
        self._next_tag += 1
        native.di_session_set_queue(req.session, self.queue, tag)
        slot = _Slot(req, self.loop)
        slot.items = collections.deque() if want_delta else _Discard()  # type: ignore[assignment]
        self.slots[tag] = slot
        return tag

    def detach(self, tag: int) -> None:
        slot = self.slots.pop(tag, None)
        if slot is not None and slot.request.session and (slot.request.done or not slot.request.started):
            try:
                native.di_session_set_queue(slot.request.session, None, 0)
            except DeepInferError:
                pass
        if not self.slots:
            self._shut()

    def _shut(self) -> None:
        if not self.queue:
            return
        if self._owner.get(self._key) is self:
            del self._owner[self._key]
        try:
            self.loop.remove_reader(self.fd)
        except Exception:
            pass  # the loop is closed
        native.di_queue_free(self.queue)
        self.queue = 0

    def _readable(self) -> None:
        for _ in range(self.BURST):
            ev, tag = native.di_queue_poll(self.queue, 0)
            if not ev:
                return
            try:
                slot = self.slots.get(tag)
                if slot is None:
                    continue  # a request given up on: its session is freed or draining
                req = slot.request
                delta = req.apply(ev, True)
                if delta is not None:
                    slot.items.append(delta)
                if req.done and not slot.finished.done():
                    slot.finished.set_result(None)
                slot.wake()
            finally:
                native.di_event_free(ev)


class _Discard(collections.deque):
    """Where agenerate's deltas go: it only needs the accumulated output."""

    def append(self, item: Any) -> None:
        pass


class AsyncStream:
    """An async iterator over the output of a running generation (``async for delta in ...``).

    It ends by itself when the generation is over. Cancelling the task that iterates it cancels
    the generation; so do ``cancel()`` (which lets the iteration end with "cancelled" deltas) and
    ``aclose()`` / leaving ``async with`` early (which release it at once). After the end,
    ``result()`` gives the whole output.
    """

    def __init__(self, hub: Hub, tag: int, keepalive: Any = None) -> None:
        self._keepalive = keepalive  # the Engine: a running stream keeps it open
        self._hub = hub
        self._tag = tag
        self._slot = hub.slots[tag]
        self._closed = False

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> StreamDelta:
        slot = self._slot
        try:
            while not slot.items:
                if slot.request.done or self._closed:
                    self._release()
                    raise StopAsyncIteration
                slot.waiter = self._hub.loop.create_future()
                try:
                    await slot.waiter
                finally:
                    slot.waiter = None
        except StopAsyncIteration:
            raise
        except BaseException:  # task cancelled (CancelledError) or interrupted
            self._release()
            raise
        return slot.items.popleft()

    def cancel(self) -> None:
        """Stops the generation; the iteration then ends with "cancelled" deltas."""
        _cancel(self._slot.request)

    async def aclose(self) -> None:
        """Cancels the generation if it still runs and releases it."""
        self._release()

    def _release(self) -> None:
        if self._closed:
            return
        self._closed = True
        req = self._slot.request
        _cancel(req)
        _release(req)
        if req.owned or req.done:
            self._hub.detach(self._tag)
        else:
            self._detach_when_done()

    def _detach_when_done(self) -> None:
        """A Session's session stays attached until its cancelled generation's DONE arrives."""
        self._slot.finished.add_done_callback(lambda _: self._hub.detach(self._tag))

    async def result(self) -> RequestOutput:
        """Reads the rest of the stream and returns the whole output."""
        async for _ in self:
            pass
        return self._slot.request.result()

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def __del__(self) -> None:
        if not self._closed:
            try:
                self._hub.loop.call_soon_threadsafe(self._release)
            except Exception:
                pass


async def run_async(hubs: Dict, key: Any, requests: List[Request], params_handles: Sequence[int]) -> List[RequestOutput]:
    """Runs the generations on the running loop and returns their outputs; cancelling the awaiting
    task cancels them."""
    hub = get_hub(hubs, key)
    tags = []
    try:
        for req in requests:
            tags.append(hub.attach(req, want_delta=False))
        for req, sp in zip(requests, params_handles):
            native.di_session_generate(req.session, sp)
            req.started = True
        for tag in tags:
            # Shielded: a cancelled task must not cancel the future the hub resolves at DONE.
            await asyncio.shield(hub.slots[tag].finished)
    finally:
        for tag, req in zip(tags, requests):
            _cancel(req)
            _release(req)
            if req.owned or req.done or not req.started:
                hub.detach(tag)
            else:
                hub.slots[tag].finished.add_done_callback(_detacher(hub, tag))
    return [r.result() for r in requests]


def _detacher(hub: Hub, tag: int):
    """A done-callback that detaches a Session's session once its cancelled generation is over."""
    return lambda _future: hub.detach(tag)


def start_async_stream(hubs: Dict, key: Any, req: Request, params_handle: int, keepalive: Any = None) -> AsyncStream:
    hub = get_hub(hubs, key)
    tag = hub.attach(req, want_delta=True)
    try:
        native.di_session_generate(req.session, params_handle)
        req.started = True
    except BaseException:
        _release(req)
        hub.detach(tag)
        raise
    return AsyncStream(hub, tag, keepalive)


def get_hub(hubs: Dict, key: Any) -> Hub:
    """The hub of the running loop (made on first use; it goes when its last request does)."""
    loop = asyncio.get_running_loop()
    hub = hubs.get((key, loop))
    if hub is None:
        hub = hubs[(key, loop)] = Hub(hubs, (key, loop), loop)
    return hub


__all__ = ["Stream", "AsyncStream", "Request", "SyncRun", "run_blocking", "run_async", "start_async_stream"]

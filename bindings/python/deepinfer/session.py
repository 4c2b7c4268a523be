"""Sessions: conversations whose model state stays on the engine between turns, and the mapping
of OpenAI-style chat messages onto the library's chat calls."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Union

from . import _generation as gen
from ._closing import Closing
from ._lib import native
from .errors import Closed, InvalidArgument
from .outputs import RequestOutput
from .sampling import SamplingParams

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Session", "Message", "add_chat_messages"]

#: An OpenAI-style chat message: {"role": ..., "content": ..., "tool_calls": [...]}.
Message = Mapping[str, Any]

_ROLES = {
    "system": native.DI_ROLE_SYSTEM,
    "user": native.DI_ROLE_USER,
    "assistant": native.DI_ROLE_ASSISTANT,
    "tool": native.DI_ROLE_TOOL,
}


def _content(i: int, message: Message) -> Optional[str]:
    c = message.get("content")
    if c is None or isinstance(c, str):
        return c
    if isinstance(c, list):  # content parts: [{"type": "text", "text": ...}]
        texts = []
        for part in c:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise InvalidArgument(f"message {i}: only text content parts are supported")
        return "".join(texts)
    raise InvalidArgument(f"message {i}: content must be a string or a list of text parts")


def _add_message(session: int, i: int, message: Message) -> None:
    role = message.get("role")
    if role not in _ROLES:
        raise InvalidArgument(f"message {i}: unknown role {role!r} (expected system, user, assistant or tool)")
    content = _content(i, message)
    calls = message.get("tool_calls") or []
    if role == "assistant" and content is None and calls:
        for call in calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise InvalidArgument(f"message {i}: a tool call needs a \"function\" with a \"name\"")
            args = fn.get("arguments", "{}")
            native.di_session_add_tool_call(session, fn["name"], args if isinstance(args, str) else json.dumps(args))
        return
    if content is None:
        raise InvalidArgument(f"message {i} ({role}) has no content")
    native.di_session_add_message(session, _ROLES[role], content)


def add_chat_messages(session: int, messages: Sequence[Message], tools: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
    """Appends messages to a session's chat; the library describes the tool definitions (OpenAI's
    format) to the model after the conversation's system messages."""
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidArgument(f"message {i}: expected a dict with \"role\" and \"content\"")
        _add_message(session, i, m)
    if tools:
        native.di_session_set_tools(session, json.dumps(list(tools), ensure_ascii=False))


class Session(Closing):
    """A conversation (or any growing context) whose model state stays on the engine between
    turns, so each turn only processes its new tokens::

        with engine.session(system="You are terse.") as chat:
            print(chat.chat("Hi!").text)
            print(chat.chat("And then?").text)

    A session holds chat messages or raw text/tokens, not both. The output of each finished
    generation (completion 0) joins the context; a cancelled one's joins only with
    ``keep_cancelled_output``. Use a session from one thread at a time (``cancel()`` excepted).
    """

    def __init__(self, engine: "Engine", *, system: Optional[str] = None, keep_cancelled_output: bool = False) -> None:
        self._handle = 0
        self._engine = engine
        with engine._calling() as h:
            self._handle = native.di_session_create(h)
        if keep_cancelled_output:
            self.keep_cancelled_output = True
        if system:
            self.add_message("system", system)

    @property
    def handle(self) -> int:
        """The di_session handle (for the low-level module deepinfer._native)."""
        if not self._handle:
            raise Closed("the session is closed")
        return self._handle

    @property
    def keep_cancelled_output(self) -> bool:
        """Whether a cancelled reply (up to the cancel) joins the conversation, like a chat's stop button."""
        return getattr(self, "_keep", False)

    @keep_cancelled_output.setter
    def keep_cancelled_output(self, keep: bool) -> None:
        native.di_session_set_keep_cancelled_output(self.handle, int(bool(keep)))
        self._keep = bool(keep)

    # -- context --------------------------------------------------------------------------------------

    def add_message(self, role: str, content: str) -> None:
        """Appends a chat message ("system", "user", "assistant" or "tool"); its content is plain text."""
        _add_message(self.handle, 0, {"role": role, "content": content})

    def add_messages(self, messages: Sequence[Message], *, tools: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
        """Appends OpenAI-style messages (and tool definitions), as Engine.chat takes them."""
        add_chat_messages(self.handle, messages, tools)

    def add_tool_call(self, name: str, arguments: Union[str, Mapping[str, Any]]) -> None:
        """Appends a tool call (function name, JSON arguments) of the assistant."""
        native.di_session_add_tool_call(self.handle, name, arguments if isinstance(arguments, str) else json.dumps(arguments))

    def add_text(self, text: str, *, special: bool = False) -> None:
        """Appends raw text (with ``special``, control tokens written in it are recognised)."""
        native.di_session_add_text(self.handle, text, native.DI_TEXT_SPECIAL if special else native.DI_TEXT_PLAIN)

    def add_tokens(self, ids: Sequence[int]) -> None:
        """Appends token ids."""
        native.di_session_add_tokens(self.handle, list(ids))

    @property
    def context_tokens(self) -> List[int]:
        """The context's token ids."""
        return native.di_session_context_tokens(self.handle)

    @property
    def context_length(self) -> int:
        """Tokens in the context."""
        return native.di_session_context_length(self.handle)

    def reset(self) -> None:
        """Empties the context (and the chat) and releases its state."""
        native.di_session_reset(self.handle)

    def cancel(self) -> None:
        """Stops the running generation, if any (from any thread)."""
        if self._handle:
            native.di_session_cancel(self._handle)

    def close(self) -> None:
        """Cancels a running generation and releases the session. Idempotent."""
        handle, self._handle = self._handle, 0
        if handle and native is not None:
            native.di_session_free(handle)

    def __repr__(self) -> str:
        return f"Session(context_length={self.context_length})" if self._handle else "Session(closed)"

    # -- turns ----------------------------------------------------------------------------------------

    def _add_user(self, message: Union[str, Message, Sequence[Message], None]) -> Any:
        if message is None:
            return None
        if isinstance(message, str):
            self.add_message("user", message)
        elif isinstance(message, Mapping):
            self.add_messages([message])
        else:
            self.add_messages(list(message))
        return message

    def _request(self, prompt: Any, params: Optional[SamplingParams]) -> tuple:
        sp = self._engine._params_list(params, 1)[0]
        return gen.Request(self.handle, False, prompt, self.context_tokens, sp._handle), sp

    def generate(self, params: Optional[SamplingParams] = None) -> RequestOutput:
        """Generates from the context (in a chat: the assistant's reply) and returns the output."""
        return self._run(None, params)

    def _run(self, prompt: Any, params: Optional[SamplingParams]) -> RequestOutput:
        req, sp = self._request(prompt, params)
        with self._engine._bound([sp]) as handles:
            return gen.run_blocking([req], handles)[0]

    def stream(self, params: Optional[SamplingParams] = None) -> gen.Stream:
        """Generates from the context, streaming the output."""
        return self._stream(None, params)

    def _stream(self, prompt: Any, params: Optional[SamplingParams]) -> gen.Stream:
        req, sp = self._request(prompt, params)
        run = gen.SyncRun([req], keepalive=self)
        try:
            with self._engine._bound([sp]) as handles:
                run.start(handles)
        except BaseException:
            run.close()
            raise
        return gen.Stream(run)

    def chat(self, message: Union[str, Message, Sequence[Message], None] = None, params: Optional[SamplingParams] = None) -> RequestOutput:
        """Adds a user message (a str) or messages, and generates the assistant's reply, which then
        joins the conversation."""
        return self._run(self._add_user(message), params)

    def chat_stream(
        self, message: Union[str, Message, Sequence[Message], None] = None, params: Optional[SamplingParams] = None
    ) -> gen.Stream:
        """Like chat(), streaming the reply."""
        return self._stream(self._add_user(message), params)

    async def agenerate(self, params: Optional[SamplingParams] = None) -> RequestOutput:
        """generate() for asyncio."""
        return await self._arun(None, params)

    async def _arun(self, prompt: Any, params: Optional[SamplingParams]) -> RequestOutput:
        req, sp = self._request(prompt, params)
        with self._engine._bound([sp]) as handles:
            return (await gen.run_async(self._engine._hubs, 0, [req], handles))[0]

    def astream(self, params: Optional[SamplingParams] = None) -> gen.AsyncStream:
        """stream() for asyncio."""
        return self._astream(None, params)

    def _astream(self, prompt: Any, params: Optional[SamplingParams]) -> gen.AsyncStream:
        req, sp = self._request(prompt, params)
        with self._engine._bound([sp]) as handles:
            return gen.start_async_stream(self._engine._hubs, 0, req, handles[0], keepalive=self)

    async def achat(
        self, message: Union[str, Message, Sequence[Message], None] = None, params: Optional[SamplingParams] = None
    ) -> RequestOutput:
        """chat() for asyncio."""
        return await self._arun(self._add_user(message), params)

    def achat_stream(
        self, message: Union[str, Message, Sequence[Message], None] = None, params: Optional[SamplingParams] = None
    ) -> gen.AsyncStream:
        """chat_stream() for asyncio."""
        return self._astream(self._add_user(message), params)

"""DeepInfer: an embeddable inference engine for DeepSeek-V4-family models, in your own process.

Quick start::

    import deepinfer

    with deepinfer.Engine() as engine:              # the bundled demo model, on GPU if there is one
        params = deepinfer.SamplingParams(temperature=0, max_tokens=16)
        for out in engine.generate(["Hello", "The sky is"], params):
            print(out.outputs[0].text)
        for delta in engine.stream("Once upon a time", params):
            print(delta.text, end="", flush=True)

The package is a thin layer over the C library (deepinfer.h) through the SWIG module
``deepinfer._native``: every check and every message comes from the library.
"""

from __future__ import annotations

from ._generation import AsyncStream, Stream
from ._lib import BUILT_VERSION as __version__
from ._lib import native as _native
from .engine import Engine, EngineInfo, EngineStats, Prompt
from .errors import (
    BackendError,
    BufferTooSmall,
    CapacityError,
    Cancelled,
    Closed,
    DeepInferError,
    GrammarError,
    InternalError,
    InvalidArgument,
    InvalidHandle,
    IoError,
    ModelFormatError,
    NotFound,
    OutOfMemory,
    StateError,
    Timeout,
    Unsupported,
)
from .outputs import CompletionOutput, RequestOutput, StreamDelta, TokenLogprob, Usage
from .sampling import SamplingParams
from .session import Message, Session
from .tokenizer import Tokenizer

__all__ = [
    "__version__",
    "library_version",
    "set_log_level",
    "Engine",
    "EngineInfo",
    "EngineStats",
    "SamplingParams",
    "Session",
    "Stream",
    "AsyncStream",
    "Tokenizer",
    "RequestOutput",
    "CompletionOutput",
    "StreamDelta",
    "TokenLogprob",
    "Usage",
    "Prompt",
    "Message",
    "DeepInferError",
    "InvalidArgument",
    "NotFound",
    "ModelFormatError",
    "Unsupported",
    "OutOfMemory",
    "CapacityError",
    "BufferTooSmall",
    "Cancelled",
    "GrammarError",
    "IoError",
    "BackendError",
    "StateError",
    "Timeout",
    "Closed",
    "InvalidHandle",
    "InternalError",
]

_LOG_LEVELS = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3, "off": 4}


def library_version() -> str:
    """The version of the loaded libdeepinfer ("MAJOR.MINOR.PATCH")."""
    return _native.di_version()


def set_log_level(level: str) -> None:
    """Sets the library's log level (process-wide): "debug", "info", "warn" (default), "error" or
    "off". The library logs to stderr."""
    if level not in _LOG_LEVELS:
        raise InvalidArgument(f"log level {level!r}: expected one of {', '.join(_LOG_LEVELS)}")
    _native.di_set_log_level(_LOG_LEVELS[level])

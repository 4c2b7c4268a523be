"""Exceptions: one class per error code of the C library, all under :class:`DeepInferError`.

Every failing library call raises the class of its code with the library's own message::

    try:
        deepinfer.SamplingParams(top_p=1.5)
    except deepinfer.InvalidArgument as e:
        print(e.code, e)        # 1 top_p=1.5 is outside (0, 1]

A code this package does not know (a newer library may add codes) raises :class:`DeepInferError`
itself, with ``code`` set.
"""

from __future__ import annotations

from typing import Dict, Type

__all__ = [
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
    "error_from_code",
]


class DeepInferError(Exception):
    """An error reported by the DeepInfer library.

    Attributes:
        code: the library's error code (``deepinfer.h``'s ``di_code``; stable across versions).
        message: the library's message, which names what was wrong.
    """

    code: int = -1

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __reduce__(self):  # picklable across processes (multiprocessing, concurrent.futures)
        return (error_from_code, (self.code, self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class InvalidArgument(DeepInferError, ValueError):
    """A parameter is out of range or malformed (the message names it)."""

    code = 1


class NotFound(DeepInferError):
    """A file or key that must exist does not (e.g. a missing model directory)."""

    code = 2


class ModelFormatError(DeepInferError):
    """A checkpoint, config or tokenizer file is malformed."""

    code = 3


class Unsupported(DeepInferError):
    """Valid input that this build or machine cannot handle (the message says what is missing)."""

    code = 4


class OutOfMemory(DeepInferError):
    """Memory ran out."""

    code = 5


class CapacityError(DeepInferError):
    """Larger than the engine's limits (context length, state memory)."""

    code = 6


class BufferTooSmall(DeepInferError):
    """An output buffer was too small (handled inside the bindings; not seen normally)."""

    code = 7


class Cancelled(DeepInferError):
    """The caller asked to stop (e.g. a model load aborted by its progress callback)."""

    code = 8


class GrammarError(DeepInferError):
    """A grammar, JSON schema or regular expression failed to compile (the message says where)."""

    code = 9


class IoError(DeepInferError):
    """A file could not be read."""

    code = 10


class BackendError(DeepInferError):
    """The device failed."""

    code = 11


class StateError(DeepInferError):
    """Not valid in the object's current state (e.g. a session that is already generating)."""

    code = 12


class Timeout(DeepInferError):
    """Reserved by the library (not produced by version 0.2)."""

    code = 13


class Closed(DeepInferError):
    """The engine behind the object was closed (or this process is a fork's child)."""

    code = 14


class InvalidHandle(DeepInferError):
    """A handle was freed, or of the wrong kind (a bug in the caller of the low-level module)."""

    code = 15


class InternalError(DeepInferError):
    """A bug in DeepInfer; please report it."""

    code = 100


_BY_CODE: Dict[int, Type[DeepInferError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        ModelFormatError,
        Unsupported,
        OutOfMemory,
        CapacityError,
        BufferTooSmall,
        Cancelled,
        GrammarError,
        IoError,
        BackendError,
        StateError,
        Timeout,
        Closed,
        InvalidHandle,
        InternalError,
    )
}


def error_from_code(code: int, message: str) -> DeepInferError:
    """The exception for a library error code and message (unknown codes give DeepInferError)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return DeepInferError(message, code)
    return cls(message)

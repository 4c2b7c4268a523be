"""The model's tokenizer (tokenizer.json), usable with or without an engine."""

from __future__ import annotations

import os
from typing import Iterable, List, Union

from ._lib import native

__all__ = ["Tokenizer"]


class Tokenizer:
    """Encodes text to token ids and back.

    ``engine.tokenizer`` is the engine's; ``Tokenizer.from_file(path)`` loads a tokenizer.json (or
    the one in a model directory) without loading a model. Thread-safe.
    """

    def __init__(self, _handle: int) -> None:
        self._handle = _handle

    @classmethod
    def from_file(cls, path: Union[str, os.PathLike]) -> "Tokenizer":
        """Loads a tokenizer.json, or the one in a model directory."""
        return cls(native.di_tokenizer_create(os.fspath(path)))

    @property
    def vocab_size(self) -> int:
        """Largest token id + 1."""
        return native.di_tokenizer_vocab_size(self._handle)

    def encode(self, text: str, *, special: bool = False) -> List[int]:
        """Token ids of ``text``. With ``special``, control tokens written in the text are
        recognised (Hugging Face tokenizers' behaviour); by default they are plain text."""
        flags = native.DI_TEXT_SPECIAL if special else native.DI_TEXT_PLAIN
        return native.di_tokenizer_encode(self._handle, text, flags)

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """The text of token ids (an id outside the vocabulary raises InvalidArgument)."""
        flags = native.DI_DETOK_SKIP_SPECIAL if skip_special_tokens else 0
        return native.di_tokenizer_decode(self._handle, list(ids), flags)

    def close(self) -> None:
        handle, self._handle = self._handle, 0
        if handle and native is not None:
            native.di_tokenizer_free(handle)

    __del__ = close

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})" if self._handle else "Tokenizer(closed)"

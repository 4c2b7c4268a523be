"""The progress bar shown on stderr while a model loads (when stderr is a terminal)."""

from __future__ import annotations

import shutil
import sys
from typing import TextIO


class LoadProgressBar:
    """A one-line bar, redrawn when the percentage changes; erased by ``finish()``."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        self._stream = stream if stream is not None else sys.stderr
        self._percent = -1

    def __call__(self, done: int, total: int) -> None:
        if total <= 0:
            return
        percent = min(100, done * 100 // total)
        if percent == self._percent:
            return
        self._percent = percent
        width = max(10, min(40, shutil.get_terminal_size((80, 20)).columns - len(self._label) - 40))
        filled = width * percent // 100
        bar = "#" * filled + "-" * (width - filled)
        self._stream.write(f"\rloading {self._label} [{bar}] {percent:3d}% ({done / 1e9:.2f} of {total / 1e9:.2f} GB)")
        self._stream.flush()

    def finish(self) -> None:
        if self._percent >= 0:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

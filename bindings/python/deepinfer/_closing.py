"""What each owner of native resources (Engine, Session, Stream) does around its close(): leaving a
``with`` block closes it, and so does the garbage collector, where an error cannot be raised."""

from typing import Self


class Closing:
    """A base for classes with an idempotent close()."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

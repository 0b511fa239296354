"""What a command prints is scrubbed: the last guard of the rule that a key never reaches a
terminal or a CI log. Each reader scrubs what it reads; this catches what none foresaw (a key
pasted into a prompt of a session log, printed by ``audit``)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import TextIO

from ._scrubber import may_hold_secret, scrub_text

__all__ = ["scrubbed_output"]


class _Scrubbing(io.TextIOBase):
    """A text stream that writes through to ``inner`` with key-shaped strings redacted."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(scrub_text(text) if may_hold_secret(text) else text)
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", None) or "utf-8"


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """While active, nothing printed on stdout or stderr holds a key-shaped string."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Scrubbing(out), _Scrubbing(err)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err

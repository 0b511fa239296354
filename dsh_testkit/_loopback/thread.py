"""One asyncio server on a background thread: how the mock server and the recording proxy run
inside a test (``with MockServer() as server: …``) while the test's own code stays synchronous."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ServerThread"]

Serve = Callable[[asyncio.Event, Callable[[str], None]], Awaitable[Any]]
"""``serve(stop, ready)``: serves until ``stop`` is set, calls ``ready(base_url)`` once bound."""


class ServerThread:
    """Runs one ``serve(stop, ready)`` coroutine on its own event loop in a daemon thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.base_url: str | None = None
        """``http://host:port`` while the server runs, else ``None``."""

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, serve: Serve) -> str:
        """Start serving; returns the base URL once bound, or raises what the server raised."""
        self._started.clear()
        self._thread = threading.Thread(
            target=self._run, args=(serve,), name=self._name, daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            error, self._error = self._error, None
            raise error
        assert self.base_url is not None
        return self.base_url

    def _run(self, serve: Serve) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._stop = asyncio.Event()

        def ready(base_url: str) -> None:
            self.base_url = base_url
            self._started.set()

        try:
            loop.run_until_complete(serve(self._stop, ready))
        except BaseException as exc:
            self._error = exc
        finally:
            self._started.set()
            loop.close()

    def stop(self) -> BaseException | None:
        """Stop serving and wait for the thread; returns the error the server failed with, if
        any (a no-op when not running)."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None or loop is None or stop is None:
            return None
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(stop.set)
        thread.join()
        self._thread = None
        self.base_url = None
        error, self._error = self._error, None
        return error

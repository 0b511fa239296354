"""Cooperative cancellation for one turn: every await of the loop races the turn's cancel token.

``Agent.cancel()`` only sets a :class:`CancelToken`; the loop notices at its next await because
each await (a stream chunk, a tool group, a hook, a backoff sleep) goes through a
:class:`CancelGuard`, which cancels the awaited work and raises :class:`Aborted` when the token
fires first. The loop then writes what a cancelled turn owes the log (an aborted finish chunk,
results for every tool call, ``step/end``, ``turn/end``) synchronously, so nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from ._request import CancelToken

__all__ = ["Aborted", "CancelGuard"]

T = TypeVar("T")


class Aborted(Exception):
    """The turn's cancel token fired; carries the token's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"cancelled ({reason})")
        self.reason = reason


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class CancelGuard:
    """Races awaits against one token, reusing a single waiter task for the whole turn."""

    __slots__ = ("_token", "_waiter")

    def __init__(self, token: CancelToken) -> None:
        self._token = token
        self._waiter: asyncio.Task[None] | None = None

    @property
    def token(self) -> CancelToken:
        return self._token

    def check(self) -> None:
        """Raise :class:`Aborted` if the token has fired."""
        if self._token.cancelled:
            raise Aborted(self._token.reason or "user")

    async def __call__(self, awaitable: Awaitable[T]) -> T:
        """The awaitable's result, or :class:`Aborted` once the token fires (the work is cancelled)."""
        if self._token.cancelled:
            # The work is cancelled as it would be had the token fired during the await.
            if isinstance(awaitable, Coroutine):
                awaitable.close()
            elif asyncio.isfuture(awaitable):
                awaitable.cancel()
            self.check()
        coro: Coroutine[Any, Any, T] = (
            awaitable if isinstance(awaitable, Coroutine) else _await(awaitable)
        )
        task = asyncio.ensure_future(coro)
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.ensure_future(self._token.wait())
        try:
            await asyncio.wait((task, self._waiter), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        if task.done():
            return task.result()
        # Only the token firing finishes the waiter.
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise Aborted(self._token.reason or "user")

    async def aclose(self) -> None:
        """Cancel and reap the waiter task (call once the turn is over)."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)

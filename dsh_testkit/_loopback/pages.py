"""The live pages a server answers when they are handed to it: what they are, not how they are made.

The mock server and the recording proxy serve the cache doctor's report of what they saw
(``GET /_dsh/report``: text, or JSON with ``?format=json``) and the Cache Explorer page
(``GET /_dsh/explorer``). Making them takes the doctor and the Explorer, rooms above both
servers; so a server never makes them. Whoever builds a server hands it a :data:`Pages` callable
(``dsh_testkit.explorer.live_pages`` makes one; the ``dsh-testkit serve`` and ``proxy`` commands
and the pytest plugin's fixtures attach it), as httpx hands a transport to a client. A server
without pages answers those paths 404, with the way to attach them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = ["PAGE_PATHS", "LiveAnswer", "Pages", "no_pages_message"]

PAGE_PATHS: Final = frozenset({"/_dsh/report", "/_dsh/explorer"})
"""The paths a server hands to its pages (``GET`` only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveAnswer:
    """One HTTP answer of a live page."""

    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()
    """Besides ``content-type`` and ``content-length``: ``etag``, ``cache-control``."""


Pages: TypeAlias = Callable[[str, str, "str | None"], LiveAnswer]
"""``pages(path, query, if_none_match)``: the answer to ``GET path?query`` for a path of
:data:`PAGE_PATHS`. Called off the server's event loop (it may diagnose a long trace), one call
at a time."""


def no_pages_message(server: str, attach: str) -> str:
    """The 404's words on a server built without pages: ``server`` names it, ``attach`` says
    how to attach them."""
    return (
        f"this {server} serves no live report pages; build it with {attach} "
        "(dsh-testkit serve, dsh-testkit proxy and the pytest plugin's fixtures attach them)"
    )

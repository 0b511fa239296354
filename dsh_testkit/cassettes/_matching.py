"""How a live request meets the recordings: canonical bodies, and the words of a mismatch.

:func:`json_body_matcher` is the vcrpy matcher (canonical JSON, key order ignored), each body made
canonical once; :func:`build_mismatch` words a request that no recording plays (the closest
recording, what differs in this project's vocabulary, what to do, in this kit's flags);
:func:`vcr_suggestions` replaces the advice of vcrpy's own error (for the clients vcrpy patches
itself) with the same flags.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Final

from dsh_core import dumps_canonical, text_difference

from .._diff import chat_view, common_message_prefix, diff_chat
from .._errors import CassetteMismatch

__all__ = [
    "as_sent",
    "body_of",
    "build_mismatch",
    "describe",
    "json_body_matcher",
    "vcr_suggestions",
]


def json_body_matcher(r1: Any, r2: Any) -> None:
    """vcrpy matcher ``json_body``: equal canonical JSON (key order ignored), else equal bytes.

    vcrpy runs it against every recording, twice per request, so each request's canonical body
    is computed once and kept on the request (see :func:`_body_of`). vcrpy passes the live
    request first; the message says where the canonical bodies first differ, with both sides
    visible there (two long bodies that differ at their end do not read alike).
    """
    a, b = body_of(r1), body_of(r2)
    if a.canonical != b.canonical:
        found = text_difference("body", a.text(), b.text(), ("request", "recorded"))
        raise AssertionError(found or "body differs")


class _Body:
    """A request body's canonical form, computed once per body object."""

    __slots__ = ("_text", "canonical", "source")

    def __init__(self, source: Any) -> None:
        self.source = source
        """The body it was computed from (kept, so its identity stays meaningful)."""
        self.canonical = _canonical_body(source)
        self._text: str | None = None

    def text(self) -> str:
        """The canonical body as text, for a message (computed on the first mismatch only)."""
        if self._text is None:
            self._text = _text(self.canonical)
        return self._text


_BODY_MEMO: Final = "_dsh_canonical_body"
"""Attribute of a ``vcr.request.Request`` holding its :class:`_Body`."""


def body_of(request: Any) -> _Body:
    """The request's :class:`_Body`, memoized on the request while its body is the same object
    (assigning a new body, as the scrub hooks do on a copy, computes it afresh)."""
    body = request.body
    memo = getattr(request, _BODY_MEMO, None)
    if isinstance(memo, _Body) and memo.source is body:
        return memo
    memo = _Body(body)
    # A request type without a __dict__ is simply not memoized.
    with contextlib.suppress(AttributeError):
        setattr(request, _BODY_MEMO, memo)
    return memo


def _canonical_body(body: Any) -> Any:
    if body is None or body in (b"", ""):
        return b""
    raw = body if isinstance(body, (bytes, str)) else bytes(body)
    try:
        return dumps_canonical(json.loads(raw), sort_keys=True)
    except ValueError:
        return raw if isinstance(raw, bytes) else raw.encode("utf-8")


def as_sent(body: Any) -> bytes:
    """A stored request body as a client most likely sent it: compact JSON, UTF-8."""
    if body is None or body in (b"", ""):
        return b""
    raw = body if isinstance(body, bytes) else str(body).encode("utf-8")
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(parsed, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def vcr_suggestions(reason: str, record_mode: str) -> list[tuple[str, str | None]]:
    """What vcrpy's own "can't play back" error suggests, in this plugin's flags.

    vcrpy raises that error for the clients it patches itself (``http.client``, ``urllib``,
    ``requests``, ``aiohttp``); its advice names its own API (``record_mode='new_episodes'``,
    ``ignore_localhost``), which a user of this kit cannot pass. Same structure: (text, link).
    """
    add = (
        "record the new request into the cassette: pytest --dsh-record-mode=new_episodes "
        "(use_cassette(mode='new_episodes'))"
    )
    redo = (
        "re-record the cassette from scratch: pytest --dsh-record-mode=rewrite "
        "(use_cassette(mode='rewrite'))"
    )
    if reason == "cassette_not_found":
        return [
            ("Record the cassette first: pytest --dsh-record-mode=once", None),
            ("If you expected it to exist, check --dsh-cassette-dir and the marker's name", None),
        ]
    if reason == "already_played":
        return [(f"The code sends this request more often than it was recorded: {add}", None)]
    if reason == "no_match":
        return [
            (f"If the request changed on purpose, {redo}; or {add}", None),
            (
                "If it differs on every run (a timestamp, a random id), make the code under "
                "test deterministic for the test",
                None,
            ),
        ]
    return [
        (f"To record this request, {add}", None),
        (
            "If this request should not reach a cassette at all, send it outside the cassette "
            "(a loopback server is reachable; --dsh-allowed-hosts=HOST lets a host through "
            "--dsh-block-network)",
            None,
        ),
    ]


def describe(request: Any) -> str:
    return f"{request.method} {request.uri}"


def build_mismatch(
    path: Path, cassette: Any, vcr_request: Any, index: int, match_on: tuple[Any, ...]
) -> CassetteMismatch:
    """The :class:`CassetteMismatch` for a live request no recording plays: the closest
    recording and what differs, in this project's vocabulary."""
    from vcr.matchers import requests_match

    live = cassette.filter_request(vcr_request)
    described = describe(live)
    head = f"cassette {path} has no recording for request {index} (0-based): {described}"
    fix = (
        "What to do: if the change is intended, re-record the cassette from scratch "
        "(pytest --dsh-record-mode=rewrite) or add the new request to it (pytest "
        "--dsh-record-mode=new_episodes); otherwise fix the code that builds the request."
    )
    data = cassette.data
    if not data:
        return CassetteMismatch(
            f"{head}\nThe cassette holds no recordings.\n{fix}",
            path=str(path),
            index=index,
            request=described,
            closest=None,
            closest_index=None,
            diff=(),
        )
    matching = [i for i, (r, _) in enumerate(data) if requests_match(live, r, match_on)]
    if matching:
        listed = ", ".join(str(i) for i in matching)
        return CassetteMismatch(
            f"{head}\nIt matches recorded interaction(s) {listed}, but each was already "
            f"played: the code sends this request more often than it was recorded.\n{fix}",
            path=str(path),
            index=index,
            request=described,
            closest=describe(data[matching[0]][0]),
            closest_index=matching[0],
            diff=(),
        )
    best = min(range(len(data)), key=lambda i: _distance(live, data[i][0], i, index))
    recorded = data[best][0]
    diff = _diff(recorded, live)
    played = " (already played)" if cassette.play_counts[best] else ""
    lines = "".join(f"\n  {line}" for line in diff) or "\n  (no difference in method, URL or body)"
    return CassetteMismatch(
        f"{head}\nClosest recording: interaction {best}{played}, {describe(recorded)}; "
        f"what differs (recorded → request), in order:{lines}\n{fix}",
        path=str(path),
        index=index,
        request=described,
        closest=describe(recorded),
        closest_index=best,
        diff=diff,
    )


def _diff(recorded: Any, live: Any) -> tuple[str, ...]:
    out: list[str] = []
    if recorded.method != live.method:
        out.append(f"method differs: recorded: {recorded.method}, request: {live.method}")
    if recorded.uri != live.uri:
        out.append(f"url differs: recorded: {recorded.uri}, request: {live.uri}")
    a, b = chat_view(recorded.body), chat_view(live.body)
    if a is not None and b is not None:
        out.extend(diff_chat(a, b))
    elif (old := body_of(recorded)).canonical != (new := body_of(live)).canonical:
        body = text_difference("body", old.text(), new.text(), ("recorded", "request"))
        out.append(body or "body differs")
    return tuple(out)


def _distance(live: Any, recorded: Any, position: int, index: int) -> tuple[int, ...]:
    """Sort key: same method and URL first, then fewer differences, longer shared history,
    and the recording at the live request's own position."""
    route = int(recorded.method != live.method) + int(recorded.uri != live.uri)
    a, b = chat_view(recorded.body), chat_view(live.body)
    if a is not None and b is not None:
        differences = len(diff_chat(a, b))
        shared = common_message_prefix(a, b)
    else:
        differences = int(body_of(recorded).canonical != body_of(live).canonical)
        shared = 0
    return (route, differences, -shared, abs(position - index))


def _text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return str(body)

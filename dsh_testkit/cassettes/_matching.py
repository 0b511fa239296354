"""How a live request meets the recordings: canonical bodies, and the words of a mismatch.

:func:`json_body_matcher` is the vcrpy matcher (canonical JSON, key order ignored), each body made
canonical once; :func:`matchers_for` turns a ``match_on`` list into vcrpy matchers (the body one
leaving out the ignored JSON paths) and :func:`request_key` into the index key that finds a
recording in one lookup; :func:`build_mismatch` words a request that no recording plays (the closest
recording, what differs in this project's vocabulary, what to do, in this kit's flags);
:func:`vcr_suggestions` replaces the advice of vcrpy's own error (for the clients vcrpy patches
itself) with the same flags.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Final

from dsh_core._differences import text_difference
from dsh_core._json_text import dumps_canonical

from .._errors import CassetteMismatch
from ..prompt._diff import chat_view, common_message_prefix, diff_chat
from ..scrub._rules import path_matches

__all__ = [
    "as_sent",
    "body_of",
    "build_mismatch",
    "describe",
    "json_body_matcher",
    "matchers_for",
    "request_key",
    "vcr_suggestions",
]

IgnoredPaths = tuple[tuple[str | int, ...], ...]


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

    def __init__(self, source: Any, ignore: IgnoredPaths = ()) -> None:
        self.source = source
        """The body it was computed from (kept, so its identity stays meaningful)."""
        self.canonical = _canonical_body(source, ignore) if ignore else _canonical_body(source)
        self._text: str | None = None

    def text(self) -> str:
        """The canonical body as text, for a message (computed on the first mismatch only)."""
        if self._text is None:
            self._text = _text(self.canonical)
        return self._text


_BODY_MEMO: Final = "_dsh_canonical_body"
"""Attribute of a ``vcr.request.Request`` holding its :class:`_Body`."""


def body_of(request: Any, ignore: IgnoredPaths = ()) -> _Body:
    """The request's :class:`_Body` (without the ``ignore`` JSON paths), memoized on the
    request while its body is the same object (assigning a new body, as the scrub hooks do on a
    copy, computes it afresh)."""
    body = request.body
    memo = getattr(request, _BODY_MEMO, None)
    if isinstance(memo, dict):
        found = memo.get(ignore)
        if isinstance(found, _Body) and found.source is body:
            return found
    else:
        memo = {}
        # A request type without a __dict__ is simply not memoized.
        with contextlib.suppress(AttributeError):
            setattr(request, _BODY_MEMO, memo)
    made = memo[ignore] = _Body(body, ignore)
    return made


def _canonical_body(body: Any, ignore: IgnoredPaths = ()) -> Any:
    if body is None or body in (b"", ""):
        return b""
    raw = body if isinstance(body, (bytes, str)) else bytes(body)
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw if isinstance(raw, bytes) else raw.encode("utf-8")
    if ignore:
        parsed = without_paths(parsed, ignore)
    return dumps_canonical(parsed, sort_keys=True)


def without_paths(value: Any, ignore: IgnoredPaths) -> Any:
    """``value`` (parsed JSON) without the members at the ``ignore`` paths (``*``: any key or
    index); a path that leads nowhere is no error."""

    def walk(item: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(item, dict):
            return {
                k: walk(v, (*path, k))
                for k, v in item.items()
                if not any(path_matches(p, (*path, k)) for p in ignore)
            }
        if isinstance(item, list):
            return [
                walk(v, (*path, i))
                for i, v in enumerate(item)
                if not any(path_matches(p, (*path, i)) for p in ignore)
            ]
        return item

    return walk(value, ())


def matchers_for(match_on: tuple[Any, ...], ignore: IgnoredPaths) -> tuple[Any, ...]:
    """vcrpy matcher callables for ``match_on`` (names of ``CassetteConfig.MATCHERS`` or
    callables): vcrpy's own for the URL parts and headers, canonical JSON for ``body``."""
    import vcr.matchers

    body = json_body_matcher if not ignore else _ignoring_matcher(ignore)
    out = []
    for matcher in match_on:
        if matcher == "body":
            out.append(body)
        elif isinstance(matcher, str):
            out.append(getattr(vcr.matchers, matcher))
        else:
            out.append(matcher)
    return tuple(out)


def _ignoring_matcher(ignore: IgnoredPaths) -> Any:
    def json_body(r1: Any, r2: Any) -> None:
        a, b = body_of(r1, ignore), body_of(r2, ignore)
        if a.canonical != b.canonical:
            found = text_difference("body", a.text(), b.text(), ("request", "recorded"))
            raise AssertionError(found or "body differs")

    return json_body


def request_key(request: Any, match_on: tuple[Any, ...], ignore: IgnoredPaths) -> tuple[Any, ...]:
    """What the named matchers compare, as one hashable key (only for named matchers)."""
    key: list[Any] = []
    for name in match_on:
        if name == "body":
            key.append(body_of(request, ignore).canonical)
        elif name == "headers":
            key.append(tuple(sorted((k.lower(), str(v)) for k, v in request.headers.items())))
        elif name == "query":
            key.append(tuple(request.query))
        else:
            key.append(getattr(request, name))
    return tuple(key)


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
    path: Path,
    cassette: Any,
    vcr_request: Any,
    index: int,
    match_on: tuple[Any, ...],
    ignore: IgnoredPaths = (),
) -> CassetteMismatch:
    """The :class:`CassetteMismatch` for a live request no recording plays: the closest
    recording and what differs, in this project's vocabulary (the ``ignore`` JSON paths left
    out of the bodies compared)."""
    from vcr.matchers import requests_match

    live = cassette.filter_request(vcr_request)
    described = describe(live)
    head = f"cassette {path} has no recording for request #{index + 1}: {described}"
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
        listed = ", ".join(f"#{i + 1}" for i in matching)
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
    best = min(range(len(data)), key=lambda i: _distance(live, data[i][0], i, index, ignore))
    recorded = data[best][0]
    diff = _diff(recorded, live, ignore)
    played = " (already played)" if cassette.play_counts[best] else ""
    lines = "".join(f"\n  {line}" for line in diff) or "\n  (no difference in method, URL or body)"
    volatile = [field for line in diff if (field := _parameter_path(line)) is not None]
    if volatile:
        fix += (
            f"\nIf {', '.join(volatile)} changes on every run (a timestamp, a request id), leave "
            f"it out of matching: ignore_json_paths={volatile!r} in dsh_cassette_config or the "
            "marker (it is still recorded)."
        )
    idle = [_path_text(ignored) for ignored in ignore if not _removes(ignored, recorded, live)]
    if idle:
        fix += (
            f"\nignore_json_paths: nothing in the recording or the request is at "
            f"{', '.join(idle)}; a path names the body's own keys (metadata.request_id, "
            "messages[*].ts)."
        )
    return CassetteMismatch(
        f"{head}\nClosest recording: interaction #{best + 1}{played}, {describe(recorded)}; "
        f"what differs (recorded → request), in order:{lines}\n{fix}",
        path=str(path),
        index=index,
        request=described,
        closest=describe(recorded),
        closest_index=best,
        diff=diff,
    )


_HEADER_PARTS: Final = ("method ", "url ", "model", "system", "tool", "messages", "body")
"""Where a difference line names no request parameter (see :func:`_parameter_path`)."""


def _parameter_path(line: str) -> str | None:
    """The body path of a request parameter a difference line names (``metadata.request_id
    differs: …`` → ``metadata.request_id``); ``None`` for the method, URL, model, system,
    tools and messages, which a test should not match loosely."""
    path = line.split(" differs:", 1)[0] if " differs:" in line else line.split(": only in", 1)[0]
    if path == line or " " in path or path.startswith(_HEADER_PARTS):
        return None
    return path


def _path_text(path: tuple[str | int, ...]) -> str:
    """A parsed JSON path as written (``messages[*].ts``)."""
    text = ""
    for part in path:
        if isinstance(part, int) or (part == "*" and text):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _removes(path: tuple[str | int, ...], *requests: Any) -> bool:
    """Whether ``path`` leaves something out of any of the requests' bodies."""
    return any(body_of(r, (path,)).canonical != body_of(r).canonical for r in requests)


def _compared_body(request: Any, ignore: IgnoredPaths) -> Any:
    """The body as matching compares it: without the ignored paths (as JSON text)."""
    if not ignore:
        return request.body
    canonical = body_of(request, ignore).canonical
    return canonical if isinstance(canonical, bytes) else canonical.encode("utf-8")


def _diff(recorded: Any, live: Any, ignore: IgnoredPaths = ()) -> tuple[str, ...]:
    out: list[str] = []
    if recorded.method != live.method:
        out.append(f"method differs: recorded: {recorded.method}, request: {live.method}")
    if recorded.uri != live.uri:
        out.append(f"url differs: recorded: {recorded.uri}, request: {live.uri}")
    a = chat_view(_compared_body(recorded, ignore))
    b = chat_view(_compared_body(live, ignore))
    if a is not None and b is not None:
        out.extend(diff_chat(a, b))
    elif (old := body_of(recorded, ignore)).canonical != (new := body_of(live, ignore)).canonical:
        body = text_difference("body", old.text(), new.text(), ("recorded", "request"))
        out.append(body or "body differs")
    return tuple(out)


def _distance(
    live: Any, recorded: Any, position: int, index: int, ignore: IgnoredPaths = ()
) -> tuple[int, ...]:
    """Sort key: same method and URL first, then fewer differences, longer shared history,
    and the recording at the live request's own position."""
    route = int(recorded.method != live.method) + int(recorded.uri != live.uri)
    a = chat_view(_compared_body(recorded, ignore))
    b = chat_view(_compared_body(live, ignore))
    if a is not None and b is not None:
        differences = len(diff_chat(a, b))
        shared = common_message_prefix(a, b)
    else:
        differences = int(body_of(recorded, ignore).canonical != body_of(live, ignore).canonical)
        shared = 0
    return (route, differences, -shared, abs(position - index))


def _text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return str(body)

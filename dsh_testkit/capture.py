"""Request capture for any httpx-based agent, and the prefix-stability assertion.

A provider's prefix cache only pays off when every request of a conversation extends the one
before it byte for byte: same model, same tools, same system prompt, earlier messages
untouched. Agents built on this project's core get that from the log; any other agent (the
openai SDK, pydantic-ai, a hand-rolled loop) can be checked from the outside: capture the wire
requests it sends and assert they are prefix-stable::

    capture = RequestCapture()
    client = OpenAI(http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())))
    run_agent(client)
    assert_prefix_stable(capture.requests)

Three ways in, for ``httpx`` and ``httpx2`` (the fork the openai and anthropic SDKs use):
:meth:`RequestCapture.transport` wraps a transport, :meth:`RequestCapture.install` adds an
event hook to an existing client, and :func:`capture_requests` captures every request of every
client inside a ``with`` block (for agents that build their own clients). Credential headers
are redacted as they are captured, so a capture is safe to print.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, overload
from unittest import mock

from dsh_core import GenerateOptions

from ._diff import ChatView, chat_view, chat_view_of_options, diff_chat
from ._errors import PrefixInstability
from ._secrets import scrub_headers
from .traces._errors import CacheUnfriendly

__all__ = [
    "CacheUnfriendly",
    "CapturedRequest",
    "PrefixInstability",
    "RequestCapture",
    "assert_cache_friendly",
    "assert_prefix_stable",
    "capture_requests",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedRequest:
    """One request as it went on the wire (credential headers redacted)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    """Header pairs in wire order; ``Authorization``, ``x-api-key``, cookies are redacted."""
    body: bytes
    """The exact body bytes sent."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON, ``None`` when it is not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def is_chat(self) -> bool:
        """Whether the body is a chat request (a JSON object with a ``messages`` list)."""
        body = self.json
        return isinstance(body, dict) and isinstance(body.get("messages"), list)

    def __repr__(self) -> str:
        return f"CapturedRequest({self.method} {self.url}, {len(self.body)} bytes)"


def _module_of(obj: object) -> ModuleType:
    """``httpx`` or ``httpx2``: the package of the nearest base class from either."""
    for cls in type(obj).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise TypeError(
        f"expected an httpx or httpx2 client or transport, got {type(obj).__qualname__}"
    )


def _captured(request: Any) -> CapturedRequest:
    return CapturedRequest(
        method=request.method,
        url=str(request.url),
        headers=tuple(scrub_headers(request.headers.multi_items())),
        body=bytes(request.content),
    )


_wrapper_classes: dict[str, type[Any]] = {}


def _wrapper_class(mod: ModuleType) -> type[Any]:
    cls = _wrapper_classes.get(mod.__name__)
    if cls is None:

        class CapturingTransport(mod.BaseTransport, mod.AsyncBaseTransport):  # type: ignore[name-defined,misc]
            """Records each request, then hands it to the wrapped transport unchanged."""

            def __init__(self, inner: Any, capture: RequestCapture) -> None:
                self.inner = inner
                self.capture = capture

            def handle_request(self, request: Any) -> Any:
                request.read()
                self.capture.requests.append(_captured(request))
                return self.inner.handle_request(request)

            async def handle_async_request(self, request: Any) -> Any:
                await request.aread()
                self.capture.requests.append(_captured(request))
                return await self.inner.handle_async_request(request)

            def close(self) -> None:
                self.inner.close()

            async def aclose(self) -> None:
                await self.inner.aclose()

        cls = _wrapper_classes[mod.__name__] = CapturingTransport
    return cls


class RequestCapture:
    """The requests an agent sent, in order (``capture.requests``)."""

    def __init__(self) -> None:
        self.requests: list[CapturedRequest] = []

    def transport(self, inner: Any) -> Any:
        """A transport that captures every request, then forwards it to ``inner``.

        ``inner`` is any ``httpx`` or ``httpx2`` transport (``HTTPTransport``,
        ``AsyncHTTPTransport``, ``MockTransport``, …); the wrapper belongs to the same package.
        """
        return _wrapper_class(_module_of(inner))(inner, self)

    def install(self, client: Any) -> Any:
        """Add a request event hook to an ``httpx``/``httpx2`` client (sync or async); returns it.

        Event hooks see the request as the client built it, before transport-level changes.
        """
        mod = _module_of(client)
        hooks = client.event_hooks
        if isinstance(client, mod.AsyncClient):

            async def capture_async(request: Any) -> None:
                await request.aread()
                self.requests.append(_captured(request))

            hooks["request"] = [*hooks.get("request", []), capture_async]
        else:

            def capture_sync(request: Any) -> None:
                request.read()
                self.requests.append(_captured(request))

            hooks["request"] = [*hooks.get("request", []), capture_sync]
        client.event_hooks = hooks
        return client

    def chat_requests(self) -> list[CapturedRequest]:
        """Only the chat requests (JSON bodies with ``messages``), in order."""
        return [r for r in self.requests if r.is_chat]

    def assert_prefix_stable(self) -> None:
        """:func:`assert_prefix_stable` over the captured requests."""
        __tracebackhide__ = True
        assert_prefix_stable(self.requests)

    def assert_cache_friendly(
        self, allow: Iterable[str] = ("below-cache-unit", "provider-miss")
    ) -> None:
        """:func:`assert_cache_friendly` over the captured requests."""
        __tracebackhide__ = True
        assert_cache_friendly(self, allow)

    def clear(self) -> None:
        self.requests.clear()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the captured requests to a ``dsh-trace`` file (credentials stay redacted).

        Any tool that reads traces takes the file (``dsh-testkit cache-report FILE``);
        :meth:`load` reads it back request for request, body bytes included.
        """
        from .traces import TraceWriter

        with TraceWriter(path, source="capture") as writer:
            for index, request in enumerate(self.requests):
                parsed = request.json
                record: dict[str, Any] = {
                    "index": index,
                    "method": request.method,
                    "url": request.url,
                    "headers": [list(pair) for pair in request.headers],
                    "request": parsed,
                }
                text = request.body.decode("utf-8", "surrogateescape")
                if (
                    parsed is None
                    or json.dumps(parsed, ensure_ascii=False, separators=(",", ":")) != text
                ):
                    record["requestText"] = text
                writer.append(record)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RequestCapture:
        """The capture :meth:`save` wrote; :class:`~dsh_testkit.traces.TraceError` otherwise."""
        from .traces import TraceError
        from .traces._file import read_trace_lines

        name = os.fspath(path)
        with open(name, encoding="utf-8") as file:
            header, records, _ = read_trace_lines(file.read(), path=name)
        if header.get("source") != "capture":
            raise TraceError(
                f"a {header.get('source')!r} trace, not a saved capture; read it with "
                "dsh_testkit.traces.load_trace",
                path=name,
            )
        capture = cls()
        for number, record in records:
            try:
                text = record.get("requestText")
                if text is None:
                    text = json.dumps(record["request"], ensure_ascii=False, separators=(",", ":"))
                capture.requests.append(
                    CapturedRequest(
                        method=str(record["method"]),
                        url=str(record["url"]),
                        headers=tuple((str(k), str(v)) for k, v in record["headers"]),
                        body=text.encode("utf-8", "surrogateescape"),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise TraceError(
                    f"line {number}: not a captured request ({type(exc).__name__}: {exc})",
                    path=name,
                ) from None
        return capture

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self) -> Iterator[CapturedRequest]:
        return iter(self.requests)

    @overload
    def __getitem__(self, index: int) -> CapturedRequest: ...
    @overload
    def __getitem__(self, index: slice) -> list[CapturedRequest]: ...
    def __getitem__(self, index: int | slice) -> CapturedRequest | list[CapturedRequest]:
        return self.requests[index]


_SYNC = ("HTTPTransport", "MockTransport", "WSGITransport")
_ASYNC = ("AsyncHTTPTransport", "MockTransport", "ASGITransport")


@contextmanager
def capture_requests() -> Iterator[RequestCapture]:
    """Capture every request any ``httpx``/``httpx2`` client sends inside the block.

    For agents that build their own clients: the standard transports of both packages are
    patched for the duration (requests still go where they were going).
    """
    capture = RequestCapture()
    patches = []
    for name in ("httpx", "httpx2"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for cls_name in _SYNC:
            cls = getattr(mod, cls_name, None)
            if cls is not None:
                patches.append(mock.patch.object(cls, "handle_request", _sync_hook(capture, cls)))
        for cls_name in _ASYNC:
            cls = getattr(mod, cls_name, None)
            if cls is not None:
                patches.append(
                    mock.patch.object(cls, "handle_async_request", _async_hook(capture, cls))
                )
    for patch in patches:
        patch.start()
    try:
        yield capture
    finally:
        for patch in reversed(patches):
            patch.stop()


def _sync_hook(capture: RequestCapture, cls: type[Any]) -> Any:
    original = cls.handle_request

    def handle_request(transport: Any, request: Any) -> Any:
        request.read()
        capture.requests.append(_captured(request))
        return original(transport, request)

    return handle_request


def _async_hook(capture: RequestCapture, cls: type[Any]) -> Any:
    original = cls.handle_async_request

    async def handle_async_request(transport: Any, request: Any) -> Any:
        await request.aread()
        capture.requests.append(_captured(request))
        return await original(transport, request)

    return handle_async_request


def _view(item: Any) -> ChatView | None:
    if isinstance(item, GenerateOptions):
        return chat_view_of_options(item)
    if isinstance(item, CapturedRequest):
        item = item.body
    if isinstance(item, (bytes, str, Mapping)):
        return chat_view(item, use_provider_codec=False)
    raise TypeError(
        f"assert_prefix_stable takes captured requests, wire bodies (bytes, str or parsed JSON) "
        f"or GenerateOptions, got {type(item).__name__}"
    )


def assert_prefix_stable(
    requests: Sequence[CapturedRequest | GenerateOptions | Mapping[str, Any] | bytes | str],
) -> None:
    """Fail unless each chat request extends the one before it.

    "Extends" is what a provider's prefix cache needs: the same ``model``, the same tools (in
    the same order) and the same system prompt, and every earlier message unchanged at the same
    position; new messages may only be appended. The failure (:class:`PrefixInstability`) names
    the request index and the first divergence (``system line 3``, tool ``'grep'`` added,
    ``messages[4].content``). Requests that are not chats (no JSON ``messages`` list: model
    listings, embeddings) are skipped.

    Each request is compared with the previous request of its own conversation: wire bodies
    that share no prefix cache unit (a sub-agent with its own system prompt, two agents on one
    client) are separate conversations and are never compared with each other.
    """
    __tracebackhide__ = True
    open_conversations: list[tuple[int, ChatView, tuple[str, ...] | None]] = []
    for index, item in enumerate(requests):
        view = _view(item)
        if view is None:
            continue
        slot, previous = _conversation_of(item, open_conversations)
        if previous is not None:
            before, prior, _ = previous
            diff = diff_chat(
                prior, view, names=(f"request {before}", f"request {index}"), prefix=True
            )
            if diff:
                raise PrefixInstability(
                    f"request {index} does not extend request {before}, so the provider's prefix "
                    f"cache cannot reuse it; the first divergence:",
                    index=index,
                    diff=diff,
                )
        entry = (index, view, _parts_of(item))
        if slot is None:
            open_conversations.append(entry)
        else:
            open_conversations[slot] = entry


def _parts_of(item: Any) -> tuple[str, ...] | None:
    from .traces import wire_parts

    body = item.json if isinstance(item, CapturedRequest) else item
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    return wire_parts(body) if isinstance(body, Mapping) else None


def _conversation_of(
    item: Any, conversations: list[tuple[int, ChatView, tuple[str, ...] | None]]
) -> tuple[int | None, tuple[int, ChatView, tuple[str, ...] | None] | None]:
    """The open conversation ``item`` continues (its slot and last request), if any."""
    from .traces import DEFAULT_UNIT_TOKENS
    from .traces._model import continuation_score

    parts = _parts_of(item)
    if parts is None:  # GenerateOptions: one conversation
        return (0, conversations[0]) if conversations else (None, None)
    best: int | None = None
    best_shared = 0
    for slot, (_, _, last) in enumerate(conversations):
        if last is None:
            continue
        shared = continuation_score(last, parts, DEFAULT_UNIT_TOKENS)
        if shared > best_shared:
            best, best_shared = slot, shared
    if best is None:
        return None, None
    return best, conversations[best]


DEFAULT_ALLOWED: Final = ("below-cache-unit", "provider-miss")
"""Cause codes :func:`assert_cache_friendly` tolerates unless told otherwise: neither is the
client's doing (a prompt shorter than one cache unit, the provider's best-effort cache)."""


def assert_cache_friendly(
    trace_or_capture: Any,
    allow: Iterable[str] = DEFAULT_ALLOWED,
    *,
    simulate: bool | None = None,
) -> None:
    """Fail unless every conversation of the traffic is friendly to the provider's prefix cache.

    ``trace_or_capture`` is anything :func:`dsh_testkit.traces.trace_of` takes: a
    :class:`RequestCapture`, a trace file, a cassette path, a ``MockDeepSeek``, a list of wire
    bodies. The cache doctor examines each conversation on its own (unrelated conversations are
    never compared) and the failure, :class:`CacheUnfriendly`, lists every finding whose cause
    code is not in ``allow`` — code, request, wire location, sentence and the evidence with the
    differing characters visible around the first difference. Codes: see :data:`dsh_testkit.reports.CAUSE_CODES`;
    an unknown code in ``allow`` is a ``ValueError``.
    """
    __tracebackhide__ = True
    from .reports import CAUSE_CODES, diagnose

    allowed = set(allow)
    unknown = sorted(allowed - set(CAUSE_CODES))
    if unknown:
        raise ValueError(
            f"unknown cause code(s) in allow: {', '.join(unknown)}; known: {', '.join(CAUSE_CODES)}"
        )
    report = diagnose(trace_or_capture, simulate=simulate)
    for conversation in report.conversations:
        failing = [(r, f) for r, f in conversation.findings() if f.code not in allowed]
        if not failing:
            continue
        requests = len({r.index for r, _ in failing})
        lines = [
            f"conversation {conversation.key}: {requests} request(s) are not cache-friendly "
            f"({', '.join(sorted({f.code for _, f in failing}))}):"
        ]
        for r, finding in failing:
            lines.append(
                f"  request #{r.index + 1} {finding.code}"
                + (f" at {finding.where}" if finding.where else "")
                + f": {finding.detail}"
            )
            lines.append(f"    {finding.sentence}")
            lines += [f"    {evidence}" for evidence in finding.evidence]
        if not allowed.issuperset({f.code for _, f in failing}):
            lines.append(
                "  (pass allow=[...] with the codes this agent accepts, e.g. "
                f"allow=[{failing[0][1].code!r}])"
            )
        raise CacheUnfriendly(
            "\n".join(lines), conversation=conversation.key, findings=[f for _, f in failing]
        )

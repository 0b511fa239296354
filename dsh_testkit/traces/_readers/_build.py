"""What every reader shares: building a trace exchange by exchange, scrubbing, decoding text.

A reader finds requests in its format and hands each to :class:`TraceBuilder.add`, which keeps
model requests (a JSON body with a ``messages`` list), skips the rest with one note, leaves out
figures that cannot be true (``_fields.py``), scrubs every string that leaves the reader
(:func:`scrub_exchange`) and numbers the exchanges in trace order.

Scrubbing follows the proxy's rule, whatever recorded the exchange: the credentials the
recording names (an exchange's credential headers' values, its URL's credential query
parameters and password: :func:`exchange_secrets`) are removed in every spelling from every
exchange of it, then everything key-shaped and every credential field: the request (body,
bytes, URL, headers), the answer, the error text and the conversation key alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from dsh_core._json_text import loads_json

from ...scrub._rules import REDACTED, URL_REDACTED
from ...scrub._scrubber import (
    Scrubber,
    credentials_of,
    scrub_headers,
    scrub_json,
    scrub_text,
    scrub_url,
)
from ...scrub._spellings import KnownSecrets
from .._errors import TraceError
from .._model import Exchange, LogEvent, Outcome, Trace, TraceSource, TraceUsage
from .._wire import endpoint_of
from ._fields import STATUS_RANGE, GroupedNotes, is_count, is_time

__all__ = [
    "BOM",
    "CONVERSATION_HEADERS",
    "NO_SECRETS",
    "TraceBuilder",
    "decode_text",
    "exchange_secrets",
    "header_key",
    "json_or_none",
    "scrub_exchange",
    "time_resolution",
    "without_bom",
]

BOM: Final = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some tools (Fiddler, Charles, editors on Windows) start a file
with: skipped when sniffing and reading."""

NO_SECRETS: Final = KnownSecrets(())
_SCRUBBER: Final = Scrubber()


def without_bom(data: bytes) -> bytes:
    """A file's bytes without a leading UTF-8 byte order mark."""
    return data[len(BOM) :] if data.startswith(BOM) else data


CONVERSATION_HEADERS: Final = (
    "x-dsh-conversation",
    "x-deepseek-harness-session-id",
    "x-session-id",
)
"""Request headers read as an explicit conversation key, first found wins: ``x-dsh-conversation``
(ours: any client can set it), the reference harness's session id, a generic session id."""


def header_key(headers: Sequence[tuple[str, str]] | Mapping[str, Any] | None) -> str | None:
    """The explicit conversation key a request's headers carry (:data:`CONVERSATION_HEADERS`)."""
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    lowered: dict[str, str] = {}
    for name, value in pairs:
        text = value[0] if isinstance(value, list) and value else value
        lowered.setdefault(str(name).lower(), str(text))
    for name in CONVERSATION_HEADERS:
        if lowered.get(name):
            return lowered[name]
    return None


def json_or_none(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return loads_json(text.decode("utf-8") if isinstance(text, bytes) else text)
    except ValueError:  # not JSON, or nested deeper than the limit: not a recording
        return None


def json_document(text: str, *, path: str | None, what: str) -> Any:
    """A whole-file JSON document; a :class:`TraceError` saying it does not parse (and where)
    otherwise, so a file cut short is not reported as one of the wrong shape."""
    try:
        return loads_json(text)
    except ValueError as exc:
        raise TraceError(
            f"{what} must be one JSON document; this one does not parse: {exc}", path=path
        ) from None


def decode_text(data: bytes, *, path: str | None, line_based: bool) -> tuple[str, str | None]:
    """A recording's bytes as text, and a note when a torn tail was dropped.

    Files are UTF-8 (a byte order mark is skipped). A line-based file (JSON Lines) whose last line is cut, even inside a
    multi-byte character, loses that line with a note: the recorder stopped while writing it.
    Anything else that is not UTF-8 is a :class:`TraceError` naming the line.
    """
    data = without_bom(data)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        bad = exc.start
    line = data.count(b"\n", 0, bad) + 1
    tail_start = data.rfind(b"\n", 0, bad) + 1
    if line_based and b"\n" not in data[bad:]:
        kept = data[:tail_start].decode("utf-8", "strict")
        return kept, (
            f"an unfinished last line (line {line}, {len(data) - tail_start} bytes, cut inside "
            "a multi-byte character) was dropped: the recording stopped while writing it"
        )
    raise TraceError(f"line {line} is not UTF-8 text (byte {bad})", path=path)


def time_resolution(times: Iterable[float | None]) -> float | None:
    """How finely a recording's times are given: 1 s, 1 ms or finer (``None``: no times)."""
    seen = [t for t in times if t is not None]
    if not seen:
        return None
    if all(float(t).is_integer() for t in seen):
        return 1.0
    if all(abs(t * 1000 - round(t * 1000)) < 1e-6 for t in seen):
        return 0.001
    return 1e-6


def exchange_secrets(
    headers: Iterable[tuple[str, str]] = (), url: str | None = None
) -> tuple[str, ...]:
    """The credentials an exchange names itself, to be removed in every spelling (as the proxy
    does): each credential header's value (and its spellings:
    :func:`~dsh_testkit.scrub._scrubber.credentials_of`), each credential query parameter's value and
    the URL's password. Values already redacted by a recorder are not secrets."""
    found = [c for c in credentials_of(headers) if REDACTED not in c]
    if url and ("?" in url or "@" in url):
        parts = urlsplit(url)
        found.extend(
            value
            for name, value in parse_qsl(parts.query, keep_blank_values=True)
            if _SCRUBBER.is_secret_query_name(name) and value != URL_REDACTED
        )
        if parts.password and parts.password != URL_REDACTED:
            found.append(parts.password)
    return tuple(found)


def _scrubbed_text(text: str, secrets: KnownSecrets) -> str:
    return secrets.text(scrub_text(text))


def _conversation_key(key: str, secrets: KnownSecrets) -> str:
    """A conversation key with secrets removed; one that held a secret keeps a short digest of
    itself, so two conversations keyed by two different secrets stay apart."""
    scrubbed = _scrubbed_text(key, secrets)
    if scrubbed == key:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{scrubbed} #{digest}"


def _content_is_clean(content: bytes, secrets: KnownSecrets) -> bool:
    """Whether scrubbing the request's bytes would change nothing (a cheap pass over the text:
    no key shape, no credential name, none of the known secrets in any spelling)."""
    text = content.decode("utf-8", "surrogateescape")
    return not (secrets and secrets.in_text(text)) and _SCRUBBER.body_is_clean(text, {})


def _scrubbed_content(
    content: bytes, body: Mapping[str, Any], secrets: KnownSecrets
) -> bytes | None:
    """The request's bytes with what was scrubbed from its (scrubbed) ``body`` scrubbed from
    them too; ``None`` when the scrubbed bytes do not read as ``body`` (a credential field the
    text pass cannot see): exact bytes that hold a secret are not kept."""
    scrubbed = _scrubbed_text(content.decode("utf-8", "surrogateescape"), secrets)
    if json_or_none(scrubbed) != body:
        return None
    return scrubbed.encode("utf-8", "surrogateescape")


def scrub_exchange(
    exchange: Exchange,
    secrets: KnownSecrets = NO_SECRETS,
    *,
    shapes: bool = True,
    body_of_content: bool = False,
) -> Exchange:
    """``exchange`` with every string a report could show scrubbed by the proxy's rule (see the
    module docstring): ``secrets`` (:func:`exchange_secrets`) removed in every spelling from its
    URL, headers, body and bytes, answer, error and conversation key, then key shapes and
    credential fields.

    ``shapes=False`` when the body, answer, URL and headers are known to hold no key shape
    already (a line our trace writer scrubbed; spans the OpenTelemetry reader scrubbed): the
    short texts (error, conversation key) are still scrubbed, and the known secrets removed
    everywhere. ``body_of_content=True`` when the body was parsed from the bytes (HAR,
    cassette): bytes with nothing to scrub mean a body with nothing to scrub, and the walk over
    the body is skipped."""
    url = exchange.url
    if url:
        url = secrets.text(scrub_url(url) if shapes else url, URL_REDACTED)
    headers = tuple(scrub_headers(exchange.headers)) if shapes else exchange.headers
    if secrets:
        headers = tuple((name, secrets.text(value)) for name, value in headers)
    content = exchange.content
    clean = content is not None and (not (shapes or secrets) or _content_is_clean(content, secrets))
    if clean and body_of_content:
        body = dict(exchange.body)
    else:
        body = secrets.json(dict(scrub_json(dict(exchange.body)) if shapes else exchange.body))
        if content is not None and not clean:
            content = _scrubbed_content(content, body, secrets)
    response = exchange.response
    if response is not None:
        response = secrets.json(scrub_json(response) if shapes else response)
    error = exchange.error
    conversation = exchange.conversation
    return dataclasses.replace(
        exchange,
        url=url,
        headers=headers,
        body=body,
        content=content,
        response=response,
        error=_scrubbed_text(error, secrets) if error is not None else None,
        conversation=_conversation_key(conversation, secrets) if conversation else conversation,
    )


class TraceBuilder:
    """Collects exchanges; skips non-model requests with one note; leaves out figures that
    cannot be true with one note per kind (``_fields.py``)."""

    def __init__(
        self, source: TraceSource, path: str | None, *, scrubbed: bool = False, keep: bool = True
    ) -> None:
        self.scrubbed = scrubbed
        """Whether the recording's request, answer, URL and headers hold no key shape already
        (a dsh-trace line our writer scrubbed): the known secrets are removed still."""
        self.source: TraceSource = source
        self.path = path
        self.keep = keep
        """Whether :attr:`exchanges` keeps what :meth:`add` returns (``False``: a stream, whose
        reader keeps what it needs of each exchange itself)."""
        self.exchanges: list[Exchange] = []
        self.count = 0
        """Exchanges added so far (kept or not)."""
        self._times: tuple[list[float | None], list[float | None]] = ([], [])
        """Without :attr:`keep`: every exchange's start and end (for :meth:`found_resolution`)."""
        self.skipped = 0
        self.notes: list[str] = []
        self._secrets: dict[str, None] = {}
        """Every credential the recording's exchanges named so far (in order)."""
        self._known = NO_SECRETS
        self._known_at: list[int] = []
        """How many of :attr:`_secrets` each exchange was scrubbed of."""
        self.left_out = GroupedNotes("exchange")
        """Figures left out because they cannot be true, by kind."""
        self.resolution: float | None = None
        """The recording's time resolution when the reader knows it (else measured)."""

    def _usage(self, usage: TraceUsage | None, where: str) -> TraceUsage | None:
        if usage is None:
            return None
        for name, value, optional in (
            ("promptTokens", usage.prompt_tokens, False),
            ("hitTokens", usage.hit_tokens, True),
            ("completionTokens", usage.completion_tokens, True),
        ):
            if not is_count(value) and not (optional and value is None):
                self.left_out.add(
                    "usage-not-count",
                    f"a usage figure is not a token count ({name} = {value!r:.40}); the "
                    "exchange's usage was left out",
                    where,
                )
                return None
        if usage.hit_tokens is not None and usage.hit_tokens > usage.prompt_tokens:
            self.left_out.add(
                "usage-hit-over-prompt",
                "a cache-read count exceeds the input tokens; the cache figure was left out",
                where,
            )
            return dataclasses.replace(usage, hit_tokens=None)
        return usage

    def _time(self, value: float | None, name: str, where: str) -> float | None:
        if value is None or is_time(value):
            return value
        self.left_out.add(
            "time-out-of-range",
            f"a time is not UNIX seconds from 1970 to 2100 ({name} = {value!r:.40}: "
            "milliseconds?); it was left out",
            where,
        )
        return None

    def _status(self, status: int | None, where: str) -> int | None:
        if status is None or status in STATUS_RANGE:
            return status
        self.left_out.add(
            "status-out-of-range",
            f"a status is not an HTTP status (status = {status!r:.40}); it was left out",
            where,
        )
        return None

    def add(
        self,
        *,
        url: str | None,
        body: Any,
        content: bytes | None = None,
        method: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
        status: int | None = None,
        error: str | None = None,
        response: Mapping[str, Any] | None = None,
        usage: TraceUsage | None = None,
        started: float | None = None,
        first_byte: float | None = None,
        finished: float | None = None,
        conversation: str | None = None,
        outcome: Outcome | None = None,
        body_exact: bool = True,
        log_events: tuple[LogEvent, ...] = (),
        where: str | None = None,
        body_of_content: bool = False,
    ) -> Exchange | None:
        """Keep one request (``None`` when it is not a model request: counted as skipped).

        ``where`` names it in notes (``line 3``, ``log.entries[2]``); by default its position.
        ``body_of_content``: the body was parsed from ``content`` (see :func:`scrub_exchange`).
        """
        endpoint = endpoint_of(url, body)
        if endpoint is None:
            self.skipped += 1
            return None
        where = where or f"request {self.count + 1}"
        exchange = Exchange(
            index=self.count,
            endpoint=endpoint,
            url=url or None,
            body=body,
            content=content,
            method=method,
            headers=tuple(headers),
            status=self._status(status, where),
            error=error,
            response=response,
            usage=self._usage(usage, where),
            started=self._time(started, "started", where),
            first_byte=self._time(first_byte, "firstByte", where),
            finished=self._time(finished, "finished", where),
            conversation=conversation if conversation is not None else header_key(headers),
            outcome=outcome,
            body_exact=body_exact,
            log_events=log_events,
        )
        named = [s for s in exchange_secrets(headers, url) if s not in self._secrets]
        if named:
            self._secrets.update(dict.fromkeys(named))
            self._known = KnownSecrets(self._secrets)
        exchange = scrub_exchange(
            exchange, self._known, shapes=not self.scrubbed, body_of_content=body_of_content
        )
        self._known_at.append(len(self._secrets))
        self.count += 1
        if self.keep:
            self.exchanges.append(exchange)
        elif self.resolution is None:
            self._times[0].append(exchange.started)
            self._times[1].append(exchange.finished)
        return exchange

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every credential the exchanges added so far named, in order."""
        return tuple(self._secrets)

    def scrubbed_late(self) -> list[int]:
        """The indexes of the exchanges added before a credential they may hold was named."""
        total = len(self._secrets)
        return [i for i, known_then in enumerate(self._known_at) if known_then < total]

    def trace(self) -> Trace:
        # A credential one exchange names is a secret in the others too (a client repeats its
        # key in a prompt, or sends the header only on some requests): the earlier exchanges
        # lose the ones named after them.
        for i in self.scrubbed_late():
            self.exchanges[i] = scrub_exchange(self.exchanges[i], self._known, shapes=False)
        self._known_at = [len(self._secrets)] * len(self._known_at)
        return Trace(
            exchanges=tuple(self.exchanges),
            source=self.source,
            path=self.path,
            notes=self.final_notes(),
            time_resolution=self.found_resolution(),
        )

    def final_notes(self) -> tuple[str, ...]:
        """The trace's notes once every exchange is added."""
        notes = list(self.notes)
        notes.extend(self.left_out.lines())
        if self.skipped:
            notes.append(
                f"{self.skipped} request(s) that are not model requests (no JSON `messages` "
                "list) were skipped"
            )
        return tuple(notes)

    def found_resolution(self) -> float | None:
        """The recording's time resolution: the reader's, else measured over every exchange."""
        if self.resolution is not None:
            return self.resolution
        if self.keep:
            starts = [e.started for e in self.exchanges]
            ends = [e.finished for e in self.exchanges]
        else:
            starts, ends = self._times
        # A gap is one time minus another: it is as coarse as the coarser of the two.
        found = [r for r in (time_resolution(starts), time_resolution(ends)) if r is not None]
        return max(found) if found else None

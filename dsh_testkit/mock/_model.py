"""The one transport-independent model of the DeepSeek API: a request in, a response plan out.

:class:`MockDeepSeek` is a thin facade over three parts: routing and the request log (here),
request admission (:mod:`._admission`: credential, JSON, the provider's own codec, the meaning
checks of :mod:`._validate`), and answer planning with fault injection (:mod:`._answers`); the
control API lives in :mod:`._control`. The answer to an admitted request is picked by
:mod:`._sources`: the routes (:mod:`._routes`), then the script queue, then the responder
callable, then what the exhausted script says (by default the deterministic
:func:`default_reply`). It never does I/O, so the in-process transport and the loopback server
serve the same behaviour.

Invariants: an invalid request never consumes a script entry; nothing raises out of
:meth:`MockDeepSeek.handle`, whatever the input (an internal failure becomes a 500, and a test
that sees one has found a bug); no credential is ever stored, echoed or logged — every
credential-bearing header is redacted in the request log, and the cache isolation key keeps
only a digest of the key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from dsh_core.providers import MODELS, ModelInfo
from dsh_core.providers._passback import PassbackRule

from .._loopback.guard import is_json_content_type
from ..prompt._cache import PrefixCacheSimulator
from ..prompt._template import PromptRenderer
from ..scrub._scrubber import credentials_of, scrub_json, scrub_text, scrub_url
from ..scrub._spellings import KnownSecrets
from ..traces._file import TraceWriter
from ._admission import (
    MODEL_NOT_EXIST,
    DecodedBody,
    Rejection,
    admit,
    caller_key,
    credentials,
    decode_body,
    redacted_headers,
)
from ._answers import CREATED_EPOCH, AnswerPlanner, context_window_error
from ._api_errors import ApiError
from ._control import control_plan
from ._errors import ScriptError
from ._plan import Emit, HttpRequest, ResponsePlan, json_plan
from ._request import AnsweredBy, Endpoint, MockRequest, ReceivedRequest
from ._routes import Route, RouteAnswer, RouteMatch, TextMatcher
from ._script import ErrorReply, OnExhausted, Reply, Script, ScriptEntry
from ._sources import (
    DEFAULT_CALL_TOOLS_LIMIT,
    SCRIPT_EXHAUSTED_STATUS,
    AnswerSources,
    exhausted_error,
    with_reasoning,
)

if TYPE_CHECKING:
    from ..traces import Trace

__all__ = [
    "DEFAULT_REQUEST_LOG_LIMIT",
    "REQUEST_LOG_FORMAT",
    "REQUEST_LOG_VERSION",
    "MockDeepSeek",
    "Responder",
    "RetiredModels",
]

REQUEST_LOG_FORMAT: Final = "dsh-mock-requests"
"""The header's ``format`` of the request log file (:meth:`MockDeepSeek.log_requests_to`)."""
REQUEST_LOG_VERSION: Final = 1

RetiredModels: TypeAlias = Literal["warn", "refuse"]
"""What the mock does with a model id requested after its announced retirement (the model
table's ``retired_at``, docs/wire.md §1.2): ``warn`` serves it as before and says so in the
request log's ``warnings`` (the pytest plugin shows them); ``refuse`` answers as the API answers
an unknown model (400 "Model Not Exist") and leaves it out of ``GET /models``. Public evidence
disagrees on which the live API did after the date, so ``warn`` is the default."""

Responder: TypeAlias = Callable[[MockRequest], ScriptEntry | None]
"""A callable script (pydantic-ai's ``FunctionModel``, for the DeepSeek wire): it gets every
admitted request that no queued entry answers, as a :class:`MockRequest` (the typed request in
``parsed``, plus derived facts), and returns the entry to answer with, or ``None`` for what the
exhausted script says. Pass it as ``MockDeepSeek(responder)`` or set it with
:meth:`MockDeepSeek.respond_with`."""

DEFAULT_REQUEST_LOG_LIMIT: Final = 1000
"""Requests the log keeps by default; older ones are dropped (and counted)."""
DEFAULT_REQUEST_LOG_BYTES: Final = 256 * 1024 * 1024
"""Request-body bytes the log keeps by default (the newest record is always kept)."""

_CHAT_PATHS: Final = frozenset(
    {"/chat/completions", "/v1/chat/completions", "/beta/chat/completions"}
)
_MODEL_PATHS: Final = frozenset({"/models", "/v1/models"})
_ANTHROPIC_PATHS: Final = frozenset({"/anthropic/v1/messages"})
_CONTROL_PREFIX: Final = "/_dsh"
NOT_JSON_MESSAGE: Final = "Expected request with `Content-Type: application/json`"
"""The live API's 415 body for a model request not declared JSON (docs/wire.md §1.1)."""


class MockDeepSeek:
    """A scripted, validating, cache-simulating model of the DeepSeek API.

    ``script``: a :class:`Script`, entries, or a :data:`Responder` callable. Routes
    (:meth:`route`) answer first, the first that matches; then queued entries, in order; then
    the responder (if any); then ``on_exhausted`` decides (``default``: the deterministic
    :func:`default_reply`; ``error``: a 410 naming the request and why no route matched). In
    thinking mode a :class:`Reply` scripted without reasoning is sent with a short generated
    one (the live API always reasons there). ``seed`` makes ids and timestamps reproducible.
    ``api_keys`` restricts the accepted keys (default: any non-empty key). ``passback`` selects
    the reasoning pass-back rule. ``as_of`` is the date every request is taken to be made on (an
    ISO 8601 date or instant, UTC unless it says otherwise; default ``None``: the machine's
    clock at each request): a model id the model table says was not yet served then is refused
    as the API refuses an unknown model, one retired by then is handled as ``retired_models``
    says (:data:`RetiredModels`), and responses' ``created`` times start there (without it,
    at 2026-01-01, a fixed start that keeps recordings byte-stable). ``cache`` is the prefix-cache simulator (a fresh default one
    when omitted); ``renderer`` the prompt renderer / tokenizer. ``request_log_limit`` caps the
    request log (oldest dropped; :attr:`dropped_requests` counts them) and ``request_log_bytes``
    the request-body bytes it holds (oldest dropped the same way). ``strict_tools`` (the
    default) refuses a reply that calls a tool the request did not offer — the real API never
    does — with a 410 ``MOCK_TOOL_NOT_OFFERED`` error naming the offered tools; ``False`` sends
    such calls as scripted. ``call_tools_limit`` bounds the ``call-tools`` answer: after that many
    answers that call tools (since the last reset) it answers without tools.

    Thread-safe: transports may call :meth:`handle` from any thread.
    """

    def __init__(
        self,
        script: Script | Iterable[ScriptEntry] | Responder | None = None,
        *,
        seed: int = 0,
        api_keys: Collection[str] | None = None,
        passback: PassbackRule = "strict",
        on_exhausted: OnExhausted | None = None,
        cache: PrefixCacheSimulator | None = None,
        renderer: PromptRenderer | None = None,
        request_log_limit: int = DEFAULT_REQUEST_LOG_LIMIT,
        request_log_bytes: int = DEFAULT_REQUEST_LOG_BYTES,
        strict_tools: bool = True,
        call_tools_limit: int = DEFAULT_CALL_TOOLS_LIMIT,
        as_of: str | datetime | None = None,
        retired_models: RetiredModels = "warn",
    ) -> None:
        if isinstance(request_log_limit, bool) or not (
            isinstance(request_log_limit, int) and request_log_limit >= 1
        ):
            raise ValueError(f"request_log_limit must be an integer ≥ 1, got {request_log_limit!r}")
        if isinstance(request_log_bytes, bool) or not (
            isinstance(request_log_bytes, int) and request_log_bytes >= 0
        ):
            raise ValueError(f"request_log_bytes must be an integer ≥ 0, got {request_log_bytes!r}")
        self._log_bytes_limit = request_log_bytes
        self._log_sizes: deque[int] = deque()
        self._log_bytes = 0
        self._lock = threading.RLock()
        self._strict_tools = strict_tools
        self._api_keys = frozenset(api_keys) if api_keys is not None else None
        self._passback: PassbackRule = passback
        self._answers = AnswerPlanner(
            seed=seed,
            cache=cache if cache is not None else PrefixCacheSimulator(),
            renderer=renderer if renderer is not None else PromptRenderer(),
        )
        self._as_of: float | None = None
        self.as_of = as_of
        self.retired_models = retired_models
        self._initial_dates = (self.as_of, self.retired_models)
        self._initial: tuple[ScriptEntry, ...] = ()
        script_exhausted: OnExhausted = "default"
        responder: Responder | None = None
        if isinstance(script, Script):
            self._initial = script.entries
            script_exhausted = script.on_exhausted
        elif callable(script):
            responder = script
        elif script is not None:
            self._initial = tuple(script)
        self._script_path: Path | None = None
        self._on_exhausted_override: OnExhausted | None = on_exhausted
        self._initial_on_exhausted: OnExhausted = on_exhausted or script_exhausted
        self._sources = AnswerSources(
            lock=self._lock,
            initial_on_exhausted=self._initial_on_exhausted,
            call_tools_limit=call_tools_limit,
        )
        self._sources.responder = responder
        self._log_limit = request_log_limit
        self._started = 0.0
        self._pending: dict[int, ReceivedRequest] = {}
        """Records whose answer is still being carried out, by identity."""
        self._request_file: TraceWriter | None = None
        self._request_file_failed = False
        self._requests: deque[ReceivedRequest] = deque(maxlen=request_log_limit)
        self._seq = 0
        self._unlogged_count = 0
        self._unscripted: deque[int] = deque(maxlen=request_log_limit)
        """``seq`` of the logged requests the test's script (queue or routes) did not answer
        (bounded like the log)."""
        self._resets = 0
        self._reset_at: float | None = None
        self.reset()
        self._resets, self._reset_at = 0, None  # building it is no reset

    def __repr__(self) -> str:
        return f"MockDeepSeek(pending={len(self._sources.queue)}, requests={self._seq})"

    @property
    def on_exhausted(self) -> OnExhausted:
        """What answers when no route, queued entry or responder does (see
        :data:`OnExhausted`); settable; :meth:`reset` restores the initial value."""
        return self._sources.on_exhausted

    @on_exhausted.setter
    def on_exhausted(self, value: OnExhausted) -> None:
        if value not in ("default", "error", "repeat-last", "call-tools"):
            raise ScriptError(
                "must be one of default, error, repeat-last, call-tools, got " + repr(value),
                path="onExhausted",
            )
        with self._lock:
            self._sources.on_exhausted = value

    @property
    def as_of(self) -> str | None:
        """The date every request is taken to be made on (ISO 8601, UTC), or ``None`` for the
        machine's clock at each request; settable (a date, an instant or a ``datetime``)."""
        if self._as_of is None:
            return None
        return datetime.fromtimestamp(self._as_of, UTC).isoformat().replace("+00:00", "Z")

    @as_of.setter
    def as_of(self, value: str | datetime | None) -> None:
        when = _instant(value)
        with self._lock:
            self._as_of = when
            self._answers.created_from = CREATED_EPOCH if when is None else int(when)

    @property
    def retired_models(self) -> RetiredModels:
        """What a request naming a retired model id gets (:data:`RetiredModels`); settable."""
        return self._retired_models

    @retired_models.setter
    def retired_models(self, value: RetiredModels) -> None:
        if value not in ("warn", "refuse"):
            raise ScriptError(f"must be 'warn' or 'refuse', got {value!r}", path="retiredModels")
        self._retired_models: RetiredModels = value

    def _dated(self, model: str) -> tuple[ApiError | None, str | None]:
        """The refusal or the warning a model id gets on the request's date (the model table's
        ``served_from`` and ``retired_at``); an id the table does not know is not dated."""
        info = MODELS.get(model)
        if info is None:
            return None, None
        when = self._as_of if self._as_of is not None else time.time()
        status = info.served_at(when)
        if status == "served":
            return None, None
        day = datetime.fromtimestamp(when, UTC).date().isoformat()
        date = (
            f"the request's date is {day} (as_of)"
            if self._as_of is not None
            else f"the request's date is {day} (the machine's clock; set as_of to choose another)"
        )
        if status == "not-yet":
            served = (info.served_from or "")[:10]
            detail = f"model {model!r} is served from {served}; {date}"
            return ApiError(status=400, message=MODEL_NOT_EXIST, detail=detail), None
        said = (
            f"model {model!r} was retired on {(info.retired_at or '')[:10]} (docs/wire.md §1.2); "
            f"{date}; use {_replacement(info)}"
        )
        if self._retired_models == "refuse":
            detail = f"{said} (retired_models='refuse': refused as an unknown model)"
            return ApiError(status=400, message=MODEL_NOT_EXIST, detail=detail), None
        return None, (
            f"{said}. Served as before (retired_models='warn'); the live API may refuse it as an "
            "unknown model (400 Model Not Exist): retired_models='refuse' does"
        )

    # -- scripting ----------------------------------------------------------------------------

    def push(self, *entries: ScriptEntry) -> None:
        """Queue entries; each answers one accepted model request, in order."""
        for entry in entries:
            if not isinstance(entry, (Reply, ErrorReply)):
                raise ScriptError(f"must be a Reply or ErrorReply, got {entry!r}", path="entry")
        with self._lock:
            self._sources.queue.extend(entries)

    def respond_with(self, responder: Responder | None) -> None:
        """Set (or clear) the callable consulted when no route or queued entry answers."""
        if responder is not None and not callable(responder):
            raise ScriptError(
                f"must be a callable (request → Reply, ErrorReply or None) or None, got "
                f"{responder!r}",
                path="responder",
            )
        with self._lock:
            self._sources.responder = responder

    @property
    def responder(self) -> Responder | None:
        """The responder callable, if one is set."""
        return self._sources.responder

    def route(
        self,
        *,
        last_user: TextMatcher | None = None,
        tools: bool | str | Collection[str] | None = None,
        model: TextMatcher | None = None,
        header: tuple[str, TextMatcher | None] | Mapping[str, TextMatcher | None] | None = None,
        endpoint: Literal["chat", "anthropic"] | None = None,
        thinking: bool | None = None,
        after_tool_result: bool | None = None,
        when: Callable[[MockRequest], bool] | None = None,
        respond: RouteAnswer | None = None,
    ) -> Route:
        """Add a route: requests matching every given matcher get its answer (respx's routes).

        ``last_user``: the last user message contains this string (or matches this compiled
        regex); ``tools``: ``True`` (some tool offered), ``False`` (none), a name or names (each
        offered); ``model``: the model id equals it (or matches the regex); ``header``:
        ``(name, value)`` or ``{name: value}`` (a regex, or ``None`` for any value);
        ``endpoint``: ``"chat"`` or ``"anthropic"``; ``thinking`` and ``after_tool_result``:
        the request's thinking mode, whether it ends with tool results; ``when``: a predicate
        of the :class:`MockRequest`. Set the answer with ``respond=`` or
        :meth:`Route.respond` / :meth:`Route.reply`; without one the route answers with the
        default reply. Routes answer before the queued script, in the order they were added.
        """
        if isinstance(header, tuple):
            headers: tuple[tuple[str, TextMatcher | None], ...] = (header,)
        elif isinstance(header, Mapping):
            headers = tuple(header.items())
        elif header is None:
            headers = ()
        else:
            raise ScriptError(
                f"must be (name, value) or {{name: value}}, got {header!r}", path="route.header"
            )
        names: bool | tuple[str, ...] | None
        if tools is None or isinstance(tools, bool):
            names = tools
        elif isinstance(tools, str):
            names = (tools,)
        elif isinstance(tools, Iterable) and not isinstance(tools, Mapping):
            names = tuple(tools)
        else:
            raise ScriptError(
                f"must be True, False, a tool name or tool names, got {tools!r}",
                path="route.tools",
            )
        match = RouteMatch(
            last_user=last_user,
            model=model,
            tools=names,
            headers=headers,
            endpoint=endpoint,
            thinking=thinking,
            after_tool_result=after_tool_result,
            when=when,
        )
        with self._lock:
            route = self._sources.add_route(match)
        if respond is not None:
            route.respond(respond)
        return route

    def add_route_json(self, document: object, *, where: str = "route") -> Route:
        """Add a route from its JSON document (``POST /_dsh/routes``): ``{"match": {...},
        "reply": entry | "call-tools" | "default"}`` or ``"replies": [entries]``; a
        :class:`ScriptError` names the bad field under ``where``."""
        with self._lock:
            return self._sources.add_route_json(document, path=where)

    @property
    def routes(self) -> tuple[Route, ...]:
        """The routes, in the order they match."""
        with self._lock:
            return tuple(self._sources.routes)

    def unused_routes(self) -> tuple[str, ...]:
        """Routes never matched and route answers never used, in words (the strict check)."""
        with self._lock:
            return tuple(self._sources.unused_routes())

    def reset(self) -> None:
        """Back to the initial state: the initial script queued, no routes, ``on_exhausted``,
        ``as_of`` and ``retired_models`` as built, the call-tools bound's count at 0, the request
        log emptied (and its memory freed), an empty cache, the PRNG re-seeded.

        With a script file (:meth:`use_script_file`) the file is read again first; if it no
        longer parses, :class:`ScriptError` is raised and nothing changes."""
        with self._lock:
            if self._script_path is not None:
                script = Script.load(self._script_path)
                self._initial = script.entries
                self._initial_on_exhausted = self._on_exhausted_override or script.on_exhausted
            self._sources.reset(self._initial, self._initial_on_exhausted)
            self._requests = deque(maxlen=self._log_limit)
            self._log_sizes = deque()
            self._log_bytes = 0
            self._seq = 0
            self._unlogged_count = 0
            self._unscripted = deque(maxlen=self._log_limit)
            self._answers.reset()
            self.as_of, self.retired_models = self._initial_dates
            self._resets += 1
            self._reset_at = time.time()

    @property
    def resets(self) -> tuple[int, float | None]:
        """``(count, when)``: how many times the mock was reset (its cache emptied with its
        request log) since it was made, and when the last time was (UNIX time; ``None``:
        never). ``GET /_dsh/requests`` says it beside the log: the log, and the cache, start
        there cold."""
        with self._lock:
            return self._resets, self._reset_at

    def use_script_file(self, path: str | Path) -> None:
        """Make the script file at ``path`` the initial script, read now and again on every
        :meth:`reset` (``POST /_dsh/reset``), and reset. Raises :class:`ScriptError` (nothing
        changed) when the file cannot be read or parsed."""
        with self._lock:
            previous = self._script_path
            self._script_path = Path(path)
            try:
                self.reset()
            except ScriptError:
                self._script_path = previous
                raise

    @property
    def pending(self) -> tuple[ScriptEntry, ...]:
        """Entries still queued (scripted replies not used yet)."""
        with self._lock:
            return tuple(self._sources.queue)

    @property
    def requests(self) -> tuple[ReceivedRequest, ...]:
        """The requests received so far, valid or not (credentials redacted), at most
        ``request_log_limit`` of them: the newest."""
        with self._lock:
            return tuple(self._requests)

    def to_trace(self) -> Trace:
        """The request log as a :class:`~dsh_testkit.traces.Trace`: what the cache doctor,
        the prefix assertions and the wire goldens read (``trace_of(mock)``)."""
        from ..traces._readers._mock_log import records_trace

        return records_trace([r.to_json() for r in self.requests], source="memory")

    @property
    def unlogged_requests(self) -> int:
        """How many requests were answered without a log record since the last reset: every
        request but a POST to a model path (``/models``, other methods, unknown paths)."""
        with self._lock:
            return self._unlogged_count

    @property
    def dropped_requests(self) -> int:
        """How many old records the capped request log dropped since the last reset."""
        with self._lock:
            return self._seq - len(self._requests)

    @property
    def unscripted_requests(self) -> tuple[ReceivedRequest, ...]:
        """Admitted model requests that neither a route nor a queued entry answered (the
        responder, the default reply, ``repeat-last``, ``call-tools`` or the exhausted-script
        error did). Records the capped log dropped are not included."""
        with self._lock:
            wanted = set(self._unscripted)
            return tuple(r for r in self._requests if r.seq in wanted)

    @property
    def request_log_limit(self) -> int:
        """The request log's cap, in records."""
        return self._log_limit

    @property
    def request_log_bytes(self) -> tuple[int, int]:
        """``(request-body bytes the log holds, its cap in bytes)``."""
        with self._lock:
            return self._log_bytes, self._log_bytes_limit

    @property
    def cache(self) -> PrefixCacheSimulator:
        """The prefix-cache simulator answering the usage."""
        return self._answers.cache

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if scripted entries were never used."""
        pending = self.pending
        if pending:
            raise AssertionError(
                f"{len(pending)} scripted entr{'y was' if len(pending) == 1 else 'ies were'} never "
                f"used; the next: {json.dumps(pending[0].to_json())}"
            )

    def assert_all_scripted(self) -> None:
        """Raise ``AssertionError`` if a model request was answered without a queued entry."""
        unscripted = self.unscripted_requests
        if unscripted:
            lines = [
                f"#{r.seq} {r.method} {r.path}: {_last_user_snippet(r.body)}" for r in unscripted
            ]
            raise AssertionError(
                f"{len(unscripted)} request{'' if len(unscripted) == 1 else 's'} arrived with no "
                "scripted reply left:\n  " + "\n  ".join(lines)
            )

    # -- the boundary -------------------------------------------------------------------------

    def handle(self, request: HttpRequest) -> ResponsePlan:
        """Answer one request. Never raises, whatever the request: an internal failure becomes
        an HTTP 500 (a bug to report).

        A request that is logged gets its start time now (or the transport's
        :attr:`HttpRequest.received`); the plan's :meth:`ResponsePlan.complete`, which the
        transports call once the answer is carried out, gives the record its end time and
        appends it to the request log file (:meth:`log_requests_to`)."""
        with self._lock:
            self._started = request.received if request.received is not None else time.time()
            before = self._seq
            try:
                plan = self._route(request)
            except Exception as exc:  # the server must survive any bug in the model
                plan = self._internal_error(request, exc)
            if self._seq != before and self._requests and self._requests[-1].seq == self._seq:
                record = self._requests[-1]
                self._pending[id(record)] = record
                plan = dataclasses.replace(plan, on_complete=self._completion(record))
            return plan

    def _completion(self, record: ReceivedRequest) -> Callable[[], None]:
        done = False

        def complete() -> None:
            nonlocal done
            if done:
                return
            done = True
            finished = dataclasses.replace(record, finished=time.time())
            with self._lock:
                self._pending.pop(id(record), None)
                for i in range(len(self._requests) - 1, -1, -1):
                    if self._requests[i] is record:
                        self._requests[i] = finished
                        break
                self._write_record(finished)

        return complete

    def _write_record(self, record: ReceivedRequest) -> None:
        writer = self._request_file
        if writer is None:
            return
        try:
            writer.append(record.to_json())
        except OSError as exc:  # a full disk: say so once, keep serving
            if not self._request_file_failed:
                self._request_file_failed = True
                print(
                    f"mock DeepSeek: cannot append to the request log file {writer.path}: "
                    f"{exc.strerror or exc}; later records may be missing",
                    file=sys.stderr,
                )

    # -- the request log file -------------------------------------------------------------------

    def log_requests_to(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        """Append every request's record to the file at ``path`` as its answer ends (JSON
        Lines: a ``{"format": "dsh-mock-requests", "version": 1}`` header, then one record per
        line, the same as ``GET /_dsh/requests`` gives, with ``started`` and ``finished``). An
        existing request log is continued; the file has one writer at a time (an exclusive
        lock), each line is written whole and flushed, and a torn last line left by a crash is
        cut off, as the proxy's trace file does (``dsh_testkit.traces._file.TraceWriter``). Readers
        (``dsh-testkit cache-report``) read it while it grows. Raises
        :class:`~dsh_testkit.traces.TraceError` when another writer holds it or it is another
        kind of file (nothing in it changed), ``OSError`` when it cannot be opened."""
        writer = TraceWriter(
            path,
            source="mock",
            fsync=fsync,
            append=True,
            file_format=REQUEST_LOG_FORMAT,
            version=REQUEST_LOG_VERSION,
        )
        with self._lock:
            previous, self._request_file = self._request_file, writer
            self._request_file_failed = False
        if previous is not None:
            previous.close()

    def close_request_log(self) -> None:
        """Write the records still in flight (without an end time) and close the file."""
        with self._lock:
            for record in list(self._pending.values()):
                self._write_record(record)
            self._pending.clear()
            writer, self._request_file = self._request_file, None
        if writer is not None:
            writer.close()

    def _internal_error(self, request: HttpRequest, exc: Exception) -> ResponsePlan:
        secrets = _safe_credentials(request)
        error = ApiError(
            status=500,
            message=f"mock DeepSeek internal error: {scrub_text(_describe(exc), secrets)}",
            type="server_error",
            code="MOCK_INTERNAL_ERROR",
        )
        try:
            self._record(request, "unknown", status=500, error=error)
            trace = "".join(traceback.format_exception(exc))
            print(scrub_text(trace, secrets), file=sys.stderr, end="")
        except Exception:
            pass
        return json_plan(500, error.deepseek_body())

    # -- routing ------------------------------------------------------------------------------

    def _route(self, request: HttpRequest) -> ResponsePlan:
        path = request.path.rstrip("/") or "/"
        if path == _CONTROL_PREFIX or path.startswith(_CONTROL_PREFIX + "/"):
            return control_plan(self, request, path)
        if path in _CHAT_PATHS or path in _ANTHROPIC_PATHS:
            endpoint: Literal["chat", "anthropic"] = "chat" if path in _CHAT_PATHS else "anthropic"
            if request.method != "POST":
                return self._unlogged(
                    ApiError(status=405, message="Method Not Allowed"), endpoint, allow="POST"
                )
            return self._model_request(request, endpoint)
        if path in _MODEL_PATHS:
            if request.method != "GET":
                return self._unlogged(
                    ApiError(status=405, message="Method Not Allowed"), "models", allow="GET"
                )
            return self._models(request)
        endpoint_shape: Endpoint = (
            "anthropic" if path == "/anthropic" or path.startswith("/anthropic/") else "unknown"
        )
        return self._unlogged(
            ApiError(status=404, message=f"Not Found: no endpoint at {path}"), endpoint_shape
        )

    def _unlogged(
        self, error: ApiError, endpoint: Endpoint, *, allow: str | None = None
    ) -> ResponsePlan:
        """An answer to a request that is not a model request (another method, ``/models``, an
        unknown path): counted, not logged, so no page making a browser send GETs (an
        ``<img>``, a favicon) can grow the log or push real records out of it."""
        self._unlogged_count += 1
        extra = (("allow", allow),) if allow else ()
        return self._answers.error_plan(error, endpoint, extra=extra)

    def _reject(
        self,
        request: HttpRequest,
        endpoint: Endpoint,
        error: ApiError,
        *,
        allow: str | None = None,
        body: DecodedBody | None = None,
    ) -> ResponsePlan:
        self._record(request, endpoint, status=error.status, error=error, body=body)
        extra = (("allow", allow),) if allow else ()
        return self._answers.error_plan(error, endpoint, extra=extra)

    # -- /models ------------------------------------------------------------------------------

    def _models(self, request: HttpRequest) -> ResponsePlan:
        try:
            caller_key(request, "models", accepted=self._api_keys)
        except Rejection as reject:
            return self._unlogged(reject.error, "models")
        self._unlogged_count += 1
        data = [
            {"id": m.id, "object": "model", "owned_by": "deepseek"}
            for m in MODELS.values()
            if self._dated(m.id)[0] is None
        ]
        return json_plan(200, {"object": "list", "data": data})

    # -- model requests -----------------------------------------------------------------------

    def _model_request(
        self, request: HttpRequest, endpoint: Literal["chat", "anthropic"]
    ) -> ResponsePlan:
        try:
            key = caller_key(request, endpoint, accepted=self._api_keys)
        except Rejection as reject:
            return self._reject(request, endpoint, reject.error)
        if not is_json_content_type(
            value for name, value in request.headers if name.lower() == "content-type"
        ):
            return self._not_json(request, endpoint)
        # The body's one decode: admission reads its value, the request log keeps it.
        body = decode_body(request.body, dict(request.headers))
        try:
            view = admit(request, endpoint, body=body, seq=self._seq + 1, passback=self._passback)
        except Rejection as reject:
            return self._reject(request, endpoint, reject.error, body=body)
        refused, retired = self._dated(view.model)
        if refused is not None:
            return self._reject(request, endpoint, refused, body=body)
        prompt = self._answers.render_prompt(view)
        overflow = context_window_error(view, prompt.prompt_tokens)
        if overflow is not None:
            return self._reject(request, endpoint, overflow, body=body)
        sources = self._sources
        entry, answered_by, route = sources.pick(view)
        scripted = answered_by in ("route", "script")
        if not scripted:
            self._unscripted.append(self._seq + 1)
        if entry is None:
            error = exhausted_error(view, tuple(sources.routes), secrets=_safe_credentials(request))
            return self._reject(request, endpoint, error, body=body)
        sources.last_entry = entry
        by: dict[str, Any] = {
            "scripted": scripted,
            "answered_by": answered_by,
            "route": None if route is None else route.index,
        }
        if isinstance(entry, ErrorReply):
            plan = self._answers.scripted_error_plan(entry, endpoint)
            self._record(request, endpoint, status=entry.status, entry=entry, body=body, **by)
            return plan
        unoffered = _unoffered_tool_error(entry, view) if self._strict_tools else None
        if unoffered is not None:
            self._record(
                request,
                endpoint,
                status=unoffered.status,
                entry=entry,
                error=unoffered,
                body=body,
                **by,
            )
            return self._answers.error_plan(unoffered, endpoint)
        sent, warning = with_reasoning(entry, view)
        plan, extras = self._answers.reply_plan(sent, view, key, prompt)  # type: ignore[arg-type]
        if sent is not entry:
            extras["generatedReasoning"] = sent.reasoning  # type: ignore[union-attr]
        warnings = [w for w in (retired, warning) if w is not None]
        if warnings:
            extras["warnings"] = warnings
        self._record(request, endpoint, status=200, entry=entry, extras=extras, body=body, **by)
        return plan

    def _not_json(
        self, request: HttpRequest, endpoint: Literal["chat", "anthropic"]
    ) -> ResponsePlan:
        """The live API's answer to a model request whose body is not declared JSON: a 415 whose
        plain-text body is its JSON extractor's own words (docs/wire.md §1.1)."""
        error = ApiError(status=415, message=NOT_JSON_MESSAGE, code="unsupported_media_type")
        self._record(request, endpoint, status=415, error=error)
        return ResponsePlan(
            status=415,
            headers=(
                ("content-type", "text/plain; charset=utf-8"),
                self._answers.trace_header(endpoint),
            ),
            body=(Emit(data=NOT_JSON_MESSAGE.encode("utf-8")),),
        )

    # -- the request log ----------------------------------------------------------------------

    def _record(
        self,
        request: HttpRequest,
        endpoint: Endpoint,
        *,
        status: int,
        entry: ScriptEntry | None = None,
        error: ApiError | None = None,
        scripted: bool = False,
        answered_by: AnsweredBy | None = None,
        route: int | None = None,
        extras: Mapping[str, Any] | None = None,
        body: DecodedBody | None = None,
    ) -> None:
        """Log ``request``; ``body`` is its decode when admission made one (else made here)."""
        if body is None:
            body = decode_body(request.body, dict(request.headers))
        # The one scrubbing rule: the request's own credentials in every spelling, key shapes
        # and credential fields, wherever the log keeps a text (the answer may echo a key).
        secrets = _known_secrets(request)
        headers = tuple(
            (name, scrub_text(value, secrets)) for name, value in redacted_headers(request)
        )
        self._seq += 1
        self._requests.append(
            ReceivedRequest(
                seq=self._seq,
                method=request.method,
                path=scrub_url(request.path, secrets),
                endpoint=endpoint,
                headers=headers,
                body=scrub_json(body.logged, secrets),
                status=status,
                entry=None if entry is None else scrub_json(entry.to_json(), secrets),
                error=None if error is None else scrub_json(error.to_json(), secrets),
                scripted=scripted,
                answered_by=answered_by,
                route=route,
                extras=scrub_json(dict(extras or {}), secrets),  # the answer may echo a key
                started=self._started,
            )
        )
        size = len(request.body)
        if len(self._log_sizes) == self._log_limit:  # the deque just dropped its oldest
            self._log_bytes -= self._log_sizes.popleft()
        self._log_sizes.append(size)
        self._log_bytes += size
        while self._log_bytes > self._log_bytes_limit and len(self._requests) > 1:
            self._requests.popleft()
            self._log_bytes -= self._log_sizes.popleft()


def _instant(value: str | datetime | None) -> float | None:
    """Unix seconds of an ISO 8601 date or instant (UTC unless it says otherwise)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ScriptError(
                f"must be an ISO 8601 date or instant (2026-05-01, 2026-05-01T09:30:00Z), "
                f"got {value!r}",
                path="asOf",
            ) from None
    elif isinstance(value, datetime):
        parsed = value
    else:
        raise ScriptError(f"must be a date string or a datetime, got {value!r}", path="asOf")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _replacement(info: ModelInfo) -> str:
    """What to request instead of a retired id: the id it was an alias of, with the thinking
    mode it had when that one's default differs."""
    target = MODELS.get(info.alias_of or "")
    if target is None:
        return "a current model (GET /models lists them)"
    if info.thinking_default == target.thinking_default:
        return repr(target.id)
    switch = "enabled" if info.thinking_default else "disabled"
    return f'{target.id!r} with "thinking": {{"type": "{switch}"}}'


def _unoffered_tool_error(entry: Reply, view: MockRequest) -> ApiError | None:
    """The mock's refusal of a scripted reply calling a tool the request did not offer: a test
    bug the real API could never produce (it only calls offered tools)."""
    offered = [name for name, _ in view.tools.schemas]
    for call in entry.tool_calls:
        if call.name not in offered:
            return ApiError(
                status=SCRIPT_EXHAUSTED_STATUS,
                message=(
                    f"MOCK_TOOL_NOT_OFFERED: the scripted reply calls the tool {call.name!r}, "
                    "which this request did not offer; offered tools: "
                    + (", ".join(repr(n) for n in offered) if offered else "none")
                ),
                type="invalid_request_error",
                code="MOCK_TOOL_NOT_OFFERED",
            )
    return None


def _last_user_snippet(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                text = content if isinstance(content, str) else json.dumps(content)[:200]
                return repr(text[:120])
    return "(no user message)"


def _known_secrets(request: HttpRequest) -> KnownSecrets:
    """The request's credentials, to be removed from everything the log keeps of it in every
    spelling (as it is, JSON-escaped, percent-encoded, a Basic password; the recording proxy and
    cassettes use the same rule)."""
    return KnownSecrets((*credentials(request), *credentials_of(request.headers)))


def _safe_credentials(request: HttpRequest) -> KnownSecrets:
    try:
        return _known_secrets(request)
    except Exception:
        return KnownSecrets(())


def _describe(exc: Exception) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__

"""The one transport-independent model of the DeepSeek API: a request in, a response plan out.

:class:`MockDeepSeek` routes a request (``/chat/completions`` and ``/v1/…``, ``/models``,
``/anthropic/v1/messages``, the ``/_dsh/…`` control API), authenticates it as the API does,
parses it with the provider's own codec (``dsh_core.providers.deepseek.parse_request`` /
``anthropic.parse_request``: one wire format, one parser), validates what the codec cannot
(:mod:`._validate`), picks the answer (the script queue, then the responder callable, then what
the exhausted script says — by default the deterministic :func:`default_reply`), runs the prompt
through the prefix-cache simulator for its usage, and returns a :class:`ResponsePlan`. It never
does I/O, so the in-process transport and the loopback server serve the same behaviour.

Invariants: an invalid request never consumes a script entry; nothing raises out of
:meth:`MockDeepSeek.handle` (an internal failure becomes a 500); the API key is never stored,
echoed or logged — the cache isolation key keeps only its digest.
"""

from __future__ import annotations

import json
import random
import string
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

from dsh_core import freeze_json, thaw_json
from dsh_core.providers import anthropic as anthropic_codec
from dsh_core.providers import deepseek as deepseek_codec
from dsh_core.providers.deepseek import MODELS, ModelInfo, WireFormatError

from ._api_errors import ApiError, default_error
from ._cache import CacheKey, PrefixCacheSimulator
from ._errors import ScriptError
from ._plan import BodyAction, Emit, Hangup, HttpRequest, Pause, ResponsePlan, Stall
from ._render import (
    KEEP_ALIVE,
    SSE_DONE,
    Completion,
    CompletionToolCall,
    WireUsage,
    anthropic_events,
    anthropic_message,
    chat_chunks,
    chat_completion,
    split_evenly,
    sse_data,
    sse_event,
    tool_input,
)
from ._request import REDACTED, Endpoint, MockRequest, ReceivedRequest, redact
from ._responder import default_reply
from ._script import HttpError, OnExhausted, Reply, Script, ScriptEntry, entry_from_json
from ._template import PromptRenderer, ToolCallSpec
from ._validate import (
    PassbackRule,
    ToolFacts,
    anthropic_thinking,
    chat_thinking,
    check_tool_names,
    validate_anthropic,
    validate_chat,
)

__all__ = ["MockDeepSeek", "Responder", "resolve_model"]

Responder: TypeAlias = Callable[[MockRequest], ScriptEntry | None]
"""A callable script: the entry to answer a validated request with, or ``None`` for the
default answer."""

_CREATED_EPOCH: Final = 1_767_225_600
"""``created`` of the first answer (2026-01-01T00:00:00Z); each answer adds one second, so a
seeded run is byte-for-byte reproducible."""

_ALNUM: Final = string.ascii_letters + string.digits

_CHAT_PATHS: Final = frozenset(
    {"/chat/completions", "/v1/chat/completions", "/beta/chat/completions"}
)
_MODEL_PATHS: Final = frozenset({"/models", "/v1/models"})
_ANTHROPIC_PATHS: Final = frozenset({"/anthropic/v1/messages"})
_CONTROL_PREFIX: Final = "/_dsh/"

_AUTH_FORMAT: Final = (
    "Authentication Fails (auth header format should be Bearer sk-...)"  # [observed]
)
_AUTH_INVALID: Final = "Authentication Fails, Your api key is invalid"  # [observed], key not echoed
_MODEL_NOT_EXIST: Final = "Model Not Exist"  # [observed] wire.md §1.9


def resolve_model(model: str, *, endpoint: Literal["chat", "anthropic"]) -> ModelInfo | None:
    """The model table entry serving ``model``; ``None`` when the API answers "Model Not Exist".

    The Anthropic-format endpoint also maps Claude names (wire.md §3): ``claude-opus*`` →
    ``deepseek-v4-pro``, ``claude-sonnet*`` / ``claude-haiku*`` → ``deepseek-flash``.
    """
    info = MODELS.get(model)
    if info is not None or endpoint == "chat":
        return info
    if model.startswith("claude-opus"):
        return MODELS.get("deepseek-v4-pro")
    if model.startswith(("claude-sonnet", "claude-haiku")):
        return MODELS.get("deepseek-flash")
    return None


class _Reject(Exception):
    """Internal: stop handling a request with this API error."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _last_user(endpoint: Literal["chat", "anthropic"], messages: list[Any]) -> tuple[str, bool]:
    """``(text of the last user message, whether the conversation ends with tool results)``.

    ``messages`` passed the codec: a non-empty list of objects with a role and valid content.
    """
    last = messages[-1]
    if endpoint == "chat":
        after_tool = last["role"] == "tool"
    else:
        content = last["content"]
        after_tool = last["role"] == "user" and any(
            b["type"] == "tool_result" for b in content if isinstance(content, list)
        )
    for message in reversed(messages):
        if message["role"] == "user":
            return _text(message["content"]), after_tool
    return "", after_tool


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p["text"]) for p in content if p["type"] == "text")


class MockDeepSeek:
    """A scripted, validating, cache-simulating model of the DeepSeek API.

    ``script``: a :class:`Script`, entries, or a :data:`Responder` callable. Queued entries answer
    first, in order; then the responder (if any); then ``on_exhausted`` decides (``default``: the
    deterministic :func:`default_reply`). ``seed`` makes ids and timestamps reproducible. ``api_keys`` restricts the accepted keys (default: any non-empty key).
    ``passback`` selects the reasoning pass-back rule. ``cache`` is the prefix-cache simulator
    (a fresh default one when omitted); ``renderer`` the prompt renderer / tokenizer.

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
    ) -> None:
        self._lock = threading.RLock()
        self._seed = seed
        self._api_keys = frozenset(api_keys) if api_keys is not None else None
        self._passback: PassbackRule = passback
        self._cache = cache if cache is not None else PrefixCacheSimulator()
        self._renderer = renderer if renderer is not None else PromptRenderer()
        self._responder: Responder | None = None
        self._initial: tuple[ScriptEntry, ...] = ()
        script_exhausted: OnExhausted = "default"
        if isinstance(script, Script):
            self._initial = script.entries
            script_exhausted = script.on_exhausted
        elif callable(script):
            self._responder = script
        elif script is not None:
            self._initial = tuple(script)
        self.on_exhausted: OnExhausted = on_exhausted or script_exhausted
        """What an empty queue answers (see :data:`OnExhausted`)."""
        self._queue: deque[ScriptEntry] = deque()
        self._requests: list[ReceivedRequest] = []
        self._rng = random.Random(seed)
        self._answers = 0
        self._last_entry: ScriptEntry | None = None
        self.reset()

    def __repr__(self) -> str:
        return f"MockDeepSeek(pending={len(self._queue)}, requests={len(self._requests)})"

    # -- scripting ----------------------------------------------------------------------------

    def push(self, *entries: ScriptEntry) -> None:
        """Queue entries; each answers one accepted model request, in order."""
        for entry in entries:
            if not isinstance(entry, (Reply, HttpError)):
                raise ScriptError(f"must be a Reply or HttpError, got {entry!r}", path="entry")
        with self._lock:
            self._queue.extend(entries)

    def respond_with(self, responder: Responder | None) -> None:
        """Set (or clear) the callable consulted when the queue is empty."""
        with self._lock:
            self._responder = responder

    def reset(self) -> None:
        """Back to the initial state: the initial script queued, no requests recorded, an empty
        cache, the PRNG re-seeded."""
        with self._lock:
            self._queue = deque(self._initial)
            self._requests = []
            self._rng = random.Random(self._seed)
            self._answers = 0
            self._last_entry = None
            self._cache.clear()

    @property
    def pending(self) -> tuple[ScriptEntry, ...]:
        """Entries still queued."""
        with self._lock:
            return tuple(self._queue)

    @property
    def requests(self) -> tuple[ReceivedRequest, ...]:
        """Every request received so far, valid or not (keys redacted)."""
        with self._lock:
            return tuple(self._requests)

    @property
    def cache(self) -> PrefixCacheSimulator:
        """The prefix-cache simulator answering the usage."""
        return self._cache

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if scripted entries were never used."""
        pending = self.pending
        if pending:
            raise AssertionError(
                f"{len(pending)} scripted entr{'y was' if len(pending) == 1 else 'ies were'} never "
                f"used; the next: {json.dumps(pending[0].to_json())}"
            )

    # -- the boundary -------------------------------------------------------------------------

    def handle(self, request: HttpRequest) -> ResponsePlan:
        """Answer one request. Never raises: an internal failure becomes an HTTP 500."""
        with self._lock:
            try:
                return self._route(request)
            except Exception as exc:  # the server must survive any bug in the model
                secret = self._secret(request)
                detail = redact(f"{type(exc).__name__}: {exc}", secret)
                error = ApiError(
                    status=500,
                    message=f"mock DeepSeek internal error: {detail}",
                    type="server_error",
                    code="MOCK_INTERNAL_ERROR",
                )
                self._record(request, "unknown", status=500, error=error)
                trace = "".join(traceback.format_exception(exc))
                print(redact(trace, secret), file=sys.stderr, end="")
                return self._json_plan(500, error.deepseek_body())

    # -- routing ------------------------------------------------------------------------------

    def _route(self, request: HttpRequest) -> ResponsePlan:
        path = request.path.rstrip("/") or "/"
        if path.startswith(_CONTROL_PREFIX):
            return self._control(request, path)
        if path in _CHAT_PATHS or path in _ANTHROPIC_PATHS:
            endpoint: Literal["chat", "anthropic"] = "chat" if path in _CHAT_PATHS else "anthropic"
            if request.method != "POST":
                return self._reject(
                    request,
                    endpoint,
                    ApiError(status=405, message="Method Not Allowed"),
                    allow="POST",
                )
            return self._model_request(request, endpoint)
        if path in _MODEL_PATHS:
            if request.method != "GET":
                return self._reject(
                    request,
                    "models",
                    ApiError(status=405, message="Method Not Allowed"),
                    allow="GET",
                )
            return self._models(request)
        return self._reject(
            request,
            "unknown",
            ApiError(status=404, message=f"Not Found: no endpoint at {path}"),
        )

    def _reject(
        self,
        request: HttpRequest,
        endpoint: Endpoint,
        error: ApiError,
        *,
        allow: str | None = None,
    ) -> ResponsePlan:
        self._record(request, endpoint, status=error.status, error=error)
        if endpoint == "anthropic":
            body = error.anthropic_body(request_id=self._request_id())
        else:
            body = error.deepseek_body()
        extra = (("allow", allow),) if allow else ()
        return self._json_plan(error.status, body, extra)

    # -- auth ---------------------------------------------------------------------------------

    @staticmethod
    def _secret(request: HttpRequest) -> str | None:
        auth = request.header("authorization")
        if auth is not None:
            scheme, _, value = auth.strip().partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                return value.strip()
        key = request.header("x-api-key")
        if key is not None and key.strip():
            return key.strip()
        return None

    def _authenticate(self, request: HttpRequest, endpoint: Endpoint) -> str:
        auth = request.header("authorization")
        key: str | None = None
        if auth is not None:
            scheme, _, value = auth.strip().partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                key = value.strip()
        if key is None and endpoint == "anthropic":
            header = request.header("x-api-key")
            key = header.strip() if header and header.strip() else None
        if key is None:
            raise _Reject(ApiError(status=401, message=_AUTH_FORMAT, type="authentication_error"))
        if self._api_keys is not None and key not in self._api_keys:
            raise _Reject(ApiError(status=401, message=_AUTH_INVALID, type="authentication_error"))
        return key

    # -- /models ------------------------------------------------------------------------------

    def _models(self, request: HttpRequest) -> ResponsePlan:
        try:
            self._authenticate(request, "models")
        except _Reject as reject:
            return self._reject(request, "models", reject.error)
        self._record(request, "models", status=200)
        data = [{"id": m.id, "object": "model", "owned_by": "deepseek"} for m in MODELS.values()]
        return self._json_plan(200, {"object": "list", "data": data})

    # -- model requests -----------------------------------------------------------------------

    def _model_request(
        self, request: HttpRequest, endpoint: Literal["chat", "anthropic"]
    ) -> ResponsePlan:
        try:
            key = self._authenticate(request, endpoint)
            body = self._decode(request)
            view = self._validate(request, endpoint, body)
        except _Reject as reject:
            return self._reject(request, endpoint, reject.error)
        entry, scripted = self._next_entry(view)
        if entry is None:
            error = ApiError(
                status=500,
                message=(
                    "MOCK_SCRIPT_EXHAUSTED: the script has no entry left for this request "
                    "(push more entries, or use onExhausted 'default' or 'repeat-last')"
                ),
                type="server_error",
                code="MOCK_SCRIPT_EXHAUSTED",
            )
            return self._reject(request, endpoint, error)
        self._last_entry = entry
        if isinstance(entry, HttpError):
            plan = self._error_plan(entry, endpoint)
            self._record(request, endpoint, status=entry.status, entry=entry, scripted=scripted)
            return plan
        plan, extras = self._reply_plan(entry, view, key)
        self._record(request, endpoint, status=200, entry=entry, scripted=scripted, extras=extras)
        return plan

    @staticmethod
    def _decode(request: HttpRequest) -> Any:
        try:
            text = request.body.decode("utf-8")
            return json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            raise _Reject(  # axum's wording for a body that is not JSON
                ApiError(status=400, message=f"Failed to parse the request body as JSON: {exc}")
            ) from None

    def _validate(
        self, request: HttpRequest, endpoint: Literal["chat", "anthropic"], body: Any
    ) -> MockRequest:
        codec = deepseek_codec if endpoint == "chat" else anthropic_codec
        if not isinstance(body, Mapping):
            # The codec words the refusal of a non-object body (from the raw bytes).
            body = request.body
        names_error = (
            check_tool_names(body, endpoint=endpoint) if isinstance(body, Mapping) else None
        )
        if names_error is not None:
            raise _Reject(names_error)
        try:
            parsed: Any = codec.parse_request(body)
        except WireFormatError as exc:
            raise _Reject(
                ApiError(
                    status=400,
                    message=f"Failed to deserialize the JSON body into the target type: {exc}",
                    param=exc.param or None,
                )
            ) from None
        info = resolve_model(parsed.model, endpoint=endpoint)
        if info is None:
            raise _Reject(ApiError(status=400, message=_MODEL_NOT_EXIST))
        facts: ToolFacts
        if endpoint == "chat":
            thinking = chat_thinking(body, default=info.thinking_default)
            facts, error = validate_chat(
                body,
                thinking=thinking,
                max_output_tokens=info.max_output_tokens,
                passback=self._passback,
            )
            user_id = body.get("user_id")
        else:
            thinking = anthropic_thinking(body, default=info.thinking_default)
            facts, error = validate_anthropic(
                body, thinking=thinking, max_output_tokens=info.max_output_tokens
            )
            metadata = body.get("metadata")
            user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if error is not None:
            raise _Reject(error)
        last_text, after_tool = _last_user(endpoint, body["messages"])
        return MockRequest(
            seq=len(self._requests) + 1,
            endpoint=endpoint,
            path=request.path,
            body=freeze_json(body, path="body"),
            parsed=parsed,
            model=parsed.model,
            stream=bool(body.get("stream")),
            thinking=thinking,
            tools=facts,
            user_id=user_id if isinstance(user_id, str) else None,
            last_user_text=last_text,
            after_tool_result=after_tool,
        )

    def _next_entry(self, view: MockRequest) -> tuple[ScriptEntry | None, bool]:
        if self._queue:
            return self._queue.popleft(), True
        if self._responder is not None:
            answer = self._responder(view)
            if answer is not None:
                if not isinstance(answer, (Reply, HttpError)):
                    raise ScriptError(
                        f"a responder must return a Reply, an HttpError or None, got {answer!r}",
                        path="responder",
                    )
                return answer, False
        if self.on_exhausted == "error":
            return None, False
        if self.on_exhausted == "repeat-last" and self._last_entry is not None:
            return self._last_entry, False
        return default_reply(view), False

    # -- answers ------------------------------------------------------------------------------

    def _token(self, size: int) -> str:
        return "".join(self._rng.choice(_ALNUM) for _ in range(size))

    def _uuid(self) -> str:
        value = self._rng.getrandbits(128)
        text = f"{value:032x}"
        return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-a{text[17:20]}-{text[20:32]}"

    def _request_id(self) -> str:
        return f"req_{self._token(24)}"

    def _completion(
        self, entry: Reply, view: MockRequest, key: str
    ) -> tuple[Completion, dict[str, Any]]:
        self._answers += 1
        calls: list[CompletionToolCall] = []
        for index, call in enumerate(entry.tool_calls):
            if call.id is not None:
                call_id = call.id
            elif view.endpoint == "chat":
                call_id = f"call_{index:02d}_{self._token(24)}"
            else:
                call_id = f"toolu_{self._token(24)}"
            calls.append(
                CompletionToolCall(
                    id=call_id,
                    name=call.name,
                    arguments=call.arguments,
                    fragments=tuple(split_evenly(call.arguments, call.fragments)),
                )
            )
        renderer = self._renderer
        # The renderer reads the frozen body as it is (FrozenDict and FrozenList are a dict and
        # a list): no per-request copy.
        if view.endpoint == "chat":
            prompt = renderer.render_chat(view.body, thinking=view.thinking)
            sent_back: list[ToolCallSpec] = [(c.name, c.arguments) for c in entry.tool_calls]
        else:
            prompt = renderer.render_anthropic(view.body, thinking=view.thinking)
            # The next request carries ``tool_use.input`` as the object this answer gives (the
            # parsed arguments, ``{}`` when they are not an object), which the renderer spells
            # ``json.dumps(input)`` — not the scripted string, whatever its spacing.
            sent_back = [(c.name, tool_input(c.arguments)) for c in entry.tool_calls]
        cache_key = CacheKey.for_request(key, view.user_id)
        lookup = self._cache.lookup(cache_key, prompt)
        rendered = renderer.render_completion(
            reasoning=entry.reasoning or "",
            content=entry.text,
            tool_calls=sent_back,
            thinking=view.thinking,
        )
        # A reset or hang never reached the model; a cut answer read the input but its output
        # was not delivered, so only input-side units persist; a full answer persists both.
        if entry.fault not in ("reset", "hang"):
            cut = entry.fault in ("empty-body", "disconnect", "eof", "stall")
            self._cache.commit(lookup, None if cut else rendered)
        usage = WireUsage(
            prompt_tokens=lookup.usage.prompt_tokens,
            completion_tokens=rendered.completion_tokens,
            cache_hit_tokens=lookup.usage.hit_tokens,
            reasoning_tokens=rendered.reasoning_tokens if view.thinking else None,
        )
        completion = Completion(
            id=self._uuid(),
            created=_CREATED_EPOCH + self._answers - 1,
            model=view.model,
            thinking=view.thinking,
            usage=usage,
            text=entry.text,
            reasoning=entry.reasoning,
            tool_calls=tuple(calls),
            finish_reason=entry.effective_finish_reason,
            chunk_size=entry.chunk_size,
        )
        extras = {
            "isolationKey": f"{cache_key.account}/{cache_key.user_id}",
            "promptTokens": usage.prompt_tokens,
            "cacheHitTokens": usage.cache_hit_tokens,
        }
        return completion, extras

    def _reply_plan(
        self, entry: Reply, view: MockRequest, key: str
    ) -> tuple[ResponsePlan, dict[str, Any]]:
        completion, extras = self._completion(entry, view, key)
        if entry.fault == "reset":
            return ResponsePlan(status=200, abort="reset"), extras
        if entry.fault == "hang":
            return ResponsePlan(status=200, abort="hang"), extras
        trace = (
            ("x-ds-trace-id", f"{self._rng.getrandbits(128):032x}")
            if view.endpoint == "chat"
            else ("request-id", self._request_id())
        )
        if view.stream:
            return self._stream_plan(entry, view, completion, trace), extras
        return self._json_reply_plan(entry, view, completion, trace), extras

    def _stream_plan(
        self,
        entry: Reply,
        view: MockRequest,
        completion: Completion,
        trace: tuple[str, str],
    ) -> ResponsePlan:
        frames: list[bytes]
        if view.endpoint == "chat":
            include_usage = bool(
                isinstance(view.body.get("stream_options"), Mapping)
                and view.body["stream_options"].get("include_usage")
            )
            frames = [sse_data(c) for c in chat_chunks(completion, include_usage=include_usage)]
            done: list[bytes] = [SSE_DONE]
            malformed_event = sse_data(
                {
                    "id": completion.id,
                    "object": "chat.completion.chunk",
                    "created": completion.created,
                    "model": completion.model,
                    "choices": [None],
                }
            )
            malformed_json = b"data: {not-json\n\n"
        else:
            frames = [sse_event(name, payload) for name, payload in anthropic_events(completion)]
            done = []
            malformed_event = sse_event(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": None}
            )
            malformed_json = b"event: content_block_delta\ndata: {not-json\n\n"
        after = min(entry.fault_after, len(frames))
        tail: BodyAction | None = None
        fault = entry.fault
        if fault == "empty-body":
            frames, done = [], []
        elif fault == "disconnect":
            frames, done, tail = frames[:after], [], Hangup()
        elif fault == "eof":
            frames, done = frames[:after], []
        elif fault == "stall":
            frames, done, tail = frames[:after], [], Stall()
        elif fault == "malformed-json":
            frames = [*frames[:after], malformed_json, *frames[after:]]
        elif fault == "malformed-event":
            frames = [*frames[:after], malformed_event, *frames[after:]]
        writes = [KEEP_ALIVE] * entry.keep_alives + frames + done
        actions = self._paced(writes, entry.pace_ms)
        if tail is not None:
            actions.append(tail)
        content_type = (
            "application/json"
            if fault == "wrong-content-type"
            else "text/event-stream; charset=utf-8"
        )
        headers = (
            ("content-type", content_type),
            ("cache-control", "no-cache"),
            trace,
        )
        return ResponsePlan(status=200, headers=headers, body=tuple(actions), framing="chunked")

    def _json_reply_plan(
        self,
        entry: Reply,
        view: MockRequest,
        completion: Completion,
        trace: tuple[str, str],
    ) -> ResponsePlan:
        payload = (
            chat_completion(completion)
            if view.endpoint == "chat"
            else anthropic_message(completion)
        )
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        fault = entry.fault
        declared: int | None = None
        tail: BodyAction | None = None
        content_type = "application/json"
        if fault == "empty-body":
            body = b""
        elif fault in ("disconnect", "stall"):
            declared = entry.keep_alives + len(body)
            body = body[: len(body) // 2]
            tail = Hangup() if fault == "disconnect" else Stall()
        elif fault == "eof":
            body = body[: len(body) // 2]
        elif fault == "malformed-json":
            body = b"{not-json"
        elif fault == "malformed-event":
            body = json.dumps(
                {"id": completion.id, "object": "chat.completion", "choices": [None]}
            ).encode("utf-8")
        elif fault == "wrong-content-type":
            content_type = "text/html; charset=utf-8"
        writes = [b"\n"] * entry.keep_alives + ([body] if body else [])
        actions = self._paced(writes, entry.pace_ms)
        if tail is not None:
            actions.append(tail)
        headers = (("content-type", content_type), trace)
        return ResponsePlan(
            status=200, headers=headers, body=tuple(actions), content_length=declared
        )

    @staticmethod
    def _paced(writes: list[bytes], pace_ms: int) -> list[BodyAction]:
        actions: list[BodyAction] = []
        for data in writes:
            if pace_ms:
                actions.append(Pause(seconds=pace_ms / 1000))
            actions.append(Emit(data=data))
        return actions

    def _error_plan(self, entry: HttpError, endpoint: Literal["chat", "anthropic"]) -> ResponsePlan:
        headers: list[tuple[str, str]] = []
        if entry.body is not None:
            if isinstance(entry.body, str):
                data = entry.body.encode("utf-8")
                content_type = entry.content_type or "text/plain; charset=utf-8"
            else:
                data = json.dumps(thaw_json(entry.body), ensure_ascii=False).encode("utf-8")
                content_type = entry.content_type or "application/json"
        else:
            base = default_error(entry.status)
            error = ApiError(
                status=entry.status,
                message=entry.message or base.message,
                type=entry.type or base.type,
                code=entry.code or base.code,
                param=entry.param,
            )
            payload = (
                error.deepseek_body()
                if endpoint == "chat"
                else error.anthropic_body(request_id=entry.request_id or self._request_id())
            )
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            content_type = entry.content_type or "application/json"
        headers.append(("content-type", content_type))
        if entry.retry_after is not None:
            headers.append(("retry-after", entry.retry_after))
        if entry.request_id is not None:
            headers.append(("x-request-id", entry.request_id))
        headers.extend(entry.headers)
        return ResponsePlan(status=entry.status, headers=tuple(headers), body=(Emit(data=data),))

    @staticmethod
    def _json_plan(
        status: int, payload: Any, extra: tuple[tuple[str, str], ...] = ()
    ) -> ResponsePlan:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return ResponsePlan(
            status=status,
            headers=(("content-type", "application/json"), *extra),
            body=(Emit(data=data),),
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
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        secret = self._secret(request)
        headers = []
        for name, value in request.headers:
            lowered = name.lower()
            if lowered == "authorization":
                scheme = value.strip().partition(" ")[0]
                value = f"{scheme} {REDACTED}" if scheme else REDACTED
            elif lowered == "x-api-key":
                value = REDACTED
            headers.append((name, redact(value, secret)))
        body: Any = None
        if request.body:
            try:
                body = json.loads(request.body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                body = request.body.decode("utf-8", errors="replace")
        self._requests.append(
            ReceivedRequest(
                seq=len(self._requests) + 1,
                method=request.method,
                path=request.path,
                endpoint=endpoint,
                headers=tuple(headers),
                body=redact(body, secret),
                status=status,
                entry=None if entry is None else redact(entry.to_json(), secret),
                error=None if error is None else redact(error.to_json(), secret),
                scripted=scripted,
                extras=dict(extras or {}),
            )
        )

    # -- the control API ----------------------------------------------------------------------

    def _control(self, request: HttpRequest, path: str) -> ResponsePlan:
        route = (request.method, path)
        if route == ("POST", "/_dsh/script"):
            try:
                pushed = self._parse_pushed(request.body)
            except ScriptError as exc:
                error = ApiError(status=400, message=str(exc), code="invalid_script")
                return self._json_plan(400, error.deepseek_body())
            self._queue.extend(pushed)
            return self._json_plan(200, {"queued": len(self._queue), "added": len(pushed)})
        if route == ("GET", "/_dsh/script"):
            return self._json_plan(
                200,
                {"onExhausted": self.on_exhausted, "entries": [e.to_json() for e in self._queue]},
            )
        if route == ("GET", "/_dsh/requests"):
            return self._json_plan(200, {"requests": [r.to_json() for r in self._requests]})
        if route == ("POST", "/_dsh/reset"):
            self.reset()
            return self._json_plan(200, {"reset": True})
        known = {"/_dsh/script": "GET, POST", "/_dsh/requests": "GET", "/_dsh/reset": "POST"}
        if path in known:
            error = ApiError(status=405, message="Method Not Allowed")
            return self._json_plan(405, error.deepseek_body(), (("allow", known[path]),))
        error = ApiError(status=404, message=f"Not Found: no control endpoint at {path}")
        return self._json_plan(404, error.deepseek_body())

    def _parse_pushed(self, raw: bytes) -> tuple[ScriptEntry, ...]:
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ScriptError(f"not valid JSON: {exc}", path="body") from None
        if isinstance(obj, list):
            return tuple(entry_from_json(e, path=f"body[{i}]") for i, e in enumerate(obj))
        if isinstance(obj, Mapping) and "entries" in obj:
            script = Script.from_json(obj, path="body")
            self.on_exhausted = script.on_exhausted
            return script.entries
        return (entry_from_json(obj, path="body"),)

"""Script entries: what the mock answers, one entry per accepted request.

An entry is a frozen value with ``to_json``/``from_json`` (camelCase keys), so a script can live in a
JSON file loaded by ``dsh-testkit serve --script FILE`` or be pushed over ``POST /_dsh/script`` by a
test written in any language. Two kinds exist:

* :class:`Reply` — a 200 answer: text, reasoning, tool calls, a finish reason, pacing
  (``keep_alives``, ``pace_ms``) and at most one transport :data:`Fault` (a reset, a stall, a
  disconnect or EOF mid-stream, a malformed chunk, …);
* :class:`ErrorReply` — an error status with the API's body (or any body), ``Retry-After`` and a
  request id.

:func:`behaviour` names the reference harness's wire-fault vocabulary (``rate_limit``,
``partial_eof``, ``tool_call_success``, …) as entries, and :func:`random_script`
draws a seeded, reproducible script from it.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar, get_args

from dsh_core import FrozenDict, FrozenList, JsonValueError, freeze_json, thaw_json

from ._errors import ScriptError

__all__ = [
    "BEHAVIOURS",
    "SCRIPT_FORMAT_VERSION",
    "ErrorReply",
    "Fault",
    "FinishReasonName",
    "OnExhausted",
    "Reply",
    "Script",
    "ScriptEntry",
    "ToolCall",
    "behaviour",
    "entry_from_json",
    "random_script",
]

SCRIPT_FORMAT_VERSION: Final = 1
"""The version written in every script file; files of another version are refused."""

Fault: TypeAlias = Literal[
    "reset",
    "hang",
    "disconnect",
    "eof",
    "stall",
    "malformed-json",
    "malformed-event",
    "empty-body",
    "wrong-content-type",
]
"""How a :class:`Reply` goes wrong on the wire.

``reset``: the connection closes before any response byte. ``hang``: nothing is ever sent (the
connection stays open). ``disconnect``: headers and ``fault_after`` chunks, then an abrupt close.
``eof``: ``fault_after`` chunks, then a clean end without ``data: [DONE]``. ``stall``:
``fault_after`` chunks, then silence with the connection open. ``malformed-json`` /
``malformed-event``: a chunk that is not JSON (``data: {not-json``) / whose ``choices`` is
``[null]``, inserted after ``fault_after`` chunks (the rest follows). ``empty-body``: a 200 with no
body. ``wrong-content-type``: the full answer under the wrong ``Content-Type``. For a non-streaming
request, ``disconnect``/``eof``/``stall`` cut the JSON body in half and the malformed faults replace it.
"""

FinishReasonName: TypeAlias = Literal[
    "stop", "length", "tool_calls", "content_filter", "insufficient_system_resource", "aborted"
]
"""DeepSeek's ``finish_reason`` values (docs/wire.md §1.6)."""

OnExhausted: TypeAlias = Literal["default", "error", "repeat-last", "call-tools"]
"""What an empty queue answers: ``default``, the deterministic default reply; ``error``, a 410
``MOCK_SCRIPT_EXHAUSTED`` error saying the script ran out (a status SDKs do not retry);
``repeat-last``, the last entry again; ``call-tools``, a tool round trip without scripting
(:func:`~dsh_testkit.mock.call_each_tool_once`: every offered tool called once with arguments
from its schema, then an answer)."""

_FAULTS: Final = frozenset(get_args(Fault))
_FINISH_REASONS: Final = frozenset(get_args(FinishReasonName))
_ON_EXHAUSTED: Final = frozenset(get_args(OnExhausted))


def _need_int(value: object, path: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ScriptError(f"must be an integer ≥ {minimum}, got {value!r}", path=path)
    return value


def _need_str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ScriptError(f"must be a string, got {value!r}", path=path)
    try:
        value.encode("utf-8")  # what goes on the wire: a lone surrogate cannot be sent
    except UnicodeEncodeError as exc:
        raise ScriptError(
            f"holds {value[exc.start]!r} at character {exc.start}, which UTF-8 cannot encode "
            "(half of a surrogate pair)",
            path=path,
        ) from None
    return value


def _opt_str(value: object, path: str) -> str | None:
    return None if value is None else _need_str(value, path)


def _need_obj(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScriptError(f"must be a JSON object, got {type(value).__name__}", path=path)
    return value


def _opt_bool(value: object, path: str) -> bool:
    """A flag: ``True`` or ``False``; ``None`` is leaving it out (``False``)."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ScriptError(f"must be true or false, got {value!r}", path=path)
    return value


def _set(target: object, **values: Any) -> None:
    """Fill a frozen dataclass's fields from its own ``__init__``."""
    for name, value in values.items():
        object.__setattr__(target, name, value)


def _check_keys(obj: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise ScriptError(
            f"unknown keys {extra}; allowed: {sorted(allowed)} (keys are camelCase)", path=path
        )


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class ToolCall:
    """One tool call of a :class:`Reply`. ``None`` for a field means what leaving it out means."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    """The arguments: a raw JSON string, sent as given (the API does not promise valid JSON),
    or an object (a dict), stored as its compact JSON string — as the JSON script and
    ``dsh_core.scripted.tool_call`` take it. After construction it is always the string
    (:attr:`arguments_json`)."""
    id: str | None = None
    """``None`` → a generated V4-style id, ``call_00_<24 alphanumerics>``."""
    fragments: int = 2
    """How many ``arguments`` deltas a stream splits the string into (by code points; the API's
    first delta for a call always carries ``arguments: ""`` before these)."""

    def __init__(
        self,
        *,
        name: str,
        arguments: str | Mapping[str, Any] | None = "{}",
        id: str | None = None,
        fragments: int | None = 2,
    ) -> None:
        _set(
            self,
            name=name,
            arguments="{}" if arguments is None else arguments,
            id=id,
            fragments=2 if fragments is None else fragments,
        )
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ScriptError("a tool call needs a non-empty name", path="name")
        if isinstance(self.arguments, Mapping):
            try:
                text = json.dumps(
                    thaw_json(freeze_json(dict(self.arguments), path="arguments")),
                    separators=(",", ":"),
                    ensure_ascii=False,
                )
            except JsonValueError as exc:
                raise ScriptError(str(exc), path="arguments") from exc
            object.__setattr__(self, "arguments", text)
        _need_str(self.arguments, "arguments")
        _opt_str(self.id, "id")
        _need_int(self.fragments, "fragments", minimum=1)

    @property
    def arguments_json(self) -> str:
        """The arguments string sent on the wire."""
        return str(self.arguments)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        if self.fragments != 2:
            out["fragments"] = self.fragments
        return out

    @classmethod
    def from_json(cls, obj: object, *, path: str = "toolCall") -> ToolCall:
        o = _need_obj(obj, path)
        _check_keys(o, ("name", "arguments", "id", "fragments"), path)
        arguments = o.get("arguments", "{}")
        return _build(
            cls,
            path,
            name=o.get("name"),
            arguments=arguments,
            id=o.get("id"),
            fragments=o.get("fragments", 2),
        )


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Reply:
    """A 200 answer. Empty (no text, reasoning or calls) is the API's degenerate empty completion.

    ``None`` for any field means what leaving it out means: ``Reply(text=None,
    tool_calls=[...])`` is a tool-call turn with no text, as the openai SDK shows one
    (``content=None``; the live API sends ``""`` beside tool calls, docs/wire.md §1.5).
    """

    text: str = ""
    reasoning: str | None = None
    """``reasoning_content``; ``None`` sends none (the thinking-mode first chunk still carries ``""``)."""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReasonName | None = None
    """``None`` → ``tool_calls`` when there are calls, else ``stop``."""
    chunk_size: int = 8
    """Code points per ``content`` / ``reasoning_content`` delta."""
    keep_alives: int = 0
    """Keep-alive signals sent while "queued", before the answer (``: keep-alive`` comments in a
    stream, blank lines before a JSON body)."""
    pace_ms: int = 0
    """Pause before every body write (keep-alives and chunks): a slow answer."""
    fault: Fault | None = None
    fault_after: int = 1
    """How many stream chunks are sent before the ``fault`` strikes."""
    optional: bool = False
    """The strict check does not ask for this entry: left unused (queued, or among a route's
    answers), the test still passes (respx's ``assert_all_called``, per entry)."""
    kind: Literal["reply"] = "reply"

    def __init__(
        self,
        *,
        text: str | None = "",
        reasoning: str | None = None,
        tool_calls: Sequence[ToolCall] | None = (),
        finish_reason: FinishReasonName | None = None,
        chunk_size: int | None = 8,
        keep_alives: int | None = 0,
        pace_ms: int | None = 0,
        fault: Fault | None = None,
        fault_after: int | None = 1,
        optional: bool | None = False,
        kind: Literal["reply"] | None = "reply",
    ) -> None:
        if kind not in (None, "reply"):
            raise ScriptError(f"must be 'reply', got {kind!r}", path="kind")
        _set(
            self,
            text="" if text is None else text,
            reasoning=reasoning,
            tool_calls=() if tool_calls is None else tool_calls,
            finish_reason=finish_reason,
            chunk_size=8 if chunk_size is None else chunk_size,
            keep_alives=0 if keep_alives is None else keep_alives,
            pace_ms=0 if pace_ms is None else pace_ms,
            fault=fault,
            fault_after=1 if fault_after is None else fault_after,
            optional=_opt_bool(optional, "optional"),
            kind="reply",
        )
        self.__post_init__()

    def __post_init__(self) -> None:
        _need_str(self.text, "text")
        _opt_str(self.reasoning, "reasoning")
        if isinstance(self.tool_calls, list):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not isinstance(self.tool_calls, tuple):
            raise ScriptError(
                f"must be a list of ToolCall (even for one call), got {self.tool_calls!r}",
                path="toolCalls",
            )
        for i, call in enumerate(self.tool_calls):
            if not isinstance(call, ToolCall):
                raise ScriptError(f"must be a ToolCall, got {call!r}", path=f"toolCalls[{i}]")
        if self.finish_reason is not None and self.finish_reason not in _FINISH_REASONS:
            raise ScriptError(
                f"unknown finish reason {self.finish_reason!r}; expected one of {sorted(_FINISH_REASONS)}",
                path="finishReason",
            )
        _need_int(self.chunk_size, "chunkSize", minimum=1)
        _need_int(self.keep_alives, "keepAlives")
        _need_int(self.pace_ms, "paceMs")
        if self.fault is not None and self.fault not in _FAULTS:
            raise ScriptError(
                f"unknown fault {self.fault!r}; expected one of {sorted(_FAULTS)}", path="fault"
            )
        _need_int(self.fault_after, "faultAfter")

    @property
    def effective_finish_reason(self) -> FinishReasonName:
        """The finish reason sent: the scripted one, else ``tool_calls`` or ``stop``."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "reply"}
        if self.text:
            out["text"] = self.text
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        if self.tool_calls:
            out["toolCalls"] = [c.to_json() for c in self.tool_calls]
        if self.finish_reason is not None:
            out["finishReason"] = self.finish_reason
        if self.chunk_size != 8:
            out["chunkSize"] = self.chunk_size
        if self.keep_alives:
            out["keepAlives"] = self.keep_alives
        if self.pace_ms:
            out["paceMs"] = self.pace_ms
        if self.fault is not None:
            out["fault"] = self.fault
        if self.fault_after != 1:
            out["faultAfter"] = self.fault_after
        if self.optional:
            out["optional"] = True
        return out

    @classmethod
    def from_json(cls, obj: object, *, path: str = "entry") -> Reply:
        o = _need_obj(obj, path)
        _check_keys(
            o,
            (
                "kind",
                "text",
                "reasoning",
                "toolCalls",
                "finishReason",
                "chunkSize",
                "keepAlives",
                "paceMs",
                "fault",
                "faultAfter",
                "optional",
            ),
            path,
        )
        calls = o.get("toolCalls")
        calls = [] if calls is None else calls
        if not isinstance(calls, list):
            raise ScriptError("must be an array of tool calls", path=f"{path}.toolCalls")
        return _build(
            cls,
            path,
            text=o.get("text", ""),
            reasoning=o.get("reasoning"),
            tool_calls=tuple(
                ToolCall.from_json(c, path=f"{path}.toolCalls[{i}]") for i, c in enumerate(calls)
            ),
            finish_reason=o.get("finishReason"),
            chunk_size=o.get("chunkSize", 8),
            keep_alives=o.get("keepAlives", 0),
            pace_ms=o.get("paceMs", 0),
            fault=o.get("fault"),
            fault_after=o.get("faultAfter", 1),
            optional=_opt_bool(o.get("optional"), f"{path}.optional"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    """A script entry that answers with an HTTP error (it is not an exception). Without ``body``
    the endpoint renders its own error shape from ``message``/``type``/``code`` (defaults per
    status, see :func:`default_error`). Its JSON ``kind`` is ``"http-error"``."""

    status: int
    message: str | None = None
    type: str | None = None
    code: str | None = None
    param: str | None = None
    body: Any = None
    """A verbatim body instead of the API's shape: a JSON object/array, or a string sent as text."""
    content_type: str | None = None
    """Overrides the ``Content-Type`` (default ``application/json``, or ``text/plain`` for a text body)."""
    retry_after: str | None = None
    """The ``Retry-After`` header as sent: seconds (``"2"``) or an HTTP date."""
    request_id: str | None = None
    """The answer's request id, where the endpoint sends one: the ``x-ds-trace-id`` header on
    the chat endpoint (DeepSeek sends no ``x-request-id``), the ``request-id`` header and the
    body's ``request_id`` on the Anthropic one. ``None``: a generated one."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers (given as pairs or a mapping)."""
    optional: bool = False
    """The strict check does not ask for this entry (see :attr:`Reply.optional`)."""
    kind: Literal["http-error"] = "http-error"

    def __init__(
        self,
        *,
        status: int,
        message: str | None = None,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        body: Any = None,
        content_type: str | None = None,
        retry_after: str | float | None = None,
        request_id: str | None = None,
        headers: Sequence[tuple[str, str]] | Mapping[str, str] | None = (),
        optional: bool | None = False,
        kind: Literal["http-error"] | None = "http-error",
    ) -> None:
        if kind not in (None, "http-error"):
            raise ScriptError(f"must be 'http-error', got {kind!r}", path="kind")
        _set(
            self,
            status=status,
            message=message,
            type=type,
            code=code,
            param=param,
            body=body,
            content_type=content_type,
            retry_after=retry_after,
            request_id=request_id,
            headers=() if headers is None else headers,
            optional=_opt_bool(optional, "optional"),
            kind="http-error",
        )
        self.__post_init__()

    def __post_init__(self) -> None:
        status = _need_int(self.status, "status")
        if not 400 <= status <= 599:
            raise ScriptError(f"an error status must be 400–599, got {status}", path="status")
        for name in ("message", "type", "code", "param", "content_type", "request_id"):
            _opt_str(getattr(self, name), name)
        if isinstance(self.retry_after, (int, float)) and not isinstance(self.retry_after, bool):
            seconds = self.retry_after
            if not math.isfinite(seconds) or seconds < 0:
                raise ScriptError(
                    f"must be a finite number of seconds ≥ 0, got {seconds!r}", path="retryAfter"
                )
            object.__setattr__(
                self, "retry_after", str(int(seconds)) if seconds == int(seconds) else str(seconds)
            )
        _opt_str(self.retry_after, "retryAfter")
        if self.body is not None and not isinstance(self.body, (str, FrozenDict, FrozenList)):
            try:
                object.__setattr__(self, "body", freeze_json(self.body, path="body"))
            except JsonValueError as exc:
                raise ScriptError(str(exc), path="body") from exc
        pairs = self.headers.items() if isinstance(self.headers, Mapping) else self.headers
        headers = tuple(tuple(h) for h in pairs)
        for i, pair in enumerate(headers):
            if len(pair) != 2 or not all(isinstance(p, str) for p in pair):
                raise ScriptError(
                    f"must be a [name, value] pair, got {pair!r}", path=f"headers[{i}]"
                )
        object.__setattr__(self, "headers", headers)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "http-error", "status": self.status}
        for key, value in (
            ("message", self.message),
            ("type", self.type),
            ("code", self.code),
            ("param", self.param),
            ("body", self.body),
            ("contentType", self.content_type),
            ("retryAfter", self.retry_after),
            ("requestId", self.request_id),
        ):
            if value is not None:
                out[key] = value
        if self.headers:
            out["headers"] = [list(h) for h in self.headers]
        if self.optional:
            out["optional"] = True
        return out

    @classmethod
    def from_json(cls, obj: object, *, path: str = "entry") -> ErrorReply:
        o = _need_obj(obj, path)
        _check_keys(
            o,
            (
                "kind",
                "status",
                "message",
                "type",
                "code",
                "param",
                "body",
                "contentType",
                "retryAfter",
                "requestId",
                "headers",
                "optional",
            ),
            path,
        )
        headers = o.get("headers")
        headers = [] if headers is None else headers
        if isinstance(headers, Mapping):
            headers = list(headers.items())
        if not isinstance(headers, list):
            raise ScriptError("must be an object or a list of pairs", path=f"{path}.headers")
        return _build(
            cls,
            path,
            status=o.get("status"),
            message=o.get("message"),
            type=o.get("type"),
            code=o.get("code"),
            param=o.get("param"),
            body=o.get("body"),
            content_type=o.get("contentType"),
            retry_after=o.get("retryAfter"),
            request_id=o.get("requestId"),
            headers=tuple(tuple(h) if isinstance(h, list) else h for h in headers),
            optional=_opt_bool(o.get("optional"), f"{path}.optional"),
        )


ScriptEntry: TypeAlias = Reply | ErrorReply
"""One scripted answer."""


_T = TypeVar("_T")


def _build(cls: Callable[..., _T], path: str, **kwargs: Any) -> _T:
    """Construct an entry, re-raising a field error with the JSON path in front."""
    try:
        return cls(**kwargs)
    except ScriptError as exc:
        raise ScriptError(str(exc).split(": ", 1)[-1], path=f"{path}.{exc.path}") from exc
    except TypeError as exc:
        raise ScriptError(str(exc), path=path) from exc


def entry_from_json(obj: object, *, path: str = "entry") -> ScriptEntry:
    """Parse one entry: ``{"kind": "reply" | "http-error", …}`` or ``{"behaviour": NAME}``."""
    o = _need_obj(obj, path)
    if "behaviour" in o:
        _check_keys(o, ("behaviour",), path)
        return behaviour(_need_str(o["behaviour"], f"{path}.behaviour"))
    kind = o.get("kind", "reply")
    if kind == "reply":
        return Reply.from_json(o, path=path)
    if kind == "http-error":
        return ErrorReply.from_json(o, path=path)
    raise ScriptError(
        f"unknown entry kind {kind!r}; expected 'reply', 'http-error', or a 'behaviour' entry",
        path=f"{path}.kind",
    )


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Script:
    """A script file: entries answered in order, and what an empty queue answers (``None``
    for a field, or ``null`` in the file, is leaving it out).

    The file (UTF-8 JSON, also accepted by ``POST /_dsh/script``)::

        {"version": 1, "onExhausted": "default", "entries": [
          {"kind": "reply", "reasoning": "…", "text": "Hi", "chunkSize": 4},
          {"kind": "reply", "toolCalls": [{"name": "search", "arguments": {"q": "x"}, "fragments": 3}]},
          {"kind": "reply", "text": "cut short", "fault": "disconnect", "faultAfter": 2},
          {"kind": "http-error", "status": 429, "retryAfter": "2"},
          {"behaviour": "partial_eof"}
        ]}
    """

    entries: tuple[ScriptEntry, ...] = ()
    on_exhausted: OnExhausted = "default"
    version: int = field(default=SCRIPT_FORMAT_VERSION, repr=False)

    def __init__(
        self,
        *,
        entries: Sequence[ScriptEntry] | None = (),
        on_exhausted: OnExhausted | None = "default",
        version: int | None = SCRIPT_FORMAT_VERSION,
    ) -> None:
        _set(
            self,
            entries=() if entries is None else entries,
            on_exhausted="default" if on_exhausted is None else on_exhausted,
            version=SCRIPT_FORMAT_VERSION if version is None else version,
        )
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple):
            object.__setattr__(self, "entries", tuple(self.entries))
        if self.on_exhausted not in _ON_EXHAUSTED:
            raise ScriptError(
                f"must be one of {sorted(_ON_EXHAUSTED)}, got {self.on_exhausted!r}",
                path="onExhausted",
            )
        if self.version != SCRIPT_FORMAT_VERSION:
            raise ScriptError(
                f"script format version {self.version!r} is not supported (this build reads "
                f"version {SCRIPT_FORMAT_VERSION})",
                path="version",
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "onExhausted": self.on_exhausted,
            "entries": [e.to_json() for e in self.entries],
        }

    def dumps(self) -> str:
        """Stable, readable file text (2-space indent, trailing newline)."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, obj: object, *, path: str = "script") -> Script:
        """Parse a script document, or a bare list of entries."""
        if isinstance(obj, list):
            obj = {"version": SCRIPT_FORMAT_VERSION, "entries": obj}
        o = _need_obj(obj, path)
        _check_keys(o, ("version", "onExhausted", "entries"), path)
        if "version" not in o:
            raise ScriptError(
                f'missing; write "version": {SCRIPT_FORMAT_VERSION}', path=f"{path}.version"
            )
        entries = o.get("entries")
        entries = [] if entries is None else entries
        if not isinstance(entries, list):
            raise ScriptError("must be an array of entries", path=f"{path}.entries")
        parsed = tuple(
            entry_from_json(e, path=f"{path}.entries[{i}]") for i, e in enumerate(entries)
        )
        return _build(
            cls,
            path,
            entries=parsed,
            on_exhausted=o.get("onExhausted", "default"),
            version=o["version"],
        )

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a script file (UTF-8 JSON)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(
                f"cannot read the script file: {exc.strerror}", path=str(path)
            ) from exc
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise ScriptError(f"not valid JSON: {exc}", path=str(path)) from exc
        return cls.from_json(obj, path=str(path))


_SUCCESS_TEXT: Final = "Hello from the mock DeepSeek."

BEHAVIOURS: Final[Mapping[str, ScriptEntry]] = {
    "connection_reset": Reply(text=_SUCCESS_TEXT, fault="reset"),
    "stream_disconnect": Reply(text=_SUCCESS_TEXT, fault="disconnect", fault_after=0),
    "partial_disconnect": Reply(text=_SUCCESS_TEXT, fault="disconnect", fault_after=3),
    "stall": Reply(text=_SUCCESS_TEXT, fault="stall", fault_after=0),
    "empty": Reply(),
    "empty_body": Reply(text=_SUCCESS_TEXT, fault="empty-body"),
    "stream_eof": Reply(text=_SUCCESS_TEXT, fault="eof", fault_after=1),
    "partial_eof": Reply(text=_SUCCESS_TEXT, fault="eof", fault_after=3),
    "malformed_json": Reply(text=_SUCCESS_TEXT, fault="malformed-json", fault_after=1),
    "malformed_event": Reply(text=_SUCCESS_TEXT, fault="malformed-event", fault_after=1),
    "wrong_content_type": Reply(text=_SUCCESS_TEXT, fault="wrong-content-type"),
    "rate_limit": ErrorReply(status=429, retry_after="1"),
    "server_error": ErrorReply(status=500),
    "service_unavailable": ErrorReply(status=503),
    "auth_error": ErrorReply(status=401),
    "invalid_request": ErrorReply(status=400),
    "context_overflow": ErrorReply(  # DeepSeek's own wording and code [observed]
        status=400,
        message=(
            "This model's maximum context length is 1048576 tokens. However, you requested "
            "1100000 tokens (1100000 in the messages, 0 in the completion). Please reduce the "
            "length of the messages or completion."
        ),
        type="invalid_request_error",
        code="invalid_request_error",
    ),
    "quota_exceeded": ErrorReply(
        status=429,
        message="You exceeded your current quota: insufficient quota",
        code="insufficient_quota",
    ),
    "success": Reply(text=_SUCCESS_TEXT),
    "slow_success": Reply(text=_SUCCESS_TEXT, pace_ms=5),
    "reasoning_success": Reply(reasoning="Let me think about that.", text=_SUCCESS_TEXT),
    "tool_call_success": Reply(
        tool_calls=(ToolCall(id="mock-call-1", name="lookup", arguments='{"query":"mock"}'),)
    ),
    "max_tokens": Reply(text="This answer is cut", finish_reason="length"),
}
"""The reference harness's wire-fault vocabulary as script entries."""

_DEFAULT_WEIGHTS: Final[Mapping[str, float]] = {
    name: (8.0 if name.endswith("success") else 1.0) for name in BEHAVIOURS
}


def behaviour(name: str, **changes: Any) -> ScriptEntry:
    """The entry for a named behaviour of :data:`BEHAVIOURS`, optionally with fields changed."""
    try:
        entry = BEHAVIOURS[name]
    except KeyError:
        raise ScriptError(
            f"unknown behaviour {name!r}; known: {', '.join(sorted(BEHAVIOURS))}", path="behaviour"
        ) from None
    return replace(entry, **changes) if changes else entry


def random_script(
    count: int, *, seed: int, weights: Mapping[str, float] | None = None
) -> tuple[ScriptEntry, ...]:
    """``count`` behaviours drawn with a seeded PRNG: the same seed gives the same script.

    ``weights`` maps behaviour names to relative weights (default: success-heavy, every fault
    possible). Names not in :data:`BEHAVIOURS` are refused.
    """
    _need_int(count, "count")
    chosen = dict(weights if weights is not None else _DEFAULT_WEIGHTS)
    unknown = sorted(set(chosen) - set(BEHAVIOURS))
    if unknown:
        raise ScriptError(f"unknown behaviours {unknown}", path="weights")
    names = sorted(name for name, weight in chosen.items() if weight > 0)
    if not names:
        raise ScriptError("at least one behaviour needs a positive weight", path="weights")
    rng = random.Random(seed)
    picks = rng.choices(names, weights=[chosen[n] for n in names], k=count)
    return tuple(BEHAVIOURS[name] for name in picks)

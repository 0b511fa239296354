"""Answer planning and fault injection: a script entry and an admitted request → a response plan.

:class:`AnswerPlanner` decides everything an answer needs that is not in the script — ids and
timestamps from a seeded PRNG (a seeded run is byte-for-byte reproducible), usage from the
prefix-cache simulator — and turns the entry's :data:`~._script.Fault` into body actions: a
reset or hang before any byte, a cut, stalled or malformed stream, a truncated JSON body. The
same plan is played by the in-process transport and by the loopback server. It also renders the
API's error answers (scripted :class:`~._script.ErrorReply` entries and the mock's own
refusals) with the headers the real endpoints send: ``x-ds-trace-id`` on the chat endpoint,
``request-id`` on the Anthropic one.
"""

from __future__ import annotations

import json
import random
import string
from typing import Any, Final, Literal

from dsh_core import thaw_json
from dsh_core.providers import MODELS, resolve_model
from dsh_core.providers.anthropic import tool_input
from dsh_core.providers.deepseek import ChatRequest

from ..prompt._cache import PrefixCacheSimulator
from ..prompt._cache_values import CacheKey
from ..prompt._template import PromptRenderer
from ..prompt._template_tokens import RenderedPrompt, ToolCallSpec
from ._api_errors import ApiError, default_error
from ._plan import BodyAction, Emit, Hangup, Pause, ResponsePlan, Stall, json_plan
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
)
from ._request import MockRequest
from ._script import ErrorReply, Reply

__all__ = [
    "CREATED_EPOCH",
    "AnswerPlanner",
    "context_length_message",
    "context_window_error",
    "reported_model",
]

CREATED_EPOCH: Final = 1_767_225_600
"""``created`` of the first answer (2026-01-01T00:00:00Z); each answer adds one second."""

_ALNUM: Final = string.ascii_letters + string.digits


def reported_model(model: str) -> str:
    """The ``model`` an answer reports: the model table's :attr:`~dsh_core.providers.ModelInfo.
    response_model` (V4-era DeepSeek names ``deepseek-v4-flash`` for the ``deepseek-chat`` /
    ``deepseek-reasoner`` aliases, as recorded live traffic shows); other ids are echoed."""
    info = MODELS.get(model)
    return model if info is None else info.response_model


def context_window_error(view: MockRequest, prompt_tokens: int) -> ApiError | None:
    """DeepSeek's refusal of a request whose prompt plus ``max_tokens`` exceeds the model's
    context window (a 400 ``invalid_request_error`` with its own wording, as recorded live; not
    OpenAI's ``context_length_exceeded``), or ``None``."""
    info = resolve_model(view.model, endpoint=view.endpoint)
    if info is None:
        return None
    completion = view.parsed.max_tokens or 0
    requested = prompt_tokens + completion
    if requested <= info.context_window:
        return None
    return ApiError(
        status=400,
        message=context_length_message(info.context_window, prompt_tokens, completion),
    )


def context_length_message(window: int, prompt_tokens: int, completion_tokens: int) -> str:
    """DeepSeek's context-overflow sentence [observed]."""
    return (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt_tokens + completion_tokens} tokens ({prompt_tokens} in the messages, "
        f"{completion_tokens} in the completion). Please reduce the length of the messages or "
        "completion."
    )


class AnswerPlanner:
    """Ids, usage and fault plans for one mock (its PRNG and cache live here). Not thread-safe:
    the facade calls it under its lock."""

    def __init__(
        self,
        *,
        seed: int,
        cache: PrefixCacheSimulator,
        renderer: PromptRenderer,
        created_from: int = CREATED_EPOCH,
    ) -> None:
        self._seed = seed
        self.cache = cache
        self.renderer = renderer
        self._rng = random.Random(seed)
        self._answers = 0
        self.created_from = created_from
        """The ``created`` of the first answer (Unix seconds); each later one a second on."""

    def reset(self) -> None:
        """Re-seed the PRNG, restart the clock, empty the cache."""
        self._rng = random.Random(self._seed)
        self._answers = 0
        self.cache.clear()

    # -- ids ----------------------------------------------------------------------------------

    def _token(self, size: int) -> str:
        return "".join(self._rng.choice(_ALNUM) for _ in range(size))

    def _uuid(self) -> str:
        value = self._rng.getrandbits(128)
        text = f"{value:032x}"
        return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-a{text[17:20]}-{text[20:32]}"

    def request_id(self) -> str:
        """An Anthropic-style request id (``req_…``)."""
        return f"req_{self._token(24)}"

    def trace_header(self, endpoint: str) -> tuple[str, str]:
        """The per-answer trace header the endpoint sends: ``x-ds-trace-id`` (DeepSeek; never
        ``x-request-id``), ``request-id`` on the Anthropic-format endpoint."""
        if endpoint == "anthropic":
            return ("request-id", self.request_id())
        return ("x-ds-trace-id", f"{self._rng.getrandbits(128):032x}")

    # -- errors -------------------------------------------------------------------------------

    def error_plan(
        self,
        error: ApiError,
        endpoint: str,
        *,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> ResponsePlan:
        """The API's error answer for ``endpoint``: its body shape and its trace header."""
        if endpoint == "anthropic":
            name, request_id = self.trace_header("anthropic")
            body = error.anthropic_body(request_id=request_id)
            return json_plan(error.status, body, ((name, request_id), *extra))
        return json_plan(error.status, error.deepseek_body(), (self.trace_header(endpoint), *extra))

    def scripted_error_plan(
        self, entry: ErrorReply, endpoint: Literal["chat", "anthropic"]
    ) -> ResponsePlan:
        """A scripted error answer: the entry's body (or the API's shape), its headers."""
        headers: list[tuple[str, str]] = []
        if endpoint == "anthropic":
            request_id = entry.request_id or self.request_id()
            trace: tuple[str, str] = ("request-id", request_id)
        else:
            request_id = entry.request_id or f"{self._rng.getrandbits(128):032x}"
            trace = ("x-ds-trace-id", request_id)
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
                else error.anthropic_body(request_id=request_id)
            )
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            content_type = entry.content_type or "application/json"
        headers.append(("content-type", content_type))
        if entry.retry_after is not None:
            headers.append(("retry-after", entry.retry_after))
        headers.append(trace)
        headers.extend(entry.headers)
        return ResponsePlan(status=entry.status, headers=tuple(headers), body=(Emit(data=data),))

    # -- replies ------------------------------------------------------------------------------

    def render_prompt(self, view: MockRequest) -> RenderedPrompt:
        """The request's prompt through the chat template (its length is ``prompt_tokens``)."""
        # The renderer reads the frozen body as it is (FrozenDict and FrozenList are a dict and
        # a list): no per-request copy.
        if view.endpoint == "chat":
            return self.renderer.render_chat(view.body, thinking=view.thinking)
        return self.renderer.render_anthropic(view.body, thinking=view.thinking)

    def _completion(
        self, entry: Reply, view: MockRequest, key: str, prompt: RenderedPrompt
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
                    arguments=call.arguments_json,
                    fragments=tuple(split_evenly(call.arguments_json, call.fragments)),
                )
            )
        renderer = self.renderer
        if view.endpoint == "chat":
            sent_back: list[ToolCallSpec] = [(c.name, c.arguments_json) for c in entry.tool_calls]
        else:
            # The next request carries ``tool_use.input`` as the object this answer gives (the
            # parsed arguments, ``{}`` when they are not an object), which the renderer spells
            # ``json.dumps(input)`` — not the scripted string, whatever its spacing.
            sent_back = [(c.name, tool_input(c.arguments_json)) for c in entry.tool_calls]
        # The cache is the serving model's: aliases (and Claude names on /anthropic) share it.
        served = resolve_model(
            view.model, endpoint="anthropic" if view.endpoint == "anthropic" else "chat"
        )
        cache_key = CacheKey.for_request(
            key, view.user_id, model=served.id if served is not None else view.model
        )
        lookup = self.cache.lookup(cache_key, prompt)
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
            self.cache.commit(lookup, None if cut else rendered)
        usage = WireUsage(
            prompt_tokens=lookup.usage.prompt_tokens,
            completion_tokens=rendered.completion_tokens,
            cache_hit_tokens=lookup.usage.hit_tokens,
            reasoning_tokens=rendered.reasoning_tokens if view.thinking else None,
        )
        completion = Completion(
            id=self._uuid(),
            created=self.created_from + self._answers - 1,
            model=reported_model(view.model),
            thinking=view.thinking,
            usage=usage,
            text=entry.text,
            reasoning=entry.reasoning,
            tool_calls=tuple(calls),
            finish_reason=entry.effective_finish_reason,
            chunk_size=entry.chunk_size,
        )
        extras: dict[str, Any] = {
            "isolationKey": f"{cache_key.account}/{cache_key.user_id}",
            "promptTokens": usage.prompt_tokens,
            "cacheHitTokens": usage.cache_hit_tokens,
            "completionTokens": usage.completion_tokens,
        }
        if entry.fault is None:
            # The answer as the client assembles it: what the doctor compares the next
            # request's resent turn with.
            if view.endpoint == "chat":
                extras["response"] = chat_completion(completion)["choices"][0]["message"]
            else:
                extras["response"] = {
                    "role": "assistant",
                    "content": anthropic_message(completion)["content"],
                }
        return completion, extras

    def reply_plan(
        self, entry: Reply, view: MockRequest, key: str, prompt: RenderedPrompt
    ) -> tuple[ResponsePlan, dict[str, Any]]:
        """The plan of a 200 answer (with its fault), and the log's derived facts."""
        completion, extras = self._completion(entry, view, key, prompt)
        if entry.fault == "reset":
            return ResponsePlan(status=200, abort="reset"), extras
        if entry.fault == "hang":
            return ResponsePlan(status=200, abort="hang"), extras
        trace = self.trace_header(view.endpoint)
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
        parsed = view.parsed
        if view.endpoint == "chat":
            include_usage = isinstance(parsed, ChatRequest) and parsed.include_usage
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
        actions = _paced(writes, entry.pace_ms)
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

    @staticmethod
    def _json_reply_plan(
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
        actions = _paced(writes, entry.pace_ms)
        if tail is not None:
            actions.append(tail)
        headers = (("content-type", content_type), trace)
        return ResponsePlan(
            status=200, headers=headers, body=tuple(actions), content_length=declared
        )


def _paced(writes: list[bytes], pace_ms: int) -> list[BodyAction]:
    actions: list[BodyAction] = []
    for data in writes:
        if pace_ms:
            actions.append(Pause(seconds=pace_ms / 1000))
        actions.append(Emit(data=data))
    return actions

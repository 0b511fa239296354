"""The transcript golden: a session log as readable turns, steps, headers and requests.

Both renderings are folds over the log alone (the single source of truth): the requests are
rebuilt with :func:`dsh_core.reconstruct_requests`, never taken from a provider. Both are pure
functions of the logs and the working directory, normalized by :class:`Normalizer` (ids in
first-seen order, times dropped or zeroed, the working directory as ``{{cwd}}``, stray UUIDs
swept), so two runs on any machine, in any directory, give the same bytes.

Transcript format (version :data:`TRANSCRIPT_FORMAT_VERSION`; any change to what is written
bumps it): a header line naming the format and version, then per session its turns and steps
in log order — each request header (the first in full, every later one as a diff against the
one before: config fields, a unified diff of the system prompt, tools added at an index,
removed, changed or reordered), each request the model saw (its header, tool names, how many
messages it carried and which are new since the previous request, or where that request's
prefix broke, worded like every other difference by :func:`dsh_core._differences.first_json_difference`),
each response (chunk count, finish reason, failure, usage with cache hit and miss), assistant
messages (text, reasoning, tool calls, dropped calls), tool calls and results, retries,
compaction and turn ends. Text is a JSON string when short or when it has anything
invisible (trailing whitespace, control characters), otherwise a literal block (``|`` keeps
one final newline, ``|-`` none). No line ends in whitespace.

"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_core import (
    EpochHeader,
    Event,
    FinishReason,
    LlmFailure,
    Message,
    OpaqueBlock,
    ReasoningBlock,
    ReconstructedRequest,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    ToolsPlaceholder,
    derive_event_message,
    fold_request_header,
    reconstruct_requests,
)
from dsh_core._assembly import BlockAssembler
from dsh_core._differences import count_difference, first_json_difference
from dsh_core._stream import chunk_from_json

from ._inputs import LogInput, _Log, _primed, logs_of
from ._normalize import Normalizer
from ._text import (
    _COMPACT_JSON_LIMIT,
    _LEGEND,
    _block_safe,
    _compact,
    _inline_raw,
    _pretty,
    _quote,
    _snippet,
    _usage_line,
    _value_lines,
)

__all__ = [
    "TRANSCRIPT_FORMAT",
    "TRANSCRIPT_FORMAT_VERSION",
    "TRANSCRIPT_HEADER",
    "render_transcript",
]

TRANSCRIPT_FORMAT: Final = "dsh-testkit transcript"
TRANSCRIPT_FORMAT_VERSION: Final = 2
"""Bumped whenever the transcript rendering changes, so a stale golden says why it differs."""
TRANSCRIPT_HEADER: Final = f"# {TRANSCRIPT_FORMAT} · format {TRANSCRIPT_FORMAT_VERSION}"
"""The first line of every transcript."""


# ---------------------------------------------------------------------------------------------
# The transcript


@dataclass(slots=True)
class _Attempt:
    """One model call's chunks as they were logged."""

    chunks: int = 0
    assembler: BlockAssembler = field(default_factory=BlockAssembler)
    calls: dict[str, str] = field(default_factory=dict)
    """Tool-call id → name, for every call the stream started (dropped ones included)."""
    usage_shown: bool = False


class _SessionState:
    def __init__(self, log: _Log) -> None:
        self.log = log
        self.header: EpochHeader | None = None
        self.header_count = 0
        self.header_labels: dict[int, str] = {}
        self.requests: dict[int, tuple[int, ReconstructedRequest]] = {}
        self.previous: list[str] = []
        """Canonical JSON of the previous request's messages (for the new-message count)."""
        self.previous_messages: Sequence[Message] = ()
        """The previous request's messages (to word where a broken prefix first differs)."""
        self.sent: dict[int, str] = {}
        """Step-start seq → canonical JSON of the step's first request (to spot resends)."""
        self.attempt: _Attempt | None = None
        self.last_attempt: _Attempt | None = None
        self.depth = 0
        number = 0
        for rebuilt in reconstruct_requests(log.events):
            if rebuilt.attempt == 0:
                number += 1
            if rebuilt.first_response_seq is not None:
                self.requests[rebuilt.first_response_seq] = (number, rebuilt)


class _Transcript:
    def __init__(self, normalizer: Normalizer) -> None:
        self.n = normalizer
        self.out: list[str] = []

    # ---------------------------------------------------------------- output

    def line(self, depth: int, text: str) -> None:
        self.out.append(("  " * depth + text).rstrip())

    def value(self, depth: int, key: str, text: str) -> None:
        for item in _value_lines(key, self.n.text(text)):
            self.line(depth + (1 if item.startswith("  ") else 0), item.removeprefix("  "))

    def json_value(self, depth: int, key: str, value: Any) -> None:
        normalized = self.n.json(value)
        compact = _compact(normalized)
        if len(compact) <= _COMPACT_JSON_LIMIT:
            self.line(depth, f"{key}: {compact}")
            return
        self.line(depth, f"{key}:")
        for item in _pretty(normalized).split("\n"):
            self.line(depth + 1, item)

    def id(self, kind: str, value: str) -> str:
        return self.n.token(kind, value)

    # ---------------------------------------------------------------- sessions

    def session(self, log: _Log, ordinal: int) -> None:
        state = _SessionState(log)
        info = log.info
        self.out.append("")
        if info is None:
            self.line(0, f"session (log {ordinal})")
        else:
            self.line(0, f"session {self.id('session', info.id)}")
            if info.cwd is not None:
                self.line(1, f"cwd: {self.n.text(info.cwd)}")
            if info.parent_session is not None:
                parent = self.id("session", info.parent_session)
                self.line(
                    1,
                    f"forked from {parent}: inherits its first {state.log.seed_length} events "
                    "(rendered with the parent)",
                )
            if info.extra:
                self.json_value(1, "header extras", info.extra)
        for event in log.events[: log.seed_length]:
            self.fold_quietly(state, event)
        for event in log.events[log.seed_length :]:
            self.event(state, event)
        self.close_attempt(state)

    def fold_quietly(self, state: _SessionState, event: Event) -> None:
        """An inherited event: track the header and the last request, print nothing."""
        if event.type in ("request/header", "request/header-delta"):
            state.header = fold_request_header((event,), state.header)
            state.header_count += 1
            state.header_labels[event.seq] = f"h{state.header_count}"
        found = state.requests.get(event.seq)
        if found is not None:
            state.previous = [m.canonical_json() for m in found[1].request.messages]
            state.previous_messages = found[1].request.messages
            state.sent.setdefault(found[1].step_start_seq, found[1].request.canonical_json())

    # ---------------------------------------------------------------- events

    def event(self, state: _SessionState, event: Event) -> None:
        kind, data = event.type, event.data
        if event.seq in state.requests:
            self.close_attempt(state)
            self.request(state, event)
        if kind == "assistant/chunk":
            self.chunk(state, event)
            return
        if kind != "assistant/message":
            self.close_attempt(state)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, state, event)
            return
        flags = " · ignorable" if event.ignorable else ""
        self.line(state.depth, f"{kind}{flags} {_compact(self.n.json(data))}")

    def turn_start(self, state: _SessionState, event: Event) -> None:
        self.out.append("")
        self.line(0, f"turn {event.data.get('turn')}")
        state.depth = 1

    def turn_end(self, state: _SessionState, event: Event) -> None:
        reason = event.data.get("reason")
        self.ending(1, "end", reason)
        state.depth = 0

    def ending(self, depth: int, label: str, reason: Any) -> None:
        if not isinstance(reason, Mapping):
            self.line(depth, f"{label} · {_compact(self.n.json(reason))}")
            return
        kind = reason.get("kind")
        rest = {k: v for k, v in reason.items() if k != "kind"}
        detail = rest.get("reason")
        if (
            kind == "aborted"
            and set(rest) == {"reason"}
            and isinstance(detail, Mapping)
            and set(detail) == {"kind"}
        ):
            self.line(depth, f"{label} · aborted ({detail['kind']})")
        elif kind == "error" and isinstance(rest.get("error"), Mapping) and len(rest) == 1:
            self.failure(depth, f"{label} · error", LlmFailure.from_json(rest["error"]))
        elif rest:
            self.line(depth, f"{label} · {kind} {_compact(self.n.json(rest))}")
        else:
            self.line(depth, f"{label} · {kind}")

    def failure(self, depth: int, head: str, failure: LlmFailure) -> None:
        parts = [head, failure.code]
        if failure.status is not None:
            parts.append(f"HTTP {failure.status}")
        if failure.retryable:
            parts.append("retryable")
        if failure.retry_after_ms is not None:
            parts.append(f"retry after {failure.retry_after_ms} ms")
        if failure.request_id is not None:
            parts.append(f"request {self.id('req', failure.request_id)}")
        self.line(depth, " · ".join(parts))
        self.value(depth + 1, "message", failure.message)

    def step_start(self, state: _SessionState, event: Event) -> None:
        self.line(1, f"step {event.data.get('step')}")
        state.depth = 2

    def step_end(self, state: _SessionState, event: Event) -> None:
        state.depth = 1

    def end_seed(self, state: _SessionState, event: Event) -> None:
        self.line(state.depth, "session/end-seed · the seeded events end here")

    # ---------------------------------------------------------------- headers

    def header_event(self, state: _SessionState, event: Event) -> None:
        previous = state.header
        state.header = fold_request_header((event,), previous)
        state.header_count += 1
        label = f"h{state.header_count}"
        state.header_labels[event.seq] = label
        depth = state.depth
        if event.type == "request/header":
            reason = event.data.get("reason") if isinstance(event.data, Mapping) else None
            head = f"header {label} · {reason}"
        else:
            head = f"header {label} · delta"
        assert state.header is not None
        if previous is None:
            self.line(depth, head)
            self.header_full(depth + 1, state.header)
            return
        self.line(depth, f"{head} · against h{state.header_count - 1}")
        self.header_diff(depth + 1, previous, state.header)

    def header_full(self, depth: int, header: EpochHeader) -> None:
        self.line(depth, f"config: {_compact(self.n.json(header.config.to_json()))}")
        if header.system:
            self.value(depth, "system", header.system)
        else:
            self.line(depth, "system: none")
        self.tools_full(depth, header.tools)

    def tools_full(
        self, depth: int, tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None
    ) -> None:
        if isinstance(tools, ToolsPlaceholder):
            self.line(depth, f"tools: {self.tool_names(tools)}")
            return
        if not tools:
            self.line(depth, "tools: none")
            return
        self.line(depth, f"tools ({len(tools)}): {', '.join(t.name for t in tools)}")
        for schema in tools:
            self.tool(depth + 1, schema)

    def tool(self, depth: int, schema: ToolSchema) -> None:
        self.line(depth, schema.name)
        self.value(depth + 1, "description", schema.description)
        self.json_value(depth + 1, "parameters", schema.parameters)

    def header_diff(self, depth: int, old: EpochHeader, new: EpochHeader) -> None:
        before = len(self.out)
        old_config, new_config = old.config.to_json(), new.config.to_json()
        for key in dict.fromkeys([*old_config, *new_config]):
            a, b = old_config.get(key), new_config.get(key)
            if _compact(a) != _compact(b) or (key in old_config) != (key in new_config):
                self.line(depth, f"config.{key}: {self.config_value(a)} → {self.config_value(b)}")
        if (old.system or None) != (new.system or None):
            self.system_diff(depth, old.system, new.system)
        self.tools_diff(depth, old.tools, new.tools)
        if len(self.out) == before:
            self.line(depth, "unchanged")

    def config_value(self, value: Any) -> str:
        return "absent" if value is None else _compact(self.n.json(value))

    def system_diff(self, depth: int, old: str | None, new: str | None) -> None:
        if not old:
            self.value(depth, "system (added)", new or "")
            return
        if not new:
            self.line(depth, "system: removed")
            return
        a, b = self.n.text(old).split("\n"), self.n.text(new).split("\n")
        self.line(depth, "system:")
        for item in list(difflib.unified_diff(a, b, n=1, lineterm=""))[2:]:
            marker, content = item[:1], item[1:]
            if item.startswith("@@") or _block_safe(content):
                self.line(depth + 1, item)
            else:
                self.line(depth + 1, marker + _quote(content))

    def tools_diff(
        self,
        depth: int,
        old: tuple[ToolSchema, ...] | ToolsPlaceholder | None,
        new: tuple[ToolSchema, ...] | ToolsPlaceholder | None,
    ) -> None:
        if isinstance(old, ToolsPlaceholder) or isinstance(new, ToolsPlaceholder):
            if old != new:
                self.line(depth, f"tools: {self.tool_names(old)} → {self.tool_names(new)}")
            return
        old_by = {t.name: t for t in old or ()}
        new_by = {t.name: t for t in new or ()}
        for name in old_by:
            if name not in new_by:
                self.line(depth, f"tools: - {name}")
        for index, schema in enumerate(new or ()):
            if schema.name not in old_by:
                self.line(depth, f"tools: + {schema.name} at [{index}]")
                self.tool(depth + 1, schema)
        for name, schema in new_by.items():
            was = old_by.get(name)
            if was is None or _compact(was.to_json()) == _compact(schema.to_json()):
                continue
            self.line(depth, f"tools: ~ {name}")
            if was.description != schema.description:
                self.value(depth + 1, "description was", was.description)
                self.value(depth + 1, "description now", schema.description)
            if _compact(was.parameters) != _compact(schema.parameters):
                self.json_value(depth + 1, "parameters were", was.parameters)
                self.json_value(depth + 1, "parameters now", schema.parameters)
        kept_old = [n for n in old_by if n in new_by]
        kept_new = [n for n in new_by if n in old_by]
        if kept_old != kept_new:
            self.line(depth, f"tools: order {', '.join(kept_old)} → {', '.join(kept_new)}")

    @staticmethod
    def tool_names(tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None) -> str:
        if isinstance(tools, ToolsPlaceholder):
            if tools.token is not None:
                return _quote(tools.token)
            return "[" + ", ".join(tools.names or ()) + "] (schemas elided)"
        return ", ".join(t.name for t in tools) if tools else "none"

    # ---------------------------------------------------------------- requests and responses

    def request(self, state: _SessionState, event: Event) -> None:
        number, rebuilt = state.requests[event.seq]
        depth = state.depth
        request = rebuilt.request
        canonical = request.canonical_json()
        if rebuilt.attempt > 0 and state.sent.get(rebuilt.step_start_seq) == canonical:
            self.line(depth, f"request {number} · attempt {rebuilt.attempt + 1} · resent as is")
            return
        state.sent[rebuilt.step_start_seq] = canonical
        label = state.header_labels.get(rebuilt.header_seq or -1, "h?")
        attempt = f" · attempt {rebuilt.attempt + 1}" if rebuilt.attempt > 0 else ""
        self.line(
            depth,
            f"request {number}{attempt} · {label} · tools: {self.tool_names(request.tools)}",
        )
        messages = list(request.messages)
        texts = [m.canonical_json() for m in messages]
        previous = state.previous
        shared = 0
        while shared < min(len(previous), len(texts)) and previous[shared] == texts[shared]:
            shared += 1
        if previous and shared < len(previous):
            self.line(
                depth + 1,
                f"messages: {len(messages)} · the previous request's {len(previous)} are not a "
                f"prefix; first difference: "
                + self.first_difference(state.previous_messages, messages, shared),
            )
        else:
            self.line(depth + 1, f"messages: {len(messages)} · {len(messages) - shared} new")
        for index in range(shared, len(messages)):
            self.line(depth + 1, f"+ [{index}] {self.message_summary(messages[index])}")
        state.previous = texts
        state.previous_messages = messages

    def first_difference(
        self, previous: Sequence[Message], messages: Sequence[Message], at: int
    ) -> str:
        """Where the messages part from the previous request's, in the core's wording
        (normalized like everything else in a golden)."""
        sides = ("previous", "this")
        if at < len(messages):
            # What the model sees first (role and content), then ids and sources.
            for part in (Message.visible_json, self.message_json):
                old, new = self.n.json(part(previous[at])), self.n.json(part(messages[at]))
                found = first_json_difference(f"messages[{at}]", old, new, sides)
                if found is not None:
                    return found
            return f"messages[{at}] differs"
        item = self.n.json(self.message_json(previous[at]))
        return count_difference(
            "messages", len(previous), len(messages), sides, at=f"messages[{at}]", item=item
        )

    def message_json(self, message: Message) -> dict[str, Any]:
        """A message's JSON with its id as the transcript names it (``{{msg-n}}``)."""
        return {**message.to_json(), "id": self.id("msg", message.id)}

    def message_summary(self, message: Message) -> str:
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                parts.append(_snippet(self.n.text(block.text)))
            elif isinstance(block, ReasoningBlock):
                parts.append(f"reasoning {_snippet(self.n.text(block.text))}")
            elif isinstance(block, ToolCallBlock):
                parts.append(f"call {self.id('call', block.id)} {block.name}")
            elif isinstance(block, ToolResultBlock):
                text = "".join(b.text for b in block.content if isinstance(b, TextBlock))
                error = " error" if block.is_error else ""
                parts.append(
                    f"result {self.id('call', block.tool_call_id)}{error} "
                    f"{_snippet(self.n.text(text))}"
                )
            else:
                parts.append(f"<{block.type}>")
        body = " · ".join(parts) if parts else "(empty)"
        return f"{message.role} {self.id('msg', message.id)}: {body}"

    def chunk(self, state: _SessionState, event: Event) -> None:
        attempt = state.attempt
        if attempt is None:
            attempt = state.attempt = _Attempt()
        raw = event.data.get("chunk") if isinstance(event.data, Mapping) else None
        chunk = chunk_from_json(raw)
        attempt.chunks += 1
        attempt.assembler.feed(chunk)
        if isinstance(raw, Mapping):
            if raw.get("type") == "tool-call-delta" and isinstance(raw.get("id"), str):
                attempt.calls.setdefault(raw["id"], str(raw.get("name") or ""))
            block = raw.get("block")
            if isinstance(block, Mapping) and block.get("type") == "tool-call":
                attempt.calls[str(block.get("id"))] = str(block.get("name") or "")
        if chunk.type == "finish":
            self.close_attempt(state)

    def close_attempt(self, state: _SessionState) -> None:
        attempt = state.attempt
        if attempt is None:
            return
        state.attempt = None
        state.last_attempt = attempt
        depth = state.depth
        assembler = attempt.assembler
        count = f"{attempt.chunks} chunk{'s' if attempt.chunks != 1 else ''}"
        if assembler.finish is None:
            self.line(depth, f"response · {count} · no finish chunk")
        else:
            reason: FinishReason = assembler.finish.reason
            head = f"response · {count} · finish {reason.kind}"
            if reason.failure is not None:
                self.failure(depth, head, reason.failure)
            else:
                self.line(depth, head)
            if reason.kind in ("error", "aborted"):
                for block in assembler.interrupted_blocks():
                    if isinstance(block, (TextBlock, ReasoningBlock)):
                        self.value(depth + 1, f"partial {block.type}", block.text)
        if assembler.usage is not None:
            self.line(depth + 1, _usage_line(assembler.usage))
            attempt.usage_shown = True

    def assistant(self, state: _SessionState, event: Event) -> None:
        attempt = state.attempt
        self.close_attempt(state)
        if attempt is None and event.source_event_seqs:
            attempt = state.last_attempt
        data = event.data
        raw = data.get("message")
        message_id = raw.get("id") if isinstance(raw, Mapping) else None
        flags = " · interrupted" if data.get("interrupted") is True else ""
        depth = state.depth
        self.line(depth, f"assistant {self.id('msg', str(message_id))}{flags}")
        message = derive_event_message(event)
        blocks = message.content if message is not None else ()
        if not blocks:
            self.line(depth + 1, "(no content: the message only carries usage)")
        self.blocks(depth + 1, blocks)
        kept = {b.id for b in blocks if isinstance(b, ToolCallBlock)}
        if attempt is not None:
            for call_id, name in attempt.calls.items():
                if call_id not in kept:
                    self.line(
                        depth + 1,
                        f"dropped tool-call {self.id('call', call_id)} {name} (never executed)",
                    )
        usage = data.get("usage")
        if usage is not None and (attempt is None or not attempt.usage_shown):
            self.line(depth + 1, _usage_line(TokenUsage.from_json(usage)))

    def blocks(self, depth: int, blocks: Sequence[Any]) -> None:
        for block in blocks:
            if isinstance(block, TextBlock):
                self.value(depth, "text", block.text)
            elif isinstance(block, ReasoningBlock):
                self.value(depth, "reasoning", block.text)
            elif isinstance(block, ToolCallBlock):
                self.line(
                    depth,
                    f"tool-call {self.id('call', block.id)} {block.name} "
                    f"{_inline_raw(self.n.text(block.arguments))}",
                )
            elif isinstance(block, ToolResultBlock):
                error = " · error" if block.is_error else ""
                self.line(depth, f"tool-result {self.id('call', block.tool_call_id)}{error}")
                self.blocks(depth + 1, block.content)
            elif isinstance(block, OpaqueBlock):
                self.json_value(depth, block.type, block.data)

    # ---------------------------------------------------------------- surface and tools

    def user(self, state: _SessionState, event: Event) -> None:
        data = event.data
        source = data.get("source") if isinstance(data, Mapping) else None
        head = f"user {self.id('msg', str(data.get('id')))}"
        if isinstance(source, Mapping) and source.get("kind") != "user":
            detail = {k: v for k, v in source.items() if k != "kind"}
            head += f" · from {source.get('kind')}"
            if detail:
                head += f" {_compact(self.n.json(detail))}"
        if event.surface_op is not None and event.surface_op != "append":
            shadowed = [
                self.id("msg", str(m.id))
                for seq in (event.source_event_seqs or ())
                if seq < len(state.log.events)
                and (m := derive_event_message(state.log.events[seq])) is not None
            ]
            head += f" · replaces {len(shadowed)} messages: {', '.join(shadowed)}"
        self.line(state.depth, head)
        message = derive_event_message(event)
        if message is not None:
            self.blocks(state.depth + 1, message.content)

    def tool_call(self, state: _SessionState, event: Event) -> None:
        data = event.data
        arguments = data.get("arguments")
        shown = _inline_raw(self.n.text(arguments)) if isinstance(arguments, str) else ""
        call = self.id("call", str(data.get("callId")))
        self.line(state.depth, f"tool/call {call} {data.get('name')} {shown}")

    def tool_result(self, state: _SessionState, event: Event) -> None:
        data = event.data
        message = derive_event_message(event)
        assert message is not None  # a tool/result always projects (the log refuses others)
        depth = state.depth
        call = self.id("call", str(message.source.get("callId")))
        head = f"tool/result {call} · {self.id('msg', message.id)}"
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if any(r.is_error for r in results):
            head += " · error"
        self.line(depth, head)
        for result in results:
            self.blocks(depth + 1, result.content)
        for key in ("error", "meta"):
            if key in data:
                self.json_value(depth + 1, key, data[key])

    def retry(self, state: _SessionState, event: Event) -> None:
        data = event.data
        head = f"llm/retry {data.get('retry')} of {data.get('maxRetries')} · wait {data.get('delayMs')} ms"
        failure = data.get("failure")
        if isinstance(failure, Mapping) and isinstance(failure.get("code"), str):
            head += f" · after {failure['code']}"  # the failed response above shows the rest
        self.line(state.depth, head)

    def compact_summary(self, state: _SessionState, event: Event) -> None:
        data = event.data
        parts = ["compact/summary"]
        if "model" in data:
            parts.append(f"model {data['model']}")
        if "maxTokens" in data:
            parts.append(f"maxTokens {data['maxTokens']}")
        seqs = data.get("shadowedSeqs")
        if isinstance(seqs, list):
            parts.append(f"{len(seqs)} messages shadowed")
        if "shadowedTokenCount" in data:
            parts.append(f"≈{data['shadowedTokenCount']} tokens")
        self.line(state.depth, " · ".join(parts))
        summary = data.get("summary")
        if isinstance(summary, list) and all(
            isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in summary
        ):
            for block in summary:
                self.value(state.depth + 1, "text", block["text"])
        elif summary is not None:
            self.json_value(state.depth + 1, "summary", summary)

    def compact_end(self, state: _SessionState, event: Event) -> None:
        error = event.data.get("error") if isinstance(event.data, Mapping) else None
        if error is None:
            self.line(state.depth, "compact/end")
        else:
            self.line(state.depth, "compact/end · failed")
            self.value(state.depth + 1, "error", str(error))

    def compact_start(self, state: _SessionState, event: Event) -> None:
        self.line(state.depth, "compact/start")


_HANDLERS: Final = {
    "turn/start": _Transcript.turn_start,
    "turn/end": _Transcript.turn_end,
    "step/start": _Transcript.step_start,
    "step/end": _Transcript.step_end,
    "session/end-seed": _Transcript.end_seed,
    "request/header": _Transcript.header_event,
    "request/header-delta": _Transcript.header_event,
    "assistant/message": _Transcript.assistant,
    "user/message": _Transcript.user,
    "tool/call": _Transcript.tool_call,
    "tool/result": _Transcript.tool_result,
    "llm/retry": _Transcript.retry,
    "compact/start": _Transcript.compact_start,
    "compact/summary": _Transcript.compact_summary,
    "compact/end": _Transcript.compact_end,
}


def render_transcript(
    logs: LogInput,
    *,
    cwd: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
    cwd_aliases: Iterable[str | os.PathLike[str]] = (),
) -> str:
    """The transcript golden of ``logs`` (see the module docstring for the format).

    ``cwd`` is the working directory to write as ``{{cwd}}`` (or several spellings of it;
    default: the current one; each log header's ``cwd`` is added), ``cwd_aliases`` more
    spellings of it.
    """
    parsed = logs_of(logs)
    normalizer = _primed(parsed, cwd, cwd_aliases)
    writer = _Transcript(normalizer)
    writer.out.extend([TRANSCRIPT_HEADER, _LEGEND])
    for ordinal, log in enumerate(parsed, start=1):
        writer.session(log, ordinal)
    return "\n".join(writer.out) + "\n"


# ---------------------------------------------------------------------------------------------
# Wire requests

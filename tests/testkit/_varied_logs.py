"""Varied synthetic logs, and requests cut loose from their fold, for the fast-path laws.

audit and cache-report answer "does this request extend the previous one?" in O(1) when both
requests come from one ``reconstruct_requests`` fold (same header objects, one backing message
list). :func:`detached` rebuilds a request with fresh objects and a plain tuple of messages, so
a test can check that the fast answer equals the slow, element-wise one on the same log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

from dsh_core import Event, GenerateOptions, ReconstructedRequest, reconstruct_requests

from ._report_builders import SYSTEM, LogBuilder, snapshot, usage

ACTIONS = ("step", "tool", "turn", "system", "model", "resume", "rewrite", "compaction")

actions = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.integers(0, 2000), st.integers(0, 2000)),
    min_size=1,
    max_size=10,
)
"""Plans for :func:`varied_log`: (action, miss tokens, hit tokens)."""


def _fresh(text: str | None) -> str | None:
    """An equal string that is not the same object (when the text has two characters or more)."""
    return None if text is None else "".join(list(text))


def detached(request: GenerateOptions) -> GenerateOptions:
    """``request`` with a tuple of messages and fresh header objects: the fast paths cannot apply."""
    tools = request.tools
    return dataclasses.replace(
        request,
        messages=tuple(request.messages),
        system=_fresh(request.system),
        tools=tuple(t for t in tools)
        if isinstance(tools, tuple)
        else tools and dataclasses.replace(tools),
    )


def detached_requests(events: Sequence[Event], **kw: Any) -> Iterator[ReconstructedRequest]:
    """:func:`dsh_core.reconstruct_requests`, every request :func:`detached`."""
    for item in reconstruct_requests(events, **kw):
        yield dataclasses.replace(item, request=detached(item.request))


def _replace_prompt(log: LogBuilder, prompt: int, *, compaction: bool) -> None:
    """Replace the turn's prompt: a compaction (bracketed, priced) or a bare history rewrite."""
    checkpoint = {
        "id": log.events[prompt].data["id"],
        "role": "user",
        "content": [{"type": "text", "text": "<compacted-summary>short</compacted-summary>"}],
        "source": {"kind": "user"},
    }
    sources = [prompt]
    if compaction:
        log.append("compaction/start", {"compactionId": f"c{prompt}", "turn": log.turn_no})
        sources.insert(
            0,
            log.append(
                "compaction/summary",
                {"compactionId": f"c{prompt}", "shadowedRange": {"start": prompt, "end": prompt}},
            ),
        )
    log.append(
        "user/message",
        checkpoint,
        surface_op={"op": "replace", "start": prompt, "end": prompt},
        source_event_seqs=sources,
    )
    if compaction:
        log.append("compaction/end", {"compactionId": f"c{prompt}", "turn": log.turn_no})


def varied_log(plan: Sequence[tuple[str, int, int]], *, with_usage: bool = True) -> LogBuilder:
    """A log with steps, tool calls, turns, header changes, model switches, resumes,
    compactions and rewrites, in the order ``plan`` says (each action ends with a step).

    Without usage, a cache report shows its raw estimates (nothing to scale them by)."""
    log = LogBuilder()
    prompt: int | None = log.start_turn("first question " * 20)
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0) if with_usage else None)
    for n, (action, miss, hit) in enumerate(plan):
        header_event = None
        tool = None
        if action == "turn":
            log.end_turn()
            prompt = log.start_turn(f"question {n} " * 10)
        elif action == "tool":
            tool = "grep"
        elif action == "system":
            header_event = snapshot("change", system=f"{SYSTEM}\nrule {n}: be brief")
        elif action == "model":
            header_event = snapshot("change", model=f"deepseek-model-{n}")
        elif action == "resume":
            header_event = snapshot("resume")
        elif action in ("rewrite", "compaction") and prompt is not None:
            _replace_prompt(log, prompt, compaction=action == "compaction")
            prompt = None  # replaced once: the surface no longer holds that node
        log.step(
            header_event=header_event,
            tool_call=tool,
            usage_data=usage(miss, hit) if with_usage else None,
        )
    log.end_turn()
    return log

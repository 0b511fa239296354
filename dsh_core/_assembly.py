"""Chunks → content blocks → message: :class:`BlockAssembler` is the one assembly, shared by the
loop, replay and the interrupted-prefix rule."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._json import freeze_json
from ._messages import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
)
from ._stream import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
    UsageChunk,
)

__all__ = [
    "BlockAssembler",
    "message_from_blocks",
]


@dataclass(slots=True)
class _OpenBlock:
    kind: str
    text: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


class BlockAssembler:
    """Assembles chunks into content blocks (docs/design.md §6.4).

    Blocks in first-seen index order; a ``block-end`` is authoritative (first close wins, later
    deltas for a closed index are ignored); an open block is assembled from its deltas (a tool call
    without id becomes ``call-<index>``); on a ``max-tokens`` finish tool calls are dropped; a
    missing finish counts as ``stop``; the last usage wins.
    """

    def __init__(self) -> None:
        self._order: list[int] = []
        self._open: dict[int, _OpenBlock] = {}
        self._closed: dict[int, ContentBlock] = {}
        self.usage: TokenUsage | None = None
        self.finish: Finish | None = None

    def _touch(self, index: int, kind: str) -> _OpenBlock | None:
        if index in self._closed:
            return None
        block = self._open.get(index)
        if block is None:
            block = self._open[index] = _OpenBlock(kind)
            self._order.append(index)
        return block

    def feed(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, BlockStart):
            self._touch(chunk.index, chunk.block_type)
        elif isinstance(chunk, (TextDelta, ReasoningDelta)):
            block = self._touch(
                chunk.index, "text" if isinstance(chunk, TextDelta) else "reasoning"
            )
            if block is not None:
                block.text.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            block = self._touch(chunk.index, "tool-call")
            if block is not None:
                block.call_id = block.call_id or chunk.id or None
                if chunk.name is not None and block.name is None:
                    block.name = chunk.name
                block.text.append(chunk.arguments_delta)
        elif isinstance(chunk, BlockEnd):
            if chunk.index not in self._closed:
                if chunk.index not in self._open:
                    self._order.append(chunk.index)
                self._open.pop(chunk.index, None)
                self._closed[chunk.index] = chunk.block
        elif isinstance(chunk, UsageChunk):
            self.usage = chunk.usage
        elif isinstance(chunk, Finish):
            self.finish = chunk
        else:
            raise TypeError(f"not a stream chunk: {chunk!r}")

    @property
    def finish_reason(self) -> FinishReason:
        return self.finish.reason if self.finish is not None else FinishReason(kind="stop")

    def _assemble_open(self, index: int, block: _OpenBlock) -> ContentBlock:
        text = "".join(block.text)
        if block.kind == "reasoning":
            return ReasoningBlock(text=text)
        if block.kind == "tool-call":
            return ToolCallBlock(
                id=block.call_id or f"call-{index}", name=block.name or "", arguments=text
            )
        return TextBlock(text=text)

    def blocks(self) -> tuple[ContentBlock, ...]:
        """The assembled blocks; tool calls are dropped on a ``max-tokens`` finish."""
        out: list[ContentBlock] = []
        drop_calls = self.finish_reason.kind == "max-tokens"
        for index in self._order:
            block = self._closed.get(index)
            if block is None:
                block = self._assemble_open(index, self._open[index])
            if drop_calls and isinstance(block, ToolCallBlock):
                continue
            out.append(block)
        return tuple(out)

    def interrupted_blocks(self) -> tuple[ContentBlock, ...]:
        """What survives a cancellation: non-blank text and reasoning only, closed or open."""
        out: list[ContentBlock] = []
        for index in self._order:
            block = self._closed.get(index)
            if block is None:
                block = self._assemble_open(index, self._open[index])
            if isinstance(block, (TextBlock, ReasoningBlock)) and block.text.strip():
                out.append(block)
        return tuple(out)


def message_from_blocks(
    blocks: tuple[ContentBlock, ...], *, provider: str, model: str, id: str
) -> Message:
    """An assistant message over assembled blocks."""
    return Message(
        id=id,
        role="assistant",
        content=blocks,
        source=freeze_json({"kind": "model", "provider": provider, "model": model}, path="source"),
    )

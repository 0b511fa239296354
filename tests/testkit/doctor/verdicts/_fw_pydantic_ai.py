"""pydantic-ai (``OpenAIChatModel`` with its ``DeepSeekProvider``): an agent with tools, one
``agent.run`` per user turn, the history carried with ``message_history``.

The killers, the way its users produce them: instructions written by a function that puts the
current time in (``@agent.instructions``) or reads a setting the user changed; a tool hidden by
its ``prepare`` function until the user unlocks it (it then appears in registration order,
mid-list); a history processor (``ProcessHistory``) that keeps only the last two turns; another
``model=`` for one run; a history processor that strips the ``ThinkingPart`` s to save tokens.
pydantic-ai itself writes arguments back from their parsed form: compact JSON, and ``''`` (what
DeepSeek writes for a tool without parameters) as ``'{}'``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

import pydantic_ai
from openai import AsyncOpenAI
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ThinkingPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.deepseek import DeepSeekProvider
from pydantic_ai.tools import RunContext, ToolDefinition

from ._scenarios import (
    API_KEY,
    EDITED_SYSTEM_PROMPT,
    MODEL,
    PROMPTS,
    SWITCHED_MODEL,
    SYSTEM_PROMPT,
    THINKING_OFF,
    TOOL_DOCS,
    Framework,
    Plant,
    Scene,
    clock,
    timestamped,
    tool_result,
)

__all__ = ["PYDANTIC_AI"]


@dataclass(slots=True, kw_only=True)
class _Settings:
    """What the user's application keeps between turns."""

    system: str = SYSTEM_PROMPT
    now: datetime | None = None
    delete_unlocked: bool = False
    keep_turns: int | None = None
    dropped: list[int] = field(default_factory=list)


def _keep_last_turns(settings: _Settings) -> Any:
    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        if settings.keep_turns is None:
            return messages
        starts = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest)
            and any(getattr(p, "part_kind", "") == "user-prompt" for p in m.parts)
        ]
        if len(starts) <= settings.keep_turns:
            return messages
        cut = starts[-settings.keep_turns]
        settings.dropped.append(cut)
        return messages[cut:]

    return processor


def _strip_thinking(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [
        replace(m, parts=[p for p in m.parts if not isinstance(p, ThinkingPart)])
        if isinstance(m, ModelResponse)
        else m
        for m in messages
    ]


def _agent(scene: Scene, client: AsyncOpenAI, settings: _Settings) -> Any:
    processors: list[Any] = [_keep_last_turns(settings)]
    if scene.drops_reasoning:
        processors.append(_strip_thinking)
    agent: Any = pydantic_ai.Agent(
        OpenAIChatModel(MODEL, provider=DeepSeekProvider(openai_client=client)),
        model_settings=None if scene.thinking else {"extra_body": THINKING_OFF},
        capabilities=[ProcessHistory(p) for p in processors],
    )

    @agent.instructions
    def instructions() -> str:
        if settings.now is not None:
            return timestamped(settings.system, settings.now)
        return settings.system

    async def only_when_unlocked(
        ctx: RunContext[Any], definition: ToolDefinition
    ) -> ToolDefinition | None:
        return definition if settings.delete_unlocked else None

    @agent.tool_plain(description=TOOL_DOCS["list_notes"])
    def list_notes() -> str:
        return tool_result("list_notes", {})

    @agent.tool_plain(description=TOOL_DOCS["read_note"])
    def read_note(path: str) -> str:
        return tool_result("read_note", {"path": path})

    @agent.tool_plain(description=TOOL_DOCS["delete_note"], prepare=only_when_unlocked)
    def delete_note(path: str) -> str:
        return tool_result("delete_note", {"path": path})

    @agent.tool_plain(description=TOOL_DOCS["save_note"])
    def save_note(path: str, content: str) -> str:
        return tool_result("save_note", {"path": path, "content": content})

    return agent


async def _play(scene: Scene) -> None:
    settings = _Settings()
    async with AsyncOpenAI(base_url=scene.base_url, api_key=API_KEY, max_retries=0) as client:
        agent = _agent(scene, client, settings)
        history: list[ModelMessage] = []
        for turn, prompt in enumerate(PROMPTS, start=1):
            model = None
            if scene.name == "volatile-system-text":
                settings.now = clock(turn)
            if turn == 2 and scene.name == "system-changed":
                settings.system = EDITED_SYSTEM_PROMPT
            if turn == 2 and scene.name == "tools-changed":
                settings.delete_unlocked = True
            if turn == 3 and scene.name == "history-rewritten":
                settings.keep_turns = 2
            if turn == 3 and scene.name == "params-changed":
                model = OpenAIChatModel(
                    SWITCHED_MODEL, provider=DeepSeekProvider(openai_client=client)
                )
            try:
                result = await agent.run(prompt, message_history=history, model=model)
            except ModelHTTPError as error:
                scene.note(f"refused: {error.status_code}")
                return
            history = result.all_messages()
        if settings.dropped:
            scene.note(f"history processor cut the history at message {settings.dropped[0]}")


def drive(scene: Scene) -> None:
    asyncio.run(_play(scene))


PYDANTIC_AI: Final = Framework(
    name="pydantic-ai",
    drive=drive,
    resends="compact",
    empty_arguments=True,
    plants={
        # pydantic-ai fills an empty reasoning_content into a tool-call turn that lost its
        # thinking part (the API accepts ""), so the tool step is accepted and loses its hit;
        # the next turn's request is refused: its plain answer turn carries no reasoning and
        # the request offers tools (the V4.1 pass-back rule, docs/wire.md §1.4).
        "reasoning-dropped": (
            Plant(
                index=1, code="reasoning-dropped", severity="loss", accepted=("reasoning-altered",)
            ),
            Plant(
                index=2,
                code="reasoning-dropped",
                severity="refusal",
                also=(("request-refused", "refusal"),),
            ),
        ),
        # Accepted (a service without the pass-back rule): both tool-call turns go back with
        # reasoning_content "", and the plain answer turns without it.
        "reasoning-dropped-accepted": tuple(
            Plant(
                index=i, code="reasoning-dropped", severity="loss", accepted=("reasoning-altered",)
            )
            for i in (1, 3)
        ),
    },
    requests={"reasoning-dropped": 3},
)

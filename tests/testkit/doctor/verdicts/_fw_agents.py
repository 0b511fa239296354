"""The OpenAI Agents SDK (``openai-agents``, its Chat Completions model): an agent with function
tools, one ``Runner.run`` per user turn, the history carried as ``result.to_input_list()``.

The killers, the way its users produce them: ``instructions`` as a function that puts the
current time in or reads a setting the user changed; a tool whose ``is_enabled`` turns true
between turns (it then appears where it was declared, mid-list); the input list cut to its last
turns; a clone of the agent with another model for one turn; the history kept without its
``reasoning`` items (to keep it small), so a tool-call turn goes back without its reasoning.
The SDK writes the model's ``''`` arguments back as ``'{}'`` and any other arguments string as
the model produced it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import agents
import openai
from openai import AsyncOpenAI

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

__all__ = ["AGENTS_SDK"]


@dataclass(slots=True, kw_only=True)
class _Settings:
    system: str = SYSTEM_PROMPT
    now: datetime | None = None
    delete_unlocked: bool = False


def _tools(settings: _Settings) -> list[Any]:
    def list_notes() -> str:
        return tool_result("list_notes", {})

    def read_note(path: str) -> str:
        return tool_result("read_note", {"path": path})

    def delete_note(path: str) -> str:
        return tool_result("delete_note", {"path": path})

    def save_note(path: str, content: str) -> str:
        return tool_result("save_note", {"path": path, "content": content})

    def unlocked(_context: Any, _agent: Any) -> bool:
        return settings.delete_unlocked

    return [
        agents.function_tool(list_notes, description_override=TOOL_DOCS["list_notes"]),
        agents.function_tool(read_note, description_override=TOOL_DOCS["read_note"]),
        agents.function_tool(
            delete_note, description_override=TOOL_DOCS["delete_note"], is_enabled=unlocked
        ),
        agents.function_tool(save_note, description_override=TOOL_DOCS["save_note"]),
    ]


def _model(client: AsyncOpenAI, name: str) -> Any:
    return agents.OpenAIChatCompletionsModel(model=name, openai_client=client)


def _user_turn_starts(items: list[Any]) -> list[int]:
    return [
        i
        for i, item in enumerate(items)
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type") != "reasoning"
    ]


async def _play(scene: Scene) -> None:
    settings = _Settings()

    def instructions(_context: Any, _agent: Any) -> str:
        if settings.now is not None:
            return timestamped(settings.system, settings.now)
        return settings.system

    async with AsyncOpenAI(base_url=scene.base_url, api_key=API_KEY, max_retries=0) as client:
        agent = agents.Agent(
            name="notewise",
            instructions=instructions,
            model=_model(client, MODEL),
            model_settings=agents.ModelSettings(
                extra_body=None if scene.thinking else THINKING_OFF
            ),
            tools=_tools(settings),
        )
        run_config = agents.RunConfig(tracing_disabled=True)  # tracing would leave the machine
        history: list[Any] = []
        for turn, prompt in enumerate(PROMPTS, start=1):
            current = agent
            if scene.name == "volatile-system-text":
                settings.now = clock(turn)
            if turn == 2 and scene.name == "system-changed":
                settings.system = EDITED_SYSTEM_PROMPT
            if turn == 2 and scene.name == "tools-changed":
                settings.delete_unlocked = True
            if turn == 3 and scene.name == "history-rewritten":
                last = _user_turn_starts(history)[-1]
                history = history[last:]  # keep the last turn (and the one about to start)
                scene.note(f"input list cut to the items from {last} on")
            if turn == 3 and scene.name == "params-changed":
                current = agent.clone(model=_model(client, SWITCHED_MODEL))
            if scene.drops_reasoning:
                history = [i for i in history if i.get("type") != "reasoning"]
            try:
                result = await agents.Runner.run(
                    current, [*history, {"role": "user", "content": prompt}], run_config=run_config
                )
            except openai.BadRequestError as error:
                scene.note(f"refused: {error.message}")
                return
            history = result.to_input_list()


def drive(scene: Scene) -> None:
    asyncio.run(_play(scene))


AGENTS_SDK: Final = Framework(
    name="agents-sdk",
    drive=drive,
    resends="spaced",
    empty_arguments=True,
    plants={
        # the history loses its reasoning items between turns: turn 2's first request is the
        # first to resend the tool-call turn without its reasoning_content
        "reasoning-dropped": (
            Plant(
                index=2,
                code="reasoning-dropped",
                severity="refusal",
                also=(("request-refused", "refusal"),),
            ),
        ),
        # Accepted: each turn's tool-call turn loses its reasoning when the next turn starts.
        "reasoning-dropped-accepted": tuple(
            Plant(index=i, code="reasoning-dropped", severity="loss") for i in (2, 4)
        ),
    },
    requests={"reasoning-dropped": 3},
)

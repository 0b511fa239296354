"""The openai SDK: a hand-written chat loop, as its users write one.

The loop keeps ``messages`` itself: it appends the model's message (``model_dump``), runs each
tool, appends the results, and asks again until the model answers without tools. The killers
are the edits such a loop makes: an f-string timestamp in the system prompt, the prompt string
edited, a tool inserted into the ``tools`` list, the oldest turn replaced by a summary, another
``model=``, the assistant turn rebuilt by hand without ``reasoning_content``, and the arguments
stored parsed and written back with ``json.dumps(..., sort_keys=True)`` (another key order) or
plain ``json.dumps`` (other spacing).
"""

from __future__ import annotations

import json
from typing import Any, Final

import openai

from ._scenarios import (
    API_KEY,
    EDITED_SYSTEM_PROMPT,
    MODEL,
    PROMPTS,
    SWITCHED_MODEL,
    SYSTEM_PROMPT,
    THINKING_OFF,
    TOOL_DOCS,
    TOOLS,
    TOOLS_WITH_DELETE,
    Framework,
    Scene,
    clock,
    timestamped,
    tool_result,
)

__all__ = ["OPENAI_SDK"]

_PARAMETERS: Final[dict[str, dict[str, Any]]] = {
    "list_notes": {"type": "object", "properties": {}},
    "read_note": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "delete_note": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "save_note": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
}


def _tools(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": TOOL_DOCS[name],
                "parameters": _PARAMETERS[name],
            },
        }
        for name in names
    ]


def _assistant(scene: Scene, message: Any) -> dict[str, Any]:
    """The model's message as the loop appends it to the history."""
    if scene.drops_reasoning:
        # Rebuilt by hand from the fields the loop knows about: the reasoning is left out.
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [c.model_dump() for c in message.tool_calls]
        return out
    dumped: dict[str, Any] = message.model_dump(exclude_none=True)
    if scene.name in ("tool-args-reserialized", "tool-args-respaced"):
        # The loop keeps arguments parsed and writes them back itself.
        sort = scene.name == "tool-args-reserialized"
        for call in dumped.get("tool_calls") or ():
            parsed = json.loads(call["function"]["arguments"] or "{}")
            call["function"]["arguments"] = json.dumps(parsed, sort_keys=sort)
    return dumped


def drive(scene: Scene) -> None:
    client = openai.OpenAI(base_url=scene.base_url, api_key=API_KEY, max_retries=0)
    system = SYSTEM_PROMPT
    tools: tuple[str, ...] = TOOLS
    model = MODEL
    extra = None if scene.thinking else THINKING_OFF
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    try:
        for turn, prompt in enumerate(PROMPTS, start=1):
            if scene.name == "volatile-system-text":
                messages[0] = {"role": "system", "content": timestamped(system, clock(turn))}
            if turn == 2 and scene.name == "system-changed":
                messages[0] = {"role": "system", "content": EDITED_SYSTEM_PROMPT}
            if turn == 2 and scene.name == "tools-changed":
                tools = TOOLS_WITH_DELETE
            if turn == 3 and scene.name == "history-rewritten":
                # The first exchange replaced by a one-line summary to save tokens.
                first_answer = next(
                    i for i, m in enumerate(messages) if m["role"] == "user" and i > 1
                )
                summary = {"role": "user", "content": "(Earlier: notes listed, idea saved.)"}
                messages[1:first_answer] = [summary]
                scene.note("turn 1 replaced by a summary")
            if turn == 3 and scene.name == "params-changed":
                model = SWITCHED_MODEL
            messages.append({"role": "user", "content": prompt})
            while True:
                try:
                    reply = client.chat.completions.create(
                        model=model,
                        messages=messages,  # type: ignore[arg-type]  # plain dicts, as users write them
                        tools=_tools(tools),  # type: ignore[arg-type]
                        extra_body=extra,
                    )
                except openai.BadRequestError as error:
                    scene.note(f"refused: {error.message}")
                    return
                message = reply.choices[0].message
                messages.append(_assistant(scene, message))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    assert call.type == "function"
                    arguments = json.loads(call.function.arguments or "{}")
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call.id,
                            "content": tool_result(call.function.name, arguments),
                        }
                    )
    finally:
        client.close()


OPENAI_SDK: Final = Framework(
    name="openai-sdk",
    drive=drive,
    resends="spaced",
    empty_arguments=False,
)

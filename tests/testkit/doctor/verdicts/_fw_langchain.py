"""langchain-deepseek (``ChatDeepSeek``): a tool loop over LangChain messages, the way its
documentation shows one — ``bind_tools``, invoke, run each ``tool_call``, append a
``ToolMessage``, invoke again — with the system prompt from a ``ChatPromptTemplate``.

The killers, the way its users produce them: a ``{now}`` variable in the system template; the
template's text edited; ``bind_tools`` with a tool inserted into the list; the history cut with
LangChain's own ``trim_messages``; another ``ChatDeepSeek(model=...)``. Two come from
LangChain itself: it writes tool-call arguments back from their parsed form
(``json.dumps``: spaced, and ``''`` as ``'{}'``), and in thinking mode it keeps the model's
``reasoning_content`` in ``additional_kwargs`` without sending it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import openai
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import StructuredTool
from langchain_deepseek import ChatDeepSeek

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
    tool_result,
)

__all__ = ["LANGCHAIN_DEEPSEEK"]


def list_notes() -> str:
    return tool_result("list_notes", {})


def read_note(path: str) -> str:
    return tool_result("read_note", {"path": path})


def delete_note(path: str) -> str:
    return tool_result("delete_note", {"path": path})


def save_note(path: str, content: str) -> str:
    return tool_result("save_note", {"path": path, "content": content})


_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {
    "list_notes": list_notes,
    "read_note": read_note,
    "delete_note": delete_note,
    "save_note": save_note,
}
_TOOLS: Final = {
    name: StructuredTool.from_function(function, name=name, description=TOOL_DOCS[name])
    for name, function in _FUNCTIONS.items()
}


def _chat(scene: Scene, model: str) -> ChatDeepSeek:
    return ChatDeepSeek(
        model=model,
        api_key=API_KEY,  # type: ignore[arg-type]
        base_url=scene.base_url,
        max_retries=0,
        extra_body=None if scene.thinking else THINKING_OFF,
    )


def drive(scene: Scene) -> None:
    timestamp = scene.name == "volatile-system-text"
    system = ("Current date and time: {now} UTC\n" if timestamp else "") + SYSTEM_PROMPT
    prompt = ChatPromptTemplate.from_messages([("system", system), MessagesPlaceholder("history")])
    chat = _chat(scene, MODEL)
    tools: tuple[str, ...] = TOOLS
    history: list[BaseMessage] = []
    for turn, text in enumerate(PROMPTS, start=1):
        if turn == 2 and scene.name == "system-changed":
            prompt = ChatPromptTemplate.from_messages(
                [("system", EDITED_SYSTEM_PROMPT), MessagesPlaceholder("history")]
            )
        if turn == 2 and scene.name == "tools-changed":
            tools = TOOLS_WITH_DELETE
        if turn == 3 and scene.name == "params-changed":
            chat = _chat(scene, SWITCHED_MODEL)
        history.append(HumanMessage(text))
        if turn == 3 and scene.name == "history-rewritten":
            # LangChain's own trimmer: the last five messages, starting on a human turn.
            history = trim_messages(
                history, strategy="last", token_counter=len, max_tokens=5, start_on="human"
            )
            scene.note(f"trim_messages kept {len(history)} messages")
        bound = chat.bind_tools([_TOOLS[name] for name in tools])
        variables: dict[str, Any] = {"history": history}
        if timestamp:
            variables["now"] = clock(turn).strftime("%Y-%m-%d %H:%M:%S")
        while True:
            try:
                answer = bound.invoke(prompt.invoke(variables))
            except openai.BadRequestError as error:
                scene.note(f"refused: {error.message}")
                return
            assert isinstance(answer, AIMessage)
            history.append(answer)
            if not answer.tool_calls:
                break
            for call in answer.tool_calls:
                result = _TOOLS[call["name"]].invoke(call["args"])
                history.append(ToolMessage(str(result), tool_call_id=str(call["id"])))


LANGCHAIN_DEEPSEEK: Final = Framework(
    name="langchain-deepseek",
    drive=drive,
    resends="spaced",
    empty_arguments=True,
)

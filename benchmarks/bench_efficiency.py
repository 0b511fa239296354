"""7. Cache efficiency side by side: our loop, pydantic-ai, the OpenAI Agents SDK, LangChain
(langchain-deepseek), and a naive timestamped client — each run through the cache doctor.

The same scripted task — six user turns, each three ``read_file`` calls and an answer (24 model
requests), under a ~10 KB system prompt — is driven by three clients against the loopback mock
server (a fresh server and cache per client):

- ``dsh_core.Agent`` with ``dsh_core.providers.deepseek.DeepSeekProvider`` (streaming);
- pydantic-ai's ``Agent`` with ``OpenAIChatModel`` + ``DeepSeekProvider`` (its OpenAI-compatible
  client, the ``openai`` SDK), the history carried with ``message_history``;
- the OpenAI Agents SDK's ``Runner`` with ``OpenAIChatCompletionsModel`` (the ``openai`` SDK),
  the history carried with ``to_input_list()``;
- LangChain's ``ChatDeepSeek`` (langchain-deepseek) with ``bind_tools``, a hand-written tool
  loop over its messages;
- a naive loop over the ``openai`` SDK that writes the current time into its system prompt on
  every request (the classic prefix bust).

Each client's traffic, as the mock recorded it (bodies, the scripted answers, the simulated
usage), then goes through the cache doctor (``dsh_testkit.doctor.diagnose``), which attributes
every lost hit to a cause code (``tool-args-reserialized``, ``volatile-system-text``, …).

The mock's prefix-cache simulator is wrapped to record every request's prompt tokens, hit and
reply. Efficiency = total hit tokens / total reusable tokens, where a request's reusable tokens
are what an append-only client would reuse: the previous request's prompt plus its reply (rounded
down to the cache granularity), 0 for the first request.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_core import Agent, AgentOptions, Session, tool
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.prompt import PrefixCacheSimulator
from dsh_testkit.prompt._cache_values import CacheLookup
from dsh_testkit.prompt._template_tokens import USER, RenderedCompletion

from ._common import Figure, Section

__all__ = ["run"]

MODEL = "deepseek-chat"
API_KEY = "sk-bench-efficiency"
TURNS = 6
CALLS_PER_TURN = 3
QUICK_TURNS = 2
SYSTEM_PROMPT = "\n".join(
    [
        "You are a senior engineer reviewing a Python repository.",
        *(
            f"Guideline {i}: read the relevant files before answering, cite paths, "
            "and keep every answer short and concrete."
            for i in range(1, 91)
        ),
    ]
)
"""91 lines, about 10 KB (≈ 2,300 tokens): the long, stable part of every prompt."""


def _file_text(path: str) -> str:
    return f"# {path}\n" + "".join(f"def helper_{i}(x):\n    return x + {i}\n" for i in range(12))


def _prompts(turns: int) -> list[str]:
    return [f"Review module group {t}: what do its three files do?" for t in range(turns)]


def _script(turns: int) -> list[Reply]:
    entries: list[Reply] = []
    for t in range(turns):
        for c in range(CALLS_PER_TURN):
            path = f"src/group_{t}/mod_{c}.py"
            entries.append(
                Reply(
                    tool_calls=(ToolCall(name="read_file", arguments=json.dumps({"path": path})),)
                )
            )
        entries.append(Reply(text=f"Group {t}: three small helper modules, each adds a constant."))
    return entries


class _RecordingCache(PrefixCacheSimulator):
    """The mock's simulator, keeping each committed request: prompt, cache outcome, reply."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[CacheLookup, tuple[int, ...]]] = []

    def commit(
        self, lookup: CacheLookup, completion: RenderedCompletion | Sequence[int] | None
    ) -> None:
        super().commit(lookup, completion)
        if isinstance(completion, RenderedCompletion):
            reply = completion.tokens
        else:
            reply = tuple(completion or ())
        self.records.append((lookup, reply))


@dataclass(slots=True, kw_only=True)
class _Outcome:
    name: str
    requests: int = 0
    prompt_tokens: int = 0
    hit_tokens: int = 0
    reusable_tokens: int = 0
    first_loss: str = "none"
    departures: int = 0
    """Requests whose prompt does not extend the previous prompt + reply."""
    error: str | None = None
    per_request: list[tuple[int, int, int]] = field(default_factory=list)
    """(prompt, hit, reusable) per request."""
    causes: dict[str, int] = field(default_factory=dict)
    """The cache doctor's cause codes and on how many requests each was found."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _where(tokens: Sequence[int], prompt_length: int, position: int) -> str:
    """Which part of the previous request a divergence at ``position`` falls in."""
    if position >= prompt_length:
        return "inside the previous reply: the resent assistant turn is not what the model sent"
    try:
        first_user = list(tokens[:prompt_length]).index(USER)
    except ValueError:
        first_user = prompt_length
    if position < first_user:
        return "in the system prompt / tool schemas"
    return "in the earlier history"


def _analyse(name: str, cache: _RecordingCache) -> _Outcome:
    outcome = _Outcome(name=name)
    granularity = cache.granularity
    previous: tuple[int, ...] | None = None
    previous_prompt = 0
    for index, (lookup, reply) in enumerate(cache.records, start=1):
        tokens = tuple(lookup.tokens)
        hit = lookup.usage.hit_tokens
        reusable = 0
        if previous is not None:
            reusable = min(len(previous), len(tokens)) // granularity * granularity
            shared = _common_prefix(tokens, previous)
            if shared < len(previous):
                outcome.departures += 1
                if outcome.first_loss == "none":
                    outcome.first_loss = (
                        f"request {index} (hit {hit:,} of {reusable:,} reusable tokens): its "
                        f"prompt leaves the previous prompt + reply at token {shared:,} of "
                        f"{len(previous):,}, {_where(previous, previous_prompt, shared)}"
                    )
        outcome.per_request.append((len(tokens), hit, reusable))
        outcome.requests += 1
        outcome.prompt_tokens += len(tokens)
        outcome.hit_tokens += hit
        outcome.reusable_tokens += reusable
        previous, previous_prompt = tokens + reply, len(tokens)
    return outcome


async def _drive(
    name: str, turns: int, client: Callable[[str, list[str]], Awaitable[None]]
) -> _Outcome:
    cache = _RecordingCache()
    mock = MockDeepSeek(_script(turns), seed=0, cache=cache)
    with MockServer(mock) as server:
        try:
            await client(server.base_url, _prompts(turns))
        except ImportError:
            raise  # the peer is not installed: "not measured", not a failure of the peer
        except Exception as exc:  # a peer failing is a finding to report, not a crash
            outcome = _analyse(name, cache)
            outcome.error = f"{type(exc).__name__}: {str(exc)[:300]}"
            outcome.causes = _doctor(mock)
            return outcome
    outcome = _analyse(name, cache)
    outcome.causes = _doctor(mock)
    return outcome


def _doctor(mock: MockDeepSeek) -> dict[str, int]:
    """The cache doctor's cause counts over what the mock received (reported usage)."""
    from dsh_testkit.doctor import diagnose

    return diagnose(mock, simulate=False).counts()


async def _ours(base_url: str, prompts: list[str]) -> None:
    from dsh_core.providers.deepseek import DeepSeekProvider

    @tool(
        name="read_file",
        description="Read a file of the repository.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    )
    async def read_file(args: Any, ctx: Any) -> str:
        return _file_text(str(args["path"]))

    provider = DeepSeekProvider(api_key=API_KEY, base_url=base_url)
    agent = Agent(
        Session.create("bench-efficiency"),
        provider,
        AgentOptions(provider="deepseek", model=MODEL, system=SYSTEM_PROMPT),
        tools=[read_file],
    )
    try:
        for prompt in prompts:
            await agent.run(prompt)
    finally:
        await provider.aclose()


async def _pydantic_ai(base_url: str, prompts: list[str]) -> None:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider as PydanticDeepSeek

    async def read_file(path: str) -> str:
        """Read a file of the repository."""
        return _file_text(path)

    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    model = OpenAIChatModel(MODEL, provider=PydanticDeepSeek(openai_client=client))
    agent = PydanticAgent(model, system_prompt=SYSTEM_PROMPT, tools=[read_file])
    history: Any = None
    try:
        for prompt in prompts:
            result = await agent.run(prompt, message_history=history)
            history = result.all_messages()
    finally:
        await client.close()


async def _openai_agents(base_url: str, prompts: list[str]) -> None:
    from agents import (
        Agent as AgentsAgent,
    )
    from agents import (
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    async def read_file(path: str) -> str:
        """Read a file of the repository."""
        return _file_text(path)

    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = AgentsAgent(name="reviewer", instructions=SYSTEM_PROMPT, model=model, tools=[read_file])
    history: list[Any] = []
    try:
        for prompt in prompts:
            result = await Runner.run(agent, [*history, {"role": "user", "content": prompt}])
            history = result.to_input_list()
    finally:
        await client.close()


async def _langchain(base_url: str, prompts: list[str]) -> None:
    import httpx2
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool as langchain_tool
    from langchain_deepseek import ChatDeepSeek

    @langchain_tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return _file_text(path)

    http = httpx2.AsyncClient()  # closed here, inside the loop that used it
    llm = ChatDeepSeek(  # type: ignore[call-arg, unused-ignore]  # only with the bench extra
        model=MODEL,
        api_key=API_KEY,  # type: ignore[arg-type, unused-ignore]  # a SecretStr in langchain
        api_base=base_url,
        max_retries=0,
        http_async_client=http,
    )
    bound = llm.bind_tools([read_file])
    messages: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT)]
    try:
        for prompt in prompts:
            messages.append(HumanMessage(prompt))
            while True:
                answer = await bound.ainvoke(messages)
                messages.append(answer)
                calls = getattr(answer, "tool_calls", None) or []
                if not calls:
                    break
                for call in calls:
                    messages.append(
                        ToolMessage(_file_text(str(call["args"]["path"])), tool_call_id=call["id"])
                    )
    finally:
        await http.aclose()


async def _naive(base_url: str, prompts: list[str]) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the repository.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
    ]
    history: list[dict[str, Any]] = []
    try:
        for prompt in prompts:
            history.append({"role": "user", "content": prompt})
            while True:
                now = datetime.datetime.now(datetime.UTC).isoformat()
                system = f"Current time: {now}\n{SYSTEM_PROMPT}"
                response = await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "system", "content": system}, *history],  # type: ignore[list-item]
                    tools=tools,  # type: ignore[arg-type]
                )
                message = response.choices[0].message
                calls = message.tool_calls or []
                entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
                if calls:
                    entry["tool_calls"] = [c.model_dump(exclude_none=True) for c in calls]
                history.append(entry)
                if not calls:
                    break
                for call in calls:
                    path = json.loads(call.function.arguments)["path"]  # type: ignore[union-attr]
                    history.append(
                        {"role": "tool", "tool_call_id": call.id, "content": _file_text(path)}
                    )
    finally:
        await client.close()


def run(quick: bool) -> Section:
    turns = QUICK_TURNS if quick else TURNS
    clients: list[tuple[str, Callable[[str, list[str]], Awaitable[None]]]] = [
        ("dsh_core Agent", _ours),
        ("pydantic-ai Agent", _pydantic_ai),
        ("OpenAI Agents SDK Runner", _openai_agents),
        ("LangChain ChatDeepSeek", _langchain),
        ("naive client, timestamp in system prompt", _naive),
    ]
    requests = turns * (CALLS_PER_TURN + 1)
    section = Section(
        key="efficiency",
        title="Cache efficiency side by side with a peer",
        method=(
            f"One scripted task — {turns} user turns, each {CALLS_PER_TURN} sequential "
            f"`read_file` calls then an answer ({requests} model requests), model `{MODEL}`, a "
            f"{len(SYSTEM_PROMPT.splitlines())}-line (~{len(SYSTEM_PROMPT) // 1024} KB) system "
            "prompt — driven by each client against its own loopback `MockServer` (fresh "
            "prefix-cache simulator, rules 2026, granularity 64). The simulator records every "
            "request. Efficiency = Σ hit tokens / Σ reusable tokens; a request's reusable tokens "
            "= the previous request's prompt + reply (what an append-only client reuses), "
            "rounded down to 64; the first request reuses nothing. A request *loses its prefix* "
            "when its prompt is not an extension of the previous prompt + reply (token by "
            "token). Each client's traffic then goes through the cache doctor "
            "(`dsh_testkit.doctor.diagnose` over the mock's request log), which names the "
            "cause code of every lost hit."
        ),
    )
    for name, client in clients:
        try:
            outcome = asyncio.run(_drive(name, turns, client))
        except ImportError as exc:
            section.figures.append(
                Figure(label=f"{name}: session efficiency", value=None, unit="%", note=str(exc))
            )
            section.notes.append(
                f"{name} not measured: {exc} (install the bench dependency group: "
                "`.venv/bin/pip install -e . --group dev --group bench`)."
            )
            continue
        efficiency = (
            100 * outcome.hit_tokens / outcome.reusable_tokens if outcome.reusable_tokens else None
        )
        note = f"{outcome.hit_tokens:,} of {outcome.reusable_tokens:,} reusable tokens hit"
        section.figures.append(
            Figure(label=f"{name}: session efficiency", value=efficiency, unit="%", note=note)
        )
        section.figures.append(
            Figure(
                label=f"{name}: requests / prompt tokens",
                value=float(outcome.requests),
                unit="requests",
                note=f"{outcome.prompt_tokens:,} prompt tokens in all",
            )
        )
        section.notes.append(
            f"{name}: first request that loses its prefix: {outcome.first_loss}"
            + (
                f" ({outcome.departures} of {outcome.requests - 1} later requests do)."
                if outcome.departures
                else "."
            )
        )
        causes = ", ".join(f"`{code}` on {n} request(s)" for code, n in outcome.causes.items())
        section.notes.append(
            f"{name}: the cache doctor attributes "
            + (causes if causes else "no lost hit (no cause found)")
            + "."
        )
        if outcome.error is not None:
            section.notes.append(f"{name} stopped with an error: {outcome.error}")
    return section

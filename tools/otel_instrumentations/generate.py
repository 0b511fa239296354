"""Record one OTLP sample: a real agent, under a real instrumentation, against the mock.

    venvs/<family>/bin/python tools/otel_instrumentations/generate.py SAMPLE [--clock] [--binary]

Each sample runs the weather scenario of ``common.py`` (five user turns, seven model requests)
with one instrumentation family's packages, pinned in ``requirements/<family>.txt`` (the
families need separate environments: their pins conflict). ``run_all.sh`` records every sample
the tests read into ``tests/fixtures/otel/agents/``; ``make_venvs.sh`` builds the environments.
The suite never needs these environments: it reads the committed samples.

Samples (``SAMPLES``; the family in brackets):

- ``openinference-openai`` [oi]: the openai SDK loop under ``openinference-instrumentation-openai``;
  ``…-genai``: with ``OPENINFERENCE_ENABLE_GENAI_SEMCONV=true``;
- ``openinference-langchain`` [oi]: ``ChatDeepSeek`` under OpenInference's LangChain
  instrumentation; ``…+openai``: its openai instrumentation on as well (each call twice);
- ``openinference-llamaindex`` [oi]: LlamaIndex ``OpenAILike`` under OpenInference;
- ``otel-openai-v2-events`` [otel2ev]: ``opentelemetry-instrumentation-openai-v2`` with content
  as log records (util-genai 0.4b0, ``…CAPTURE_MESSAGE_CONTENT=true``);
- ``otel-openai-v2-span`` / ``…-latest-events`` / ``…-span-and-event`` [otel2]: the latest
  experimental conventions (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``) with
  ``SPAN_ONLY`` / ``EVENT_ONLY`` / ``SPAN_AND_EVENT``;
- ``logfire-openai`` / ``logfire-openai-v1`` [logfire]: ``logfire.instrument_openai()``
  (version 2, and version 1's ``request_data``);
- ``logfire-pydantic-ai`` [logfire]: a pydantic-ai agent under ``logfire.instrument_pydantic_ai()``;
  ``…+openai``: ``instrument_openai()`` on as well (each call twice);
- ``openllmetry-openai`` / ``…-events`` [llmetry]: OpenLLMetry 0.62 (attributes; log records);
- ``openllmetry-langchain`` [llmetry]: ``ChatOpenAI`` under OpenLLMetry's LangChain one;
- ``openllmetry-llamaindex`` [llmetry] / ``openllmetry-legacy-llamaindex`` [legacy]: LlamaIndex
  under OpenLLMetry 0.62 / 0.53;
- ``openllmetry-legacy-openai`` [legacy]: OpenLLMetry 0.53 (indexed ``gen_ai.prompt.N``);
- ``azure-ai-inference`` [azure]: ``azure-ai-inference``'s own tracing (span events).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import common

Turn = Callable[[int], AbstractContextManager[Any]]


# -- agents -----------------------------------------------------------------------------------


def _streamed(create: Any, **kwargs: Any) -> dict[str, Any]:
    stream = create(stream=True, stream_options={"include_usage": True}, **kwargs)
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            for call in choice.delta.tool_calls or ():
                slot = calls.setdefault(
                    call.index,
                    {"id": call.id, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.function and call.function.name:
                    slot["function"]["name"] += call.function.name
                if call.function and call.function.arguments:
                    slot["function"]["arguments"] += call.function.arguments
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def openai_loop(
    base_url: str, scenario: common.Scenario, recorder: common.Recorder, turn: Turn
) -> None:
    """A hand-written loop on the official client; requests 2 and 6 streamed (with usage)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=common.API_KEY, max_retries=0)
    create = client.chat.completions.create
    history: list[dict[str, Any]] = []
    request = 0
    for number, prompt in enumerate(common.TURNS, 1):
        with turn(number):
            history.append({"role": "user", "content": prompt})
            while True:
                request += 1
                messages = [{"role": "system", "content": scenario.system()}, *history]
                kwargs = {
                    "model": common.MODEL,
                    "messages": messages,
                    "tools": common.TOOLS,
                    "temperature": 0.2,
                }
                if request in (2, 6):
                    message = _streamed(create, **kwargs)
                else:
                    reply = create(**kwargs)
                    message = reply.choices[0].message.model_dump(exclude_none=True)
                history.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    city = json.loads(call["function"]["arguments"])["city"]
                    history.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": common.get_weather(city),
                        }
                    )
        recorder.flush()
    client.close()


def langchain_loop(
    base_url: str, scenario: common.Scenario, recorder: common.Recorder, turn: Turn, client: str
) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return common.get_weather(city)

    if client == "deepseek":
        from langchain_deepseek import ChatDeepSeek

        llm: Any = ChatDeepSeek(
            model=common.MODEL,
            api_base=base_url,
            api_key=common.API_KEY,
            temperature=0.2,
            max_retries=0,
        )
    else:
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(
            model=common.MODEL,
            base_url=base_url,
            api_key=common.API_KEY,
            temperature=0.2,
            max_retries=0,
        )
    bound = llm.bind_tools([get_weather])
    history: list[Any] = []
    for number, prompt in enumerate(common.TURNS, 1):
        with turn(number):
            history.append(HumanMessage(prompt))
            while True:
                reply = bound.invoke([SystemMessage(scenario.system()), *history])
                history.append(reply)
                if not reply.tool_calls:
                    break
                for call in reply.tool_calls:
                    history.append(
                        ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
                    )
        recorder.flush()


def llamaindex_loop(
    base_url: str, scenario: common.Scenario, recorder: common.Recorder, turn: Turn
) -> None:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return common.get_weather(city)

    tool = FunctionTool.from_defaults(fn=get_weather)
    llm = OpenAILike(
        model=common.MODEL,
        api_base=base_url,
        api_key=common.API_KEY,
        is_chat_model=True,
        is_function_calling_model=True,
        temperature=0.2,
        max_retries=0,
        context_window=128000,
    )
    history: list[Any] = []
    for number, prompt in enumerate(common.TURNS, 1):
        with turn(number):
            history.append(ChatMessage(role="user", content=prompt))
            while True:
                messages = [ChatMessage(role="system", content=scenario.system()), *history]
                response = llm.chat_with_tools([tool], chat_history=messages)
                history.append(response.message)
                calls = llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
                if not calls:
                    break
                for call in calls:
                    history.append(
                        ChatMessage(
                            role="tool",
                            content=str(tool(**call.tool_kwargs)),
                            additional_kwargs={
                                "tool_call_id": call.tool_id,
                                "name": call.tool_name,
                            },
                        )
                    )
        recorder.flush()


def pydantic_ai_loop(base_url: str, scenario: common.Scenario, recorder: common.Recorder) -> None:
    import logfire
    import pydantic_ai
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider

    async def run() -> None:
        async with AsyncOpenAI(base_url=base_url, api_key=common.API_KEY, max_retries=0) as c:
            model = OpenAIChatModel(common.MODEL, provider=DeepSeekProvider(openai_client=c))
            agent: Any = pydantic_ai.Agent(model, model_settings={"temperature": 0.2})

            @agent.instructions
            def system() -> str:
                return scenario.system()

            @agent.tool_plain
            def get_weather(city: str) -> str:
                """The current weather in a city."""
                return common.get_weather(city)

            history: list[Any] = []
            for number, prompt in enumerate(common.TURNS, 1):
                with logfire.span("user turn {turn}", turn=number):
                    result = await agent.run(prompt, message_history=history)
                history = result.all_messages()
                logfire.force_flush()
                recorder.flush()

    asyncio.run(run())


def azure_loop(base_url: str, scenario: common.Scenario, recorder: common.Recorder) -> None:
    from azure.ai.inference import ChatCompletionsClient
    from azure.ai.inference.models import (
        AssistantMessage,
        ChatCompletionsToolCall,
        ChatCompletionsToolDefinition,
        FunctionCall,
        FunctionDefinition,
        SystemMessage,
        ToolMessage,
        UserMessage,
    )
    from azure.core.credentials import AzureKeyCredential

    tool = ChatCompletionsToolDefinition(
        function=FunctionDefinition(
            name="get_weather",
            description="The current weather in a city.",
            parameters=common.TOOL_SCHEMA,
        )
    )
    client = ChatCompletionsClient(
        endpoint=base_url, credential=AzureKeyCredential(common.API_KEY), model=common.MODEL
    )
    history: list[Any] = []
    for prompt in common.TURNS:
        history.append(UserMessage(content=prompt))
        while True:
            reply = client.complete(
                messages=[SystemMessage(content=scenario.system()), *history],
                tools=[tool],
                temperature=0.2,
            )
            message = reply.choices[0].message
            calls = message.tool_calls or []
            history.append(
                AssistantMessage(
                    content=message.content or None,
                    tool_calls=[
                        ChatCompletionsToolCall(
                            id=c.id,
                            function=FunctionCall(
                                name=c.function.name, arguments=c.function.arguments
                            ),
                        )
                        for c in calls
                    ]
                    or None,
                )
            )
            if not calls:
                break
            for c in calls:
                city = json.loads(c.function.arguments)["city"]
                history.append(ToolMessage(content=common.get_weather(city), tool_call_id=c.id))
        recorder.flush()


# -- instrumentations -------------------------------------------------------------------------

_V2_MODES = {
    "otel-openai-v2-events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "otel-openai-v2-span": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
    "otel-openai-v2-latest-events": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
    },
    "otel-openai-v2-span-and-event": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
    },
}


def _session(name: str) -> Turn:
    from openinference.instrumentation import using_session

    return lambda _turn: using_session(name)


def _logfire(recorder: common.Recorder) -> Any:
    import logfire
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="weather-agent",
        additional_span_processors=[SimpleSpanProcessor(recorder.span_exporter)],
    )
    return logfire


def record(sample: str, clock: bool) -> tuple[common.Recorder, int]:
    """Run the sample's agent under its instrumentation; the recorder and the mock's port."""
    recorder = common.Recorder("weather-agent")
    scenario = common.Scenario(clock)
    plain: Turn = lambda _turn: nullcontext()  # noqa: E731
    with common.Mock() as mock:
        url = mock.base_url
        if sample.startswith("openinference-"):
            if sample.endswith("-genai"):
                os.environ["OPENINFERENCE_ENABLE_GENAI_SEMCONV"] = "true"
            from openinference.instrumentation.openai import OpenAIInstrumentor

            provider = recorder.tracer_provider
            if sample.startswith("openinference-openai"):
                OpenAIInstrumentor().instrument(tracer_provider=provider)
                openai_loop(url, scenario, recorder, _session("weather-session-1"))
            elif sample.startswith("openinference-langchain"):
                from openinference.instrumentation.langchain import LangChainInstrumentor

                LangChainInstrumentor().instrument(tracer_provider=provider)
                if sample.endswith("+openai"):
                    OpenAIInstrumentor().instrument(tracer_provider=provider)
                langchain_loop(url, scenario, recorder, _session("weather-session-1"), "deepseek")
            else:
                from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

                LlamaIndexInstrumentor().instrument(tracer_provider=provider)
                llamaindex_loop(url, scenario, recorder, _session("weather-session-1"))
        elif sample.startswith("otel-openai-v2"):
            os.environ.update(_V2_MODES[sample])
            recorder.install_globals()
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as V2

            kwargs: dict[str, Any] = {
                "tracer_provider": recorder.tracer_provider,
                "logger_provider": recorder.logger_provider,
            }
            try:  # util-genai 0.4b0 emits events through the (older) event logger API
                from opentelemetry.sdk._events import EventLoggerProvider

                kwargs["event_logger_provider"] = EventLoggerProvider(recorder.logger_provider)
            except ImportError:
                pass
            V2().instrument(**kwargs)
            openai_loop(url, scenario, recorder, plain)
        elif sample.startswith("logfire-openai"):
            logfire = _logfire(recorder)
            logfire.instrument_openai(version=1 if sample.endswith("-v1") else 2)
            openai_loop(url, scenario, recorder, lambda n: logfire.span("user turn {turn}", turn=n))
            logfire.force_flush()
        elif sample.startswith("logfire-pydantic-ai"):
            logfire = _logfire(recorder)
            logfire.instrument_pydantic_ai()
            if sample.endswith("+openai"):
                logfire.instrument_openai()
            pydantic_ai_loop(url, scenario, recorder)
        elif sample.startswith("openllmetry-"):
            os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
            recorder.install_globals()
            provider = recorder.tracer_provider
            if sample.endswith(("-openai", "-openai-events")):
                from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Llm

                if sample.endswith("-events"):
                    Llm(use_attributes=False).instrument(
                        tracer_provider=provider, logger_provider=recorder.logger_provider
                    )
                else:
                    Llm().instrument(tracer_provider=provider)
                openai_loop(url, scenario, recorder, plain)
            elif sample.endswith("-langchain"):
                from opentelemetry.instrumentation.langchain import LangchainInstrumentor

                LangchainInstrumentor().instrument(tracer_provider=provider)
                langchain_loop(url, scenario, recorder, plain, "openai")
            else:
                from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

                LlamaIndexInstrumentor().instrument(tracer_provider=provider)
                llamaindex_loop(url, scenario, recorder, plain)
        elif sample == "azure-ai-inference":
            os.environ["AZURE_TRACING_GEN_AI_CONTENT_RECORDING_ENABLED"] = "true"
            recorder.install_globals()
            from azure.ai.inference.tracing import AIInferenceInstrumentor
            from azure.core.settings import settings

            settings.tracing_implementation = "opentelemetry"
            AIInferenceInstrumentor().instrument()
            azure_loop(url, scenario, recorder)
        else:
            raise SystemExit(f"unknown sample {sample!r}")
        unscripted = mock.unscripted()
        if unscripted:
            raise SystemExit(f"requests the script did not answer: {unscripted}")
        return recorder, mock.port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sample")
    parser.add_argument("--clock", action="store_true", help="the time in the system prompt")
    parser.add_argument("--binary", action="store_true", help="also the protobuf form (.binpb)")
    args = parser.parse_args()
    recorder, port = record(args.sample, args.clock)
    stem = f"{args.sample}-{'clock' if args.clock else 'clean'}"
    recorder.write(stem, port=port, binary=args.binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())

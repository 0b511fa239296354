#!/usr/bin/env bash
# Record every sample the tests read (tests/fixtures/otel/agents/), each family in its own
# environment ($VENVS/<family>, built by make_venvs.sh); each run starts its own
# `dsh-testkit serve` from the project's environment ($DSH_TESTKIT, default .venv/bin/dsh-testkit).
# About five minutes on two CPUs.
set -euo pipefail
cd "$(dirname "$0")"
VENVS=${VENVS:-venvs}
run() { local family=$1; shift; echo "== $family $*" >&2; "$VENVS/$family/bin/python" generate.py "$@" 2> >(grep -v '^mock DeepSeek at' >&2); }
for clock in "" --clock; do
  run oi openinference-openai $clock --binary
  run oi openinference-langchain $clock
  run oi openinference-llamaindex $clock
  run otel2ev otel-openai-v2-events $clock --binary
  run otel2 otel-openai-v2-span $clock
  run otel2 otel-openai-v2-latest-events $clock
  run logfire logfire-openai $clock
  run logfire logfire-pydantic-ai $clock
  run llmetry openllmetry-openai $clock
  run llmetry openllmetry-langchain $clock
  run llmetry openllmetry-llamaindex $clock
  run legacy openllmetry-legacy-openai $clock
  run legacy openllmetry-legacy-llamaindex $clock
  run azure azure-ai-inference $clock
done
# clean only: the other published shapes, and two instrumentations on the same calls
run oi openinference-openai-genai
run oi openinference-langchain+openai
run otel2 otel-openai-v2-span-and-event
run logfire logfire-openai-v1
run logfire logfire-pydantic-ai+openai
run llmetry openllmetry-openai-events
# the SDK's attribute count limit reached: the oldest attributes are evicted
OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=32 run oi openinference-openai-attrlimit32

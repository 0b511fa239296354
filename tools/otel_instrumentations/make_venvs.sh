#!/usr/bin/env bash
# Build the generators' virtual environments from the pinned requirements: one per
# instrumentation family, because their pins conflict (openai 2.x for llama-index vs 3.x;
# opentelemetry-util-genai 0.4b0, whose log-record mode the latest releases dropped, vs 1.1b0;
# OpenLLMetry 0.53 vs 0.62). The pins are complete closures, installed with --no-deps.
#   tools/otel_instrumentations/make_venvs.sh [FAMILY ...]   (default: all; into $VENVS)
set -euo pipefail
cd "$(dirname "$0")"
VENVS=${VENVS:-venvs}
PY=${PYTHON:-python3}
for name in ${@:-oi otel2 otel2ev logfire llmetry legacy azure}; do
  echo "== $name" >&2
  "$PY" -m venv "$VENVS/$name"
  "$VENVS/$name/bin/pip" install -q --no-deps -r "requirements/$name.txt"
done

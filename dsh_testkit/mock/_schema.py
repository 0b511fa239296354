"""The JSON Schema (draft 2020-12) of a script document, for users of any language.

``dsh-testkit serve --print-schema`` prints it and ``GET /_dsh/schema`` answers it. It is built
from the same vocabularies the parser checks (faults, finish reasons, behaviours, ``onExhausted``
values), and a test validates every example script against it and checks that the parser and the
schema agree.
"""

from __future__ import annotations

from typing import Any, get_args

from ._script import BEHAVIOURS, SCRIPT_FORMAT_VERSION, Fault, FinishReasonName, OnExhausted

__all__ = ["script_schema"]

_SCHEMA_ID = "https://dsh-testkit.invalid/schemas/mock-script.json"


def _count(description: str, minimum: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "description": description}


def script_schema() -> dict[str, Any]:
    """The schema as a JSON value (a new dict each call)."""
    tool_call = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "The tool's name."},
            "arguments": {
                "type": ["string", "object"],
                "default": "{}",
                "description": "The arguments: a JSON string sent as given, or an object "
                "(serialized compactly).",
            },
            "id": {"type": "string", "description": "The call id; absent: a generated one."},
            "fragments": _count("How many argument deltas a stream sends.", 1) | {"default": 2},
        },
    }
    reply = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "kind": {"const": "reply"},
            "text": {"type": "string", "default": ""},
            "reasoning": {"type": "string", "description": "reasoning_content / thinking."},
            "toolCalls": {"type": "array", "items": {"$ref": "#/$defs/toolCall"}},
            "finishReason": {"enum": list(get_args(FinishReasonName))},
            "chunkSize": _count("Code points per streamed delta.", 1) | {"default": 8},
            "keepAlives": _count("Keep-alive signals before the answer.") | {"default": 0},
            "paceMs": _count("Pause before every body write, in ms.") | {"default": 0},
            "fault": {"enum": list(get_args(Fault)), "description": "How the answer breaks."},
            "faultAfter": _count("Stream chunks sent before the fault.") | {"default": 1},
        },
    }
    error = {
        "type": "object",
        "additionalProperties": False,
        "required": ["kind", "status"],
        "properties": {
            "kind": {"const": "http-error"},
            "status": {"type": "integer", "minimum": 400, "maximum": 599},
            "message": {"type": "string"},
            "type": {"type": "string"},
            "code": {"type": "string"},
            "param": {"type": "string"},
            "body": {
                "type": ["object", "array", "string"],
                "description": "A verbatim body instead of the API's error shape.",
            },
            "contentType": {"type": "string"},
            "retryAfter": {"type": ["string", "number"]},
            "requestId": {"type": "string"},
            "headers": {
                "oneOf": [
                    {"type": "object", "additionalProperties": {"type": "string"}},
                    {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "prefixItems": [{"type": "string"}, {"type": "string"}],
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                ]
            },
        },
    }
    behaviour = {
        "type": "object",
        "additionalProperties": False,
        "required": ["behaviour"],
        "properties": {"behaviour": {"enum": sorted(BEHAVIOURS)}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _SCHEMA_ID,
        "title": "dsh-testkit mock DeepSeek script",
        "description": "What the mock answers, one entry per accepted model request, in order.",
        "type": "object",
        "additionalProperties": False,
        "required": ["version"],
        "properties": {
            "version": {"const": SCRIPT_FORMAT_VERSION},
            "onExhausted": {
                "enum": list(get_args(OnExhausted)),
                "default": "default",
                "description": "What an empty queue answers.",
            },
            "entries": {"type": "array", "items": {"$ref": "#/$defs/entry"}},
        },
        "$defs": {
            "entry": {
                "oneOf": [
                    {"$ref": "#/$defs/reply"},
                    {"$ref": "#/$defs/httpError"},
                    {"$ref": "#/$defs/behaviour"},
                ]
            },
            "reply": reply,
            "httpError": error,
            "behaviour": behaviour,
            "toolCall": tool_call,
        },
    }

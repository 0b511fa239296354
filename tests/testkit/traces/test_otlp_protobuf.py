"""The kit's OTLP protobuf decoder against opentelemetry-proto's own (the official classes).

The kit decodes the subset of protobuf OTLP uses by hand (no protobuf runtime dependency); the
official generated classes, in the dev environment through the OTLP encoder, decode the same
bytes into the documents the OTLP JSON mapping defines.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from dsh_testkit.traces._readers._otlp._protobuf import (
    ProtobufError,
    decode_export,
    decode_message,
)

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "otel" / "agents"
_IDS = ("traceId", "spanId", "parentSpanId")


def official(message: Any) -> dict[str, Any]:
    """The official decoding in the OTLP JSON mapping: hex ids, integers as numbers."""

    def fix(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: fix(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        if key in _IDS:
            return base64.b64decode(value).hex()
        if key == "doubleValue" and isinstance(value, str):  # "Infinity", "-Infinity"
            return float(value)
        if key in (
            "intValue",
            "startTimeUnixNano",
            "endTimeUnixNano",
            "timeUnixNano",
            "observedTimeUnixNano",
            "droppedAttributesCount",
        ):
            return int(value)
        return value

    return fix(MessageToDict(message, use_integers_for_enums=True))


def messages(name: str) -> list[bytes]:
    data = (AGENTS / f"{name}.binpb").read_bytes()
    out, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        out.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return out


@pytest.mark.parametrize("name", ["openinference-openai-clock", "otel-openai-v2-events-clean"])
def test_real_exports_decode_as_the_official_classes_decode_them(name: str) -> None:
    signals = set()
    for payload in messages(name):
        ours = decode_export(payload)
        signal = "resourceSpans" if ours.get("resourceSpans") else "resourceLogs"
        signals.add(signal)
        theirs = official(
            TracesData.FromString(payload)
            if signal == "resourceSpans"
            else LogsData.FromString(payload)
        )
        assert ours == theirs
    if name.startswith("otel-openai-v2-events"):
        assert signals == {"resourceSpans", "resourceLogs"}


def _array(values: list[AnyValue]) -> AnyValue:
    out = AnyValue()
    out.array_value.values.extend(values)
    return out


def _kvlist(values: dict[str, AnyValue]) -> AnyValue:
    out = AnyValue()
    for key, value in values.items():
        item = out.kvlist_value.values.add()
        item.key = key
        item.value.CopyFrom(value)
    return out


any_values = st.recursive(
    st.one_of(
        st.builds(lambda s: AnyValue(string_value=s), st.text(max_size=20)),
        st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
        st.builds(lambda i: AnyValue(int_value=i), st.integers(-(2**63), 2**63 - 1)),
        st.builds(
            lambda d: AnyValue(double_value=d), st.floats(allow_nan=False, allow_infinity=True)
        ),
        st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=16)),
    ),
    lambda children: st.one_of(
        st.builds(_array, st.lists(children, max_size=4)),
        st.builds(_kvlist, st.dictionaries(st.text(max_size=8), children, max_size=4)),
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(any_values, st.binary(min_size=16, max_size=16), st.integers(0, 2**64 - 1))
def test_any_value_round_trips_like_the_official_decoder(value, trace_id, start) -> None:
    data = TracesData()
    span = data.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = trace_id
    span.start_time_unix_nano = start
    span.name = "chat"
    attribute = span.attributes.add()
    attribute.key = "k"
    attribute.value.CopyFrom(value)
    payload = data.SerializeToString()
    assert decode_message(payload, "resourceSpans") == official(TracesData.FromString(payload))


def test_bytes_that_are_not_an_otlp_message_are_refused() -> None:
    with pytest.raises(ProtobufError, match="not an OTLP traces or logs message"):
        decode_export(b"\x0a\x05hello")
    with pytest.raises(ProtobufError):
        decode_message(b"\x0a\xff\xff", "resourceSpans")

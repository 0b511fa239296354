"""The wire golden's repeated parts, written once: each later request refers to them.

An agent resends its whole conversation every request: the system prompt, the tool list and
the history grow the golden by the conversation's length squared, and a reviewer reads the same
forty lines of tools in every request. So the golden (format 2) writes a part in full the
first time and refers to it after:

* ``"messages": [{"$history": {"request": 2, "messages": 4}}, …]`` — the first four messages
  are those of request 2 (the earlier request sharing the longest start with this one); only
  what is new follows;
* ``{"$message": {"request": 1, "index": 0}}`` — one message (a long one: a system prompt a
  sub-agent shares, a large tool result) as shown in request 1;
* ``"tools": {"$same_as": 1}`` — a long top-level value (the tool list, a response format) as in
  request 1.

A request that does not extend the previous one shows it at once: its ``$history`` names an
older request or fewer messages. Real JSON that happens to look like a reference (an object
with one ``$`` key) is written ``{"$literal": …}``. :func:`expand_requests` undoes all of it:
``expand_requests(compact_requests(entries)) == entries`` (a property test holds it to that).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._inputs import SnapshotInputError

__all__ = ["compact_requests", "expand_requests"]

REPEAT_MIN: Final = 60
"""A value or message shorter than this (compact JSON characters) is written again rather
than referred to: a reference would be no shorter, and harder to read."""

_MARKERS: Final = frozenset({"$history", "$message", "$same_as", "$literal"})


def _key(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _looks_like_marker(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value) == 1 and str(next(iter(value))).startswith("$")


def _literal(value: Any) -> Any:
    return {"$literal": value} if _looks_like_marker(value) else value


def compact_requests(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Entries (each with a unique ``request`` number and its full ``body``) with repeated
    parts replaced by references to the first request that showed them."""
    out: list[dict[str, Any]] = []
    shown_values: dict[tuple[str, str], int] = {}  # (key, value JSON) -> request
    shown_messages: dict[str, tuple[int, int]] = {}  # message JSON -> (request, index)
    histories: list[tuple[int, list[str]]] = []  # (request, message JSONs), in order
    for entry in entries:
        number = entry["request"]
        body = entry["body"]
        compact: dict[str, Any] = {}
        for key, value in body.items():
            if key == "messages" and isinstance(value, list):
                compact[key] = _compact_messages(number, value, histories, shown_messages)
                continue
            if isinstance(value, (dict, list)) and len(_key(value)) >= REPEAT_MIN:
                first = shown_values.setdefault((key, _key(value)), number)
                if first != number:
                    compact[key] = {"$same_as": first}
                    continue
            compact[key] = _literal(value)
        out.append({**entry, "body": compact})
    return out


def _compact_messages(
    number: int,
    messages: list[Any],
    histories: list[tuple[int, list[str]]],
    shown: dict[str, tuple[int, int]],
) -> list[Any]:
    keys = [_key(m) for m in messages]
    best_request, best = 0, 0
    for request, earlier in histories:
        common = 0
        for a, b in zip(earlier, keys, strict=False):
            if a != b:
                break
            common += 1
        if common and common >= best:  # the latest of equally long shared starts
            best_request, best = request, common
    out: list[Any] = []
    if best:
        out.append({"$history": {"request": best_request, "messages": best}})
    for index, (message, key) in enumerate(zip(messages, keys, strict=True)):
        if index < best:
            continue
        first = shown.setdefault(key, (number, index)) if len(key) >= REPEAT_MIN else None
        if first is not None and first[0] != number:
            out.append({"$message": {"request": first[0], "index": first[1]}})
        else:
            out.append(_literal(message))
    histories.append((number, keys))
    return out


def expand_requests(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Entries with every reference replaced by what it refers to (the inverse of
    :func:`compact_requests`; a golden of format 1 has none and comes back as it is).
    Raises :class:`SnapshotInputError` for a reference to a request not before it."""
    full: dict[int, Mapping[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for position, entry in enumerate(entries):
        number = entry.get("request", position + 1)
        body = entry.get("body")
        if not isinstance(body, Mapping):
            raise SnapshotInputError(
                f"requests[{position}]: no body object", value_type=type(body).__name__
            )
        expanded: dict[str, Any] = {}
        for key, value in body.items():
            where = f"request {number}, {key}"
            if key == "messages" and isinstance(value, list):
                expanded[key] = _expand_messages(value, full, where)
            elif _looks_like_marker(value) and "$same_as" in value:
                expanded[key] = _earlier(full, value["$same_as"], where)[key]
            else:
                expanded[key] = _unwrap(value, where)
        full[number] = expanded
        out.append({**entry, "body": expanded})
    return out


def _earlier(full: Mapping[int, Mapping[str, Any]], request: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(request, int) or request not in full:
        raise SnapshotInputError(
            f"{where}: refers to request {request!r}, which is not an earlier request of the "
            "golden",
            value_type="reference",
        )
    return full[request]


def _unwrap(value: Any, where: str) -> Any:
    if not _looks_like_marker(value):
        return value
    (key,) = value
    if key == "$literal":
        return value[key]
    if key in _MARKERS:
        raise SnapshotInputError(f"{where}: {key} is not allowed here", value_type="reference")
    return value


def _expand_messages(
    messages: list[Any], full: Mapping[int, Mapping[str, Any]], where: str
) -> list[Any]:
    out: list[Any] = []
    for index, message in enumerate(messages):
        here = f"{where}[{index}]"
        if index == 0 and _looks_like_marker(message) and "$history" in message:
            ref = message["$history"]
            if not isinstance(ref, Mapping):
                raise SnapshotInputError(f"{here}: a bad $history", value_type="reference")
            earlier = _earlier(full, ref.get("request"), here)["messages"]
            count = ref.get("messages")
            if not isinstance(count, int) or not 0 < count <= len(earlier):
                raise SnapshotInputError(
                    f"{here}: $history takes 1 to {len(earlier)} messages, got {count!r}",
                    value_type="reference",
                )
            out += earlier[:count]
        elif _looks_like_marker(message) and "$message" in message:
            ref = message["$message"]
            if not isinstance(ref, Mapping):
                raise SnapshotInputError(f"{here}: a bad $message", value_type="reference")
            earlier = _earlier(full, ref.get("request"), here)["messages"]
            at = ref.get("index")
            if not isinstance(at, int) or not 0 <= at < len(earlier):
                raise SnapshotInputError(
                    f"{here}: $message index {at!r} is not a message of that request",
                    value_type="reference",
                )
            out.append(earlier[at])
        else:
            out.append(_unwrap(message, here))
    return out

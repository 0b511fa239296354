"""The cache report's JSON document, compact (formatVersion 4), and the way back to the full one.

Version 4 says each piece of evidence once; :func:`expand_report` rebuilds the version 3
document (:meth:`DoctorReport.to_json`) from it value for value, so nothing is lost:

- a conversation lists its distinct findings once (``findings``: code, severity, detail,
  signature, and where, evidence, diff, rejected, rendered when not their defaults); a request
  names them by number with what each cost there (``findings: [[n, lostTokens], …]``), and a
  group names its first finding (``groups: [[n, [requests…], lostTokens], …]``);
- a cause code's sentence is said once for the document (``codes``), not on every finding;
- a diff's common text once: ``[prefix, before, after, suffix]``;
- the prompt bar by label number: ``labels`` per conversation, ``segments: [label, tokens, …]``;
- where each request's figures came from by number (``figureSources``, ``figures: n``, left
  out when 0);
- no derived values (a request's ``position``, ``conversation``, ``hitRate``, ``lostTokens``;
  a group's ``label``, ``code`` and ``severity``; the ``efficiency`` and ``hitRate`` beside
  ``totals``): they are computed from what is there;
- defaults left out: ``null``, ``0`` for token counts that are 0 by default, ``[]``;
- written with the C encoder, without indent: one line, sorted keys.

A reader given a document of another version gets :class:`ReportFormatError` naming the
version; a version 3 document passes :func:`expand_report` unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ._codes import CODES
from ._errors import ReportFormatError
from ._report import (
    DOCTOR_FORMAT_VERSION,
    ConversationDiagnosis,
    DoctorReport,
    Finding,
    RequestDiagnosis,
    report_head,
    request_ranges,
)

__all__ = [
    "COMPACT_FORMAT_VERSION",
    "compact_report",
    "dumps_compact",
    "expand_report",
    "write_compact",
]

COMPACT_FORMAT_VERSION: Final = 4
"""Version of the compact document (4: each piece of evidence once; 3, what
:func:`expand_report` gives back, is :data:`DOCTOR_FORMAT_VERSION`)."""

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def dumps_compact(document: Any) -> str:
    """The compact document as text: one line, sorted keys (the C encoder), final newline."""
    return _ENCODER.encode(document) + "\n"


def _key(finding: Finding) -> tuple[Any, ...]:
    """A finding without what it cost here (its body)."""
    return (
        finding.code,
        finding.severity,
        finding.detail,
        finding.evidence,
        finding.where,
        finding.rejected,
        finding.rendered,
        finding.diff,
        finding.signature,
    )


def _body(finding: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": finding.code,
        "severity": finding.severity,
        "detail": finding.detail,
        "signature": finding.signature,
    }
    if finding.where is not None:
        out["where"] = finding.where
    if finding.evidence:
        out["evidence"] = list(finding.evidence)
    if finding.rejected:
        out["rejected"] = True
    if not finding.rendered:
        out["rendered"] = False
    d = finding.diff
    if d is not None:
        prefix, suffix = d.before[: d.start], d.before[d.before_end :]
        if d.after[: d.start] == prefix and d.after[d.after_end :] == suffix:
            out["diff"] = [
                prefix,
                d.before[d.start : d.before_end],
                d.after[d.start : d.after_end],
                suffix,
            ]
        else:  # excerpts cut differently on each side: both said whole
            out["diff"] = d.to_json()
    return out


class _Tables:
    """The numbered tables of one document: figure sources (document-wide) and, per
    conversation, findings and prompt-bar labels."""

    __slots__ = ("sources",)

    def __init__(self) -> None:
        self.sources: dict[tuple[str | None, str | None, str | None], int] = {}

    def source(self, r: RequestDiagnosis) -> int:
        key = (r.prompt_source, r.hit_source, r.usage_origin)
        found = self.sources.get(key)
        if found is None:
            found = self.sources[key] = len(self.sources)
        return found

    def figure_sources(self) -> list[list[str | None]]:
        """The ``figureSources`` table: each source numbered so far, in order."""
        return [list(k) for k in self.sources]


def _request(
    r: RequestDiagnosis,
    ids: Mapping[tuple[Any, ...], int],
    labels: dict[str, int],
    tables: _Tables,
) -> dict[str, Any]:
    out: dict[str, Any] = {"index": r.index, "relation": r.relation}
    for name, value in (
        ("parent", r.parent),
        ("model", r.model),
        ("status", r.status),
        ("error", r.error),
        ("outcome", r.outcome),
        ("promptTokens", r.prompt_tokens),
        ("hitTokens", r.hit_tokens),
        ("completionTokens", r.completion_tokens),
        ("divergence", r.divergence),
        ("started", r.started),
        ("cost", None if r.cost is None else round(r.cost, 8)),
        ("lostCost", None if r.lost_cost is None else round(r.lost_cost, 8)),
    ):
        if value is not None:
            out[name] = value
    source = tables.source(r)
    if source:
        out["figures"] = source
    for name, count in (
        ("reusableTokens", r.reusable_tokens),
        ("sharedTokens", r.shared_tokens),
        ("roundedOffTokens", r.rounded_off_tokens),
    ):
        if count:
            out[name] = count
    if r.findings:
        out["findings"] = [[ids[_key(f)], f.lost_tokens] for f in r.findings]
    if r.log_events:
        out["logEvents"] = list(r.log_events)
    if r.notes:
        out["notes"] = list(r.notes)
    if r.segments:
        flat: list[int] = []
        for s in r.segments:
            at = labels.get(s.label)
            if at is None:
                at = labels[s.label] = len(labels)
            flat += (at, s.tokens)
        out["segments"] = flat
    return out


def _conversation(c: ConversationDiagnosis, tables: _Tables) -> dict[str, Any]:
    ids: dict[tuple[Any, ...], int] = {}
    bodies: list[dict[str, Any]] = []
    for r in c.requests:
        for f in r.findings:
            key = _key(f)
            if key not in ids:
                ids[key] = len(bodies)
                bodies.append(_body(f))
    labels: dict[str, int] = {}
    out: dict[str, Any] = {
        "key": c.key,
        "totals": c.totals.to_json(),
        "sideCalls": c.side_totals.to_json(),
        "requests": [_request(r, ids, labels, tables) for r in c.requests],
    }
    if bodies:
        out["findings"] = bodies
    if c.groups:
        out["groups"] = [[ids[_key(g.first)], list(g.requests), g.lost_tokens] for g in c.groups]
    if labels:
        out["labels"] = list(labels)
    return out


def _fields(report: DoctorReport) -> dict[str, Any]:
    """The document's fields but ``conversations`` and ``figureSources`` (those two are made as
    the conversations are turned compact), from one pass over the conversations."""
    head = report_head(report)
    del head["efficiency"], head["hitRate"]
    return {
        **head,
        "formatVersion": COMPACT_FORMAT_VERSION,
        # the codes found on any request are exactly the keys of causeCounts (already sorted)
        "codes": {code: CODES[code].sentence for code in head["causeCounts"]},
        "notes": list(report.notes),
    }


_MADE_LATE: Final = ("conversations", "figureSources")
"""The fields made as the conversations are turned compact. ``figureSources`` numbers the
sources in order of first appearance across the document, so it is known only once every
conversation is done; sorted keys put it after ``conversations``, which is what lets
:func:`write_compact` write it after them."""


def compact_report(report: DoctorReport) -> dict[str, Any]:
    """The report as the compact (formatVersion 4) document. Iterates ``report.conversations``
    twice (the fields before them, then the conversations); :func:`write_compact` writes the
    same document as text without holding it."""
    fields = _fields(report)
    tables = _Tables()
    conversations = [_conversation(c, tables) for c in report.conversations]
    notes = fields.pop("notes")  # the order it always had (the Explorer page embeds it unsorted)
    return {
        **fields,
        "figureSources": tables.figure_sources(),
        "conversations": conversations,
        "notes": notes,
    }


def write_compact(report: DoctorReport, write: Callable[[str], object]) -> None:
    """Write the compact document's text, exactly ``dumps_compact(compact_report(report))``, in
    pieces to ``write``, never holding the whole document: each conversation is made compact,
    encoded and written on its own.

    ``report.conversations`` is iterated exactly twice, and only iterated (never indexed, nor
    its length taken): once for the report's figures and the cause codes, which come before
    ``conversations`` in key order, and once to write the conversations. What is held besides
    one conversation is the report's figures and the document-wide ``figureSources`` table.
    """
    fields = _fields(report)
    tables = _Tables()
    keys = sorted([*fields, *_MADE_LATE])
    write("{")
    for n, key in enumerate(keys):
        write(f"{',' if n else ''}{_ENCODER.encode(key)}:")
        if key == "conversations":
            write("[")
            for i, c in enumerate(report.conversations):
                write(f"{',' if i else ''}{_ENCODER.encode(_conversation(c, tables))}")
            write("]")
        elif key == "figureSources":
            write(_ENCODER.encode(tables.figure_sources()))
        else:
            write(_ENCODER.encode(fields[key]))
    write("}\n")


# -- the way back: version 4 to version 3 ----------------------------------------------------------


def _finding(body: Mapping[str, Any], lost: int, codes: Mapping[str, str]) -> dict[str, Any]:
    diff = body.get("diff")
    if isinstance(diff, list):
        prefix, before, after, suffix = diff
        diff = {
            "before": prefix + before + suffix,
            "after": prefix + after + suffix,
            "start": len(prefix),
            "beforeEnd": len(prefix) + len(before),
            "afterEnd": len(prefix) + len(after),
        }
    return {
        "code": body["code"],
        "severity": body["severity"],
        "sentence": codes[body["code"]],
        "detail": body["detail"],
        "where": body.get("where"),
        "evidence": list(body.get("evidence", ())),
        "lostTokens": lost,
        "rejected": body.get("rejected", False),
        "rendered": body.get("rendered", True),
        "diff": diff,
        "signature": body["signature"],
    }


def _rate(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _expand_conversation(
    c: Mapping[str, Any], codes: Mapping[str, str], sources: Sequence[Sequence[str | None]]
) -> dict[str, Any]:
    bodies = c.get("findings", ())
    labels = c.get("labels", ())
    requests = []
    for position, r in enumerate(c["requests"], start=1):
        hit, prompt, status = r.get("hitTokens"), r.get("promptTokens"), r.get("status")
        reusable = r.get("reusableTokens", 0)
        measured = hit is not None and not (status or 0) >= 400
        prompt_source, hit_source, origin = sources[r.get("figures", 0)]
        flat = r.get("segments", ())
        requests.append(
            {
                "index": r["index"],
                "position": position,
                "conversation": c["key"],
                "parent": r.get("parent"),
                "relation": r["relation"],
                "model": r.get("model"),
                "status": status,
                "error": r.get("error"),
                "outcome": r.get("outcome"),
                "promptTokens": prompt,
                "hitTokens": hit,
                "completionTokens": r.get("completionTokens"),
                "figures": {"prompt": prompt_source, "hit": hit_source, "origin": origin},
                "hitRate": None if hit is None or not prompt else _rate(hit / prompt),
                "reusableTokens": reusable,
                "sharedTokens": r.get("sharedTokens", 0),
                "roundedOffTokens": r.get("roundedOffTokens", 0),
                "lostTokens": reusable - min(hit or 0, reusable) if measured else 0,
                "divergence": r.get("divergence"),
                "findings": [_finding(bodies[i], n, codes) for i, n in r.get("findings", ())],
                "logEvents": list(r.get("logEvents", ())),
                "notes": list(r.get("notes", ())),
                "segments": [
                    {"label": labels[flat[k]], "tokens": flat[k + 1]}
                    for k in range(0, len(flat), 2)
                ],
                "started": r.get("started"),
                "cost": r.get("cost"),
                "lostCost": r.get("lostCost"),
            }
        )
    compact_by_index = {r["index"]: r for r in c["requests"]}
    groups = []
    for fid, members, lost in c.get("groups", ()):
        first = compact_by_index[members[0]]
        first_lost = next(n for i, n in first.get("findings", ()) if i == fid)
        finding = _finding(bodies[fid], first_lost, codes)
        groups.append(
            {
                "code": finding["code"],
                "severity": finding["severity"],
                "requests": list(members),
                "label": request_ranges(members),
                "lostTokens": lost,
                "finding": finding,
            }
        )
    totals = c["totals"]
    return {
        "key": c["key"],
        "totals": totals,
        "sideCalls": c["sideCalls"],
        "efficiency": totals["efficiency"],
        "hitRate": totals["hitRate"],
        "findingGroups": groups,
        "requests": requests,
    }


def expand_report(document: Mapping[str, Any]) -> dict[str, Any]:
    """The version 3 document a version 4 (compact) one stands for; a version 3 document is
    returned as it is. Any other version, or a document that is not a cache report, is a
    :class:`ReportFormatError`."""
    if not isinstance(document, Mapping) or document.get("kind") != "dsh-testkit/cache-report":
        raise ReportFormatError("not a cache report document (kind dsh-testkit/cache-report)")
    version = document.get("formatVersion")
    if version == DOCTOR_FORMAT_VERSION:
        return dict(document)
    if version != COMPACT_FORMAT_VERSION:
        raise ReportFormatError(
            f"cache report formatVersion {version!r} is not read here (this version reads "
            f"{COMPACT_FORMAT_VERSION} and {DOCTOR_FORMAT_VERSION})"
        )
    try:
        codes = document["codes"]
        sources = document["figureSources"]
        conversations = [_expand_conversation(c, codes, sources) for c in document["conversations"]]
        out = {
            k: v
            for k, v in document.items()
            if k not in ("codes", "figureSources", "conversations")
        }
        totals = document["totals"]
        out.update(
            formatVersion=DOCTOR_FORMAT_VERSION,
            efficiency=totals["efficiency"],
            hitRate=totals["hitRate"],
            conversations=conversations,
        )
    except (KeyError, IndexError, TypeError, ValueError, StopIteration) as exc:
        raise ReportFormatError(
            f"cache report formatVersion 4 is malformed: {type(exc).__name__}: {exc}"
        ) from exc
    return out

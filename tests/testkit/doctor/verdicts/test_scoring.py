"""The scorer itself: verdicts from findings, and every figure on hand-made cases."""

from __future__ import annotations

from typing import Any

from dsh_testkit.doctor import Finding, RequestDiagnosis

from ._scoring import Case, Verdict, markdown_confusion, markdown_table, score, verdict_of


def _request(*findings: tuple[str, str], hit: int = 0, reusable: int = 0) -> RequestDiagnosis:
    return RequestDiagnosis(
        index=1,
        position=2,
        conversation="#1",
        parent=0,
        relation="extends",
        prompt_tokens=1000,
        hit_tokens=hit,
        reusable_tokens=reusable,
        findings=tuple(
            Finding(code=code, severity=severity, detail="d")  # type: ignore[arg-type]
            for code, severity in findings
        ),
    )


def test_the_verdict_is_the_loss_then_the_refusal_then_below_unit_then_none() -> None:
    lost = verdict_of(
        _request(("tool-args-reserialized", "note"), ("tools-changed", "loss"), reusable=512)
    )
    assert (lost.cause, lost.severity, lost.lost, lost.reusable) == (
        "tools-changed",
        "loss",
        512,
        512,
    )
    refused = verdict_of(_request(("request-refused", "refusal"), ("reasoning-dropped", "refusal")))
    assert (refused.cause, refused.severity) == ("reasoning-dropped", "refusal")
    assert refused.has("request-refused", "refusal") and not refused.has("request-refused", "note")
    only_refused = verdict_of(_request(("request-refused", "refusal")))
    assert only_refused.cause == "request-refused"
    short = verdict_of(_request(("below-cache-unit", "note")))
    assert (short.cause, short.severity) == ("below-cache-unit", "note")
    noted = verdict_of(_request(("tool-args-reserialized", "note"), hit=256, reusable=256))
    assert (noted.cause, noted.severity, noted.lost) == ("none", None, 0)
    timing = verdict_of(_request(("not-yet-persisted", "loss"), reusable=128))
    assert timing.timing and timing.cause == "not-yet-persisted"


def _case(truth: str, said: str, **fields: Any) -> Case:
    severity = fields.pop(
        "said_severity", "loss" if said not in ("none", "below-cache-unit") else None
    )
    verdict = Verdict(
        cause=said,
        severity=severity,
        findings=fields.pop("findings", ((said, severity),) if severity else ()),
        timing=fields.pop("timing", False),
    )
    return Case(id=f"{truth}->{said}", source="real", truth=truth, verdict=verdict, **fields)


def test_a_case_is_right_on_its_cause_an_accepted_one_its_severity_and_its_companions() -> None:
    assert _case("system-moved", "system-changed", accepted=("system-changed",), lost=64).right
    assert not _case("system-moved", "system-changed", lost=64).right
    assert not _case("reasoning-dropped", "reasoning-dropped", severity="refusal").right  # a loss
    needs = (("request-refused", "refusal"),)
    refusal = _case(
        "reasoning-dropped",
        "reasoning-dropped",
        severity="refusal",
        said_severity="refusal",
        also=needs,
    )
    assert not refusal.right  # request-refused is missing
    complete = _case(
        "reasoning-dropped",
        "reasoning-dropped",
        severity="refusal",
        said_severity="refusal",
        also=needs,
        findings=(("reasoning-dropped", "refusal"), ("request-refused", "refusal")),
    )
    assert complete.right


def test_the_figures_count_what_they_say() -> None:
    cases = [
        _case("tools-changed", "tools-changed", lost=128, lost_vs_prompt=128, resolution=1.0),
        _case("tools-changed", "provider-miss", lost=64, lost_vs_prompt=64, resolution=1.0),
        _case("provider-miss", "provider-miss", lost=64, resolution=1.0),
        _case("system-moved", "system-changed", accepted=("system-changed",), lost=64),
        _case("none", "provider-miss", lost=0, resolution=1e-6),  # a false loss
        _case("none", "below-cache-unit", lost=0, resolution=1.0),  # named wrongly
        _case("below-cache-unit", "below-cache-unit", lost=0, resolution=1.0),
        _case("none", "none", lost=0, timing=False, resolution=None),
        _case("none", "not-yet-persisted", lost=0, timing=True, resolution=1.0),
    ]
    card = score(cases)
    assert card.cases == 9 and card.right == 5
    assert (card.lost, card.lost_explained) == (4, 3)
    assert (card.lost_vs_prompt, card.lost_vs_prompt_explained) == (2, 1)
    assert [c.id for c in card.wrong_losses] == [
        "tools-changed->provider-miss",
        "none->provider-miss",
        "none->not-yet-persisted",
    ]
    assert (card.nothing_lost, card.below_unit_named, card.below_unit_wrong) == (5, 2, 1)
    assert card.below_unit_wrong_rate == 0.2
    assert card.coarse == 8 and [c.id for c in card.coarse_timing] == ["none->not-yet-persisted"]

    tools, miss = card.codes["tools-changed"], card.codes["provider-miss"]
    assert (tools.labelled, tools.named, tools.right_named, tools.found) == (2, 1, 1, 1)
    assert (tools.precision, tools.recall) == (1.0, 0.5)
    assert (miss.labelled, miss.named, miss.right_named) == (1, 3, 1)
    assert miss.precision == 1 / 3 and miss.recall == 1.0
    moved = card.codes["system-moved"]
    assert (moved.found, moved.via_alternative, moved.recall) == (0, 1, 0.0)
    assert card.codes["system-changed"].precision == 1.0
    assert card.confusion[("tools-changed", "provider-miss")] == 1

    table = markdown_table(card)
    assert "| `tools-changed` | 2 | 1 | 1 | 1.00 | 1 | 0 | 0.50 |" in table
    assert "| `system-moved` | 1 | 0 | 0 | — | 0 | 1 | 0.00 |" in table
    confusion = markdown_confusion(card)
    assert confusion.splitlines()[0].startswith("| true \\ doctor | `system-changed`")


def test_a_refused_request_is_not_one_that_lost_nothing() -> None:
    refused = _case(
        "reasoning-dropped", "reasoning-dropped", severity="refusal", said_severity="refusal"
    )
    card = score([refused])
    assert (card.lost, card.nothing_lost, card.right) == (0, 0, 1)


def test_a_loss_may_be_shared_with_the_provider_only_where_the_provider_lost_a_part() -> None:
    def split(provider_share: bool) -> Case:
        verdict = Verdict(
            cause="tools-changed",
            severity="loss",
            findings=(("tools-changed", "loss"), ("provider-miss", "loss")),
            losses=(("tools-changed", 384), ("provider-miss", 256)),
        )
        return Case(
            id="split",
            source="real",
            truth="tools-changed",
            verdict=verdict,
            lost=640,
            provider_share=provider_share,
        )

    assert split(True).right
    assert not split(False).right
    blamed = Verdict(
        cause="tool-args-reserialized",
        severity="loss",
        findings=(("tool-args-reserialized", "loss"), ("provider-miss", "loss")),
        losses=(("tool-args-reserialized", 64), ("provider-miss", 128)),
    )
    case = Case(id="b", source="real", truth="provider-miss", verdict=blamed, provider_share=True)
    assert not case.right
    assert "tool-args-reserialized (loss, 64 tokens)" in case.describe()

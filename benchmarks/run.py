"""Run the benchmarks and write their results into BENCHMARKS.md (``make bench``).

::

    .venv/bin/python benchmarks/run.py                 # everything, updates BENCHMARKS.md
    .venv/bin/python benchmarks/run.py --only loop     # one section (see --list)
    .venv/bin/python benchmarks/run.py --quick         # tiny sizes, seconds; writes nothing

``--quick`` runs every benchmark at toy sizes to prove the script works (its figures mean
nothing) and never touches BENCHMARKS.md. Exit status: 0 when every benchmark ran (a missed goal
is a finding, not a failure), 1 when one crashed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

if not __package__:
    # Run as a script (`python benchmarks/run.py`): make the checkout importable as the package
    # root, so the sibling modules import as `benchmarks.*` exactly as they do under pytest.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO_ROOT, Figure, Section, machine_info

__all__ = ["SECTIONS", "main", "render_results", "run_sections"]

SECTIONS: dict[str, tuple[str, str]] = {
    "loop": ("bench_loop", "1. Loop overhead per step"),
    "reconstruct": ("bench_reconstruct", "2. Reconstruction and audit scaling"),
    "cache": ("bench_cache", "3. Prefix-cache simulator throughput"),
    "cassette": ("bench_cassette", "4. Cassette replay"),
    "mock-server": ("bench_mock_server", "5. Mock server under concurrent streaming clients"),
    "header": ("bench_header", "6. Header codec"),
    "efficiency": ("bench_efficiency", "7. Cache efficiency side by side with a peer"),
    "proxy": ("bench_proxy", "8. Recording proxy: added latency and first byte"),
    "traces": ("bench_traces", "9. Trace analysis: cache-report over a 10,000-request trace"),
    "peers": ("bench_peers", "10. The loop against its peers"),
    "calibrate": ("bench_calibrate", "11. Calibrate over a directory of 100 logs"),
    "explorer": ("bench_explorer", "12. The Cache Explorer: page size, write time, browser"),
    "compare": ("bench_compare", "13. Compare two folders of 1,000 traces"),
    "verdicts": ("bench_verdicts", "14. Cache doctor: verdict accuracy"),
    "scale": ("bench_scale", "15. The cache doctor at production scale (beside the parse)"),
}
"""Section key → (module in ``benchmarks``, heading); the issue's numbering."""

RESULTS_START = "<!-- bench:results:start -->"
RESULTS_END = "<!-- bench:results:end -->"
BENCHMARKS_MD = REPO_ROOT / "BENCHMARKS.md"


def run_sections(keys: Sequence[str], *, quick: bool) -> tuple[list[Section], bool]:
    """Run the named sections in order; returns them and whether every one ran without error.

    A benchmark whose code under test cannot be imported yet is reported "not yet measured".
    """
    sections: list[Section] = []
    ok = True
    for key in keys:
        module_name, heading = SECTIONS[key]
        print(f"[bench] {heading} …", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{module_name}")
            section: Section = module.run(quick)
        except ImportError as exc:
            section = Section(key=key, title=heading, method="", measured=False)
            section.notes.append(f"Not yet measured: the code under test is missing ({exc}).")
        except Exception as exc:
            ok = False
            traceback.print_exc()
            section = Section(key=key, title=heading, method="", measured=False)
            section.notes.append(f"The benchmark failed: {type(exc).__name__}: {exc}")
        section.title = heading
        section.seconds = time.perf_counter() - start
        print(f"[bench]   done in {section.seconds:.1f} s", file=sys.stderr, flush=True)
        sections.append(section)
    return sections, ok


def _format(figure: Figure) -> str:
    value, unit = figure.value, figure.unit
    if value is None:
        return "not measured"
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "tokens/s":
        return f"{value / 1e6:.1f} M tokens/s"
    if unit in ("bytes", "requests"):
        return f"{value:,.0f} {unit}"
    if unit == "req/s":
        return f"{value:,.0f} req/s"
    if unit in ("ms", "µs"):
        digits = 3 if value < 1 else 2 if value < 10 else 1 if value < 100 else 0
        return f"{value:,.{digits}f} {unit}"
    return f"{value:g} {unit}".strip()


def _verdict(figure: Figure) -> str:
    if figure.goal is None:
        return ""
    if figure.ok is None:
        return "not measured"
    return "**pass**" if figure.ok else "**FAIL**"


def render_results(
    sections: Sequence[Section], *, machine: dict[str, str], seconds: float, command: str
) -> str:
    """The generated block of BENCHMARKS.md: machine, command, and every section's table."""
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        RESULTS_START,
        "<!-- Generated by benchmarks/run.py; edit the text outside these markers only. -->",
        "",
        f"Measured {today} at revision `{machine['revision']}` by `{command}` "
        f"(whole run {seconds:.0f} s).",
        "",
        f"- **Machine**: {machine['nproc']} CPUs (nproc), {machine['cpu']}, {machine['os']}",
        f"- **Python**: {machine['python']} (`{machine['executable']}`)",
        "",
    ]
    for section in sections:
        lines.append(f"### {section.title}")
        lines.append("")
        reproduce = f"`.venv/bin/python benchmarks/run.py --only {section.key}`"
        if not section.measured:
            lines.append(f"**Not yet measured.** Reproduce: {reproduce}")
            lines.append("")
            lines.extend(f"- {note}" for note in section.notes)
            lines.append("")
            continue
        lines.append(f"**Method.** {section.method}")
        lines.append("")
        lines.append(f"**Command.** {reproduce} ({section.seconds:.0f} s)")
        lines.append("")
        lines.append("| figure | value | goal | result |")
        lines.append("|---|---:|---|---|")
        for figure in section.figures:
            label = figure.label + (f" <br><sub>{figure.note}</sub>" if figure.note else "")
            lines.append(
                f"| {label} | {_format(figure)} | {figure.goal or ''} | {_verdict(figure)} |"
            )
        lines.append("")
        lines.extend(f"- {note}" for note in section.notes)
        if section.notes:
            lines.append("")
    lines.append(RESULTS_END)
    return "\n".join(lines)


def write_results(block: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the generated block of ``path`` (appended when the markers are missing)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start, end = text.find(RESULTS_START), text.find(RESULTS_END)
    if start != -1 and end > start:
        text = text[:start] + block + text[end + len(RESULTS_END) :]
    else:
        text = text.rstrip("\n") + "\n\n## Results\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8", newline="\n")


def _summary(sections: Sequence[Section]) -> str:
    rows = []
    for section in sections:
        rows.append(f"\n{section.title} ({section.seconds:.1f} s)")
        if not section.measured:
            rows.extend(f"  {note}" for note in section.notes)
            continue
        for figure in section.figures:
            verdict = _verdict(figure).replace("*", "")
            goal = f"  [goal {figure.goal}: {verdict}]" if figure.goal else ""
            rows.append(f"  {figure.label}: {_format(figure)}{goal}")
        rows.extend(f"  - {note}" for note in section.notes)
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes (a smoke run); implies --no-write"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SECTIONS),
        metavar="SECTION",
        help="run only this section (repeatable); see --list",
    )
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument(
        "--no-write", action="store_true", help="print the results; leave BENCHMARKS.md alone"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    args = parser.parse_args(argv)
    if args.list:
        for key, (_, heading) in SECTIONS.items():
            print(f"{key:12} {heading}")
        return 0
    keys = [k for k in SECTIONS if not args.only or k in args.only]
    machine = machine_info()
    start = time.perf_counter()
    sections, ok = run_sections(keys, quick=args.quick)
    seconds = time.perf_counter() - start
    print(_summary(sections))
    print(f"\nwhole run: {seconds:.1f} s")
    if args.json:
        document = {
            "machine": machine,
            "quick": args.quick,
            "seconds": round(seconds, 2),
            "sections": [s.to_json() for s in sections],
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if not (args.quick or args.no_write):
        command = ".venv/bin/python benchmarks/run.py" + "".join(
            f" --only {k}" for k in args.only or ()
        )
        if args.only:
            print("(--only: BENCHMARKS.md is written from complete runs only; not written)")
        else:
            write_results(
                render_results(sections, machine=machine, seconds=seconds, command=command)
            )
            print(f"results written to {BENCHMARKS_MD.relative_to(REPO_ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

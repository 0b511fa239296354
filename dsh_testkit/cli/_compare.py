"""``dsh-testkit compare BASE NEW``: two runs side by side, with a verdict a build gates on.

Exit status: 0 no regression; 1 a regression (the run's verdict: see ``compare/_runs.py``);
2 an input that cannot be read (a missing path, a file of no known kind given alone, a corrupt
recording inside a folder, a folder with no recording in it), runs that share no scenario, or a
bad option — a build must tell a broken input from a regression (an empty run compared with a
baseline would otherwise pass). On exit 2 nothing but the reason is printed: no verdict, no
report.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Final

from dsh_core import DshError
from dsh_core.providers import Prices

from .._console import dumps_report_json, write_output
from ..compare._inputs import MAX_FILE_BYTES, TraceLoader
from ..compare._render import comparison_markdown, comparison_text
from ..compare._result import NothingCompared
from ..compare._runs import compare_runs
from ..compare._values import COMPARE_FORMAT_VERSION, Thresholds
from ..traces import Trace, TraceError
from ..traces._readers import identify
from ._doctor import (
    INPUTS,
    add_granularity_argument,
    given_granularity,
    parse_prices,
    read_input,
)

__all__ = ["add_compare_arguments", "run_compare"]

_MATCHING: Final = (
    "BASE and NEW are each a recording or a folder of them (every file under it that reads as "
    "one; hidden files skipped). Scenarios match by declared id (a dsh-trace file's scenario, "
    "a cassette's metadata scenario), then by an explicit conversation key, then by the path "
    "inside the folder; a file whose requests carry several conversation keys is one scenario "
    "per key. "
)


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit compare``."""
    parser.description = (
        "What a change did to prompt caching and cost: per scenario and in total the requests, "
        "prompt and hit tokens, efficiency, estimated cost, the cause codes that appeared or "
        "went away with their evidence, and the first request whose shape changed; a verdict "
        "(identical, benign, regression, improvement) per scenario and for the run. A "
        "regression is a cause the harness can fix or a refusal that appeared or grew, volatile "
        "text that appeared in the system prompt, a failed test's traffic, a scenario missing "
        "from NEW, or efficiency or cost worse beyond the thresholds and what the cache unit's "
        "rounding can explain. Exit status: 0 no regression, 1 a regression, 2 an input that "
        "cannot be read, runs that share no scenario, or a bad option."
    )
    parser.add_argument("base", metavar="BASE", help="the run before the change")
    parser.add_argument("new", metavar="NEW", help="the run after the change")
    defaults = Thresholds()
    parser.add_argument(
        "--max-efficiency-drop",
        type=float,
        default=defaults.max_efficiency_drop,
        metavar="PP",
        help="percentage points the cache efficiency may fall, beyond what the cache unit's "
        f"rounding can explain, before it is a regression (default "
        f"{defaults.max_efficiency_drop:g})",
    )
    parser.add_argument(
        "--max-cost-increase",
        type=float,
        default=defaults.max_cost_increase,
        metavar="PCT",
        help="percent the estimated cost may rise, beyond what the cache unit's rounding can "
        f"explain, before it is a regression (default {defaults.max_cost_increase:g})",
    )
    parser.add_argument(
        "--max-net-cost-increase",
        type=float,
        default=None,
        metavar="PCT",
        help="also a regression: the estimated cost net of the rounding actually present rose "
        "more than PCT percent (default: not gated; gates the bill itself, e.g. a longer "
        "prompt that caches as well as before)",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="let a scenario of BASE that NEW lacks pass (default: missing traffic fails)",
    )
    parser.add_argument(
        "--price",
        metavar="hit=H,miss=M[,output=O]",
        help="list prices in dollars per million tokens for both runs (default: the model "
        "table's, at the new run's date)",
    )
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="figures from the prefix-cache simulator for both runs, not the reported usage "
        "(compare a live recording with a mock run on one footing)",
    )
    add_granularity_argument(parser, help="tokens per cache unit, for both runs")
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {COMPARE_FORMAT_VERSION}) instead of text",
    )
    output.add_argument(
        "--markdown",
        action="store_true",
        help="print Markdown (a pull-request comment, $GITHUB_STEP_SUMMARY) instead of text",
    )
    parser.add_argument(
        "--max-file-bytes",
        type=_byte_count,
        default=MAX_FILE_BYTES,
        metavar="N",
        help="the largest file read (default 256 MiB; a larger one is an error naming it). "
        "Only regular files are read: in a folder, symbolic links, named pipes and devices are "
        "skipped with a note",
    )
    parser.add_argument(
        "--markdown-file",
        metavar="FILE",
        help="also write the Markdown report to FILE (stdout keeps the text or JSON)",
    )
    from ._logs import add_sidecar_arguments

    add_sidecar_arguments(parser)
    parser.epilog = _MATCHING + INPUTS


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Stop(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


def _loader(args: argparse.Namespace) -> TraceLoader:
    def load(path: str, reader: str, data: bytes) -> Trace:
        if reader == "session-log":
            found = read_input("compare", argparse.Namespace(**{**vars(args), "log": path}))
            if isinstance(found, int):
                raise _Stop(2)
            return found
        chosen = identify(data)
        assert chosen is not None
        return chosen.read(data, path)

    return load


def run_compare(args: argparse.Namespace) -> int:
    """``dsh-testkit compare``; returns the exit status."""
    command = "dsh-testkit compare"
    try:
        thresholds = Thresholds(
            max_efficiency_drop=args.max_efficiency_drop,
            max_cost_increase=args.max_cost_increase,
            max_net_cost_increase=args.max_net_cost_increase,
            allow_missing=bool(args.allow_missing),
        )
    except ValueError as exc:
        print(
            f"{command}: {str(exc).replace('Thresholds.', '--').replace('_', '-')}",
            file=sys.stderr,
        )
        return 2
    try:
        granularity = given_granularity(args, say=command)
    except ValueError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    prices: Prices | None = None
    if args.price:
        try:
            prices = parse_prices(args.price)
        except ValueError as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return 2
    for side in (args.base, args.new):
        if not os.path.exists(side):
            print(f"{command}: {side}: no such file or folder", file=sys.stderr)
            return 2
    try:
        result = compare_runs(
            args.base,
            args.new,
            thresholds=thresholds,
            prices=prices,
            simulate=True if args.simulate else None,
            granularity=granularity,
            loader=_loader(args),
            max_file_bytes=args.max_file_bytes,
        )
    except _Stop as stop:
        return stop.status
    except NothingCompared as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{command}: cannot read {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except (TraceError, DshError) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    if args.markdown_file:
        refused = write_output(
            command,
            args.markdown_file,
            lambda: comparison_markdown(result),
            inputs=[*_files_under(args.base), *_files_under(args.new)],
        )
        if refused:
            return refused
    if args.json:
        sys.stdout.write(dumps_report_json(result.to_json()))
    elif args.markdown:
        sys.stdout.write(comparison_markdown(result))
    else:
        sys.stdout.write(comparison_text(result))
    return result.exit_status


def _files_under(path: str) -> list[str]:
    """``path``, or every file below it when it is a folder (a report never replaces one)."""
    if not os.path.isdir(path):
        return [path]
    return [os.path.join(root, name) for root, _, names in os.walk(path) for name in names]

"""(Re)record scenario recordings: ``python -m tests.scenarios.record [NAME ...]``.

Each named scenario (default: all) is driven through the real agent loop against the mock
DeepSeek, and its recordings in ``tests/scenarios/recordings/`` are rewritten. Review the
result with ``pytest tests/scenarios --snapshot-update`` and the golden diffs it leaves.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._harness import discover, record


def main(argv: Sequence[str] | None = None) -> int:
    scenarios = discover()
    parser = argparse.ArgumentParser(
        prog="python -m tests.scenarios.record", description="Re-record scenario recordings."
    )
    parser.add_argument("names", nargs="*", help=f"default: all ({', '.join(scenarios)})")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in scenarios]
    if unknown:
        print(f"error: unknown scenario(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in args.names or scenarios:
        written = record(scenarios[name])
        for path in written:
            print(f"recorded {path}")
        if not written:
            print(f"{name}: unchanged (only ids and times differ), recordings kept")
    print("now run: pytest tests/scenarios --snapshot-update, and review the golden diffs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

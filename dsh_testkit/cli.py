"""The ``dsh-testkit`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dsh-testkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the scripted demo session (no key, no network)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        print("dsh-testkit demo: not yet implemented")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``dsh-testkit`` command: ``demo``, ``serve``, ``audit`` and ``cache-report``.

Each subcommand's module (the mock, the loop, rich, the reports) is imported only when that
subcommand runs or shows its help.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence


def _serve(args: argparse.Namespace) -> int:
    """Run the mock DeepSeek on loopback until SIGINT/SIGTERM; the base URL is stdout's first line."""
    from .mock import MockDeepSeek, MockServerError, Script, ScriptError, serve

    try:
        script = Script.load(args.script) if args.script else None
    except ScriptError as exc:
        print(f"dsh-testkit serve: {exc}", file=sys.stderr)
        return 2
    mock = MockDeepSeek(script, seed=args.seed)

    def ready(base_url: str) -> None:
        print(base_url, flush=True)
        print(
            f"mock DeepSeek at {base_url} (chat: /chat/completions, /v1/chat/completions; "
            f"Anthropic format: {base_url}/anthropic; control: /_dsh/script, /_dsh/requests, "
            "/_dsh/reset). Stop with Ctrl-C or SIGTERM.",
            file=sys.stderr,
            flush=True,
        )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
                loop.add_signal_handler(signum, stop.set)
        await serve(mock, host=args.host, port=args.port, stop=stop, ready=ready)

    try:
        asyncio.run(run())
    except MockServerError as exc:
        print(f"dsh-testkit serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # where signal handlers cannot be installed
        pass
    return 0


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Start the mock DeepSeek on loopback, run a scripted multi-turn agent session with "
        "tools, one header change and one compaction, write its log, audit it and print the "
        "cache report. No key, no network (unless --live)."
    )
    from ._demo import add_demo_arguments

    add_demo_arguments(parser)


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    from .reports import add_audit_arguments

    add_audit_arguments(parser)


def _cache_report_arguments(parser: argparse.ArgumentParser) -> None:
    from .reports import add_cache_report_arguments

    add_cache_report_arguments(parser)


def _rebuild_arguments(parser: argparse.ArgumentParser) -> None:
    from .reports import add_rebuild_arguments

    add_rebuild_arguments(parser)


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve the mock DeepSeek until SIGINT/SIGTERM. The first line on stdout is the base "
        "URL; any client takes it as its DeepSeek base URL (add /anthropic for the "
        "Anthropic format)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=0, help="port to bind; 0 picks a free one (default 0)"
    )
    parser.add_argument(
        "--script",
        metavar="FILE",
        help="a JSON script file loaded at start (see dsh_testkit.mock.Script)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for ids and timestamps (default 0)"
    )


_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "demo": (
        "the main job: a scripted agent session on the mock, audited, with a cache report",
        _demo_arguments,
    ),
    "serve": (
        "serve the mock DeepSeek over HTTP on loopback (prints its base URL)",
        _serve_arguments,
    ),
    "audit": ("rebuild every request of a session log and check its invariants", _audit_arguments),
    "cache-report": (
        "per-request prompt-cache hits, the best possible, and why each drop happened",
        _cache_report_arguments,
    ),
    "rebuild": (
        "print every request a log rebuilds, as a summary or the exact wire body",
        _rebuild_arguments,
    ),
}
"""Each subcommand's help line and argument builder, in the order ``--help`` lists them. A
builder may import the (heavy) module that owns the subcommand; :func:`build_parser` calls only
the builders it needs."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``dsh-testkit`` argument parser.

    :param only: build just this subcommand's arguments; the others are listed with their help
        line but not populated, so ``dsh-testkit serve --help`` imports neither rich nor the
        reports. ``None`` builds every subcommand (the CLI reference in the docs does).
    """
    parser = argparse.ArgumentParser(
        prog="dsh-testkit",
        description=(
            "Test and audit LLM agent harnesses against a wire-faithful mock DeepSeek, offline."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_line, add_arguments) in _SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_line)
        if only is None or name == only:
            add_arguments(command)
    return parser


def _first_command(argv: Sequence[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _first_command(argv)
    parser = build_parser(only=command if command in _SUBCOMMANDS else "")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(args)
    if args.command == "audit":
        from .reports import run_audit

        return run_audit(args)
    if args.command == "cache-report":
        from .reports import run_cache_report

        return run_cache_report(args)
    if args.command == "rebuild":
        from .reports import run_rebuild

        return run_rebuild(args)
    if args.command == "serve":
        return _serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

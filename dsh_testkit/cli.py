"""The ``dsh-testkit`` command: ``demo``, ``serve``, ``audit``, ``cache-report`` and ``calibrate``.

The mock and the loop are imported only by the subcommands that run them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dsh-testkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="the main job: a scripted agent session on the mock, audited, with a cache report",
        description=(
            "Start the mock DeepSeek on loopback, run a scripted multi-turn agent session with "
            "tools, one header change and one compaction, write its log, audit it and print the "
            "cache report. No key, no network (unless --live)."
        ),
    )
    from ._demo import add_demo_arguments

    add_demo_arguments(demo)
    audit = sub.add_parser(
        "audit",
        help="rebuild every request of a session log and check its invariants",
    )
    cache_report = sub.add_parser(
        "cache-report",
        help="per-request prompt-cache hits, the best possible, and why each drop happened",
    )
    from .reports import add_audit_arguments, add_cache_report_arguments

    add_audit_arguments(audit)
    add_cache_report_arguments(cache_report)
    calibrate = sub.add_parser(
        "calibrate",
        help="how far the mock's prefix-cache simulator agrees with live usage in session logs",
        description=(
            "Rebuild the requests of session logs that carry live usage, render them to the "
            "wire, run them in order through a fresh prefix-cache simulator and compare hit "
            "tokens, the unit reused and prompt tokens with what the API reported. Exit status: "
            "0 figures printed, 1 no log with live cache figures, 2 a path cannot be used."
        ),
    )
    from .calibration._cli import add_calibrate_arguments

    add_calibrate_arguments(calibrate)
    serve = sub.add_parser(
        "serve",
        help="serve the mock DeepSeek over HTTP on loopback (prints its base URL)",
        description=(
            "Serve the mock DeepSeek until SIGINT/SIGTERM. The first line on stdout is the base "
            "URL; any client takes it as its DeepSeek base URL (add /anthropic for the "
            "Anthropic format)."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=0, help="port to bind; 0 picks a free one (default 0)"
    )
    serve.add_argument(
        "--script",
        metavar="FILE",
        help="a JSON script file loaded at start (see dsh_testkit.mock.Script)",
    )
    serve.add_argument(
        "--seed", type=int, default=0, help="seed for ids and timestamps (default 0)"
    )
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
    if args.command == "calibrate":
        from .calibration._cli import run_calibrate

        return run_calibrate(args)
    if args.command == "serve":
        return _serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

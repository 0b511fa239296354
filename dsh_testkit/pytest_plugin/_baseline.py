"""The cache baseline in pytest: each test's traffic kept as a trace, and compared next time.

As syrupy keeps a snapshot per assertion, ``--dsh-cache-baseline DIR`` keeps the model traffic of
each test as a dsh-trace file in DIR (``DIR/<module path>/<test name>.trace.jsonl``, the test's
node id in the file's header; :func:`encode_name` spells each part so that every test has a file
of its own):

- ``--dsh-cache-baseline-update`` writes (or rewrites) the file of every passing test that sent
  model requests;
- without it, each such test is compared with its file as ``dsh-testkit compare`` does, and a
  test that regressed fails with :class:`~dsh_testkit.compare.CacheRegression`, in the compare
  wording: a cause the harness can fix or a refusal appeared or grew, volatile text appeared in
  the system prompt, or efficiency or cost got worse beyond the thresholds and what the cache
  unit's rounding can explain (``--dsh-cache-max-efficiency-drop PP``,
  ``--dsh-cache-max-cost-increase PCT``, or the ini options of the same names with ``_``;
  defaults 2 pp and 5 %). A test without a file is counted, not failed.

A failing test never hides its cache regression: its traffic is kept, marked failed. When
comparing, it is compared with its file and the comparison is added to the test's report (the
test fails anyway). When writing, its file is written marked ``"failed": true`` — so a CI run
folder holds it and ``dsh-testkit compare`` fails it — unless the folder already holds a file
for it (a committed baseline is never replaced by a failed run's traffic).

The terminal summary ends with one line for the run::

    cache: 12 tests · efficiency 97.1 % (baseline 98.0 %) · cost +1.2 % · 1 regression

The traffic is taken, in this order, from ``dsh_capture`` (every httpx/httpx2 client), the
session's ``dsh_mock_server``, ``dsh_mock``, or the test's cassette when it replayed. A file is
byte-stable — the same run writes the same bytes: request times are dropped, URLs are filed
under ``https://api.deepseek.com`` whatever port the loopback mock had, and explicit
conversation keys that look random (a UUID, a hex or mixed-case id, a long number) become
``conversation-1``, ``conversation-2``, … in order of appearance; a stable key (``bugfix``) is
kept, so a baseline pairs with a proxy recording of the same scenarios. Files are replaced
atomically. Writes stay inside DIR: a symbolic link (or anything but a folder or a regular file)
on the way to a baseline below DIR is refused, the test failing with what to remove (DIR itself
may be a link: it is resolved once).
A baseline whose header names another test fails its test rather than compare against that
test's traffic. Per-test figures travel in the test report's ``user_properties``
(``dsh_cache``), so the line is right under pytest-xdist.

Baselines written under the earlier file names (every character outside ``A-Z a-z 0-9 _ . - [ ]
= + ,`` read as ``_``, so ``test_p[a/b]`` and ``test_p[a_b]`` shared one file) are still read
when their header names the test; ``--dsh-cache-baseline-update`` writes the new name and removes
the old file.

Imported by the plugin at start-up, so it imports only pytest and the standard library; the
doctor is imported when a test is compared.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import pytest

from .._replace_file import replacing
from .._test_ids import name_of_test
from ._stash import CASSETTE_USE, MOCK, SERVER

if TYPE_CHECKING:
    from ..traces import Trace

__all__ = [
    "BASELINE_SUFFIX",
    "BaselineSettings",
    "add_options",
    "baseline_path",
    "configure",
    "decode_name",
    "encode_name",
    "stable_key",
    "write_baseline",
]

BASELINE_SUFFIX: Final = ".trace.jsonl"
PROPERTY: Final = "dsh_cache"
"""The ``user_properties`` name a test's figures travel under."""
_ORIGIN: Final = "https://api.deepseek.com"
_OLD_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.\-\[\]=+,]")
"""The earlier file-name rule (lossy: see the module docstring), still read."""
NAME_BYTES: Final = 150
"""The longest file-name component a test's name (or a module path part) becomes. With
``.trace.jsonl`` after it and the ``.<name>.<8 random>`` temporary file written beside it, it stays
under the 255 bytes a file name holds on the common file systems."""
_KEPT: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-[]=,+")
_WINDOWS_DEVICES: Final = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)
"""Names Windows keeps for devices whatever their extension (``nul.trace.jsonl`` too)."""
_HASHED: Final = re.compile(r"~[0-9a-f]{32}$")
_RANDOM_KEY: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?<![0-9a-zA-Z])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9a-zA-Z])"
    r"|(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])[A-Za-z0-9_-]{12,}"
    r"|[0-9]{6,}"
)
"""What a conversation key drawn anew on every run looks like (a UUID, a hex or mixed-case id,
a timestamp): renamed in a baseline so the file is byte-stable. Other keys are kept."""
_PLUGIN_NAME: Final = "dsh-cache-baseline"


def add_options(group: Any, parser: pytest.Parser) -> None:
    """The baseline's options in the plugin's ``dsh`` group, and its ini options."""
    group.addoption(
        "--dsh-cache-baseline",
        metavar="DIR",
        default=None,
        help="keep each test's model traffic as a trace in DIR and compare the run with it: a "
        "test whose cache efficiency or estimated cost regressed beyond the thresholds fails",
    )
    group.addoption(
        "--dsh-cache-baseline-update",
        action="store_true",
        default=False,
        help="write the traces of --dsh-cache-baseline DIR from this run instead of comparing",
    )
    group.addoption(
        "--dsh-cache-max-efficiency-drop",
        metavar="PP",
        type=float,
        default=None,
        help="percentage points a test's cache efficiency may fall against the baseline "
        "(default: the ini option dsh_cache_max_efficiency_drop, else 2)",
    )
    group.addoption(
        "--dsh-cache-max-cost-increase",
        metavar="PCT",
        type=float,
        default=None,
        help="percent a test's estimated cost may rise against the baseline (default: the ini "
        "option dsh_cache_max_cost_increase, else 5)",
    )
    parser.addini(
        "dsh_cache_max_efficiency_drop",
        "percentage points a test's cache efficiency may fall against --dsh-cache-baseline",
        default="2",
    )
    parser.addini(
        "dsh_cache_max_cost_increase",
        "percent a test's estimated cost may rise against --dsh-cache-baseline",
        default="5",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BaselineSettings:
    """What the command line and the ini file decided for the baseline."""

    directory: Path
    update: bool
    max_efficiency_drop: float
    max_cost_increase: float
    rootdir: Path


def _threshold(config: pytest.Config, name: str) -> float:
    value = config.getoption(f"--dsh-cache-{name.replace('_', '-')}")
    source = f"--dsh-cache-{name.replace('_', '-')}"
    if value is None:
        source = f"ini option dsh_cache_{name}"
        raw = str(config.getini(f"dsh_cache_{name}")).strip()
        try:
            value = float(raw)
        except ValueError:
            raise pytest.UsageError(f"{source}: {raw!r} is not a number") from None
    if not (value >= 0 and value != float("inf")):
        raise pytest.UsageError(f"{source}: must be a number ≥ 0, got {value!r}")
    return float(value)


def configure(config: pytest.Config) -> None:
    """Register the baseline's hooks when ``--dsh-cache-baseline`` is given."""
    directory = config.getoption("--dsh-cache-baseline")
    if directory is None:
        if config.getoption("--dsh-cache-baseline-update"):
            raise pytest.UsageError(
                "--dsh-cache-baseline-update needs --dsh-cache-baseline DIR (where to write)"
            )
        return
    path = Path(directory)
    if not path.is_absolute():
        path = Path(config.invocation_params.dir) / path
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"--dsh-cache-baseline {directory}: not a directory")
    settings = BaselineSettings(
        directory=path,
        update=bool(config.getoption("--dsh-cache-baseline-update")),
        max_efficiency_drop=_threshold(config, "max_efficiency_drop"),
        max_cost_increase=_threshold(config, "max_cost_increase"),
        rootdir=Path(config.rootpath),
    )
    config.pluginmanager.register(_BaselinePlugin(settings), _PLUGIN_NAME)


def encode_name(name: str) -> str:
    """One file-name component for a test's name or a module path part, one of its own for
    every name, on any file system.

    Readable and reversible (:func:`decode_name`): ``a-z 0-9 . _ - [ ] = , +`` stay as they are;
    an upper-case ASCII letter becomes ``!`` and the letter in lower case (``TestX`` →
    ``!test!x``), so names that differ only in case stay apart where the file system ignores
    case (macOS, Windows); anything else, ``!`` and ``%`` included, is ``%XX`` of its UTF-8 bytes
    (``a/b`` → ``a%2Fb``; two spellings of ``é`` stay two files). A leading or trailing ``.``
    (hidden files, which ``compare`` skips; Windows drops a trailing one) is escaped too, and so
    is the first letter of a Windows device name (``nul``). Past :data:`NAME_BYTES`, a readable
    head is kept and ends in ``~`` and 32 hex digits of the name's SHA-256 (``~`` is not
    otherwise written, so a hashed name never equals a readable one); the file's header names
    the test in full.
    """
    if not name:
        raise ValueError("encode_name: a name cannot be empty")
    out: list[str] = []
    last = len(name) - 1
    for i, char in enumerate(name):
        if "A" <= char <= "Z":
            out.append("!" + char.lower())
        elif char in _KEPT and not (char == "." and i in (0, last)):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    encoded = "".join(out)
    if encoded.split(".", 1)[0] in _WINDOWS_DEVICES:
        encoded = f"%{ord(encoded[0]):02X}" + encoded[1:]
    if len(encoded) <= NAME_BYTES:
        return encoded
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    head = encoded[: NAME_BYTES - 33]
    if head.endswith(("%", "!")):  # never end inside an escape
        head = head[:-1]
    elif head[-2:-1] == "%":
        head = head[:-2]
    return f"{head}~{digest}"


def decode_name(encoded: str) -> str | None:
    """The name :func:`encode_name` made ``encoded`` of; ``None`` for a hashed (long) one."""
    if _HASHED.search(encoded):
        return None
    cased = re.sub(r"!([a-z])", lambda m: m.group(1).upper(), encoded)
    return unquote(cased, errors="surrogatepass")


def _module_parts(rootdir: Path, item: Any) -> tuple[str, ...]:
    module = Path(item.path)
    try:
        relative = module.relative_to(rootdir)
    except ValueError:
        relative = Path(module.name)
    return relative.with_suffix("").parts


def baseline_path(directory: Path, rootdir: Path, item: Any) -> Path:
    """``DIR/<module path without .py>/<Class.test[param]>.trace.jsonl`` for a test item, each
    part spelled by :func:`encode_name`."""
    parts = [encode_name(p) for p in _module_parts(rootdir, item)]
    return directory.joinpath(*parts, encode_name(name_of_test(item)) + BASELINE_SUFFIX)


def _old_baseline_path(directory: Path, rootdir: Path, item: Any) -> Path:
    """Where the earlier file-name rule put the baseline (see the module docstring)."""

    def old(name: str) -> str:
        return _OLD_UNSAFE.sub("_", name) or "_"

    parts = [old(p) for p in _module_parts(rootdir, item)]
    return directory.joinpath(*parts, old(name_of_test(item)) + BASELINE_SUFFIX)


# ------------------------------------------------------------------------------ traces


def stable_key(key: str, renamed: dict[str, str]) -> str:
    """``key`` as a baseline keeps it: itself, unless it looks drawn anew on every run
    (:data:`_RANDOM_KEY`); then ``conversation-N``, N in order of appearance (``renamed``)."""
    if _RANDOM_KEY.search(key) is None:
        return key
    return renamed.setdefault(key, f"conversation-{len(renamed) + 1}")


def _stable_records(trace: Trace) -> Iterator[dict[str, Any]]:
    """The trace's exchange records with what varies from run to run normalized away."""
    keys: dict[str, str] = {}
    for exchange in trace.exchanges:
        record = exchange.to_json()
        record["started"] = record["firstByte"] = record["finished"] = None
        if exchange.url:
            parts = urlsplit(exchange.url)
            record["url"] = _ORIGIN + (parts.path or "/")
        if exchange.conversation is not None:
            record["conversation"] = stable_key(exchange.conversation, keys)
        yield record


def _leaves(directory: Path, path: Path) -> str | None:
    """Why writing ``path`` could leave ``directory`` (``None``: it cannot): a symbolic link,
    or anything but a folder, on the way below it; a link or anything but a regular file at
    ``path``. (``directory`` itself may be a link.)"""
    current = directory
    for part in path.relative_to(directory).parts[:-1]:
        current = current / part
        if current.is_symlink():
            return f"{current} is a symbolic link"
        if os.path.lexists(current) and not current.is_dir():
            return f"{current} is not a folder"
    if path.is_symlink():
        return f"{path} is a symbolic link"
    if os.path.lexists(path) and not path.is_file():
        return f"{path} is not a regular file"
    return None


def write_baseline(
    trace: Trace, path: Path, *, scenario: str, root: Path | None = None, failed: bool = False
) -> None:
    """Write ``trace`` to ``path`` as a byte-stable dsh-trace file (atomically replaced);
    ``failed``: the traffic of a test that failed (``"failed": true`` in the header).

    With ``root`` (the baseline folder, ``path`` inside it), nothing is written through a link:
    an ``OSError`` (``ELOOP``) says what is in the way, and nothing is written."""
    from ..traces._file import TraceWriter

    if root is not None:
        real = Path(os.path.realpath(root))
        path = real.joinpath(*path.relative_to(root).parts)
        problem = _leaves(real, path)
        if problem is not None:
            raise OSError(
                errno.ELOOP,
                f"{problem}; baselines are written only inside {root}, never through a link: "
                "remove it",
                str(path),
            )
    source = "capture" if trace.source == "capture" else "memory"
    with (
        replacing(path) as temporary,
        TraceWriter(temporary, source=source, scenario=scenario, failed=failed) as writer,
    ):
        for record in _stable_records(trace):
            writer.append(record)


def _declared_test(path: Path) -> str | None:
    """The test a baseline's header names (its ``scenario``), if it reads."""
    try:
        with open(path, "rb") as file:
            first = file.readline(1 << 20)
        header = json.loads(first)
    except (OSError, ValueError):
        return None
    scenario = header.get("scenario") if isinstance(header, dict) else None
    return scenario if isinstance(scenario, str) else None


def _is_earlier_baseline(old: Path, path: Path, nodeid: str) -> bool:
    """Whether ``old`` (the earlier rule's name of ``path``) is this test's baseline: a regular
    file whose header names it."""
    if old == path:
        return False
    try:
        if not os.path.isfile(old) or os.path.islink(old):
            return False
    except (OSError, ValueError):  # a name too long for the system: never written
        return False
    return _declared_test(old) == nodeid


def _damage(path: Path, nodeid: str | None = None) -> str | None:
    """What is wrong with the baseline file at ``path`` (``None``: it reads as one).

    A baseline is written whole and at once (:func:`write_baseline`) and only for a test that
    sent requests, so what a trace reader forgives in a live recording (a cut last line, figures
    it leaves out, no exchange at all) is damage here, and so is another kind of recording, and
    a header naming another test than ``nodeid``."""
    from ..traces import TraceError, load_trace

    if not path.is_file():
        return f"{path} is not a file"
    declared = _declared_test(path)
    if nodeid is not None and declared is not None and declared != nodeid:
        return f"{path} is the baseline of {declared}, not of this test"
    try:
        trace = load_trace(path)
    except TraceError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if trace.source not in ("capture", "memory"):
        return f"{path} is a {trace.source} recording, not a baseline this plugin wrote"
    if not len(trace):
        return f"{path} holds no request (a baseline holds the requests its test sent)"
    if trace.notes:
        return f"{path}: " + "; ".join(trace.notes)
    return None


def _test_trace(item: pytest.Item) -> Trace | None:
    """The model traffic of the test that just ran (``None``: it sent none)."""
    capture = getattr(item, "funcargs", {}).get("dsh_capture")
    if capture is not None and capture.requests:
        trace: Trace = capture.to_trace()
        if len(trace):
            return trace
    server = item.config.stash.get(SERVER, None)
    if (
        server is not None
        and "dsh_mock_server" in getattr(item, "fixturenames", ())
        and server.mock.requests
    ):
        return server.mock.to_trace()
    fixture = item.stash.get(MOCK, None)
    if fixture is not None and fixture.mock.requests:
        return fixture.mock.to_trace()
    use = item.stash.get(CASSETTE_USE, None)
    if use is not None and Path(use.path).is_file():
        from ..traces import load_trace

        trace = load_trace(use.path)
        if len(trace):
            return trace
    return None


# ------------------------------------------------------------------------------ the run


def _counts_as_failed(item: pytest.Item, failure: BaseException) -> bool:
    """Whether the test failed (not skipped, not an expected failure, not interrupted)."""
    if isinstance(failure, (KeyboardInterrupt, SystemExit, pytest.skip.Exception)):
        return False
    return item.get_closest_marker("xfail") is None


@dataclass(slots=True)
class _Tally:
    tests: int = 0
    compared: int = 0
    regressions: int = 0
    without_baseline: int = 0
    unreadable: int = 0
    failed: int = 0
    written: int = 0
    reusable: int = 0
    counted: int = 0
    base_reusable: int = 0
    base_counted: int = 0
    cost: float = 0.0
    base_cost: float = 0.0

    def add(self, figures: dict[str, Any]) -> None:
        self.tests += 1
        new = figures["new"]
        self.reusable += new["reusableTokens"]
        self.counted += new["countedHitTokens"]
        state = figures["state"]
        if state == "written":
            self.written += 1
        elif state == "no-baseline":
            self.without_baseline += 1
        elif state == "unreadable":
            self.unreadable += 1
        elif state == "failed":
            self.failed += 1
        else:
            self.compared += 1
            base = figures["base"]
            self.base_reusable += base["reusableTokens"]
            self.base_counted += base["countedHitTokens"]
            self.cost += new["cost"] or 0.0
            self.base_cost += base["cost"] or 0.0
            if state == "regression":
                self.regressions += 1

    def line(self, settings: BaselineSettings) -> str:
        parts = [f"cache: {self.tests} test{'s' if self.tests != 1 else ''}"]
        efficiency = _percent_text(self.counted, self.reusable)
        if self.compared:
            base = _percent_text(self.base_counted, self.base_reusable)
            parts.append(f"efficiency {efficiency} (baseline {base})")
            if self.base_cost:
                parts.append(f"cost {(self.cost - self.base_cost) / self.base_cost * 100:+.1f} %")
            else:
                parts.append("cost –" if not self.cost else "cost up from $0")
            parts.append(
                f"{self.regressions} regression{'s' if self.regressions != 1 else ''}"
                if self.regressions
                else "no regression"
            )
        else:
            parts.append(f"efficiency {efficiency}")
        if self.written:
            parts.append(f"baseline written for {self.written} test(s) in {settings.directory}")
        if self.without_baseline:
            parts.append(
                f"{self.without_baseline} without baseline (--dsh-cache-baseline-update writes it)"
            )
        if self.failed:
            parts.append(
                f"{self.failed} failed test{'s' if self.failed != 1 else ''} (traffic kept, "
                "marked failed)"
            )
        if self.unreadable:
            parts.append(
                f"{self.unreadable} baseline{'s' if self.unreadable != 1 else ''} that do"
                f"{'' if self.unreadable != 1 else 'es'} not read"
            )
        return " · ".join(parts)


def _percent_text(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f} %" if whole else "–"


def _figures(totals: Any) -> dict[str, Any]:
    return {
        "reusableTokens": totals.reusable_tokens,
        "countedHitTokens": totals.counted_hit_tokens,
        "cost": totals.cost,
    }


class _BaselinePlugin:
    """The hooks of one run with ``--dsh-cache-baseline``."""

    def __init__(self, settings: BaselineSettings) -> None:
        self.settings = settings
        self.tally = _Tally()
        self._written: dict[Path, str] = {}
        """Baselines written by this process, by the test they belong to."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        # Outermost: runs after the plugin's own after-call checks.
        __tracebackhide__ = True
        try:
            result = yield
        except BaseException as failure:
            # A failing test never hides its cache regression: its traffic is kept (marked
            # failed) and compared, and the test fails with its own error.
            if _counts_as_failed(item, failure):
                trace = _test_trace(item)
                if trace is not None:
                    self._failed(item, trace)
            raise
        trace = _test_trace(item)
        if trace is not None:
            self._check(item, trace)
        return result

    def _failed(self, item: pytest.Item, trace: Trace) -> None:
        from ..compare import compare_runs
        from ..compare._render import scenario_text
        from ..doctor import diagnose
        from ..traces import TraceError

        directory = self.settings.directory
        path = baseline_path(directory, self.settings.rootdir, item)
        old = _old_baseline_path(directory, self.settings.rootdir, item)
        if not os.path.lexists(path) and _is_earlier_baseline(old, path, item.nodeid):
            path = old  # its baseline, under the earlier name
        if self.settings.update:
            if os.path.lexists(path):
                item.add_report_section(
                    "call",
                    "dsh cache",
                    f"the test failed: its cache baseline {path} is kept as it was (a failed "
                    "run's traffic never replaces a baseline)",
                )
                with tempfile.TemporaryDirectory(prefix="dsh-cache-") as scratch:
                    current = Path(scratch) / path.name
                    write_baseline(trace, current, scenario=item.nodeid, failed=True)
                    self._record(item, "failed", diagnose(current).totals, None)
                return
            try:
                write_baseline(trace, path, scenario=item.nodeid, root=directory, failed=True)
            except OSError as exc:
                item.add_report_section(
                    "call",
                    "dsh cache",
                    f"the test failed, and its traffic cannot be written: {exc.strerror or exc}",
                )
                return
            item.add_report_section(
                "call",
                "dsh cache",
                f"the test failed: its traffic is written to {path} marked failed "
                "(dsh-testkit compare fails it)",
            )
            self._record(item, "failed", diagnose(path).totals, None)
            return
        with tempfile.TemporaryDirectory(prefix="dsh-cache-") as scratch:
            current = Path(scratch) / path.name
            write_baseline(trace, current, scenario=item.nodeid, failed=True)
            totals = diagnose(current).totals
            if not path.is_file() or _damage(path, item.nodeid) is not None:
                self._record(item, "failed", totals, None)
                return
            try:
                result = compare_runs(path, current, thresholds=self._thresholds())
            except TraceError:
                self._record(item, "failed", totals, None)
                return
        scenario = result.scenarios[0]
        self._record(item, "failed", scenario.new, scenario.base)
        shown = os.path.relpath(path, item.config.invocation_params.dir)
        lines = scenario_text(scenario)
        lines[0] = (
            f"the test failed; its traffic, compared with the cache baseline {shown}, is a "
            f"{scenario.verdict}:"
        )
        item.add_report_section("call", "dsh cache", "\n".join(lines))

    def _thresholds(self) -> Any:
        from ..compare import Thresholds

        return Thresholds(
            max_efficiency_drop=self.settings.max_efficiency_drop,
            max_cost_increase=self.settings.max_cost_increase,
        )

    def _check(self, item: pytest.Item, trace: Trace) -> None:
        __tracebackhide__ = True
        from ..compare import CacheRegression, compare_runs
        from ..compare._render import scenario_text
        from ..doctor import diagnose
        from ..traces import TraceError

        directory = self.settings.directory
        path = baseline_path(directory, self.settings.rootdir, item)
        old = _old_baseline_path(directory, self.settings.rootdir, item)
        if self.settings.update:
            if self._written.setdefault(path, item.nodeid) != item.nodeid:
                pytest.fail(
                    f"the cache baseline of {item.nodeid} would be {path}, which this run "
                    f"wrote for {self._written[path]}: rename one of the tests",
                    pytrace=False,
                )
            try:
                write_baseline(trace, path, scenario=item.nodeid, root=directory)
            except OSError as exc:
                pytest.fail(
                    f"cannot write the cache baseline of {item.nodeid}: {exc.strerror or exc}",
                    pytrace=False,
                )
            if _is_earlier_baseline(old, path, item.nodeid):
                old.unlink(missing_ok=True)  # its earlier name: the new file replaces it
            totals = diagnose(path).totals
            self._record(item, "written", totals, None)
            return
        if not os.path.lexists(path) and _is_earlier_baseline(old, path, item.nodeid):
            path = old  # written under the earlier name; --dsh-cache-baseline-update renames it
        damage = _damage(path, item.nodeid) if os.path.lexists(path) else None
        if damage is not None:
            with tempfile.TemporaryDirectory(prefix="dsh-cache-") as scratch:
                current = Path(scratch) / path.name
                write_baseline(trace, current, scenario=item.nodeid)
                self._record(item, "unreadable", diagnose(current).totals, None)
            pytest.fail(
                f"the cache baseline of {item.nodeid} does not read: {damage}; rewrite it with "
                "--dsh-cache-baseline-update",
                pytrace=False,
            )
        if not path.is_file():
            with tempfile.TemporaryDirectory(prefix="dsh-cache-") as scratch:
                current = Path(scratch) / path.name
                write_baseline(trace, current, scenario=item.nodeid)
                self._record(item, "no-baseline", diagnose(current).totals, None)
            return
        thresholds = self._thresholds()
        with tempfile.TemporaryDirectory(prefix="dsh-cache-") as scratch:
            current = Path(scratch) / path.name
            write_baseline(trace, current, scenario=item.nodeid)
            try:
                result = compare_runs(path, current, thresholds=thresholds)
            except TraceError as exc:
                self._record(item, "unreadable", diagnose(current).totals, None)
                pytest.fail(
                    f"the cache baseline of {item.nodeid} does not read: {exc}; rewrite it with "
                    "--dsh-cache-baseline-update",
                    pytrace=False,
                )
        scenario = result.scenarios[0]
        state = "regression" if result.verdict == "regression" else scenario.verdict
        self._record(item, state, scenario.new, scenario.base)
        if state == "regression":
            shown = os.path.relpath(path, item.config.invocation_params.dir)
            lines = scenario_text(scenario)
            lines[0] = f"cache regression in {item.nodeid} against the baseline {shown}:"
            lines.append(
                "if the change is intended, accept it with --dsh-cache-baseline-update "
                f"(thresholds: {thresholds.max_efficiency_drop:g} pp efficiency, "
                f"{thresholds.max_cost_increase:g} % cost, beyond the cache unit's rounding)"
            )
            raise CacheRegression("\n".join(lines), comparison=result)

    def _record(self, item: pytest.Item, state: str, new: Any, base: Any | None) -> None:
        figures = {
            "state": state,
            "new": _figures(new),
            "base": _figures(base) if base is not None else None,
        }
        item.user_properties.append((PROPERTY, json.dumps(figures, sort_keys=True)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, str):
                self.tally.add(json.loads(value))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller says it
            return
        if self.tally.tests:
            terminalreporter.write_line(self.tally.line(self.settings))
        else:
            terminalreporter.write_line("cache: no test sent model requests")

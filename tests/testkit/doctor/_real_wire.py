"""Real DeepSeek traffic grouped per recorded test run, for the cache doctor's verdict-accuracy tests.

The recordings (``../shared/fixtures/real-deepseek-wire/``, beside the checkout; see its README)
are chat-completions exchanges that other public projects' test suites had with the live API: one
JSON object per line in ``<source>.jsonl.gz``, each naming the file version it came from (repo,
path, commit, git blob), its position in that file, the request body as recorded and the answer
(status, headers such as ``date``, body; SSE text for streams).

**One run = one stored version of one cassette/fixture file** (one git blob): a test suite
re-records a file as a whole, so the exchanges of one blob were sent together, in the order the
file holds them (the ``#N`` of an interaction's id; a cassette's exchanges with other hosts — the
remote file a test downloads, the other provider of a model-switching test — are not in the
fixture, so positions may start at 1). Runs with at least two requests are the conversations the
doctor is measured on (303 runs, 772 requests: the grouping of issue 23).

:func:`har_document` writes a run as HAR 1.2: one entry per exchange, ``startedDateTime`` from the
response ``Date`` header (whole seconds; the interaction's ``recorded`` date where the recorder kept
no ``Date``), the request body as recorded in ``postData.text``, the answer's status, headers and
body. Durations are unknown (a ``Date`` header is a 1-second clock read once), so ``time`` and the
``timings`` are ``-1``, which the trace reader takes as "no end time"; strict HAR 1.2 wants
non-negative ``send``/``wait``/``receive``, and a made-up 0 would claim the answer came at once.

Tests that use this module call :func:`require_wire` first: it skips, with the reason, where the
recordings are absent.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Final

import pytest

WIRE: Final = (
    Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "real-deepseek-wire"
)
"""The recordings, beside the checkout."""

MISSING: Final = f"the real DeepSeek recordings are not beside the checkout ({WIRE})"
"""Why tests that need the recordings skip."""

API_BASE: Final = "https://api.deepseek.com"
HAR_CREATOR: Final = {"name": "dsh-testkit tests: real-wire runs", "version": "1"}
UNKNOWN_MS: Final = -1
"""HAR's "unknown" for a duration: the recordings time nothing."""

_POSITION = re.compile(r"#(\d+)@[0-9a-f]+$")


def require_wire(folder: Path = WIRE) -> Path:
    """The recordings' folder; skips the calling test (with the reason) when it is absent."""
    if not folder.is_dir() or not any(folder.glob("*.jsonl.gz")):
        pytest.skip(MISSING if folder == WIRE else f"no recordings in {folder}")
    return folder


@dataclass(frozen=True, slots=True, kw_only=True)
class Interaction:
    """One recorded exchange with the live API, as the fixture stores it."""

    fixture_id: str
    """The fixture's own id (``ruby_llm:<name>#<position>@<blob prefix>``)."""
    repo: str
    path: str
    commit: str
    """The commit that introduced this version of the file."""
    blob: str
    """The git blob of this version of the file: the run."""
    recording_format: str
    position: int
    """0-based position of the exchange in the recorded file (other hosts' exchanges count)."""
    recorded: str
    """ISO date of the recording: VCR ``recorded_at``, else the ``Date`` header, else ``created``."""
    endpoint: str
    request_text: str | None
    """The request body as recorded (``None``: the fixture kept no request)."""
    request_exact: bool
    """Whether ``request_text`` holds the bytes as sent (else a re-serialized parsed form)."""
    status: int
    response_headers: Mapping[str, str]
    """Headers of interest, lower-case names."""
    response_text: str | None

    @property
    def id(self) -> str:
        """Stable case id: ``<repo>:<path>@<blob>#<position>``."""
        return f"{self.repo}:{self.path}@{self.blob}#{self.position}"

    @property
    def run_id(self) -> str:
        return f"{self.repo}:{self.path}@{self.blob}"

    def body(self) -> dict[str, Any] | None:
        """The request body parsed (``None`` when the fixture has no request)."""
        if self.request_text is None:
            return None
        parsed = json.loads(self.request_text)
        return parsed if isinstance(parsed, dict) else None

    @property
    def date(self) -> datetime | None:
        """The response ``Date`` header (whole seconds, UTC), if the recorder kept it."""
        text = self.response_headers.get("date")
        return parsedate_to_datetime(text).astimezone(UTC) if text else None

    @property
    def started(self) -> datetime:
        """The exchange's time: the response ``Date``, else the ``recorded`` date."""
        date = self.date
        if date is not None:
            return date
        return datetime.fromisoformat(self.recorded.replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One stored version of one recorded file: exchanges sent together, in recorded order."""

    repo: str
    path: str
    blob: str
    commit: str
    interactions: tuple[Interaction, ...]

    @property
    def id(self) -> str:
        return f"{self.repo}:{self.path}@{self.blob}"

    @property
    def requests(self) -> tuple[Interaction, ...]:
        """The exchanges whose request the fixture kept (the AI SDK fixtures keep none)."""
        return tuple(i for i in self.interactions if i.request_text is not None)

    @property
    def har_name(self) -> str:
        """A file name for this run's HAR: repo, file stem and blob prefix."""
        owner_repo = self.repo.replace("/", "+")
        stem = Path(self.path).name.rsplit(".", 1)[0]
        stem = re.sub(r"[^A-Za-z0-9_.,=+-]+", "_", stem)
        return f"{owner_repo}+{stem}@{self.blob[:12]}.har"


def _interaction(record: Mapping[str, Any]) -> Interaction:
    source = record["source"]
    request = record["request"]
    response = record["response"]
    found = _POSITION.search(record["id"])
    if found is None:
        raise ValueError(f"fixture id without a position: {record['id']!r}")
    text = request.get("body")
    return Interaction(
        fixture_id=record["id"],
        repo=source["repo"],
        path=source["path"],
        commit=source["commit"],
        blob=source["blob"],
        recording_format=source["format"],
        position=int(found.group(1)),
        recorded=record["recorded"],
        endpoint=record["endpoint"],
        request_text=text if isinstance(text, str) else None,
        request_exact=bool(request.get("body_exact")),
        status=int(response["status"]),
        response_headers=dict(response.get("headers") or {}),
        response_text=response.get("body"),
    )


def load_interactions(folder: Path = WIRE) -> tuple[Interaction, ...]:
    """Every interaction of the fixture, file by file (sorted names), line by line."""
    out: list[Interaction] = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            out.extend(_interaction(json.loads(line)) for line in lines if line.strip())
    return tuple(out)


def group_runs(interactions: Iterable[Interaction]) -> tuple[Run, ...]:
    """The interactions grouped per run (one blob of one file), each in recorded order.

    Runs are ordered by repository, path, first recorded date and blob, so the grouping does not
    depend on the order the fixture's files list them.
    """
    grouped: dict[tuple[str, str, str], list[Interaction]] = {}
    for interaction in interactions:
        grouped.setdefault((interaction.repo, interaction.path, interaction.blob), []).append(
            interaction
        )
    runs = []
    for (repo, path, blob), members in grouped.items():
        members.sort(key=lambda i: i.position)
        positions = [i.position for i in members]
        if len(set(positions)) != len(positions):
            raise ValueError(f"two interactions at one position in {repo}:{path}@{blob}")
        commits = {i.commit for i in members}
        if len(commits) != 1:
            raise ValueError(f"one blob introduced by several commits: {repo}:{path}@{blob}")
        runs.append(
            Run(repo=repo, path=path, blob=blob, commit=commits.pop(), interactions=tuple(members))
        )
    runs.sort(key=lambda r: (r.repo, r.path, r.interactions[0].recorded, r.blob))
    return tuple(runs)


def load_runs(folder: Path = WIRE) -> tuple[Run, ...]:
    return group_runs(load_interactions(folder))


def conversation_runs(runs: Sequence[Run]) -> tuple[Run, ...]:
    """The runs with at least two requests: those where a request can follow an earlier one."""
    return tuple(r for r in runs if len(r.requests) >= 2)


# -- HAR 1.2 ------------------------------------------------------------------------------------


def _har_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _har_entry(interaction: Interaction) -> dict[str, Any]:
    headers = interaction.response_headers
    mime = headers.get("content-type") or "application/json"
    request_text = interaction.request_text or ""
    answer = interaction.response_text or ""
    clock = "response Date header" if interaction.date is not None else "recorded date"
    return {
        "startedDateTime": _har_time(interaction.started),
        "time": UNKNOWN_MS,
        "request": {
            "method": "POST",
            "url": API_BASE + interaction.endpoint,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "postData": {"mimeType": "application/json", "text": request_text},
            "headersSize": -1,
            "bodySize": len(request_text.encode("utf-8")),
        },
        "response": {
            "status": interaction.status,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": name, "value": value} for name, value in headers.items()],
            "content": {
                "size": len(answer.encode("utf-8")),
                "mimeType": mime,
                "text": answer,
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": UNKNOWN_MS, "wait": UNKNOWN_MS, "receive": UNKNOWN_MS},
        "comment": (
            f"{interaction.id}; started = {clock} (1 s resolution); durations unknown (-1)"
        ),
    }


def har_document(run: Run) -> dict[str, Any]:
    """The run as a HAR 1.2 document: its requests in recorded order."""
    return {
        "log": {
            "version": "1.2",
            "creator": dict(HAR_CREATOR),
            "entries": [_har_entry(i) for i in run.requests],
            "comment": f"one recorded test run: {run.id} (commit {run.commit})",
        }
    }


def har_text(run: Run) -> str:
    """The HAR document's text: stable bytes for the same run on any machine."""
    return json.dumps(har_document(run), ensure_ascii=False, indent=1) + "\n"


def write_har(run: Run, folder: Path) -> Path:
    """Write the run's HAR into ``folder`` (named :attr:`Run.har_name`); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / run.har_name
    path.write_text(har_text(run), encoding="utf-8", newline="\n")
    return path


def write_hars(runs: Iterable[Run], folder: Path) -> list[Path]:
    """Write every run's HAR into ``folder``; names are unique per run."""
    paths = [write_har(run, folder) for run in runs]
    if len({p.name for p in paths}) != len(paths):
        raise ValueError("two runs map to one HAR file name")
    return paths

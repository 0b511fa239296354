"""Normalization for goldens: what differs between runs, machines and working directories is
replaced by stable tokens, and nothing else is touched.

The rules, applied by :class:`Normalizer` (docs/design.md §T2 — the churn they fought:
fresh UUIDs, cwd spellings and timestamps rewriting every golden on every run):

1. **The working directory** → ``{{cwd}}``. Every spelling is replaced (the path as given, its
   ``realpath``, declared aliases, and ``/private`` + each absolute spelling for macOS's
   ``/tmp`` and ``/var`` symlinks), longest first, and only at a boundary: before it the start
   of the text, whitespace, one of ``<>'"`()[]{},;:!?=`` or ``file://``; after it the end, a
   path separator, one of those characters, or a ``.`` that ends the text or precedes one of
   them. So ``/tmp/w/x`` and ``file:///tmp/w`` and ``(/tmp/w).`` are replaced, ``/tmp/w-backup``
   and ``/tmp/w.backup`` are not. A leftover ``/private{{cwd}}`` collapses to ``{{cwd}}``, and
   inside a ``{{cwd}}``-rooted path (up to whitespace, a quote, ``<``, ``>`` or a backtick)
   ``\\`` becomes ``/``, so a Windows run writes the same golden. The filesystem root is never
   a spelling (it would match everywhere).
2. **Ids** → ``{{<kind>-<n>}}``, numbered per kind in first-seen order (``{{session-1}}``,
   ``{{msg-3}}``, ``{{call-2}}``, ``{{req-1}}``). Ids are registered where the structure says
   "this is an id" (:meth:`Normalizer.token`); a registered id that is UUID-shaped or at least
   :data:`MIN_SWEPT_ID_LENGTH` characters long is also replaced wherever it appears inside text.
3. **Stray UUIDs** (any other UUID-shaped string, any case) → ``{{uuid-<n>}}``, first-seen order.
4. **Times**: in JSON values, the keys of :data:`TIME_KEYS` become ``0`` (``dt`` arrays of packed
   chunk rows become zeros). Sequence numbers are kept: they are deterministic by contract.

Normalizing twice changes nothing (tokens contain no id, UUID or path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "CWD_TOKEN",
    "MIN_SWEPT_ID_LENGTH",
    "TIME_KEYS",
    "Normalizer",
    "cwd_spellings",
]

CWD_TOKEN: Final = "{{cwd}}"
"""What every spelling of the working directory becomes."""

TIME_KEYS: Final = frozenset({"time", "createdAt", "time0", "durationMs"})
"""JSON keys whose integer values are wall-clock times or durations: zeroed."""

MIN_SWEPT_ID_LENGTH: Final = 8
"""A registered id at least this long is also replaced inside text; a shorter one (``m1``,
``call_1``) only where the structure names it, since it could be part of ordinary words."""

_BOUNDARY_CHARS: Final = "<>'\"`()[]{},;:!?="
_BOUNDARY_CLASS: Final = "[\\s" + re.escape(_BOUNDARY_CHARS) + "]"
# A token's braces are not boundaries: "{{uuid-1}}/tmp/w" must stay as it is when normalized
# again (its "}" was a hex digit before the UUID sweep), so normalizing is idempotent.
_BEFORE: Final = f"(?:\\A|(?<={_BOUNDARY_CLASS})(?<!}}}})|(?<=file://)|(?<=file:///))"
_AFTER: Final = f"(?=\\Z|[/\\\\]|(?!{{{{){_BOUNDARY_CLASS}|\\.(?:\\Z|(?!{{{{){_BOUNDARY_CLASS}))"
_CWD_ROOTED: Final = re.compile(r"\{\{cwd\}\}[^\s'\"<>`]*")
_UUID: Final = re.compile(
    r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"(?![0-9A-Za-z])"
)
_KIND: Final = re.compile(r"^[a-z][a-z0-9]*$")
_ID_EDGE: Final = "A-Za-z0-9_-"


def _is_root(path: str) -> bool:
    stripped = path.rstrip("/\\")
    return stripped == "" or re.fullmatch(r"[A-Za-z]:", stripped) is not None


def cwd_spellings(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """Every spelling to replace for these directories, longest first (rule 1).

    Each path contributes itself (trailing separators dropped), its ``realpath``, and
    ``/private`` + each absolute spelling that does not already start with it. Empty paths and
    the filesystem root contribute nothing.
    """
    found: set[str] = set()
    for raw in paths:
        path = os.fspath(raw)
        if not path or _is_root(path):
            continue
        candidates = {path.rstrip("/\\") or path, os.path.realpath(path).rstrip("/\\")}
        for spelling in tuple(candidates):
            if spelling.startswith("/") and not spelling.startswith("/private/"):
                candidates.add("/private" + spelling)
        found.update(c for c in candidates if c and not _is_root(c))
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


class Normalizer:
    """Replaces what varies between runs with stable tokens (the module's rules 1–4).

    One normalizer renders one golden: tokens are numbered in the order ids are registered,
    so register them in a deterministic order (the renderers walk the log first).
    """

    def __init__(
        self,
        *,
        cwd: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
        cwd_aliases: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        """``cwd``: the working directory (or several spellings of it; default: the process's
        current directory). ``cwd_aliases``: more spellings of the same directory."""
        if cwd is None:
            paths: list[str | os.PathLike[str]] = [os.getcwd()]
        elif isinstance(cwd, (str, os.PathLike)):
            paths = [cwd]
        else:
            paths = list(cwd)
        self._paths: list[str | os.PathLike[str]] = [*paths, *cwd_aliases]
        self._cwd_pattern = self._compile_cwd()
        self._tokens: dict[str, str] = {}
        """Registered id (UUIDs lower-cased) → its token."""
        self._counts: dict[str, int] = {}
        self._swept_pattern: re.Pattern[str] | None = None
        self._swept_dirty = False

    # ---------------------------------------------------------------- configuration

    @property
    def spellings(self) -> tuple[str, ...]:
        """The cwd spellings replaced, longest first."""
        return cwd_spellings(self._paths)

    def add_cwd(self, path: str | os.PathLike[str] | None) -> None:
        """Add another spelling of the working directory (e.g. a log header's ``cwd``)."""
        if path is None or not os.fspath(path) or os.fspath(path) == CWD_TOKEN:
            return
        self._paths.append(path)
        self._cwd_pattern = self._compile_cwd()

    def _compile_cwd(self) -> re.Pattern[str] | None:
        spellings = cwd_spellings(self._paths)
        if not spellings:
            return None
        alternatives = "|".join(re.escape(s) for s in spellings)
        return re.compile(f"{_BEFORE}(?:{alternatives}){_AFTER}")

    # ---------------------------------------------------------------- ids

    def token(self, kind: str, value: str) -> str:
        """The token of id ``value``, registering it as a ``kind`` id when first seen.

        An id registered before keeps its first token, whatever ``kind`` says now; a value
        that is already a token is returned unchanged.
        """
        if not _KIND.match(kind):
            raise ValueError(f"an id kind is lower-case letters and digits, got {kind!r}")
        if _is_token(value):
            return value
        key = value.lower() if _UUID.fullmatch(value) else value
        found = self._tokens.get(key)
        if found is not None:
            return found
        count = self._counts.get(kind, 0) + 1
        self._counts[kind] = count
        token = f"{{{{{kind}-{count}}}}}"
        self._tokens[key] = token
        if len(value) >= MIN_SWEPT_ID_LENGTH or _UUID.fullmatch(value):
            self._swept_dirty = True
        return token

    def known(self, value: str) -> str | None:
        """The token of a registered id, or ``None``."""
        key = value.lower() if _UUID.fullmatch(value) else value
        return self._tokens.get(key)

    def _swept(self) -> re.Pattern[str] | None:
        if self._swept_dirty:
            ids = sorted(
                (v for v in self._tokens if len(v) >= MIN_SWEPT_ID_LENGTH or _UUID.fullmatch(v)),
                key=lambda v: (-len(v), v),
            )
            alternatives = "|".join(re.escape(v) for v in ids)
            self._swept_pattern = re.compile(
                f"(?<![{_ID_EDGE}])(?:{alternatives})(?![{_ID_EDGE}])", re.IGNORECASE
            )
            self._swept_dirty = False
        return self._swept_pattern

    # ---------------------------------------------------------------- values

    def cwd(self, text: str) -> str:
        """Rule 1 only: the working directory's spellings → ``{{cwd}}``."""
        pattern = self._cwd_pattern
        if pattern is not None:
            text = pattern.sub(CWD_TOKEN, text)
        text = text.replace("/private" + CWD_TOKEN, CWD_TOKEN)
        if CWD_TOKEN in text and "\\" in text:
            text = _CWD_ROOTED.sub(lambda m: m.group().replace("\\", "/"), text)
        return text

    def text(self, text: str) -> str:
        """Rules 1–3 for one string: cwd, registered ids, stray UUIDs."""
        text = self.cwd(text)
        swept = self._swept()
        if swept is not None:
            text = swept.sub(lambda m: self.known(m.group()) or m.group(), text)
        return _UUID.sub(lambda m: self.token("uuid", m.group()), text)

    def json(self, value: Any, *, zero_times: bool = True) -> Any:
        """A JSON value with every string (keys too) normalized and, unless ``zero_times`` is
        false, times zeroed (rule 4). Returns plain ``dict``/``list`` values in the same order.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if zero_times and key in TIME_KEYS and _is_int(item):
                    out[self.text(key)] = 0
                elif zero_times and key == "dt" and isinstance(item, (list, tuple)):
                    out[key] = [0 if _is_int(x) else self.json(x) for x in item]
                else:
                    out[self.text(key)] = self.json(item, zero_times=zero_times)
            return out
        if isinstance(value, (list, tuple)):
            return [self.json(item, zero_times=zero_times) for item in value]
        return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_token(value: str) -> bool:
    return re.fullmatch(r"\{\{[a-z][a-z0-9]*(?:-[0-9]+)?\}\}", value) is not None

"""What counts as a secret: the built-in rules, and the user's own (:class:`ScrubRules`).

Kept apart from the scrubber (:mod:`dsh_testkit.scrub._scrubber`), which applies them: the built-in
names and key shapes are listed here once, and the user's rules (header, query and JSON names,
JSON paths, regexes) are configuration, validated once at the boundary (a ``pyproject.toml``
table, the ``dsh_scrub`` fixture) with a :class:`~dsh_testkit.scrub.ScrubRuleError` naming
the rule that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .._errors import ScrubRuleError

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_HEADER_WORDS",
    "SECRET_JSON_NAMES",
    "SECRET_QUERY_NAMES",
    "URL_REDACTED",
    "ScrubRules",
    "parse_json_path",
    "path_matches",
]

REDACTED: Final = "<REDACTED>"
"""What a secret is replaced with: not key-shaped, and ends every key pattern's character run.
The one spelling the test kit uses (cassettes, captured requests, the mock's request log)."""

URL_REDACTED: Final = "REDACTED"
"""The replacement inside URLs, where ``<`` and ``>`` would need escaping."""

SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"}
)
"""Headers whose values are always replaced, whatever they look like (compared lowercased)."""

SECRET_HEADER_WORDS: Final = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "cookie",
        "credential",
        "credentials",
        "key",
        "passwd",
        "password",
        "secret",
        "signature",
        "token",
    }
)
"""A header (or query parameter) whose name has one of these words (split on ``-``/``_``,
lowercased) is a credential: ``x-team-token``, ``x-goog-api-key``. Plurals are not words here,
so ``x-ratelimit-remaining-tokens`` keeps its value."""

SECRET_JSON_NAMES: Final = frozenset(
    {
        "access_token",
        "accesstoken",
        "api-key",
        "api_key",
        "apikey",
        "auth_token",
        "authorization",
        "client_secret",
        "clientsecret",
        "id_token",
        "passwd",
        "password",
        "private_key",
        "refresh_token",
        "refreshtoken",
        "secret",
        "secret_key",
        "session_token",
        "x-api-key",
    }
)
"""JSON keys whose values are always replaced, whatever their shape (compared lowercased).
Not ``token`` or ``key``: the API's own fields use them (``logprobs[].token``)."""

SECRET_QUERY_NAMES: Final = SECRET_JSON_NAMES | {"key", "sig", "signature", "token"}
"""Query parameters are credentials more often than JSON keys are (``?key=…`` for Google APIs)."""

# Each alternative is a secret on its own; a bearer scheme keeps its word and loses its token.
_KEY_PATTERN: Final = re.compile(
    r"(?P<bearer>(?i:bearer)\s+)[A-Za-z0-9\-._~+/]{20,}=*"
    r"|(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}"
    # glued to a word ("tokensk-…", "a" + key): a DeepSeek key's 32 letters and digits
    r"|sk-[A-Za-z0-9]{32,}"
    r"|(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![0-9A-Z])"
    r"|(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}"
    r"|(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"
)

_KEY_STARTS: Final = ("sk-", "AKIA", "AIza", "eyJ", "xox", "ghp_", "gho_", "ghu_", "ghs_", "ghr_")
"""What every case-sensitive alternative of the key pattern starts with (``bearer`` aside)."""

_URL_HEADERS: Final = frozenset({"location", "content-location", "referer", "origin"})
"""Headers whose value is a URL: scrubbed as one (credential query parameters included)."""

_RULES_VERSION: Final = 5
"""Bumped whenever the built-in rules change: a cassette written under older rules is then
scrubbed again as it loads (its checksum no longer matches)."""

_WORD_SPLIT: Final = re.compile(r"[-_.\s]+")
_MAX_PASSES: Final = 16
"""A user pattern whose replacement feeds a new match stops here (see :class:`ScrubRuleError`)."""


def _replace(match: re.Match[str]) -> str:
    bearer = match.group("bearer")
    return f"{bearer}{REDACTED}" if bearer else REDACTED


def _may_hold_key(text: str) -> bool:
    """``False`` only when ``text`` certainly holds nothing key-shaped.

    The key pattern opens each alternative with a lookbehind, which keeps the regex engine from
    skipping ahead: it costs ~90 ns per character. Substring search is ~50× faster, and every
    match starts with one of :data:`_KEY_STARTS` or with ``bearer`` in any case (no character
    outside ``bBeEaArR`` lowercases to those letters or matches them case-insensitively).
    """
    return any(start in text for start in _KEY_STARTS) or "bearer" in text.lower()


def _name_words(name: str) -> set[str]:
    return set(_WORD_SPLIT.split(name.lower()))


_PATH_PART: Final = re.compile(r"\[(\*|\d+)\]|\.?([^.\[\]]+)")


def _parse_path(path: str) -> tuple[str | int, ...]:
    """``a.b[*].c`` → ``("a", "b", "*", "c")``; ``[n]`` → ``n``; a leading ``$.`` is allowed."""
    text = path[2:] if path.startswith("$.") else path
    parts: list[str | int] = []
    position = 0
    while position < len(text):
        match = _PATH_PART.match(text, position)
        if match is None or match.end() == position:
            raise ScrubRuleError(
                f"JSON path {path!r}: cannot read it at character {position}; write paths as "
                "'a.b', 'a[*].b', 'a[0].b' or '*.b'",
                rule="json_paths",
                value=path,
            )
        index, name = match.groups()
        parts.append(name if name is not None else ("*" if index == "*" else int(index)))
        position = match.end()
    if not parts:
        raise ScrubRuleError(f"JSON path {path!r} is empty", rule="json_paths", value=path)
    return tuple(parts)


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """A JSON path in the rules' syntax (``a.b``, ``a[*].b``, ``a[0].b``, ``*.b``) as its parts;
    a :class:`~dsh_testkit.scrub.ScrubRuleError` says where it cannot be read. (Cassette
    matching reads its ``ignore_json_paths`` with it: one path syntax in the kit.)"""
    return _parse_path(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrubRules:
    """Rules of your own, on top of the built-in ones (which always apply).

    Build one directly, or with :meth:`from_mapping` from a configuration table such as
    ``[tool.dsh_testkit.scrub]``; combine two with :meth:`merged`.
    """

    headers: frozenset[str] = frozenset()
    """Header names (any case) whose whole value is replaced."""
    query: frozenset[str] = frozenset()
    """Query (and form) parameter names (any case) whose value is replaced."""
    json_keys: frozenset[str] = frozenset()
    """JSON keys (any case, at any depth) whose value is replaced, whatever its shape."""
    json_paths: tuple[str, ...] = ()
    """JSON paths whose value is replaced: ``metadata.team_token``, ``messages[*].name``,
    ``tools[0].function.description``; ``*`` is any key or index."""
    patterns: tuple[str, ...] = ()
    """Regular expressions; every match, in any header value, URL or body, is replaced."""
    _compiled: tuple[re.Pattern[str], ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    _paths: tuple[tuple[str | int, ...], ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for name in ("headers", "query", "json_keys"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ScrubRuleError(
                    f"scrub rule {name!r} must be a collection of non-empty names, got {value!r}",
                    rule=name,
                    value=value,
                )
            object.__setattr__(self, name, frozenset(v.lower() for v in value))
        for name in ("json_paths", "patterns"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ScrubRuleError(
                    f"scrub rule {name!r} must be a list of non-empty strings, got {value!r}",
                    rule=name,
                    value=value,
                )
            object.__setattr__(self, name, tuple(value))
        compiled = []
        for source in self.patterns:
            try:
                pattern = re.compile(source)
            except re.error as exc:
                raise ScrubRuleError(
                    f"scrub pattern {source!r} is not a regular expression: {exc}",
                    rule="patterns",
                    value=source,
                ) from None
            if pattern.search("") is not None or pattern.search(REDACTED) is not None:
                raise ScrubRuleError(
                    f"scrub pattern {source!r} matches the empty string or {REDACTED!r} itself, "
                    "so scrubbing would never end; make it match only the secret",
                    rule="patterns",
                    value=source,
                )
            compiled.append(pattern)
        object.__setattr__(self, "_compiled", tuple(compiled))
        object.__setattr__(self, "_paths", tuple(_parse_path(p) for p in self.json_paths))

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, where: str = "scrub rules") -> ScrubRules:
        """Rules from a configuration table (keys ``headers``, ``query``, ``json_keys``,
        ``json_paths``, ``patterns``; each a list of strings). ``where`` names the table in
        errors (``pyproject.toml [tool.dsh_testkit.scrub]``)."""
        known = {"headers", "query", "json_keys", "json_paths", "patterns"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ScrubRuleError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                rule=unknown[0],
                value=table[unknown[0]],
            )
        for name, value in table.items():
            if not isinstance(value, list):
                raise ScrubRuleError(
                    f"{where}: {name} must be a list of strings, got {value!r}",
                    rule=name,
                    value=value,
                )
        try:
            return cls(
                headers=frozenset(table.get("headers", ())),
                query=frozenset(table.get("query", ())),
                json_keys=frozenset(table.get("json_keys", ())),
                json_paths=tuple(table.get("json_paths", ())),
                patterns=tuple(table.get("patterns", ())),
            )
        except ScrubRuleError as exc:
            raise ScrubRuleError(f"{where}: {exc}", rule=exc.rule, value=exc.value) from None
        except TypeError:
            raise ScrubRuleError(
                f"{where}: every rule must be a list of strings, got {dict(table)!r}",
                rule="",
                value=dict(table),
            ) from None

    def merged(self, other: ScrubRules) -> ScrubRules:
        """Both rule sets at once."""
        return ScrubRules(
            headers=self.headers | other.headers,
            query=self.query | other.query,
            json_keys=self.json_keys | other.json_keys,
            json_paths=tuple(dict.fromkeys((*self.json_paths, *other.json_paths))),
            patterns=tuple(dict.fromkeys((*self.patterns, *other.patterns))),
        )

    @property
    def compiled_patterns(self) -> tuple[re.Pattern[str], ...]:
        return self._compiled

    @property
    def parsed_paths(self) -> tuple[tuple[str | int, ...], ...]:
        return self._paths


def path_matches(pattern: tuple[str | int, ...], path: tuple[str | int, ...]) -> bool:
    if len(pattern) != len(path):
        return False
    for want, have in zip(pattern, path, strict=True):
        if want == "*":
            continue
        if isinstance(want, int) != isinstance(have, int) or want != have:
            return False
    return True

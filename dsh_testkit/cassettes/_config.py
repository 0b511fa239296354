"""What a cassette use may be told beyond its mode: vcrpy's ``vcr_config``, typed.

A pytest-recording user writes ``vcr_config`` (a dict: match rules, filters, before-record
hooks) and passes the same keys to ``@pytest.mark.vcr``. :class:`CassetteConfig` holds those
options for :func:`~dsh_testkit.cassettes.use_cassette`, and :meth:`CassetteConfig.from_mapping`
reads them from the ``dsh_cassette_config`` fixture and the ``dsh_cassette`` marker with an
error naming the key that is wrong.

- ``match_on``: which parts of a request must equal a recording's (default method, URL and the
  canonical JSON body); names of :data:`MATCHERS` or vcrpy matcher callables.
- ``ignore_json_paths``: JSON paths left out of the body comparison (volatile fields: a request
  id, a timestamp), in the scrub rules' path syntax (``metadata.request_id``,
  ``messages[*].ts``). They are still recorded.
- ``before_record_request`` / ``before_record_response``: vcrpy's hooks, run on what is
  recorded (and on each live request before it is matched); return ``None`` to leave a request
  out of the cassette (it then reaches its target unrecorded) or a response unrecorded. The
  built-in secret scrubbing runs after them, so nothing they let through escapes it.
- ``rewrite_origin``: origins filed under another (``{live: recorded}``): a gateway or a staging
  URL stored as the API's own.
- ``loopback_as_one``: every loopback origin (``127.0.0.0/8``, ``::1``, ``localhost``, any port)
  is stored and matched as :data:`LOOPBACK_ORIGIN`, so a recording through a mock on a random
  port replays wherever the mock listens next time (default on).
- ``allow_playback_repeats``: a recording may answer more than one request.
- ``scrub`` (plus vcrpy's ``filter_headers`` / ``filter_query_parameters``): secret-scrub rules
  of your own, on top of the built-in ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import urlsplit

from .._errors import CassetteConfigError, ScrubRuleError
from .._loopback.hosts import is_loopback
from ..scrub._rules import ScrubRules, parse_json_path

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_MATCH_ON",
    "LOOPBACK_ORIGIN",
    "MATCHERS",
    "CassetteConfig",
    "canonical_origin",
]

MATCHERS: Final = ("method", "uri", "scheme", "host", "port", "path", "query", "body", "headers")
"""The request parts ``match_on`` may name: vcrpy's matchers, with ``body`` compared as
canonical JSON (key order and spacing ignored, ``ignore_json_paths`` left out)."""

DEFAULT_MATCH_ON: Final = ("method", "uri", "body")

LOOPBACK_ORIGIN: Final = "127.0.0.1"
"""The host every loopback origin is stored and matched as (``http://127.0.0.1``, no port)."""

CONFIG_KEYS: Final = (
    "allow_playback_repeats",
    "before_record_request",
    "before_record_response",
    "filter_headers",
    "filter_query_parameters",
    "ignore_json_paths",
    "loopback_as_one",
    "match_on",
    "rewrite_origin",
    "scrub",
)
"""The keys :meth:`CassetteConfig.from_mapping` reads."""

Hook = Callable[[Any], Any]


def _origin(url: Any, where: str) -> str:
    if not isinstance(url, str):
        raise CassetteConfigError(
            f"{where}: {url!r} is not an origin (write 'https://host[:port][/path]')", key=where
        )
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CassetteConfigError(
            f"{where}: {url!r} is not an origin (write 'https://host[:port][/path]')", key=where
        )
    return url.strip().rstrip("/")


def canonical_origin(uri: str) -> str | None:
    """``uri`` with a loopback origin replaced by ``<scheme>://127.0.0.1`` (no port), or ``None``
    when its host is not loopback (or it already is the canonical one)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if not is_loopback(host) or (host == LOOPBACK_ORIGIN and parts.port is None):
        return None
    rest = uri[len(f"{parts.scheme}://{parts.netloc}") :]
    return f"{parts.scheme}://{LOOPBACK_ORIGIN}{rest}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CassetteConfig:
    """Options of a cassette use (see the module docstring); the defaults are this kit's."""

    match_on: tuple[str | Callable[[Any, Any], Any], ...] = DEFAULT_MATCH_ON
    """What must equal a recording's: names of :data:`MATCHERS` or vcrpy matcher callables."""
    ignore_json_paths: tuple[str, ...] = ()
    """JSON paths left out when bodies are compared (still recorded)."""
    before_record_request: Hook | None = None
    """vcrpy's hook: the request to record (or match), or ``None`` to leave it out."""
    before_record_response: Hook | None = None
    """vcrpy's hook: the response dict to record, or ``None`` to record nothing."""
    rewrite_origin: tuple[tuple[str, str], ...] = ()
    """``(live, recorded)`` pairs: requests to ``live`` are stored (and matched) as sent to
    ``recorded``; the first pair that applies wins."""
    loopback_as_one: bool = True
    """Every loopback origin is stored and matched as ``http://127.0.0.1``."""
    allow_playback_repeats: bool = False
    """A recording may answer more than one request (vcrpy's option)."""
    scrub: ScrubRules | None = None
    """Secret-scrub rules of your own (the built-in rules always apply)."""
    _paths: tuple[tuple[str | int, ...], ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        match_on = (self.match_on,) if isinstance(self.match_on, str) else tuple(self.match_on)
        for matcher in match_on:
            if isinstance(matcher, str):
                if matcher not in MATCHERS:
                    raise CassetteConfigError(
                        f"match_on: unknown matcher {matcher!r}; known: {', '.join(MATCHERS)} "
                        "(or a vcrpy matcher callable)",
                        key="match_on",
                    )
            elif not callable(matcher):
                raise CassetteConfigError(
                    f"match_on: {matcher!r} is neither a matcher name nor a callable",
                    key="match_on",
                )
        if not match_on:
            raise CassetteConfigError("match_on: name at least one matcher", key="match_on")
        object.__setattr__(self, "match_on", match_on)
        paths = (
            (self.ignore_json_paths,)
            if isinstance(self.ignore_json_paths, str)
            else tuple(self.ignore_json_paths)
            if isinstance(self.ignore_json_paths, (list, tuple))
            else None
        )
        if paths is None or not all(isinstance(p, str) for p in paths):
            wrong = (
                self.ignore_json_paths
                if paths is None
                else next(p for p in paths if not isinstance(p, str))
            )
            raise CassetteConfigError(
                f"ignore_json_paths: {wrong!r} is not a JSON path (a string such as "
                "'metadata.request_id'), nor a list of them",
                key="ignore_json_paths",
            )
        try:
            parsed = tuple(parse_json_path(p) for p in paths)
        except ScrubRuleError as exc:
            raise CassetteConfigError(
                f"ignore_json_paths: {exc}", key="ignore_json_paths"
            ) from None
        object.__setattr__(self, "ignore_json_paths", paths)
        object.__setattr__(self, "_paths", parsed)
        for name in ("before_record_request", "before_record_response"):
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise CassetteConfigError(f"{name}: {hook!r} is not callable", key=name)
        object.__setattr__(
            self, "rewrite_origin", _origin_pairs(self.rewrite_origin, "rewrite_origin")
        )
        for name in ("loopback_as_one", "allow_playback_repeats"):
            if not isinstance(getattr(self, name), bool):
                raise CassetteConfigError(
                    f"{name}: must be True or False, got {getattr(self, name)!r}", key=name
                )
        if self.scrub is not None and not isinstance(self.scrub, ScrubRules):
            raise CassetteConfigError(
                f"scrub: must be ScrubRules, got {type(self.scrub).__name__}", key="scrub"
            )

    @property
    def parsed_ignore_paths(self) -> tuple[tuple[str | int, ...], ...]:
        """``ignore_json_paths`` parsed (``("messages", "*", "ts")``)."""
        return self._paths

    @property
    def keyable(self) -> bool:
        """Whether matching needs only named matchers (then recordings are found by an index)."""
        return all(isinstance(m, str) for m in self.match_on)

    def merged(self, other: CassetteConfig) -> CassetteConfig:
        """``other``'s options over these: ``other``'s values where they differ from the
        defaults, the rewrite pairs of both (``other``'s first) and both scrub rule sets."""
        changes: dict[str, Any] = {}
        default = CassetteConfig()
        for name in (
            "match_on",
            "ignore_json_paths",
            "before_record_request",
            "before_record_response",
            "loopback_as_one",
            "allow_playback_repeats",
        ):
            value = getattr(other, name)
            if value != getattr(default, name):
                changes[name] = value
        changes["rewrite_origin"] = (*other.rewrite_origin, *self.rewrite_origin)
        if self.scrub is not None and other.scrub is not None:
            changes["scrub"] = self.scrub.merged(other.scrub)
        elif other.scrub is not None:
            changes["scrub"] = other.scrub
        return replace(self, **changes)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], *, where: str) -> CassetteConfig:
        """Options from a ``vcr_config``-like mapping of :data:`CONFIG_KEYS`; ``where`` names the
        source in errors (``the dsh_cassette_config fixture``). ``scrub`` may be
        :class:`ScrubRules` or a table like ``[tool.dsh_testkit.scrub]``; ``filter_headers`` and
        ``filter_query_parameters`` (vcrpy's names) add header and query names to scrub."""
        if not isinstance(options, Mapping):
            raise CassetteConfigError(
                f"{where} must be a dict of options, got {type(options).__name__}", key=""
            )
        unknown = sorted(set(options) - set(CONFIG_KEYS))
        if unknown:
            raise CassetteConfigError(
                f"{where}: unknown option(s) {', '.join(unknown)}; known: {', '.join(CONFIG_KEYS)}",
                key=unknown[0],
            )
        kwargs = {
            k: v
            for k, v in options.items()
            if k not in ("scrub", "filter_headers", "filter_query_parameters")
        }
        scrub = options.get("scrub")
        try:
            if isinstance(scrub, Mapping):
                scrub = ScrubRules.from_mapping(scrub, where=f"{where} 'scrub'")
            headers = _names(options.get("filter_headers", ()), f"{where} 'filter_headers'")
            query = _names(
                options.get("filter_query_parameters", ()), f"{where} 'filter_query_parameters'"
            )
            if headers or query:
                extra = ScrubRules(headers=frozenset(headers), query=frozenset(query))
                scrub = extra if scrub is None else scrub.merged(extra)
        except ScrubRuleError as exc:
            raise CassetteConfigError(str(exc), key="scrub") from None
        try:
            return cls(scrub=scrub, **kwargs)
        except CassetteConfigError as exc:
            raise CassetteConfigError(f"{where}: {exc}", key=exc.key) from None
        except TypeError as exc:
            raise CassetteConfigError(f"{where}: {exc}", key="") from None


def _names(value: Any, where: str) -> list[str]:
    """vcrpy's filter lists: names, or ``(name, replacement)`` pairs (the name is kept)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ScrubRuleError(f"{where}: {value!r} is not a list of names", rule=where, value=value)
    names = []
    for item in value:
        name = item[0] if isinstance(item, tuple) and item else item
        if not isinstance(name, str) or not name:
            raise ScrubRuleError(f"{where}: {item!r} is not a name", rule=where, value=item)
        names.append(name)
    return names


def _origin_pairs(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{live: recorded}``, one ``(live, recorded)`` pair, pairs, or ``"live -> recorded"``
    lines, as checked ``(live, recorded)`` origins."""
    if not value:
        return ()
    if isinstance(value, Mapping):
        pairs: Iterable[Any] = value.items()
    elif isinstance(value, str) or (
        isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)
    ):
        pairs = [value]
    else:
        pairs = value
    out = []
    for pair in pairs:
        if isinstance(pair, str):
            parts = [p for p in re.split(r"\s*->\s*", pair.strip()) if p]
            pair = tuple(parts)
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise CassetteConfigError(
                f"{where}: {pair!r} is not a (live, recorded) pair of origins (in the ini: "
                "'LIVE -> RECORDED')",
                key=where,
            )
        out.append((_origin(pair[0], where), _origin(pair[1], where)))
    return tuple(out)

"""Secret scrubbing for everything a cassette stores: URLs, headers and bodies, both ways.

vcrpy runs the record hooks on every live request before matching and again on every
interaction it loads, so each function here is idempotent: scrubbing twice equals scrubbing
once. Text is scrubbed to a fixpoint (a replacement ends every pattern's character run), which
makes idempotence hold by construction rather than by care.

Exactly what is removed (a denylist with rules you can extend, not an allowlist):

- **Headers**: the whole value of a credential header: ``Authorization``,
  ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie``, and any header whose name has one of the
  words of :data:`SECRET_HEADER_WORDS` (``x-api-key``, ``api-key``, ``x-team-token``,
  ``x-amz-security-token``, …; words are split on ``-`` and ``_``). Any other
  header keeps its value with key-shaped strings replaced.
- **URLs**: the value of a credential query parameter (:data:`SECRET_QUERY_NAMES`, or any name
  with a word of :data:`SECRET_HEADER_WORDS`), a userinfo password (or a bare userinfo), and
  key-shaped strings anywhere (the path included).
- **JSON bodies**: the value under a credential key (:data:`SECRET_JSON_NAMES`), whatever its
  shape (a string, number, list or object: the whole value becomes ``"<REDACTED>"``), and
  key-shaped strings in any key or value. Form bodies lose credential parameters as URLs do.
- **Any text**: key-shaped strings: ``sk-…`` API keys, ``Bearer`` tokens of 20+ characters,
  AWS, Google, GitHub and Slack keys, JWTs; also behind escapes (``%XX``, ``\\uXXXX``,
  ``\\xXX``, HTML references: ``_spellings.py``) and base64- or hex-encoded (``_encoded.py``):
  the run that spells one is replaced whole.
- **The request's own credential** (every value its credential headers present:
  :func:`credentials_of`), when the caller passes it (``known``): in every spelling
  (:class:`~dsh_testkit.scrub._spellings.KnownSecrets`), in the request and in the answer,
  headers, URL and body alike.
- **Encoded bodies** are scrubbed as what they decode to: a compressed request body
  (``Content-Encoding: gzip``/``deflate``) is stored decompressed; a body that is not UTF-8 is
  scrubbed in the charset its ``Content-Type`` names (else as Latin-1, which keeps every byte)
  and stored as those bytes; a gzip stream without a header is refused when it holds a secret.
  A body in an encoding this module cannot read (``br``, ``zstd`` without a decoder) is refused
  (:class:`~dsh_testkit.scrub.UnscrubbableBody`), never stored unscrubbed.
- **Streams** (``text/event-stream``): each event, and also the concatenated text of each field
  across events, so a key streamed a few characters per delta is removed from the pieces
  (the first piece keeps ``<REDACTED>``, the others lose their part of the key).

:class:`ScrubRules` adds your own: header names, query names, JSON keys (anywhere), JSON paths
(``metadata.team_token``, ``messages[*].name``) and regular expressions. The pytest plugin reads
them from ``[tool.dsh_testkit.scrub]`` in ``pyproject.toml`` and the ``dsh_scrub`` fixture.

Scrubbing is a regular-expression pass over every body, and most bodies hold nothing to
scrub: a cheap pre-check (substring searches for what every key pattern starts with) lets clean
text through untouched, and the cassette's ``request_is_clean`` / ``response_is_clean`` (``cassettes/_scrub.py``) tell
which loaded interactions need the hooks at all.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dsh_core.providers._sse import split_events

from .._errors import ScrubRuleError, UnscrubbableBody
from ._bodies import (
    Piece,
    content_type,
    cut_pieces,
    data_line,
    decode_text,
    gunzip,
    rewrite_event,
    stream_fields,
)
from ._encoded import encoded_spans, merge_spans
from ._rules import (
    _KEY_PATTERN,
    _MAX_PASSES,
    _RULES_VERSION,
    _URL_HEADERS,
    REDACTED,
    SECRET_HEADER_WORDS,
    SECRET_HEADERS,
    SECRET_JSON_NAMES,
    SECRET_QUERY_NAMES,
    URL_REDACTED,
    ScrubRules,
    _may_hold_key,
    _name_words,
    _replace,
    path_matches,
)
from ._spellings import KnownSecrets, header_credentials, hidden, may_hide, replace_spans

__all__ = [
    "Scrubber",
    "credentials_of",
    "find_secrets",
    "may_hold_secret",
    "redact_known",
    "scrub_headers",
    "scrub_json",
    "scrub_text",
    "scrub_url",
]

_NO_SECRETS: Final = KnownSecrets(())

# ------------------------------------------------------------------------------ the scrubber


class Scrubber:
    """The built-in rules plus a :class:`ScrubRules`; every method is idempotent.

    ``Scrubber.for_rules(rules)`` returns a shared instance per rule set.
    """

    def __init__(self, rules: ScrubRules | None = None) -> None:
        self.rules = rules if rules is not None else ScrubRules()
        self._patterns = self.rules.compiled_patterns
        self._paths = self.rules.parsed_paths
        self._json_names = SECRET_JSON_NAMES | self.rules.json_keys
        quoted = {f'"{name}"' for name in self._json_names}
        quoted |= {f'"{p[-1]}"' for p in self._paths if isinstance(p[-1], str) and p[-1] != "*"}
        self._quoted_names = tuple(sorted(quoted))
        self._any_path_ends_wild = any(
            not isinstance(p[-1], str) or p[-1] == "*" for p in self._paths
        )

    @staticmethod
    @functools.cache
    def for_rules(rules: ScrubRules | None) -> Scrubber:
        return Scrubber(rules)

    @functools.cached_property
    def fingerprint(self) -> str:
        """Names the rules in force (built-in version and the user's rules), for checksums."""
        rules = self.rules
        parts = [
            ",".join(sorted(rules.headers)),
            ",".join(sorted(rules.query)),
            ",".join(sorted(rules.json_keys)),
            "\x1f".join(rules.json_paths),
            "\x1f".join(rules.patterns),
        ]
        return f"dsh-scrub/{_RULES_VERSION}/" + "\x1e".join(parts)

    # -------------------------------------------------------------------------- names

    def is_secret_header(self, name: str) -> bool:
        lowered = name.lower()
        return (
            lowered in SECRET_HEADERS
            or lowered in self.rules.headers
            or not SECRET_HEADER_WORDS.isdisjoint(_name_words(lowered))
        )

    def is_secret_query_name(self, name: str) -> bool:
        lowered = name.lower()
        return (
            lowered in SECRET_QUERY_NAMES
            or lowered in self.rules.query
            or not SECRET_HEADER_WORDS.isdisjoint(_name_words(lowered))
        )

    def _is_secret_json_key(self, name: str, path: tuple[str | int, ...]) -> bool:
        if name.lower() in self._json_names:
            return True
        return any(path_matches(p, path) for p in self._paths)

    # --------------------------------------------------------------------------- text

    def _may_hold_secret(self, text: str) -> bool:
        return (
            _may_hold_key(text)
            or any(p.search(text) for p in self._patterns)
            or bool(self._hidden(text))
            or bool(self._encoded(text))
        )

    def _shows_secret(self, text: str) -> bool:
        """Whether ``text`` as it reads holds a key shape or a user pattern."""
        if _may_hold_key(text) and _KEY_PATTERN.search(text):
            return True
        return any(p.search(text) for p in self._patterns)

    def _holds(self, text: str) -> bool:
        """Whether ``text`` holds a secret the rules find (shape, pattern or escaped run)."""
        return self._may_hold_secret(text) and bool(self.find(text))

    def _hidden(self, text: str) -> list[tuple[int, int]]:
        """The runs of escapes in ``text`` that decode to a key shape or a user pattern
        (``sk%2D…``, ``\\u0073k-…``, a key percent-encoded twice): replaced whole."""
        return hidden(text, self._shows_secret) if may_hide(text) else []

    def _encoded(self, text: str) -> list[tuple[int, int]]:
        """The base64 and hex runs of ``text`` that decode to a key shape or a user pattern:
        replaced whole."""
        return encoded_spans(text, self._shows_secret)

    def find(self, text: str) -> list[str]:
        """The key-shaped (and user-pattern) substrings of ``text``, and the runs of escapes,
        base64 or hex that decode to one (empty when it is clean)."""
        found = [
            text[start:end] for start, end in merge_spans(self._hidden(text) + self._encoded(text))
        ]
        if _may_hold_key(text):
            found.extend(m.group(0) for m in _KEY_PATTERN.finditer(text))
        for pattern in self._patterns:
            found.extend(m.group(0) for m in pattern.finditer(text))
        return found

    def text(self, text: str, known: KnownSecrets = _NO_SECRETS) -> str:
        """``text`` with every secret-shaped substring replaced, every run of escapes, base64
        or hex that decodes to one, and every spelling of a ``known`` secret, to a fixpoint
        (idempotent)."""
        if not self._may_hold_secret(text) and not known.in_text(text):
            return text
        for _ in range(_MAX_PASSES):
            scrubbed = known.text(text)
            scrubbed = replace_spans(
                scrubbed, merge_spans(self._hidden(scrubbed) + self._encoded(scrubbed)), REDACTED
            )
            if _may_hold_key(scrubbed):
                scrubbed = _KEY_PATTERN.sub(_replace, scrubbed)
            for pattern in self._patterns:
                scrubbed = pattern.sub(REDACTED, scrubbed)
            if scrubbed == text:
                return text
            text = scrubbed
        raise ScrubRuleError(
            f"scrubbing did not settle after {_MAX_PASSES} passes: a scrub pattern matches "
            f"what its own replacement {REDACTED!r} leaves around it; make it narrower",
            rule="patterns",
            value=self.rules.patterns,
        )

    # --------------------------------------------------------------------------- JSON

    def json(
        self, value: Any, path: tuple[str | int, ...] = (), *, known: KnownSecrets = _NO_SECRETS
    ) -> Any:
        """A copy of a parsed JSON value with secrets replaced (credential keys, paths, shapes,
        ``known`` secrets in every spelling).

        A value under a credential key is replaced whole, whatever its shape (``null`` aside:
        it holds nothing)."""
        if isinstance(value, str):
            return self.text(value, known)
        if isinstance(value, list):
            return [self.json(item, (*path, i), known=known) for i, item in enumerate(value)]
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                where = (*path, key)
                name = self.text(key, known) if isinstance(key, str) else key
                if (
                    item is not None
                    and isinstance(key, str)
                    and self._is_secret_json_key(key, where)
                ):
                    out[name] = REDACTED
                else:
                    out[name] = self.json(item, where, known=known)
            return out
        return value

    def value(self, value: Any, known: KnownSecrets = _NO_SECRETS) -> Any:
        """A parsed JSON value (or a text) with secrets replaced as :meth:`json` does; the value
        itself when its JSON text shows nothing to scrub (checked in C-speed substring searches
        before the walk over every string). What every record the kit keeps or shows goes
        through: the mock's request log, the proxy's trace, a capture, a trace file."""
        if isinstance(value, str):
            return self.text(value, known)
        if not isinstance(value, (list, dict)):
            return value
        if not self._patterns:  # a user's pattern may match what JSON escapes: walk
            try:
                dumped = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                dumped = None  # not plain JSON: walk it
            if dumped is not None and self._text_is_clean(dumped, "", known):
                return value
        return self.json(value, known=known)

    # --------------------------------------------------------------------------- URLs

    def _pairs(self, pairs: list[tuple[str, str]], replacement: str) -> list[tuple[str, str]]:
        return [(k, replacement if self.is_secret_query_name(k) else v) for k, v in pairs]

    def url(self, url: str, known: KnownSecrets = _NO_SECRETS) -> str:
        """``url`` with credential query parameters, userinfo, secret shapes and ``known``
        secrets replaced."""
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                netloc = f"{userinfo.split(':', 1)[0]}:{URL_REDACTED}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(self.is_secret_query_name(name) for name, _ in pairs):
                query = urlencode(self._pairs(pairs, URL_REDACTED))
        rebuilt = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
        return self.text(rebuilt, known).replace(REDACTED, URL_REDACTED)

    # -------------------------------------------------------------------- credentials

    def credentials(self, headers: Iterable[tuple[str, str]]) -> tuple[str, ...]:
        """The values a request's credential headers present (:meth:`is_secret_header`), in the
        spellings they may be repeated in elsewhere (see
        :func:`~dsh_testkit.scrub._spellings.header_credentials`)."""
        return header_credentials(headers, self.is_secret_header)

    # ------------------------------------------------------------------------ headers

    def header_value(self, name: str, value: str, known: KnownSecrets = _NO_SECRETS) -> str:
        """A header's value as stored: replaced whole for a credential header, read as a URL
        for a URL-valued header (``Location``), else with secret shapes (and ``known``
        secrets) replaced."""
        if self.is_secret_header(name):
            return REDACTED
        if name.lower() in _URL_HEADERS:
            return self.url(value, known)
        return self.text(value, known)

    def headers(
        self, items: Iterable[tuple[str, str]], known: KnownSecrets = _NO_SECRETS
    ) -> list[tuple[str, str]]:
        """Header pairs with credential headers replaced and secret shapes removed from the rest."""
        return [(name, self.header_value(name, value, known)) for name, value in items]

    def header_is_clean(self, name: str, value: str) -> bool:
        if self.is_secret_header(name):
            return value == REDACTED
        if name.lower() in _URL_HEADERS:
            return self.url(value) == value
        return not self._may_hold_secret(value)

    # ------------------------------------------------------------------------- bodies

    def body(
        self,
        body: bytes | str | None,
        headers: Mapping[str, Any],
        *,
        part: str,
        known: KnownSecrets = _NO_SECRETS,
    ) -> bytes | str | None:
        """A body with secrets replaced (``known``: the request's own credentials, in every
        spelling), read as its headers say; the same object when clean.

        Compressed bodies must be decompressed by the caller (see :func:`dsh_testkit.cassettes._scrub.vcr_request`);
        a gzip stream without a ``Content-Encoding`` is scanned and refused if it holds a
        secret. ``part`` names the body in errors (``request body``).
        """
        if body is None or body == b"" or body == "":
            return body
        if isinstance(body, str):
            return self._text_body(body, headers, known=known)
        if body[:2] == b"\x1f\x8b":
            self._refuse_secret_in_gzip(body, part, known)
            return body
        text, encoding, bom = decode_text(body, headers, self._holder(known))
        scrubbed = self._text_body(text, headers, ascii_json=encoding != "utf-8", known=known)
        if scrubbed is text:
            return body
        try:
            return bom + scrubbed.encode(encoding)
        except UnicodeEncodeError:  # pragma: no cover - replacements are ASCII
            raise UnscrubbableBody(
                f"the {part} cannot be written back in {encoding} after scrubbing",
                part=part,
                reason=f"not encodable in {encoding}",
            ) from None

    def _holder(self, known: KnownSecrets) -> Callable[[str], bool]:
        """Whether a text holds a secret: a shape, a pattern or a ``known`` one."""
        if not known:
            return self._holds
        return lambda text: known.in_text(text) or self._holds(text)

    def _refuse_secret_in_gzip(self, body: bytes, part: str, known: KnownSecrets) -> None:
        try:
            inner = gunzip(body)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            raise UnscrubbableBody(
                f"the {part} starts like gzip but does not decompress ({exc}); it cannot be "
                "checked for secrets, so it is not stored",
                part=part,
                reason="undecodable gzip",
            ) from None
        text = inner.decode("latin-1")
        if known.in_text(text) or (self._may_hold_secret(text) and self.find(text)):
            raise UnscrubbableBody(
                f"the {part} is a gzip stream (no Content-Encoding) holding a secret; it is not "
                "stored. Send it with 'Content-Encoding: gzip' (then it is stored decompressed "
                "and scrubbed) or keep the secret out of it",
                part=part,
                reason="secret inside gzip data",
            )

    def _text_body(
        self,
        text: str,
        headers: Mapping[str, Any],
        *,
        ascii_json: bool = False,
        known: KnownSecrets = _NO_SECRETS,
    ) -> str:
        """Scrubbed text; the same object when nothing changed."""
        media = content_type(headers)
        if media.startswith("text/event-stream"):
            return self.stream_text(text, known)
        if not self._text_is_clean(text, media, known):
            scrubbed = self.text(text, known)
            stripped = scrubbed.lstrip()[:1]
            if stripped in ("{", "["):
                try:
                    parsed = json.loads(scrubbed)
                except ValueError:
                    parsed = None
                if isinstance(parsed, (dict, list)):
                    cleaned = self.json(parsed, known=known)
                    if cleaned != parsed:
                        scrubbed = json.dumps(
                            cleaned, ensure_ascii=ascii_json, separators=(",", ":")
                        )
            elif media.startswith("application/x-www-form-urlencoded"):
                pairs = parse_qsl(scrubbed, keep_blank_values=True)
                if any(self.is_secret_query_name(name) for name, _ in pairs):
                    scrubbed = urlencode(self._pairs(pairs, URL_REDACTED))
            if scrubbed != text:
                return scrubbed
        return text

    def _text_is_clean(self, text: str, media: str = "", known: KnownSecrets = _NO_SECRETS) -> bool:
        """``False`` unless scrubbing ``text`` as a body certainly changes nothing.

        Conservative: a JSON-looking body is unclean when a credential name appears quoted
        anywhere in it (lowercased, as the scrubber compares names), or when it holds a ``\\u``
        escape, the one way JSON can spell a letter of a key or a name the text does not show.
        A ``known`` secret is looked for in every spelling (each reads the same in a JSON text).
        """
        if self._may_hold_secret(text) or known.in_text(text):
            return False
        if media.startswith("application/x-www-form-urlencoded"):
            return False
        if text.lstrip()[:1] not in ("{", "["):
            return True  # json.loads cannot give an object or an array: only the text pass
        if "\\u" in text or self._any_path_ends_wild:
            return False
        lowered = text.lower()
        return not any(name in lowered for name in self._quoted_names)

    def body_is_clean(
        self,
        body: bytes | str | None,
        headers: Mapping[str, Any],
        known: KnownSecrets = _NO_SECRETS,
    ) -> bool:
        """``False`` unless :meth:`body` certainly returns ``body`` unchanged."""
        if body is None or body == b"" or body == "":
            return True
        if isinstance(body, bytes):
            if body[:2] == b"\x1f\x8b":
                return False
            text = decode_text(body, headers, self._holder(known))[0]
        else:
            text = body
        media = content_type(headers)
        if media.startswith("text/event-stream"):
            return self.stream_is_clean(split_events(text), known)
        return self._text_is_clean(text, media, known)

    # ------------------------------------------------------------------------ streams

    def stream_text(self, text: str, known: KnownSecrets = _NO_SECRETS) -> str:
        """An SSE body scrubbed per event and across events; the same object when clean."""
        events = split_events(text)
        scrubbed = self.stream(events, known)
        if scrubbed is events:
            return text
        return "".join(scrubbed)

    def stream(self, events: list[str], known: KnownSecrets = _NO_SECRETS) -> list[str]:
        """SSE events (each with its blank line) scrubbed one by one and then as a stream:
        the text of each field, concatenated across events, holds no secret afterwards (a
        ``known`` one in any spelling included). The same list object when nothing changed."""
        if self.stream_is_clean(events, known):
            return events
        out = [self._event(event, known) for event in events]
        for _ in range(_MAX_PASSES):
            spanned = self._scrub_across(out, known)
            if spanned is None:
                return out
            out = spanned
        raise ScrubRuleError(  # pragma: no cover - each pass removes a whole match
            f"scrubbing a stream did not settle after {_MAX_PASSES} passes",
            rule="patterns",
            value=self.rules.patterns,
        )

    def _event(self, event: str, known: KnownSecrets) -> str:
        """One SSE event scrubbed as text, and its JSON ``data:`` payload as JSON."""
        event = self.text(event, known)
        span = data_line(event)
        if span is None:
            return event
        payload = event[span[0] : span[1]]
        if self._text_is_clean(payload, "", known):
            return event
        scrubbed = self._text_body(payload, {}, known=known)
        return event[: span[0]] + scrubbed + event[span[1] :]

    def _event_is_clean(self, event: str, known: KnownSecrets) -> bool:
        if self._may_hold_secret(event) or known.in_text(event):
            return False
        span = data_line(event)
        return span is None or self._text_is_clean(event[span[0] : span[1]], "", known)

    def stream_is_clean(self, events: list[str], known: KnownSecrets = _NO_SECRETS) -> bool:
        if not all(self._event_is_clean(event, known) for event in events):
            return False
        if len(events) < 2:
            return True
        for pieces in stream_fields(events).values():
            joined = "".join(piece.text for piece in pieces)
            if self._may_hold_secret(joined) or known.in_text(joined):
                return False
        return True

    def _scrub_across(self, events: list[str], known: KnownSecrets) -> list[str] | None:
        """One pass over the concatenated fields; ``None`` when no field holds a secret."""
        fields = stream_fields(events)
        edits: dict[int, dict[tuple[str | int, ...], str]] = {}
        for pieces in fields.values():
            joined = "".join(p.text for p in pieces)
            if not self._may_hold_secret(joined) and not known.in_text(joined):
                continue
            new_texts = self._cut(joined, pieces, known)
            for piece, new in zip(pieces, new_texts, strict=True):
                if new != piece.text:
                    edits.setdefault(piece.event, {})[piece.path] = new
        if not edits:
            return None
        out = list(events)
        for index, changes in edits.items():
            out[index] = rewrite_event(events[index], changes)
        return out

    def _cut(self, joined: str, pieces: list[Piece], known: KnownSecrets) -> list[str]:
        """Each piece's new text: every secret match in ``joined`` removed from the pieces it
        spans, its replacement kept by the piece where it starts."""
        spans = known.spans(joined) + self._hidden(joined) + self._encoded(joined)
        matches = [(start, end, REDACTED) for start, end in merge_spans(spans)]
        if _may_hold_key(joined):
            matches += [(m.start(), m.end(), _replace(m)) for m in _KEY_PATTERN.finditer(joined)]
        for pattern in self._patterns:
            matches += [(m.start(), m.end(), REDACTED) for m in pattern.finditer(joined)]
        return cut_pieces([p.text for p in pieces], matches)


# ------------------------------------------------------------------ the default scrubber

_DEFAULT: Final = Scrubber()


def find_secrets(text: str) -> list[str]:
    """The key-shaped substrings of ``text`` (empty when it is clean)."""
    return _DEFAULT.find(text)


def may_hold_secret(text: str) -> bool:
    """``False`` only when ``text`` certainly holds nothing the built-in rules scrub (cheap:
    substring checks, and the runs of escapes decoded only when there are some)."""
    return _DEFAULT._may_hold_secret(text)


def credentials_of(headers: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The values a request's credential headers present, in the spellings they may be repeated
    in (each value, without its scheme word, a Basic credential's ``user:password`` and
    password, a cookie's values; 8 characters or more), longest first. Hand them to
    :func:`redact_known` for the request's body, URL and anything logged of it."""
    return _DEFAULT.credentials(headers)


def redact_known(value: Any, secrets: Iterable[str] | KnownSecrets, *, url: bool = False) -> Any:
    """A JSON value (or a text) with every spelling of each known secret replaced: as it is,
    percent-encoded, JSON-escaped, and inside any run of escapes that decodes to it
    (:class:`~dsh_testkit.scrub._spellings.KnownSecrets`). ``url=True`` replaces with
    ``REDACTED`` (no ``<>`` to escape in a URL)."""
    known = secrets if isinstance(secrets, KnownSecrets) else KnownSecrets(secrets)
    return known.json(value, URL_REDACTED if url else REDACTED)


def _known(secrets: Iterable[str] | KnownSecrets) -> KnownSecrets:
    return secrets if isinstance(secrets, KnownSecrets) else KnownSecrets(secrets)


def scrub_text(text: str, known: Iterable[str] | KnownSecrets = _NO_SECRETS) -> str:
    """``text`` with every key-shaped substring replaced, and every spelling of the ``known``
    secrets (a request's own credentials: :func:`credentials_of`), to a fixpoint (idempotent)."""
    return _DEFAULT.text(text, _known(known))


def scrub_json(value: Any, known: Iterable[str] | KnownSecrets = _NO_SECRETS) -> Any:
    """A parsed JSON value with secrets replaced (credential keys, whatever their value's
    shape, key shapes, and every spelling of the ``known`` secrets): the value itself when it
    holds none, else a copy (:meth:`Scrubber.value`)."""
    return _DEFAULT.value(value, _known(known))


def scrub_url(url: str, known: Iterable[str] | KnownSecrets = _NO_SECRETS) -> str:
    """``url`` with credential query parameters, a userinfo password, key shapes and the
    ``known`` secrets replaced."""
    return _DEFAULT.url(url, _known(known))


def scrub_headers(
    items: Iterable[tuple[str, str]], known: Iterable[str] | KnownSecrets = _NO_SECRETS
) -> list[tuple[str, str]]:
    """Header pairs with credential headers replaced and key shapes (and the ``known``
    secrets) removed from the rest."""
    return _DEFAULT.headers(items, _known(known))

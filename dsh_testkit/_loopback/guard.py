"""Who may talk to a loopback server: the Host and Origin rules, checked on every request.

Both servers listen on loopback without authentication, so any local program may use them; the
one they must not serve is a web page in the user's browser. A page on any site can make the
browser send requests to ``http://127.0.0.1:PORT`` (another port of loopback counts as the same
*site*), and a page whose public name was made to resolve to 127.0.0.1 (DNS rebinding) can even
read the answers, since to the browser they come from its own origin. So, before a request is
routed, its body read, logged or relayed:

1. **Host.** The authority the request names (an absolute-form target's, else the one ``Host``
   header; HTTP/1.0 may omit it) must be a loopback name: ``localhost`` or ``*.localhost`` (a
   browser resolves those to loopback itself), a ``127.x.y.z`` address in dotted-quad form,
   ``[::1]`` or ``[::ffff:127.x.y.z]``; or a name the user allowed (``allow_hosts``: exact, or
   ``.example.test`` for the domain and its subdomains; ``*`` turns the rule off); or, for a
   server listening beyond loopback, the address the connection reached. Anything else is
   **421**; a missing, repeated or malformed ``Host`` is **400**. The port is not compared (a
   forwarded port changes it; a rebound page has to use the real one anyway). A rebound page
   sends nothing but ``Host`` that names it: this rule is the only defence for reads.
2. **Origin.** A request that carries ``Origin`` (a browser sends it on every POST and every
   cross-origin request) must carry this server's own: ``http://`` + the authority of rule 1,
   exactly (names compared case-insensitively, one trailing dot and the default port ignored).
   ``null`` and every other origin, another port of loopback included, is **403**.
3. **Fetch metadata.** A request without ``Origin`` whose ``Sec-Fetch-Site`` is ``cross-site``
   or ``same-site`` (an ``<img>``, a no-cors fetch from another page) is **403**, unless it is a
   top-level navigation (``Sec-Fetch-Mode: navigate``, ``Sec-Fetch-Dest: document``, GET or HEAD:
   a link from another tool still opens the Explorer). A request without any of these headers (an
   SDK, curl, a test in any language) passes.

Refusals are counted (``host``, ``origin``, ``fetch-site``), never logged or relayed, and
answered in the chat error shape with ``Connection: close``. No answer of either server ever
carries an ``Access-Control-Allow-*`` header, so a cross-origin page can neither read an answer
nor send the JSON a state change needs (its CORS preflight fails).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .http import Head

__all__ = ["Guard", "Refusal", "allowed_host_pattern", "is_json_content_type"]

_AUTHORITY: Final = re.compile(
    r"(?P<host>\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{0,5}))?", re.ASCII
)
"""``host [":" port]``: a bracketed IPv6 literal (a zone id passes the syntax, not the rule) or
a reg-name of letters, digits, dots, hyphens and underscores; no userinfo, no percent-escapes."""
_OCTET: Final = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD: Final = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}", re.ASCII)
"""An IPv4 address in canonical dotted-quad form (no leading zeros, no shorthand)."""
_FETCH_SITES_REFUSED: Final = frozenset({"cross-site", "same-site"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a request is not served."""

    status: int
    """421 (a Host that is not this server's), 400 (no usable Host), 403 (another origin)."""
    kind: str
    """What is counted: ``host``, ``origin`` or ``fetch-site``."""
    code: str
    """The error body's ``code``."""
    message: str
    value: str | None = None
    """The refused ``Host`` or ``Origin``, for the operator's line (``None`` when absent)."""


@dataclass(frozen=True, slots=True)
class _Authority:
    host: str
    """Lower-cased, one trailing dot removed, brackets kept on IPv6."""
    port: str
    """As written (``""`` when absent)."""

    def origin(self) -> str:
        port = "" if self.port in ("", "80") else f":{self.port}"
        return f"http://{self.host}{port}"


def _authority(text: str) -> _Authority | None:
    match = _AUTHORITY.fullmatch(text)
    if match is None:
        return None
    port = match["port"] or ""
    if port and not 0 < int(port) <= 65535:
        return None
    host = match["host"].lower()
    if host.endswith(".") and not host.startswith("["):
        host = host[:-1]
    if not host:
        return None
    return _Authority(host, port)


def _loopback_host(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return all(host.split("."))  # no empty label ("localhost." was trimmed once already)
    if _DOTTED_QUAD.fullmatch(host):
        return host.startswith("127.")
    if host.startswith("[") and host.endswith("]"):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        mapped = address.ipv4_mapped
        return address.is_loopback or (mapped is not None and mapped.is_loopback)
    return False


def allowed_host_pattern(text: str) -> str:
    """``text`` as an ``allow_hosts`` entry: a host name or IP literal (``*`` alone: any),
    lower-cased, IPv6 bracketed; a leading dot (``.example.test``) allows the domain and its
    subdomains. Raises ``ValueError`` for anything else (a port, a path, a scheme)."""
    entry = text.strip().lower()
    if entry == "*":
        return entry
    domain = entry.startswith(".")
    bare = entry[1:] if domain else entry
    with contextlib.suppress(ValueError):  # an IPv6 literal given without brackets
        bare = f"[{ipaddress.IPv6Address(bare)}]"
    parsed = _authority(bare)
    if parsed is None or parsed.port or bare.endswith(":"):
        raise ValueError(
            f"{text!r} is not a host name or address (no scheme, port or path: e.g. "
            "mock.internal, .example.test, 192.0.2.7 or [2001:db8::7])"
        )
    return ("." if domain else "") + parsed.host


class Guard:
    """The Host and Origin rules of one server (see the module docstring).

    ``allow_hosts``: names (or IP literals) accepted besides loopback ones, checked by
    :func:`allowed_host_pattern`; ``"*"`` accepts any Host. ``server`` names the server in the
    refusals' words; ``flag`` is the option that allows a host (``--allow-host``).
    """

    def __init__(
        self, *, allow_hosts: Iterable[str] = (), server: str, flag: str = "--allow-host"
    ) -> None:
        patterns = [allowed_host_pattern(entry) for entry in allow_hosts]
        self.any_host = "*" in patterns
        self.exact = frozenset(p for p in patterns if not p.startswith(".") and p != "*")
        self.domains = tuple(p for p in patterns if p.startswith("."))
        self.server = server
        self.flag = flag

    def _allowed(self, host: str, local_address: str | None) -> bool:
        if self.any_host or _loopback_host(host) or host in self.exact:
            return True
        if any(host == d[1:] or host.endswith(d) for d in self.domains):
            return True
        # Listening beyond loopback (allow_remote): the address the client reached. An IP
        # literal cannot be rebound to another machine.
        if local_address is not None:
            literal = host[1:-1] if host.startswith("[") else host
            try:
                return ipaddress.ip_address(literal) == ipaddress.ip_address(
                    local_address.split("%", 1)[0]
                )
            except ValueError:
                return False
        return False

    def check(self, head: Head, local_address: str | None = None) -> Refusal | None:
        """The refusal ``head`` earns, or ``None`` to serve it. ``local_address``: the address
        the connection was accepted on, when the server listens beyond loopback."""
        if head.authority is not None:
            named = head.authority
        else:
            hosts = head.values("host")
            if not hosts:
                if head.version >= (1, 1):  # h11 refuses these first; kept for any caller
                    return self._bad_host(None, "an HTTP/1.1 request needs a Host header")
                named = None  # HTTP/1.0 without Host: loopback, as every browser sends one
            elif len(hosts) > 1:
                return self._bad_host(None, "more than one Host header")
            else:
                named = hosts[0]
        authority = None
        if named is not None:
            authority = _authority(named)
            if authority is None:
                return self._bad_host(named, f"the Host {named!r} is not a host[:port]")
            if not self._allowed(authority.host, local_address):
                hint = authority.host.strip("[]")
                return Refusal(
                    status=421,
                    kind="host",
                    code="host_not_allowed",
                    message=(
                        f"dsh-testkit: this {self.server} answers requests addressed to a "
                        f"loopback name (localhost, 127.0.0.1, [::1]) only; Host {named!r} is "
                        f"not one. If you reach it under that name, pass {self.flag} {hint}"
                    ),
                    value=named,
                )
        return self._check_origin(head, authority)

    def _bad_host(self, value: str | None, words: str) -> Refusal:
        return Refusal(status=400, kind="host", code="invalid_host", message=words, value=value)

    def _check_origin(self, head: Head, authority: _Authority | None) -> Refusal | None:
        origins = head.values("origin")
        if origins:
            origin = origins[0].strip() if len(origins) == 1 else ", ".join(origins)
            if authority is not None and _same_origin(origin, authority):
                return None
            return Refusal(
                status=403,
                kind="origin",
                code="origin_not_allowed",
                message=(
                    f"dsh-testkit: this {self.server} takes requests from its own pages and from "
                    f"programs that send no Origin; Origin {origin!r} is another one"
                ),
                value=origin,
            )
        site = (head.value("sec-fetch-site") or "").strip().lower()
        if site in _FETCH_SITES_REFUSED and not _navigation(head):
            return Refusal(
                status=403,
                kind="fetch-site",
                code="origin_not_allowed",
                message=(
                    f"dsh-testkit: this {self.server} does not serve requests another site's "
                    f"page makes (Sec-Fetch-Site: {site}); open its pages directly"
                ),
            )
        return None


def _same_origin(origin: str, authority: _Authority) -> bool:
    if not origin.startswith("http://"):
        return False  # null, https (neither server speaks TLS), other schemes
    theirs = _authority(origin[len("http://") :])
    return theirs is not None and theirs.origin() == authority.origin()


def _navigation(head: Head) -> bool:
    mode = (head.value("sec-fetch-mode") or "").strip().lower()
    dest = (head.value("sec-fetch-dest") or "").strip().lower()
    return mode == "navigate" and dest == "document" and head.method in ("GET", "HEAD")


def is_json_content_type(values: Iterable[str], *, utf8_only: bool = False) -> bool:
    """Whether a request's ``Content-Type`` header values say JSON: exactly one value, whose
    media type (before ``;``, trimmed, any case) is ``application/json``; parameters allowed
    and, with ``utf8_only``, a ``charset`` one must be ``utf-8`` (quoted or not, any case).

    A page on another origin can send only ``text/plain``, form and multipart bodies without
    the browser first asking the server (a CORS preflight, which neither server ever grants):
    a state change that needs ``application/json`` cannot come from such a page."""
    found = list(values)
    if len(found) != 1:
        return False
    media, _, parameters = found[0].partition(";")
    if media.strip().lower() != "application/json":
        return False
    if utf8_only:
        for parameter in parameters.split(";"):
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
                return False
    return True

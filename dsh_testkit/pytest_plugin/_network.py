"""The pytest plugin's network guard: which hosts a test may reach, checked at the socket.

Two rules, both enforced below every client library (httpx, httpx2, requests, urllib3,
aiohttp, a raw socket), because they patch :func:`socket.getaddrinfo` (every client resolves a
name before it connects) and :meth:`socket.socket.connect` (for addresses given as IPs):

- **The live DeepSeek guard** (always on, like pydantic-ai's ``ALLOW_MODEL_REQUESTS=False``): a
  test that resolves a DeepSeek API host (``api.deepseek.com``, any ``*.deepseek.com``) fails
  unless ``--dsh-live`` is given;
- **``--dsh-block-network``**: every host is refused except loopback (``localhost``,
  ``127.0.0.0/8``, ``::1``: the loopback mock server keeps working), Unix sockets, and the
  hosts of ``--dsh-allowed-hosts`` (names or IPs; ``*.example.com`` for a domain's hosts).

A refused connection raises :class:`~dsh_testkit.pytest_plugin.NetworkBlocked` naming the host and
the flag that allows it. Clients often wrap or retry connection errors (the openai SDK turns
any into ``APIConnectionError``), so a refused live DeepSeek call is also kept, and the plugin
fails the test that made it even when the error was swallowed or caught.

Imports only the standard library (the plugin installs the guard at start-up).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from .._loopback.hosts import is_loopback

__all__ = [
    "DEEPSEEK_DOMAIN",
    "NetworkGuard",
    "NetworkPolicy",
    "is_deepseek",
    "parse_hosts",
]

DEEPSEEK_DOMAIN: Final = "deepseek.com"
"""The live API's domain: its hosts are refused without ``--dsh-live``."""


def is_deepseek(host: str) -> bool:
    """Whether ``host`` is one of the live DeepSeek API's hosts."""
    name = host.strip("[]").lower().rstrip(".")
    return name == DEEPSEEK_DOMAIN or name.endswith("." + DEEPSEEK_DOMAIN)


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host == pattern[2:] or host.endswith(pattern[1:])
    return host == pattern


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPolicy:
    """What this run allows: from ``--dsh-block-network``, ``--dsh-allowed-hosts`` and
    ``--dsh-live``."""

    block_all: bool = False
    """``--dsh-block-network``: refuse every host but loopback and the allowed ones."""
    allowed_hosts: frozenset[str] = frozenset()
    """``--dsh-allowed-hosts``: names (any case) or IPs; ``*.example.com`` for a domain."""
    live: bool = False
    """``--dsh-live``: the DeepSeek API's hosts are allowed (and not blocked by block_all)."""

    def refusal(self, host: str) -> str | None:
        """Why ``host`` is refused (the flag to give), or ``None`` when it is allowed."""
        name = host.strip("[]").lower().rstrip(".")
        if is_loopback(name) or any(_host_matches(name, p) for p in self.allowed_hosts):
            return None
        if is_deepseek(name):
            if self.live:
                return None
            return (
                "it is the live DeepSeek API, and tests do not call it unless pytest runs with "
                "--dsh-live (and DEEPSEEK_API_KEY); replay a cassette, or give the client the "
                "dsh_mock fixture's transport (http_client=httpx2.Client(transport="
                'dsh_mock.transport("httpx2")) for the openai and anthropic SDKs) or '
                "dsh_mock_server.base_url"
            )
        if self.block_all:
            return (
                "the network is blocked (--dsh-block-network); allow this host with "
                f"--dsh-allowed-hosts={name}, or answer it with a cassette or the mock"
            )
        return None

    @property
    def guards_anything(self) -> bool:
        return self.block_all or not self.live


@dataclass(slots=True)
class NetworkGuard:
    """The installed patches; :meth:`uninstall` restores the originals (LIFO with other guards)."""

    policy: NetworkPolicy
    refused: list[BaseException] = field(default_factory=list)
    """Every refused live DeepSeek call so far, in order (the plugin fails the test that made
    one, however it ended)."""
    _resolved: dict[str, str] = field(default_factory=dict)
    """IP → the allowed name it was resolved from (so ``connect`` allows it)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _originals: tuple[Any, Any, Any] | None = None

    def install(self) -> NetworkGuard:
        original_getaddrinfo = socket.getaddrinfo
        original_connect = socket.socket.connect
        original_connect_ex = socket.socket.connect_ex
        self._originals = (original_getaddrinfo, original_connect, original_connect_ex)
        guard = self

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(host, (str, bytes)) and host:
                name = host.decode("idna") if isinstance(host, bytes) else host
                guard.check(name, port)
                infos = original_getaddrinfo(host, port, *args, **kwargs)
                with guard._lock:
                    for info in infos:
                        guard._resolved[str(info[4][0])] = name
                return infos
            return original_getaddrinfo(host, port, *args, **kwargs)

        def connect(sock: socket.socket, address: Any) -> Any:
            guard.check_address(sock, address)
            return original_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> Any:
            guard.check_address(sock, address)
            return original_connect_ex(sock, address)

        socket.getaddrinfo = getaddrinfo
        socket.socket.connect = connect  # type: ignore[assignment,method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[assignment,method-assign]
        return self

    def uninstall(self) -> None:
        if self._originals is None:
            return
        original_getaddrinfo, original_connect, original_connect_ex = self._originals
        socket.getaddrinfo = original_getaddrinfo
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        self._originals = None

    def check(self, host: str, port: Any) -> None:
        """Raise :class:`~dsh_testkit.pytest_plugin.NetworkBlocked` when ``host`` is refused."""
        reason = self.policy.refusal(host)
        if reason is None:
            return
        from .._errors import NetworkBlocked

        error = NetworkBlocked(
            f"dsh-testkit refused a connection to {host}:{port}: {reason}",
            host=host,
            port=int(port) if isinstance(port, int) or str(port).isdigit() else None,
        )
        if is_deepseek(host):
            with self._lock:
                self.refused.append(error)
        raise error

    def check_address(self, sock: socket.socket, address: Any) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
            return  # Unix sockets and the like are local
        host = str(address[0])
        with self._lock:
            name = self._resolved.get(host)
        if name is not None and self.policy.refusal(name) is None:
            return
        self.check(name or host, address[1])

    def refused_since(self, count: int) -> list[BaseException]:
        with self._lock:
            return self.refused[count:]


def parse_hosts(values: Iterable[str]) -> frozenset[str]:
    """``--dsh-allowed-hosts`` values (comma-separated, repeatable) as lowercased names."""
    return frozenset(
        part.strip().lower().rstrip(".")
        for value in values
        for part in value.split(",")
        if part.strip()
    )

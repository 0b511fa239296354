"""Which host names and addresses are this machine: loopback, in every spelling a URL or a
``Host`` header can give it.

Imports only the standard library: the pytest plugin's network guard reads it at start-up.
"""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["LOOPBACK_NAMES", "is_loopback"]

LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
"""Names that resolve to loopback on every common system (and ``*.localhost``, RFC 6761)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP, IPv6 possibly bracketed) is this machine."""
    name = host.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False

"""Cassettes: record an agent's HTTP traffic once, replay it in every test run after.

Built on vcrpy with this project's configuration. The parts:

- ``_api``: :func:`use_cassette` and the :class:`Cassette` handle (modes, playing, recording);
- ``_config``: :class:`CassetteConfig`, the options beyond the mode (vcrpy's ``vcr_config``);
- ``_hooks``: the record hooks (the user's, origin rewrites, scrubbing, volatile headers);
- ``_matching``: canonical bodies, the words of a mismatch, our flags in vcrpy's errors;
- ``_format``: the versioned YAML format (one literal block per body, SSE as sent);
- ``_transport``: the one interception of ``httpx`` and ``httpx2`` transports, and the cassette's
  layer in it (SSE-faithful playback, one event per chunk).

Secrets are scrubbed by :mod:`dsh_testkit.scrub` before anything is written (its
:class:`~dsh_testkit.scrub.ScrubRules` add your own; a body it cannot check is refused with
:class:`~dsh_testkit.scrub.UnscrubbableBody`, a :class:`RecordingRefused`).
"""

from .._errors import (
    CassetteConfigError,
    CassetteError,
    CassetteFormatError,
    CassetteMismatch,
    CassetteNotFound,
    CassetteNotFullyPlayed,
    RecordingRefused,
)
from ._api import Cassette, use_cassette
from ._config import CassetteConfig

__all__ = [
    "Cassette",
    "CassetteConfig",
    "CassetteConfigError",
    "CassetteError",
    "CassetteFormatError",
    "CassetteMismatch",
    "CassetteNotFound",
    "CassetteNotFullyPlayed",
    "RecordingRefused",
    "use_cassette",
]

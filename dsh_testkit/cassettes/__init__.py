"""Cassettes: record an agent's HTTP traffic once, replay it in every test run after.

Built on vcrpy with this project's configuration. The parts:

- ``_api``: :func:`use_cassette` and the :class:`Cassette` handle (modes, playing, recording);
- ``_config``: :class:`CassetteConfig`, the options beyond the mode (vcrpy's ``vcr_config``);
- ``_hooks``: the record hooks (the user's, origin rewrites, scrubbing, volatile headers);
- ``_matching``: canonical bodies, the words of a mismatch, our flags in vcrpy's errors;
- ``_format``: the versioned YAML format (one literal block per body, SSE as sent);
- ``_transport``: the one interception of ``httpx`` and ``httpx2`` transports, and the cassette's
  layer in it (SSE-faithful playback, one event per chunk).

Secrets are scrubbed by :mod:`dsh_testkit.scrub._scrubber` before anything is written.
"""

from .._errors import (
    CassetteConfigError,
    CassetteError,
    CassetteFormatError,
    CassetteMismatch,
    CassetteNotFound,
    CassetteNotFullyPlayed,
    NetworkBlocked,
    RecordingRefused,
    ScrubRuleError,
    UnscrubbableBody,
)
from ..scrub._rules import REDACTED, ScrubRules
from ..scrub._scrubber import find_secrets, scrub_json, scrub_text, scrub_url
from ._api import (
    RECORD_MODES,
    Cassette,
    RecordMode,
    use_cassette,
)
from ._config import LOOPBACK_ORIGIN, MATCHERS, CassetteConfig
from ._format import CASSETTE_FORMAT, CASSETTE_FORMAT_VERSION
from ._hooks import VOLATILE_REQUEST_HEADERS, VOLATILE_RESPONSE_HEADERS
from ._matching import json_body_matcher

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_FORMAT_VERSION",
    "LOOPBACK_ORIGIN",
    "MATCHERS",
    "RECORD_MODES",
    "REDACTED",
    "VOLATILE_REQUEST_HEADERS",
    "VOLATILE_RESPONSE_HEADERS",
    "Cassette",
    "CassetteConfig",
    "CassetteConfigError",
    "CassetteError",
    "CassetteFormatError",
    "CassetteMismatch",
    "CassetteNotFound",
    "CassetteNotFullyPlayed",
    "NetworkBlocked",
    "RecordMode",
    "RecordingRefused",
    "ScrubRuleError",
    "ScrubRules",
    "UnscrubbableBody",
    "find_secrets",
    "json_body_matcher",
    "scrub_json",
    "scrub_text",
    "scrub_url",
    "use_cassette",
]

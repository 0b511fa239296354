"""Scrubbing: the one rule that keeps credentials and secrets out of everything the kit stores
or prints.

Every writer and reader of the kit goes through it: cassettes (their vcrpy hooks live with the
cassettes), the mock's request log, the proxy's trace, every trace a reader hands out, the
reports and what a command prints. Key-shaped strings are removed everywhere; a request's own
credential (what its ``Authorization`` or ``x-api-key`` header presents) is removed in every
spelling (``_spellings.py``); :class:`ScrubRules` adds a project's own header names, query
names, JSON keys and paths, and patterns, and a :class:`Scrubber` applies them (the functions
apply the built-in rules alone). An invalid rule raises :class:`ScrubRuleError`; a body that
cannot be checked for secrets is refused with :class:`UnscrubbableBody`, never stored.
"""

from .._errors import ScrubRuleError, UnscrubbableBody
from ._rules import REDACTED, ScrubRules
from ._scrubber import Scrubber, find_secrets, scrub_headers, scrub_json, scrub_text, scrub_url

__all__ = [
    "REDACTED",
    "ScrubRuleError",
    "ScrubRules",
    "Scrubber",
    "UnscrubbableBody",
    "find_secrets",
    "scrub_headers",
    "scrub_json",
    "scrub_text",
    "scrub_url",
]

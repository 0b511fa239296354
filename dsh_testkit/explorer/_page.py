"""The Cache Explorer page: the report's JSON embedded once, the page's CSS and script inline.

The page is one file that needs nothing else: no network, no CDN, no build step; it opens
from ``file://`` and, served by the proxy or the mock, polls a JSON endpoint for new requests.
Everything the page shows is built in the browser from two JSON blocks:

- ``dsh-report``: the compact report document (``compact_report``, formatVersion 4), which the
  script expands to the full one (formatVersion 3) as ``expand_report`` does, and
- ``dsh-config``: the cause codes' sentences and advice (``_codes.CODES``), the report's terms,
  the docs page the codes are listed in, and, for a live page, the URL to poll and the version
  of the embedded report.

The script never writes markup from the data (``textContent`` and ``setAttribute`` only), and
the JSON blocks cannot end early: every ``<``, ``>`` and ``&`` is written as a ``\\u`` escape, so
no text in a trace (``</script>``, ``<!--``) is read by the HTML parser as markup. Lone
surrogates (a JSON trace may hold ``"\\ud800"``) are escaped too, so the page always encodes as
UTF-8, and non-finite numbers (a trace's ``NaN``) become ``null``, which ``JSON.parse`` reads.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Final

from ..doctor._codes import CODES, TERMS
from ..doctor._compact import compact_report
from ..doctor._report import DoctorReport

__all__ = ["DOCS_PAGE", "embed_json", "page_config", "render_html"]

DOCS_PAGE: Final = "docs/guides/cache-doctor.md"
"""Where the cause codes are documented; each code's entry is ``DOCS_PAGE#<code>``."""

_UNSAFE: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (the slow path: only taken
    when the fast encoding refused a ``NaN`` or an infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def embed_json(value: Any) -> str:
    """``value`` as JSON text that is safe inside ``<script type="application/json">``: no
    ``<``, ``>`` or ``&`` (written ``\\u003c`` …), no U+2028/U+2029, no lone surrogate, no
    ``NaN`` (``null`` instead); ``JSON.parse`` of it gives ``value`` back."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(
            _finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    return _UNSAFE.sub(_escape, text)


_SCRIPTS: Final = ("core.js", "rail.js", "views.js", "overview.js", "app.js")
"""The page's script, in order: one function scope over them all (see ``js/core.js``)."""


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@cache
def _script() -> str:
    parts = [_asset(f"js/{name}") for name in _SCRIPTS]
    return '(() => {\n"use strict";\n' + "\n".join(parts) + "\n})();\n"


def page_config(*, live: str | None = None, version: str | None = None) -> dict[str, Any]:
    """What the page needs besides the report: the glossary, the terms, the docs page, and
    the live endpoint (``live``: a URL answering the report as JSON; ``version``: the ETag of
    the embedded report, so the first poll answers 304 when nothing changed)."""
    return {
        "live": live,
        "version": version,
        "docs": DOCS_PAGE,
        "codes": {
            code: {"sentence": info.sentence, "advice": info.advice, "kind": info.kind}
            for code, info in CODES.items()
        },
        "terms": [[name, meaning] for name, meaning in TERMS],
    }


def _title(report: DoctorReport) -> str:
    name = report.path or report.source
    # A path from the file system may carry surrogate escapes: they cannot be encoded.
    name = re.sub("[\ud800-\udfff]", "\ufffd", name)
    return html.escape(f"Cache Explorer: {name}")


def render_html(
    report: DoctorReport, *, live: str | None = None, version: str | None = None
) -> str:
    """The Cache Explorer of ``report``: one HTML document that needs no network (opens from
    ``file://``). ``live``: the URL of a JSON endpoint answering the report, which the page
    polls for new requests; ``version``: the embedded report's ETag there."""
    return "".join(
        (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            # Nothing on the page may load from anywhere: inline style and script only.
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
            "connect-src 'self'\">",
            f"<title>{_title(report)}</title>\n<style>\n",
            _asset("explorer.css"),
            "</style></head>\n<body>\n",
            "<noscript><p class='noscript'>The Cache Explorer needs JavaScript; "
            "<code>dsh-testkit cache-report INPUT</code> prints the same report as text."
            "</p></noscript>\n",
            "<div id='app' class='app' data-state='loading'></div>\n",
            "<script type='application/json' id='dsh-report'>",
            embed_json(compact_report(report)),
            "</script>\n<script type='application/json' id='dsh-config'>",
            embed_json(page_config(live=live, version=version)),
            "</script>\n<script>\n",
            _script(),
            "</script>\n</body></html>\n",
        )
    )

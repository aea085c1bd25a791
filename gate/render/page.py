"""A self-contained page (the label sheet; the HTML report and the dashboard follow the same rules): a fixed template,
the data as JSON in a ``<script type="application/json">`` block in which ``<``, ``>`` and ``&`` are JSON escapes,
the page's own script and style allowed by hash in a Content Security Policy that allows nothing else. Pure."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Assets:
    """A page's own stylesheet and script (gate/render/assets)."""

    css: str
    js: str


def sha256_source(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def self_contained_page(data: Any, assets: Assets, *, title: str, noscript: str) -> str:
    """The page with ``data`` as its data block."""
    return page_from_json(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False), assets, title=title,
                          noscript=noscript)


def page_from_json(data: str, assets: Assets, *, title: str, noscript: str) -> str:
    """The page with ``data`` (JSON text, however the caller encoded it) as its data block."""
    block = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    policy = (f"default-src 'none'; script-src '{sha256_source(assets.js)}'; style-src '{sha256_source(assets.css)}'; "
              "img-src 'none'; base-uri 'none'; form-action 'none'")
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{assets.css}</style>\n</head>\n<body>\n"
        f'<noscript><p class="noscript">{html.escape(noscript)}</p></noscript>\n'
        '<main id="app"></main>\n'
        f'<script type="application/json" id="rag-gate-data">{block}</script>\n'
        f"<script>{assets.js}</script>\n</body>\n</html>\n"
    )

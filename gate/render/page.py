"""A self-contained page (the label sheet; the HTML report and the dashboard follow the same rules): a fixed template,
the data as JSON in a ``<script type="application/json">`` block in which ``<``, ``>`` and ``&`` are JSON escapes,
the page's own script and style allowed by hash in a Content Security Policy that allows nothing else. Pure."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

from gate.render.html import Assets


def sha256_source(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def data_block(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def self_contained_page(data: Any, assets: Assets, *, title: str, noscript: str) -> str:
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
        f'<script type="application/json" id="rag-gate-data">{data_block(data)}</script>\n'
        f"<script>{assets.js}</script>\n</body>\n</html>\n"
    )

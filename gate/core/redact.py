"""Keep secrets out of every message rag-gate prints or writes. Pure.

A run knows its secrets: the value of every ${NAME} the spec expands, the judge's key, the GitHub
token. ``Redactor`` replaces each of them, wherever it appears, by ``***``:

* whole: as it is, each of its lines (a multi-line secret may be shown one line at a time),
  JSON-escaped and URL-encoded (the forms an error body echoes it in);
* encoded, as rag-gate itself encodes it and a service may echo it: base64 (standard and URL-safe, with and
  without padding), hex (lower and upper case) and ``\\uXXXX`` escapes (of every character, or of the non-ASCII
  ones only; lower and upper case), of its UTF-8 bytes and of its latin-1 ones (requests' Basic credential); the
  base64 of ``Bearer <secret>``; and inside any base64 text, the whole run of base64 characters around the
  encoding of ``CORE_BYTES`` (6) bytes or more of a secret, at any of base64's three alignments: so the Basic
  credential requests sends for a URL's user info, base64 of ``user:password``, is redacted whoever the user
  (and when the user is the secret). Under 8 characters a secret's bytes may not fill two base64 groups: its
  credential is known only from the URL (``Redactor.with_urls``; a URL secret gives its own);
* in part: any piece of ``PIECE`` (8) characters or more of a token-like secret (no blank, no
  ``://``), because a service that echoes a token may cut it first. A URL read from ${NAME} is
  redacted whole, and its credentials (``user:password@``) in part, so that answers that merely
  mention the same host keep their text.

Text is always redacted *before* it is cut, so a cut never leaves part of a secret behind:
``shorten`` is the one way to shorten text that may hold one.

Speed (a report holds a million strings): a regex alternation of many forms tries each at every position, so the
forms are first looked for with ``str.find`` (fast for literal needles): the needles are the fewest forms that
every form holds one of, and for the pieces the ``BLOCK``-character blocks every ``STRIDE`` characters of a token
(every 8-character piece holds one). A document's strings are searched as one text: only the strings where a
needle was found go through the one regex of every form (a trie, compiled once per Redactor when first needed) or
have their pieces looked for around each block found.
"""

from __future__ import annotations

import base64
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import cached_property
from itertools import accumulate
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

MIN_LENGTH = 4  # shorter values are not secrets worth hiding (and would erase ordinary words)
PIECE = 8  # a piece this long of a token is redacted too
MASK = "***"
BLOCK, STRIDE = 5, 4  # every PIECE-long piece of a token holds one of its BLOCK-long blocks starting every STRIDE
CORE_BYTES = 6  # a secret's bytes inside longer base64 are recognised from 6 of them (two whole groups, 8 characters)
B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")  # string.ascii_letters, digits
_B64_TAIL = "[A-Za-z0-9+/_-]*=*"


def _escaped(text: str, upper: bool, every: bool) -> str:
    """``text`` with its characters (``every``) or its non-ASCII ones as JSON ``\\uXXXX`` escapes (UTF-16 units)."""
    fmt = "\\u%04X" if upper else "\\u%04x"

    def esc(c: str) -> str:
        units = c.encode("utf-16-be", "surrogatepass")
        return "".join(fmt % int.from_bytes(units[i:i + 2], "big") for i in range(0, len(units), 2))

    return "".join(esc(c) if every or ord(c) >= 128 else c for c in text)


def _encodings(value: str) -> list[bytes]:
    """The bytes a secret is sent as: UTF-8 (an undecodable environment byte as it was), and latin-1 when it differs
    (requests encodes a Basic credential in latin-1)."""
    out = [value.encode("utf-8", "surrogateescape")]
    try:
        latin = value.encode("latin-1")
    except UnicodeEncodeError:
        return out
    return out if latin == out[0] else [*out, latin]


def _base64(raw: bytes) -> set[str]:
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return {std, std.rstrip("="), url, url.rstrip("=")}


def _forms(secret: str) -> set[str]:
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], quote(secret, safe=""),
             quote_plus(secret, safe="")}
    forms |= {line.strip() for line in secret.splitlines()}
    forms |= {_escaped(secret, upper, every) for upper in (False, True) for every in (False, True)}
    for raw in _encodings(secret):
        forms |= _base64(raw) | {raw.hex(), raw.hex().upper()}
    for raw in _encodings("Bearer " + secret):
        forms |= _base64(raw)
    return {f for f in forms if len(f) >= MIN_LENGTH}


def _cores(secret: str) -> set[str]:
    """The base64 of a secret's bytes inside any longer base64: for each alignment (0, 1 or 2 bytes of it in the group
    before), the whole 3-byte groups that hold only its bytes, if they are CORE_BYTES or more."""
    cores: set[str] = set()
    for raw in _encodings(secret):
        for skip in range(3):
            whole = (len(raw) - skip) // 3 * 3
            if whole >= CORE_BYTES:
                chunk = raw[skip:skip + whole]
                cores |= {base64.b64encode(chunk).decode(), base64.urlsafe_b64encode(chunk).decode()}
    return cores


def _token_parts(secret: str) -> list[str]:
    """The parts of a secret whose pieces are secret too: a token whole, a URL's credentials."""
    if "://" in secret:
        creds = secret.split("://", 1)[1].split("@", 1)
        return [creds[0]] if len(creds) == 2 and len(creds[0]) >= PIECE else []
    return [secret] if len(secret) > PIECE and not any(c.isspace() for c in secret) else []


def url_credentials(url: str) -> str | None:
    """``user:password`` as requests sends it in the Basic credential of a URL with user info (both percent-decoded),
    or None: no password, no credential (requests sends none)."""
    try:
        parts = urlsplit(url.strip())
        user, password = parts.username, parts.password
    except ValueError:
        return None
    return None if password is None else f"{unquote(user or '')}:{unquote(password)}"


def _fewest(needles: Iterable[str]) -> tuple[str, ...]:
    """The needles no other one is part of: finding those finds every text that holds any."""
    kept: list[str] = []
    for n in sorted(set(needles), key=len):
        if not any(k in n for k in kept):
            kept.append(n)
    return tuple(kept)


def _trie(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, the longest at a place, as a trie (common prefixes once): linear in the text
    where an alternation of every word is tried at every position."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}
    return _branch(root)


def _branch(node: dict[str, Any]) -> str:
    out: list[str] = []
    keys = [c for c in node if c]
    while len(keys) == 1 and "" not in node:  # a chain of single characters: no group, no recursion
        out.append(re.escape(keys[0]))
        node = node[keys[0]]
        keys = [c for c in node if c]
    if keys:
        alts = [re.escape(c) + _branch(node[c]) for c in keys]
        group = alts[0] if len(alts) == 1 and "" not in node else "(?:" + "|".join(alts) + ")"
        out.append(group + ("?" if "" in node else ""))
    return "".join(out)


def _strings(value: Any, out: list[str], keys: set[str]) -> list[str]:
    """Every string of a JSON-like value, keys included, in order (a leaf is taken without a call: a report has a
    million of them); the keys also in ``keys``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                out.append(k)
                keys.add(k)
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, (dict, list)):
                _strings(v, out, keys)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, (dict, list)):
                _strings(v, out, keys)
    elif isinstance(value, str):
        out.append(value)
    return out


class Redactor:
    """The secrets of one run, and the functions that remove them from text and documents. ``credentials``: the
    ``user:password`` pairs whose Basic credential (base64) is redacted too (``with_urls`` reads them from URLs)."""

    def __init__(self, secrets: Iterable[str] = (), credentials: Iterable[str] = ()) -> None:
        values = [s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_LENGTH]
        pairs = [*credentials, *(c for s in values if "://" in s and (c := url_credentials(s)) is not None)]
        forms: set[str] = set()
        cores: set[str] = set()
        parts: list[str] = []
        for s in values:
            forms |= _forms(s)
            cores |= _cores(s)
            parts += _token_parts(s)
        forms |= {f for c in pairs if len(c) >= MIN_LENGTH for raw in _encodings(c) for f in _base64(raw)}
        self._forms = sorted(forms, key=len, reverse=True)  # the longest first: a secret that holds another
        self._cores = sorted(cores)
        self._needles = _fewest([*forms, *cores])
        self._grams = frozenset(p[i:i + PIECE] for p in parts for i in range(len(p) - PIECE + 1))
        self._blocks = _fewest(p[i:i + BLOCK] for p in parts for i in range(0, len(p) - BLOCK + 1, STRIDE))

    @classmethod
    def with_urls(cls, secrets: Iterable[str], urls: Iterable[str | None]) -> Redactor:
        """A Redactor of ``secrets`` that knows the Basic credential of each URL's user info too (what requests sends
        for ``http://user:password@host``): needed when the password (or the user) is under 8 characters."""
        return cls(secrets, [c for u in urls if u and (c := url_credentials(u)) is not None])

    def __bool__(self) -> bool:
        return bool(self._needles)

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        """Every form, and every core followed by the rest of its base64 (compiled the first time a needle is found)."""
        alts = [f"(?P<b64>{_trie(self._cores)}){_B64_TAIL}"] if self._cores else []
        return re.compile("|".join([*alts, _trie(self._forms)]))

    def __call__(self, text: str) -> str:
        return self._redact(text, self._needles, self._blocks) if self._needles else text

    def _redact(self, text: str, needles: Sequence[str], blocks: Sequence[str]) -> str:
        if any(n in text for n in needles):
            text = self._replace(text)
        if blocks and len(text) >= PIECE:
            found = [b for b in blocks if b in text]
            if found:
                text = self._pieces(text, found)
        return text

    def _replace(self, text: str) -> str:
        """Every form replaced by ***; a core with the whole run of base64 characters around it."""
        out: list[str] = []
        at = 0
        for m in self._pattern.finditer(text):
            start, end = m.span()
            if m.lastgroup == "b64":
                while start > at and text[start - 1] in B64_CHARS:
                    start -= 1
            out += [text[at:start], MASK]
            at = end
        return "".join(out) + text[at:] if out else text

    def _pieces(self, text: str, blocks: Sequence[str]) -> str:
        """Every run of text covered by a secret's 8-character pieces, replaced by ***. A piece holds one of the
        ``blocks`` found in the text, at most PIECE - BLOCK characters from its start: only there are pieces looked for."""
        grams, last = self._grams, len(text) - PIECE
        starts: set[int] = set()
        for b in blocks:
            at = text.find(b)
            while at >= 0:
                starts.update(q for q in range(max(0, at - (PIECE - BLOCK)), min(at, last) + 1) if text[q:q + PIECE] in grams)
                at = text.find(b, at + 1)
        if not starts:
            return text
        spans: list[list[int]] = []
        for i in sorted(starts):
            if spans and i <= spans[-1][1]:
                spans[-1][1] = i + PIECE
            else:
                spans.append([i, i + PIECE])
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], MASK]
            at = end
        return "".join(out) + text[at:]

    def shorten(self, text: Any, limit: int, ellipsis: str = "...") -> str:
        """``text`` redacted, on one line, then cut to ``limit`` characters."""
        s = " ".join(self(str(text)).split())
        return s if len(s) <= limit else s[: max(0, limit - len(ellipsis))] + ellipsis

    def document(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) redacted; the value itself when nothing in it
        is to be removed. Its strings are searched as one text: only the strings where a needle was found there are
        redacted, for the needles found.

        The document's names (its keys, and a value that is one of its keys: a stage, a metric, a case id) lose a
        secret's whole forms but not the pieces of a token: a token that spells a word (``acme-retrieval-key``) would
        otherwise rename the ``retrieval`` stage and every ``paraphrase_*`` metric, and leave a document its own
        schema refuses."""
        if not self._needles:
            return value
        names: set[str] = set()
        strings = _strings(value, [], names)
        joined = "\x00".join(strings)
        needles = [n for n in self._needles if n in joined]
        blocks = [b for b in self._blocks if b in joined]
        if not needles and not blocks:
            return value
        starts = list(accumulate((len(s) + 1 for s in strings), initial=0))  # where each string starts in ``joined``
        flagged: set[int] = set()
        for n in (*needles, *blocks):
            at = joined.find(n)
            while at >= 0:
                i = bisect_right(starts, at) - 1
                flagged.add(i)
                at = joined.find(n, starts[i + 1])
        return self._copy(value, flagged, needles, (blocks, names))

    def _copy(self, value: Any, flagged: set[int], needles: Sequence[str], pieces: tuple[Sequence[str], set[str]]) -> Any:
        """A copy of ``value`` whose strings numbered in ``flagged`` (in the order of _strings) are redacted: for
        ``pieces`` (the blocks found, and the names that keep them) as ``document`` says."""
        n = -1
        blocks, names = pieces

        def leaf(v: Any) -> Any:
            nonlocal n
            if isinstance(v, str):
                n += 1
                return self._redact(v, needles, () if v in names else blocks) if n in flagged else v
            return walk(v) if isinstance(v, (dict, list)) else v

        def walk(v: Any) -> Any:
            if isinstance(v, list):
                return [leaf(x) for x in v]
            if isinstance(v, dict):
                return {leaf(k): leaf(x) for k, x in v.items()}  # the key first, as _strings counts them
            return leaf(v)

        return walk(value)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Every form of every secret in ``text`` replaced by ***."""
    return Redactor(secrets)(text)

"""The encodings rag-gate itself makes of a secret are redacted like the secret: the Basic credential requests sends for
a URL's user info (``user:password@``), a ``Bearer <secret>`` value, and the base64 (standard and URL-safe, with and
without padding), hex (lower and upper case) and ``\\uXXXX`` (every character, or the non-ASCII ones only) forms of
every secret. Secrets shorter than MIN_LENGTH stay ignored, and the pieces rule (8 characters of a token) is the one
it was: a reference implementation of it is compared with the Redactor on random texts."""

from __future__ import annotations

import base64
import binascii
import json
import random
import re

import pytest

from gate.core.redact import MASK, MIN_LENGTH, PIECE, Redactor

PASSWORD = "Zq7pXj9Lm2wRt4"  # a URL's password, read from ${RAG_PASS}
NON_ASCII = "pässwörd-Zq7€Xj9"  # latin-1 cannot hold the euro sign: its base64 is of the UTF-8 bytes
LATIN1 = "pässwörd-Zq7Xj9Lm"  # requests encodes a Basic credential in latin-1 when it can


def b64_forms(raw: bytes) -> set[str]:
    """The four base64 spellings of ``raw``: standard and URL-safe, with and without padding."""
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return {std, std.rstrip("="), url, url.rstrip("=")}


def u_every(text: str, upper: bool = False) -> str:
    units = text.encode("utf-16-be")
    return "".join(("\\u%04X" if upper else "\\u%04x") % int.from_bytes(units[i:i + 2], "big") for i in range(0, len(units), 2))


def u_non_ascii(text: str, upper: bool = False) -> str:
    return "".join(c if ord(c) < 128 else u_every(c, upper) for c in text)


def clean(r: Redactor, shown: str) -> str:
    """``shown`` in a sentence, redacted: the whole encoded value must be gone."""
    out = r(f"the service said: {shown} (end)")
    assert shown not in out and MASK in out, (shown, out)
    assert out.startswith("the service said: ") and out.endswith(" (end)"), out
    return out


# --------------------------------------------------------------------------- the Basic credential of a URL's user info


@pytest.mark.parametrize("user", ["", "s", "sv", "svc", "svc1", "rag-gate-bot"])  # every alignment of the password
def test_basic_credential_of_a_literal_user_and_a_secret_password(user):
    """Only the password is a secret (``http://svc:${RAG_PASS}@host``): the Redactor does not need the user."""
    r = Redactor([PASSWORD])
    for shown in sorted(b64_forms(f"{user}:{PASSWORD}".encode())):
        assert clean(r, f"Basic {shown}") == f"the service said: Basic {MASK} (end)"
        assert clean(r, f'{{"authorization":"Basic {shown}"}}') == f'the service said: {{"authorization":"Basic {MASK}"}} (end)'


@pytest.mark.parametrize("password", [LATIN1, NON_ASCII])
def test_basic_credential_of_a_non_ascii_password_in_latin1_and_utf8(password):
    r = Redactor([password])
    encodings = [password.encode()] + ([password.encode("latin-1")] if password == LATIN1 else [])
    for raw in encodings:
        for user in ("", "u", "us"):
            for shown in b64_forms(user.encode() + b":" + raw):
                clean(r, f"Basic {shown}")


@pytest.mark.parametrize("password", ["pa5s", "hunt3r", "hunt3r2", "hunt3r2!"])
def test_a_short_password_needs_the_url_to_know_its_basic_credential(password):
    """Under 8 characters a password's base64 inside ``user:password`` is too short to recognise alone: given the URL,
    the Redactor knows the whole credential (user and password percent-decoded, as requests decodes them)."""
    url = f"http://svc:{password.replace('!', '%21')}@rag.internal:8443/query"
    r = Redactor.with_urls([password], [url])
    for shown in b64_forms(f"svc:{password}".encode()):
        assert clean(r, f"Basic {shown}") == f"the service said: Basic {MASK} (end)"


def test_the_user_of_a_url_is_the_secret():
    """``http://${RAG_TOKEN}:x-oauth-basic@host`` (or an empty password): the token comes first in the credential."""
    token = "tok_9Qm2Lx7Vb4Nc8Zr1"
    r = Redactor([token])
    for rest in (":x-oauth-basic", ":", ":pw"):
        for shown in b64_forms(f"{token}{rest}".encode()):
            clean(r, f"Basic {shown}")
    short = Redactor.with_urls(["t0k3n"], ["https://t0k3n:x-oauth-basic@rag.internal/"])
    for shown in b64_forms(b"t0k3n:x-oauth-basic"):
        clean(short, f"Basic {shown}")


def test_a_url_secret_gives_its_own_basic_credential():
    """A whole URL read from ${RAG_URL}: its user info is known without being told."""
    r = Redactor(["https://svc:pa5s@rag.internal:8443/query"])
    for shown in b64_forms(b"svc:pa5s"):
        clean(r, f"Basic {shown}")


def test_urls_without_credentials_add_nothing():
    plain = Redactor([PASSWORD])
    for url in ("https://rag.internal/query", "http://svc@rag.internal/", "not a url", "http://[::1"):
        r = Redactor.with_urls([PASSWORD], [url])
        assert r("Basic c3ZjOnB3 and svc rag.internal") == plain("Basic c3ZjOnB3 and svc rag.internal")


# --------------------------------------------------------------------------- Bearer, base64, hex and \u forms


def test_bearer_value_and_its_base64():
    token = "sk-test-Qx7Lm2Vb9Zr4"
    r = Redactor([token])
    assert r(f"Authorization: Bearer {token}") == f"Authorization: Bearer {MASK}"
    for shown in b64_forms(f"Bearer {token}".encode()):
        clean(r, shown)
    short = Redactor(["k3y5"])
    for shown in b64_forms(b"Bearer k3y5"):
        clean(short, shown)


@pytest.mark.parametrize("secret", [PASSWORD, NON_ASCII, LATIN1, "pa5s", "a b\"c\\d", "emoji-🔑-Qx7Lm2"])
def test_base64_hex_and_unicode_escapes_of_every_secret(secret):
    r = Redactor([secret])
    raw = secret.encode()
    shown = b64_forms(raw) | {raw.hex(), raw.hex().upper(), binascii.hexlify(raw).decode()}
    shown |= {u_every(secret), u_every(secret, upper=True), json.dumps(secret)[1:-1]}
    if any(ord(c) >= 128 for c in secret):
        shown |= {u_non_ascii(secret), u_non_ascii(secret, upper=True)}
    for s in sorted(shown):
        if len(s) >= MIN_LENGTH:
            clean(r, s)


def test_secrets_shorter_than_the_minimum_stay_ignored():
    r = Redactor(["abc", "", "xy"])
    assert not r
    for text in ("abc", "YWJj", "616263", "\\u0061\\u0062\\u0063", "Basic c3ZjOmFiYw=="):
        assert r(text) == text
        assert r.document({"k": text}) == {"k": text}


def test_ordinary_text_digests_and_other_base64_keep_their_text():
    r = Redactor([PASSWORD, NON_ASCII, "sk-test-Qx7Lm2Vb9Zr4", "pa5s"])
    rng = random.Random(3)
    samples = [
        "The library opens at 9:00; a loan lasts 21 days. Passwords are never shown.",
        "Authorization: Basic c3ZjOm90aGVyLXBhc3N3b3Jk",  # svc:other-password
        "".join(rng.choice("0123456789abcdef") for _ in range(4096)),  # digests
        base64.b64encode(bytes(rng.randrange(256) for _ in range(3000))).decode(),
        "\\u0048\\u0065\\u006c\\u006c\\u006f",  # Hello
    ]
    for text in samples:
        assert r(text) == text


# --------------------------------------------------------------------------- documents, and the pieces rule kept


def test_document_is_the_value_itself_when_nothing_is_to_be_removed_and_a_copy_otherwise():
    r = Redactor([PASSWORD])
    doc = {"cases": [{"id": f"c{i}", "error": None, "answer": "fine"} for i in range(50)], "n": 3, "ok": True}
    assert r.document(doc) is doc
    basic = base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
    doc["cases"][7]["error"] = f'HTTP 400: {{"authorization": "Basic {basic}"}}'
    doc[f"key {PASSWORD.encode().hex()}"] = [PASSWORD, 1.5, None]
    out = r.document(doc)
    assert out is not doc and doc["cases"][7]["error"].endswith(f'{basic}"}}')  # the input is left alone
    assert out["cases"][7]["error"] == f'HTTP 400: {{"authorization": "Basic {MASK}"}}'
    assert out[f"key {MASK}"] == [MASK, 1.5, None] and out["cases"][8] == doc["cases"][8]
    assert PASSWORD not in json.dumps(out) and basic not in json.dumps(out)


def reference(text: str, secrets: list[str]) -> str:
    """The Redactor's rules on plain text as they were before the encodings: whole forms, then pieces of tokens."""
    from urllib.parse import quote, quote_plus

    forms: set[str] = set()
    grams: set[str] = set()
    for s in secrets:
        if len(s) < MIN_LENGTH:
            continue
        forms |= {f for f in {s, json.dumps(s)[1:-1], quote(s, safe=""), quote_plus(s, safe=""),
                              *(line.strip() for line in s.splitlines())} if len(f) >= MIN_LENGTH}
        parts = [s] if len(s) > PIECE and not any(c.isspace() for c in s) and "://" not in s else []
        if "://" in s:
            creds = s.split("://", 1)[1].split("@", 1)
            parts = [creds[0]] if len(creds) == 2 and len(creds[0]) >= PIECE else []
        for p in parts:
            grams |= {p[i:i + PIECE] for i in range(len(p) - PIECE + 1)}
    if forms:
        text = re.sub("|".join(map(re.escape, sorted(forms, key=len, reverse=True))), MASK, text)
    spans: list[list[int]] = []
    for i in range(len(text) - PIECE + 1):
        if text[i:i + PIECE] in grams:
            if spans and i <= spans[-1][1]:
                spans[-1][1] = i + PIECE
            else:
                spans.append([i, i + PIECE])
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start], MASK]
        at = end
    return "".join(out) + text[at:]


def test_the_pieces_rule_is_unchanged():
    """Random texts made of pieces of the secrets (cut anywhere, overlapping, adjacent) and ordinary words."""
    rng = random.Random(11)
    token, other, url = "QXZJ" * 3 + "qxzj5678", "ZZJQ-xx-QQXJ-yy-ZJQX", "https://svc:QXZJQXZJqxzj1234@rag.internal/q"
    secrets = [token, other, url, "short"]
    r = Redactor(secrets)
    words = ["a", "the", "QX", "ZJ", "-", " ", "x", "svc:", "@rag", "\n"]
    for _ in range(3000):
        bits = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.4:
                s = rng.choice([token, other, "svc:QXZJQXZJqxzj1234"])
                start = rng.randrange(len(s))
                bits.append(s[start:start + rng.randint(1, len(s))])
            else:
                bits.append(rng.choice(words))
        text = "".join(bits)
        assert r(text) == reference(text, secrets), text

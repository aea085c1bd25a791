"""Attack 3: a secret in the encodings rag-gate itself makes of it, and a secret sent to the judge.

1. ``url: http://svc:${RAG_PASS}@host/`` makes requests send ``Authorization: Basic base64(svc:password)``. A service
   that echoed that header back in a 400 body put the whole base64 value in report.json, the HTML report, the console
   and the PR comment (the Redactor knew the password, not its encodings). The service here echoes the credential in
   every encoding rag-gate's Redactor must know: the Basic header (standard base64, latin-1 as requests encodes it),
   URL-safe base64 without padding, hex in both cases, JSON with every character \\u-escaped in both cases, and JSON
   with only the non-ASCII characters escaped. The real CLI writes every output; none may hold any of those forms.
2. A target whose answers (and passages) hold the value of a run's secret sent it to the judge in the prompts: the
   question, answer, contexts and ground truth of every judge input, the distractor and refusal prompts, are redacted
   first, and their cache keys come from the redacted text (a re-run hits the cache).
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from tests.support.judge_server import JudgeServer
from tests.support.rag_server import Action, RagServer, reply, status

ROOT = Path(__file__).resolve().parents[2]
PIECE = 8


def u_every(text: str, upper: bool = False) -> str:
    """JSON escapes of every character (UTF-16 code units, as JSON writes them)."""
    units = text.encode("utf-16-be")
    return "".join(("\\u%04X" if upper else "\\u%04x") % int.from_bytes(units[i:i + 2], "big") for i in range(0, len(units), 2))


def u_non_ascii(text: str, upper: bool = False) -> str:
    return "".join(c if ord(c) < 128 else u_every(c, upper) for c in text)


def b64_forms(raw: bytes) -> set[str]:
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return {std, std.rstrip("="), url, url.rstrip("=")}


def leak(text: str, value: str, n: int = PIECE) -> str | None:
    """A piece of ``value`` (``n`` characters, or the whole of a shorter one) found in ``text``, or None."""
    n = min(n, len(value))
    return next((value[i:i + n] for i in range(len(value) - n + 1) if value[i:i + n] in text), None)


def run_cli(ws: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "JUDGE_", "OPENAI_", "GITHUB_"))}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gate", "run", "--config", "rag-eval.yml", "--no-progress", *args],
                          cwd=ws, env=full, capture_output=True, text=True, timeout=300)


# --------------------------------------------------------------------------- 1. the encodings of a URL's credentials


class EchoingService(RagServer):
    """The RAG stand-in with one more action, ``raw``: a body written by the service's own JSON encoder (one that
    escapes every character, say), sent as it is."""

    def _act(self, h: Any, req: Any, action: Action) -> None:
        if action.kind == "raw":
            h.reply(action.code, str(action.body).encode("utf-8"))
            return
        super()._act(h, req, action)


def raw(code: int, body: str) -> Action:
    return Action("raw", code=code, body=body)


def echo_credentials(req: Any) -> Action:
    """Case ``ok`` answers; every other case is a 400 echoing the Basic credential the request carried, one encoding
    a case (each body under the 200 characters the target keeps of an error body)."""
    auth = {k.lower(): v for k, v in req.headers.items()}.get("authorization", "")
    cred = base64.b64decode(auth.removeprefix("Basic ")).decode("latin-1") if auth.startswith("Basic ") else "(none)"
    which = (req.question or "").split()[-1]
    urlsafe = base64.urlsafe_b64encode(cred.encode("latin-1")).decode().rstrip("=")
    bodies = {
        "urlsafe": ("bad token", urlsafe), "hex": ("bad credential", cred.encode().hex()),
        "HEX": ("bad credential", cred.encode().hex().upper()), "u": ("unknown user", u_every(cred)),
        "U": ("unknown user", u_every(cred, upper=True)), "Unonascii": ("unknown user", u_non_ascii(cred, upper=True)),
    }
    if which == "ok":
        return reply({"retrieved": [{"id": "loans", "text": "A loan lasts 21 days."}], "answer": "21 days."})
    if which == "basic":
        return status(400, body={"error": "unauthorized", "authorization": auth})
    if which == "json":  # json.dumps: the non-ASCII characters \u-escaped (lower case)
        return status(400, body={"error": "unknown user", "credential": cred})
    error, value = bodies[which]
    return raw(400, '{"error": "' + error + '", "echo": "' + value + '"}')


CASES = ["ok", "basic", "urlsafe", "hex", "HEX", "u", "U", "Unonascii", "json"]

ENCODINGS_SPEC = """\
version: 1
golden_set: golden.jsonl
max_error_rate: 1
target:
  http: {url: "URL", retries: 0, concurrency: 1}
stages:
  retrieval:
    metrics: [hit_rate@1]
"""


def forbidden(secret: str, credential: str) -> dict[str, str]:
    """Every form of the secret no output may hold (name -> value)."""
    forms = {"raw": secret, "hex": secret.encode().hex(), "HEX": secret.encode().hex().upper(),
             "u": u_every(secret), "U": u_every(secret, upper=True), "json": json.dumps(secret)[1:-1]}
    if any(ord(c) >= 128 for c in secret):
        forms.update({"u non-ASCII": u_non_ascii(secret), "U non-ASCII": u_non_ascii(secret, upper=True)})
    encodings = {credential.encode(), credential.encode("latin-1")}  # requests sends latin-1
    for raw_bytes in encodings:
        forms.update({f"base64 {b}": b for b in b64_forms(raw_bytes)})
    forms.update({f"base64 of the secret {b}": b for b in b64_forms(secret.encode())})
    return forms


@pytest.mark.parametrize("user,password,secret", [
    pytest.param("svc", "${RAG_PASS}", "pässwörd-Zq7Xj9Lm", id="literal-user-secret-password"),
    pytest.param("${RAG_USER}", "x-oauth-basic", "tok_9Qm2Lx7Vb4Nc8Zr1", id="the-user-is-the-secret"),
    pytest.param("svc", "${RAG_PASS}", "hunt3r2", id="short-password"),  # under 8 characters: the URL's user is needed
])
def test_no_output_holds_an_encoding_of_the_urls_credentials(tmp_path: Path, user: str, password: str, secret: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    golden = [{"id": c, "question": f"Please answer case {c}", "relevant_doc_ids": ["loans"]} for c in CASES]
    (ws / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    name = "RAG_USER" if user.startswith("$") else "RAG_PASS"
    with EchoingService({}, behaviour=echo_credentials) as srv:
        url = srv.url.replace("http://", f"http://{user}:{password}@")
        (ws / "rag-eval.yml").write_text(ENCODINGS_SPEC.replace("URL", url), encoding="utf-8")
        proc = run_cli(ws, {name: secret}, "--report", "report.json", "--markdown", "comment.md", "--html", "report.html")
        headers = [dict(r.headers) for r in srv.requests]
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    credential = f"{secret if user.startswith('$') else user}:{secret if password.startswith('$') else password}"
    assert all(h.get("Authorization", "").startswith("Basic ") for h in headers) and len(headers) == len(CASES)
    outputs = {"report.json": (ws / "report.json").read_text(encoding="utf-8"),
               "comment": (ws / "comment.md").read_text(encoding="utf-8"),
               "HTML report": (ws / "report.html").read_text(encoding="utf-8"),
               "console": proc.stdout + proc.stderr}
    report = json.loads(outputs["report.json"])
    errors = {o["id"]: o["error"] for o in report["stages"]["retrieval"]["samples"] if o.get("error")}
    assert set(errors) == set(CASES) - {"ok"} and all("HTTP 400" in e for e in errors.values()), errors
    assert "***" in errors["basic"] and "***" in errors["hex"] and "***" in errors["u"], errors  # the echoes got there, redacted
    for where, text in outputs.items():
        for form_name, form in forbidden(secret, credential).items():
            assert form not in text, (where, form_name, form)
            if not form_name.startswith(("u", "U")):  # a 12-character piece of an escape holds 2 characters of the secret
                assert leak(text, form) is None, (where, form_name, leak(text, form))
            else:
                assert leak(text, form, 12) is None, (where, form_name, leak(text, form, 12))


# --------------------------------------------------------------------------- 2. the judge never gets a secret


LEAKY_RAG = '''\
import os

KEY, URL = os.environ["JUDGE_KEY"], os.environ["JUDGE_URL"]


def answer(question, k):
    """A RAG that leaks its secrets: in its passages and in its answers."""
    if "weather" in question:
        return {"retrieved": [{"id": "none", "text": "Opening hours: 9 to 5."}], "answer": f"Sunny, says {URL}."}
    return {"retrieved": [{"id": "loans", "text": f"A loan lasts 21 days. Staff key: {KEY}."},
                          {"id": "fees", "text": "A late book costs 10 cents a day."}],
            "answer": f"A loan lasts 21 days. Your key is {KEY} at {URL}."}


def from_contexts(question, contexts):
    return {"answer": f"A loan lasts 21 days (key {KEY}). " + " ".join(contexts)[:200]}
'''

JUDGE_SPEC = """\
version: 1
golden_set: golden.jsonl
max_error_rate: 0.5
target:
  python: {function: "leaky:answer", contexts_function: "leaky:from_contexts"}
judge: {base_url: "${JUDGE_URL}", model: judge-2024-01-01, api_key_env: JUDGE_KEY, embeddings_model: emb-2024-01-01}
cache: {path: cache.sqlite}
stages:
  generation:
    metrics: [faithfulness, answer_correctness, deepeval/faithfulness]
  robustness:
    noise: {distractors: 1, source: generated, correctness: {method: judge, engine: deepeval}}
    rejection: {judge: true}
"""


@pytest.mark.skipif(find_spec("ragas") is None or find_spec("deepeval") is None, reason="ragas and deepeval are not installed")
def test_the_judge_never_receives_a_secret_the_target_or_the_golden_set_holds(tmp_path: Path) -> None:
    key = "sk-judge-Qx7Lm2Vb9Zr4Nc8Tp6"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "leaky.py").write_text(LEAKY_RAG, encoding="utf-8")
    golden = [
        {"id": "q1", "question": "How long is a loan?", "ground_truth": "A loan lasts 21 days.", "relevant_doc_ids": ["loans"]},
        {"id": "q2", "question": f"How long is a loan with key {key}?", "ground_truth": f"21 days, for {key} too.",
         "relevant_doc_ids": ["loans"]},
        {"id": "q3", "question": "What is the weather in Paris?", "type": "out_of_scope"},
    ]
    (ws / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden), encoding="utf-8")
    (ws / "rag-eval.yml").write_text(JUDGE_SPEC, encoding="utf-8")
    with JudgeServer() as judge:
        judge_url = judge.url
        env = {"JUDGE_URL": judge_url, "JUDGE_KEY": key}
        first = run_cli(ws, env, "--report", "report.json")
        first_calls = judge.calls
        bodies = [json.dumps(r.body, ensure_ascii=False) for r in judge.requests]
        second = run_cli(ws, env, "--report", "again.json")
        again_calls = judge.calls - first_calls
    assert first.returncode in (0, 1) and second.returncode in (0, 1), first.stdout + first.stderr + second.stderr
    assert first_calls > 0 and len(bodies) == first_calls
    for secret in (key, judge_url):
        for body in bodies:
            assert leak(body, secret) is None, (secret, leak(body, secret), body[:400])
    assert any("***" in b for b in bodies)  # the secrets were in the prompts' inputs, redacted
    report = json.loads((ws / "report.json").read_text(encoding="utf-8"))
    gen, rob = report["stages"]["generation"], report["stages"]["robustness"]
    assert set(gen["metrics"]) == {"faithfulness", "answer_correctness", "deepeval/faithfulness"}, gen.get("not_evaluated")
    assert all(0.0 <= v <= 1.0 for v in gen["metrics"].values())
    assert {"clean_accuracy", "noisy_accuracy"} <= set(rob["metrics"]), rob.get("not_evaluated")
    assert rob["rejection"]["judge"] is True, rob["rejection"]
    with sqlite3.connect(ws / "cache.sqlite") as db:
        cached = json.dumps([list(row) for table in ("texts", "scores") for row in db.execute(f"SELECT * FROM {table}")])  # noqa: S608
    assert leak(cached, key) is None and leak(cached, judge_url) is None
    again = json.loads((ws / "again.json").read_text(encoding="utf-8"))
    assert again_calls == 0, again["stages"]["generation"]["usage"]  # every redacted input's key hit the cache
    assert again["stages"]["generation"]["usage"]["cache_misses"] == 0
    assert again["stages"]["generation"]["metrics"] == gen["metrics"]

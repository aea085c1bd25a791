"""gate.targets.http.HttpTarget against a real HTTP service on 127.0.0.1 (tests/support/rag_server.py).

Retry waits go through an injected ``sleep`` that records the delays instead of sleeping,
so the backoff schedule is asserted exactly and the tests stay fast. The end-to-end tests
run the real CLI in a subprocess against the same kind of server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.config.loader import load_spec
from gate.core.errors import RunError
from gate.core.model import GoldenCase
from gate.run.flow import run
from gate.targets.factory import make_target
from gate.targets.http import HttpTarget
from tests.support.settings import http

try:
    from tests.support.rag_server import (
        RagServer,
        Received,
        drop,
        fail_first,
        free_port,
        malformed,
        reply,
        response,
        slow,
        status,
        truncated,
    )
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import (  # type: ignore[no-redef]
        RagServer,
        Received,
        drop,
        fail_first,
        free_port,
        malformed,
        reply,
        response,
        slow,
        status,
        truncated,
    )

TOKEN = "tok-5ecr3t-9f8e7d6c5b4a"


def reason(error: str | None) -> str:
    """A target error without the URL it names first (every target error says which URL it came from)."""
    assert error is not None and re.match(r"^https?://\S+: ", error), error
    return re.sub(r"^https?://\S+: ", "", error, count=1)


class Sleeps:
    """The ``sleep`` HttpTarget is given: records every requested wait, never sleeps."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def case(question: str = "What is the loan period?", cid: str = "c1", relevant: tuple[str, ...] = ("d1",)) -> GoldenCase:
    return GoldenCase(id=cid, question=question, line=1, relevant=dict.fromkeys(relevant, 1))


def target(srv: RagServer, sleeps: Sleeps | None = None, **cfg: Any) -> HttpTarget:
    return HttpTarget(http(srv.url, **{"retries": 3, "backoff_s": 0.5, "timeout_s": 5, **cfg}), sleep=sleeps or Sleeps())


Q = "What is the loan period?"
OK_BODY = {
    "retrieved": [
        {"id": "d1", "text": "Books are lent for 21 days.", "score": 0.93},
        {"id": "d2", "text": "E-books are lent for 14 days.", "score": 0.71},
        {"id": 7, "text": "Renewals: twice.", "score": 1},
    ],
    "answer": "21 days.",
}


# --- the normal case ---------------------------------------------------------------------------

def test_normal_response_is_parsed() -> None:
    with RagServer({Q: OK_BODY}) as srv:
        t = target(srv)
        out = t.ask(case(Q), k=5)
        t.close()
        assert out.error is None
        assert [d.id for d in out.retrieved] == ["d1", "d2", "7"]  # an integer id becomes a string
        assert [d.text for d in out.retrieved] == ["Books are lent for 21 days.", "E-books are lent for 14 days.", "Renewals: twice."]
        assert [d.score for d in out.retrieved] == [0.93, 0.71, 1.0]
        assert out.answer == "21 days."
        assert out.contexts == [d.text for d in out.retrieved]  # contexts default to the retrieved texts
        assert out.latency_ms is not None and out.latency_ms > 0
        (req,) = srv.requests
        assert req.method == "POST"
        assert req.body == {"question": Q, "k": 5}
        assert req.headers["Content-Type"] == "application/json"


def test_contexts_from_the_service_win_over_texts() -> None:
    body = {**OK_BODY, "contexts": ["only this"]}
    with RagServer({Q: body}) as srv:
        out = target(srv).ask(case(Q), k=3)
    assert out.error is None and out.contexts == ["only this"]


def test_non_ascii_question_travels_as_utf8() -> None:
    q = "借书期限是多久？"
    with RagServer({q: response(["d1"], answer="21 天")}) as srv:
        out = target(srv).ask(case(q), k=2)
        assert srv.requests[0].body == {"question": q, "k": 2}
    assert out.error is None and out.answer == "21 天"


# --- field remapping ---------------------------------------------------------------------------

def test_field_remapping_request_and_response() -> None:
    remapped = {"data": {"docs": [{"doc_id": "d9", "text": "nine", "score": 0.5}, {"doc_id": "d1", "text": "one"}]}, "answer": "x"}
    with RagServer({Q: remapped}, question_field="query") as srv:
        t = target(
            srv,
            body={"index": "handbook"},
            request={"question": "query", "k": "top_k"},
            response={"retrieved": "data.docs", "id": "doc_id"},
        )
        out = t.ask(case(Q), k=4)
        assert out.error is None, out.error
        assert [d.id for d in out.retrieved] == ["d9", "d1"]
        assert [d.score for d in out.retrieved] == [0.5, None]
        # the server found the question under "query" (else it answers 400) and got exactly this body
        assert srv.requests[0].body == {"index": "handbook", "query": Q, "top_k": 4}


def test_nested_request_field_builds_an_object() -> None:
    with RagServer({Q: OK_BODY}, question_field="input.text") as srv:
        out = target(srv, request={"question": "input.text"}).ask(case(Q), k=1)
        assert out.error is None, out.error
        assert srv.requests[0].body == {"input": {"text": Q}, "k": 1}


def test_without_remapping_a_remapped_service_is_an_error() -> None:
    """The server really checks the field: the default body has no 'query', so it answers 400."""
    with RagServer({Q: OK_BODY}, question_field="query") as srv:
        out = target(srv).ask(case(Q), k=1)
        assert srv.attempts(Q) == 0 and len(srv.requests) == 1  # no 'query' in the body -> not counted for Q
    assert out.error is not None and reason(out.error).startswith("HTTP 400")


# --- headers and secrets -----------------------------------------------------------------------

def _write_spec(tmp_path: Path, target_cfg: dict[str, Any], *, cases: list[dict[str, Any]] | None = None,
                max_error_rate: float = 0.0, metrics: list[str] | None = None, gates: dict[str, Any] | None = None) -> Path:
    cases = cases if cases is not None else [{"id": "c1", "question": Q, "relevant_doc_ids": ["d1"]}]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    spec = {
        "version": 1,
        "golden_set": "golden.jsonl",
        "target": target_cfg,
        "max_error_rate": max_error_rate,
        "stages": {"retrieval": {"metrics": metrics or ["hit_rate@5", "mrr"], **({"gates": gates} if gates else {})}},
    }
    path = tmp_path / "rag-eval.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_headers_from_spec_with_expanded_token(tmp_path: Path) -> None:
    with RagServer({Q: OK_BODY}) as srv:
        spec_path = _write_spec(tmp_path, {"http": {"url": srv.url, "headers": {"Authorization": "Bearer ${RAG_TOKEN}", "X-Team": "search"}}})
        spec = load_spec(spec_path, env={"RAG_TOKEN": TOKEN})
        cases = [case(Q)]
        t = make_target(spec, cases)
        out = t.ask(cases[0], k=spec.target_k)
        t.close()
        assert out.error is None
        (req,) = srv.requests
        assert req.headers["Authorization"] == f"Bearer {TOKEN}"
        assert req.headers["X-Team"] == "search"
        assert req.headers["User-Agent"] == "rag-gate"


def _echo_token(req: Received) -> Any:
    """A service that puts the credentials it got into its error messages."""
    auth = req.headers.get("Authorization", "")
    if req.question == "401":
        return status(401, body={"error": f"token rejected: {auth}"})
    if req.question == "html":
        return malformed(f"<html>bad gateway for {auth}</html>")
    if req.question == "limit":
        return status(429, retry_after=3600, body={"error": auth})
    return None


def test_token_never_appears_in_error_strings(tmp_path: Path) -> None:
    with RagServer({Q: OK_BODY}, behaviour=_echo_token) as srv:
        spec_path = _write_spec(tmp_path, {"http": {"url": srv.url, "retries": 0, "headers": {"Authorization": "Bearer ${RAG_TOKEN}"}}})
        spec = load_spec(spec_path, env={"RAG_TOKEN": TOKEN})
        t = make_target(spec, [])
        outs = [t.ask(case(q, cid=q), k=3) for q in ("401", "html", "limit")]
        t.close()
        assert [r.headers["Authorization"] for r in srv.requests] == [f"Bearer {TOKEN}"] * 3
    errors = [o.error for o in outs]
    assert all(errors), errors
    assert reason(errors[0]).startswith("HTTP 401") and "***" in errors[0]  # the echoed token was there, and redacted
    assert "malformed JSON" in errors[1] and "***" in errors[1]
    assert "Retry-After" in errors[2]
    assert not any(TOKEN in e for e in errors)


def test_token_in_url_not_in_errors_or_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Connection refused to a URL carrying the token: the report and its errors never show it."""
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    url = f"http://127.0.0.1:{free_port()}/search?key=${{RAG_TOKEN}}"
    spec_path = _write_spec(tmp_path, {"http": {"url": url, "retries": 0, "headers": {"Authorization": "Bearer ${RAG_TOKEN}"}}})
    with pytest.raises(RunError) as err:  # nobody listens: the run stops at the first case, naming the URL
        run(str(spec_path))
    message = err.value.message + (err.value.hint or "")
    assert "cannot be reached" in message and "/search?key=***" in message and "connection" in message.lower()
    assert TOKEN not in message


# --- retries -----------------------------------------------------------------------------------

def test_fails_twice_with_503_then_succeeds() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: fail_first(2, status(503))}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 3
        assert [r.action for r in srv.requests] == ["status", "status", "ok"]
    assert out.error is None
    assert [d.id for d in out.retrieved] == ["d1", "d2", "7"]
    assert sleeps.calls == [0.5, 1.0]


@pytest.mark.parametrize("code", [500, 502, 504])
def test_other_5xx_are_retried(code: int) -> None:
    with RagServer({Q: OK_BODY}, script={Q: fail_first(1, status(code))}) as srv:
        out = target(srv).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
    assert out.error is None


@pytest.mark.parametrize("code", [429, 503])
def test_retry_after_seconds_is_honoured(code: int) -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: fail_first(1, status(code, retry_after=1))}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
        assert srv.requests[0].action == "status"
    assert out.error is None
    assert sleeps.calls == [1.0]


def test_retry_after_http_date_in_the_past_means_no_wait() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: fail_first(1, status(429, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
    assert out.error is None
    assert sleeps.calls == [0.0]


def test_429_without_retry_after_uses_backoff() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: fail_first(2, status(429))}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 3
    assert out.error is None
    assert sleeps.calls == [0.5, 1.0]


def test_retry_after_above_max_fails_at_once() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: status(429, retry_after=120)}) as srv:
        out = target(srv, sleeps, max_retry_after_s=60).ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert sleeps.calls == []
    assert out.error is not None
    assert "HTTP 429" in out.error and "Retry-After 120" in out.error and "max_retry_after_s" in out.error
    assert out.retrieved == []


@pytest.mark.parametrize(("backoff", "expected"), [(0.5, [0.5, 1.0, 2.0]), (0.2, [0.2, 0.4, 0.8]), (0, [0, 0, 0])])
def test_always_503_backs_off_exponentially_then_fails(backoff: float, expected: list[float]) -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: status(503)}) as srv:
        out = target(srv, sleeps, retries=3, backoff_s=backoff).ask(case(Q), k=5)
        assert srv.attempts(Q) == 4
    assert sleeps.calls == pytest.approx(expected)
    assert reason(out.error) == "HTTP 503 after 4 attempts"
    assert out.retrieved == [] and out.answer is None


def test_retries_zero_means_one_attempt() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: status(503)}) as srv:
        out = target(srv, sleeps, retries=0).ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert sleeps.calls == []
    assert reason(out.error) == "HTTP 503 after 1 attempt"


def test_dropped_connection_is_retried_then_errors() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: drop()}) as srv:
        out = target(srv, sleeps, retries=2).ask(case(Q), k=5)
        assert srv.attempts(Q) == 3
        assert {r.action for r in srv.requests} == {"drop"}
    assert out.error is not None
    assert "connection" in out.error.lower() and out.error.endswith("after 3 attempts")
    assert sleeps.calls == [0.5, 1.0]


def test_dropped_connection_once_then_succeeds() -> None:
    with RagServer({Q: OK_BODY}, script={Q: fail_first(1, drop())}) as srv:
        out = target(srv).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
    assert out.error is None and out.answer == "21 days."


def test_connection_broken_mid_body_is_retried() -> None:
    """Headers promise the whole body, half arrives, then a reset: a connection failure like any other."""
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: fail_first(1, truncated())}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)  # must not raise: failures come back in ``error``
        assert srv.attempts(Q) == 2
        assert [r.action for r in srv.requests] == ["truncated", "ok"]
    assert out.error is None and out.answer == "21 days."
    assert sleeps.calls == [0.5]


def test_connection_broken_mid_body_every_time_errors_as_connection() -> None:
    with RagServer({Q: OK_BODY}, script={Q: truncated()}) as srv:
        out = target(srv, retries=1, backoff_s=0).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
    assert out.error is not None
    assert reason(out.error).startswith("connection failed") and out.error.endswith("after 2 attempts"), out.error


def test_slow_beyond_timeout_errors_as_timed_out() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: slow(30)}) as srv:
        out = target(srv, sleeps, timeout_s=0.2, retries=1).ask(case(Q), k=5)
        assert srv.attempts(Q) == 2
    assert out.error is not None
    assert "timed out" in out.error and "after 2 attempts" in out.error
    assert sleeps.calls == [0.5]


def test_slow_within_timeout_is_fine() -> None:
    with RagServer({Q: OK_BODY}, script={Q: slow(0.05)}) as srv:
        out = target(srv, timeout_s=5).ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert out.error is None


def test_malformed_json_is_an_error_and_not_retried() -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: malformed()}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert sleeps.calls == []
    assert out.error is not None and "malformed JSON" in out.error and "HTTP 200" in out.error


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(code: int) -> None:
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: status(code, body={"error": "nope"})}) as srv:
        out = target(srv, sleeps).ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert sleeps.calls == []
    assert out.error is not None and reason(out.error).startswith(f"HTTP {code}") and "nope" in out.error


def test_redirect_loop_is_an_error_not_an_exception() -> None:
    """A redirect loop, where the spec lets redirects be followed, ends after 5 hops as the case's error, not retried."""
    sleeps = Sleeps()
    with RagServer({Q: OK_BODY}, script={Q: status(307, headers={"Location": "/"})}) as srv:
        out = target(srv, sleeps, follow_redirects=True).ask(case(Q), k=5)
        assert srv.attempts(Q) == 6  # 307 keeps the POST body: every hop carried the question
    assert sleeps.calls == []  # not retried
    assert out.error is not None and "more than 5 redirects" in out.error, out.error


def test_unknown_question_gets_the_servers_404() -> None:
    with RagServer({Q: OK_BODY}) as srv:
        out = target(srv).ask(case("something else"), k=5)
        assert srv.attempts("something else") == 1
    assert out.error is not None and reason(out.error).startswith("HTTP 404") and "unknown question" in out.error


@pytest.mark.parametrize(
    ("body", "response_cfg", "needle", "received", "field"),
    [
        ({"retrieved": {"id": "d1"}, "answer": "x"}, {}, "'retrieved' must be a list, got dict", "keys 'retrieved', 'answer'",
         "retrieved"),
        ({"retrieved": "d1 d2"}, {}, "'retrieved' must be a list, got str", "key 'retrieved'", "retrieved"),
        ({"answer": "x"}, {}, "'retrieved'", "an object with key 'answer'", "retrieved"),
        ([{"id": "d1"}], {}, "list", "a list", "retrieved"),
        ({"retrieved": [{"text": "no id"}]}, {}, "retrieved[0].id", "key 'retrieved'", "id"),
        ({"retrieved": [{"id": "d1"}], "answer": 42}, {}, "'answer' must be a string", "keys 'retrieved', 'answer'", "answer"),
        ({"retrieved": [{"id": "d1"}], "contexts": "one"}, {}, "'contexts' must be a list of strings", "keys 'retrieved', 'contexts'",
         "contexts"),
        ({"data": {"items": []}}, {"retrieved": "data.docs"}, "'data.docs'", "'data' holds an object with key 'items'",
         "retrieved"),
    ],
)
def test_wrong_shape_errors_name_what_was_received_and_the_mapping(body: Any, response_cfg: dict[str, str], needle: str,
                                                                   received: str, field: str) -> None:
    sleeps = Sleeps()
    with RagServer(script={Q: reply(body)}) as srv:
        t = target(srv, sleeps, response=response_cfg)
        out = t.ask(case(Q), k=5)
        assert srv.attempts(Q) == 1
    assert sleeps.calls == []
    assert out.error is not None and needle in out.error, out.error
    assert t.wrong_shape == out.error and reason(out.error).startswith("returned the wrong shape: ")
    assert received in out.error and f"(set target.http.response.{field} to where {field} is, e.g. `response: {{{field}: " in out.error
    assert t.unreachable is None


# --- concurrency -------------------------------------------------------------------------------

@pytest.mark.parametrize(("concurrency", "n", "low", "high"), [(1, 4, 1, 1), (4, 12, 2, 4)])
def test_concurrency_is_bounded(tmp_path: Path, concurrency: int, n: int, low: int, high: int) -> None:
    """A server with 100 ms latency counts the requests it handles at once."""
    cases = [{"id": f"c{i:02d}", "question": f"question {i}", "relevant_doc_ids": [f"d{i}"]} for i in range(n)]
    responses = {c["question"]: response([f"d{i}", "other"]) for i, c in enumerate(cases)}
    with RagServer(responses, latency=0.1) as srv:
        spec = _write_spec(tmp_path, {"http": {"url": srv.url, "concurrency": concurrency}}, cases=cases)
        report = run(str(spec))
        assert len(srv.requests) == n
        assert low <= srv.max_in_flight <= high, srv.max_in_flight
    assert report["verdict"] == "pass"
    assert report["stages"]["retrieval"]["n"] == n
    assert report["stages"]["retrieval"]["metrics"]["hit_rate@5"] == 1.0


# --- end to end through the CLI ----------------------------------------------------------------

N_CASES = 40


def _mixed_fault_plan() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, tuple[str, int]]]:
    """Golden cases, the server's responses and scripts, and per case the expected outcome:
    case id -> ("scored", attempts) or (<substring of the error>, attempts)."""
    cases, responses, script, expect = [], {}, {}, {}
    for i in range(N_CASES):
        cid, q = f"c{i:02d}", f"question number {i}?"
        cases.append({"id": cid, "question": q, "relevant_doc_ids": [f"doc-{i}"], "category": "even" if i % 2 == 0 else "odd"})
        rank = i % 3 + 1  # the relevant doc sits at rank 1, 2 or 3
        ids = [f"filler-{i}-{j}" for j in range(rank - 1)] + [f"doc-{i}"] + [f"filler-{i}-x{j}" for j in range(3)]
        responses[q] = response(ids, answer=f"answer {i}")
        if i < 4:
            script[q], expect[cid] = slow(30), ("timed out", 3)
        elif i < 8:
            script[q], expect[cid] = fail_first(1, status(503)), ("scored", 2)
        elif i < 12:
            script[q], expect[cid] = fail_first(2, status(429, retry_after=0)), ("scored", 3)
        elif i < 14:
            script[q], expect[cid] = fail_first(1, status(429)), ("scored", 2)
        elif i < 18:
            script[q], expect[cid] = drop(), ("connection", 3)
        elif i < 20:
            script[q], expect[cid] = fail_first(1, drop()), ("scored", 2)
        elif i < 24:
            script[q], expect[cid] = malformed(), ("malformed JSON", 1)
        elif i < 26:
            script[q], expect[cid] = status(503), ("HTTP 503 after 3 attempts", 3)
        elif i == 26:
            script[q], expect[cid] = fail_first(1, status(500)), ("scored", 2)
        elif i == 27:
            script[q], expect[cid] = reply({"retrieved": "nope"}), ("'retrieved' must be a list", 1)
        elif i == 28:
            script[q], expect[cid] = fail_first(1, truncated()), ("scored", 2)
        else:
            expect[cid] = ("scored", 1)
    return cases, responses, script, expect


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("max_error_rate", [0.0, 0.5])
def test_mixed_faults_end_to_end_through_the_cli(tmp_path: Path, max_error_rate: float) -> None:
    cases, responses, script, expect = _mixed_fault_plan()
    with RagServer(responses, script=script, latency=0.002) as srv:
        spec = _write_spec(
            tmp_path,
            {"http": {"url": srv.url, "retries": 2, "backoff_s": 0.01, "timeout_s": 0.5, "concurrency": 8}},
            cases=cases, max_error_rate=max_error_rate,
            metrics=["hit_rate@5", "mrr", "recall@5", "context_recall@5"], gates={"hit_rate@5": {"min": 0.9}},
        )
        report_path = tmp_path / "report.json"
        proc = _cli("run", "--config", str(spec), "--report", str(report_path), cwd=tmp_path)
        attempts = {c["id"]: srv.attempts(c["question"]) for c in cases}
    assert "Traceback" not in proc.stderr + proc.stdout
    report = json.loads(report_path.read_text(encoding="utf-8"))
    stage = report["stages"]["retrieval"]
    samples = {s["id"]: s for s in stage["samples"]}

    # every golden case is accounted for, exactly once: none missing, none invented
    assert len(stage["samples"]) == N_CASES
    assert set(samples) == {c["id"] for c in cases}
    assert [c["id"] for c in report["cases"]] == [c["id"] for c in cases]

    scored = sorted(cid for cid, (what, _) in expect.items() if what == "scored")
    errored = sorted(cid for cid, (what, _) in expect.items() if what != "scored")
    for cid, (what, n_attempts) in expect.items():
        s = samples[cid]
        assert attempts[cid] == n_attempts, (cid, attempts[cid], n_attempts)
        if what == "scored":
            assert s["error"] is None, (cid, s["error"])
            i = int(cid[1:])
            assert s["metrics"]["hit_rate@5"] == 1.0
            assert s["metrics"]["mrr"] == pytest.approx(1 / (i % 3 + 1))
        else:
            assert isinstance(s["error"], str) and what in s["error"], (cid, s["error"])
            assert s["metrics"] == {}  # never scored, in particular never scored 0
    by_case = {c["id"]: c for c in report["cases"]}
    assert all(by_case[cid]["error"] for cid in errored)
    assert all(by_case[cid]["error"] is None and by_case[cid]["retrieved"] for cid in scored)

    # errored cases are out of the averages: n = scored count, and the means are over the scored only
    assert stage["n"] == len(scored) == 25
    assert stage["errored"] == len(errored) == 15
    assert stage["metrics"]["hit_rate@5"] == 1.0
    assert stage["metrics"]["mrr"] == pytest.approx(sum(1 / (int(c[1:]) % 3 + 1) for c in scored) / len(scored))
    assert stage["metrics"]["context_recall@5"] == 1.0
    assert stage["metrics"]["error_rate"] == pytest.approx(15 / 40)
    assert report["target"]["errors"] == 15 and report["target"]["calls"] == N_CASES

    if max_error_rate == 0.0:
        assert proc.returncode == 3, proc.stderr
        assert report["verdict"] == "error"
        assert report["errors"] and "15 of 40" in report["errors"][0]
    else:
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.returncode == 0  # the one gate (hit_rate@5 >= 0.9) holds on the scored cases
        assert report["verdict"] == "pass"
        assert report["errors"] == []
    assert report["exit_code"] == proc.returncode


def test_connection_refused_exits_3_at_once_naming_the_url(tmp_path: Path) -> None:
    """A service that is down: the first case finds nobody listening, the run stops there (the other cases are not
    asked, no retry of theirs is waited out), exit 3, the message names the URL and the cause first."""
    cases = [{"id": f"c{i}", "question": f"q{i}", "relevant_doc_ids": ["d1"]} for i in range(5)]
    url = f"http://127.0.0.1:{free_port()}/"
    spec = _write_spec(tmp_path, {"http": {"url": url, "retries": 2, "backoff_s": 0.01}}, cases=cases)
    report_path = tmp_path / "report.json"
    proc = _cli("run", "--config", str(spec), "--report", str(report_path), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    first = proc.stderr.splitlines()[-2]
    assert first.startswith(f"rag-gate: the target cannot be reached: {url}: connection failed") and "after 3 attempts" in first
    assert "no other case was asked" in proc.stderr
    assert not report_path.exists()

"""Report mode (the workflow_run job that posts a fork's artifact with the base repository's token) on artifacts the
schema lets through, whatever they hold: it posts the comment, or it refuses the artifact with exit 2 and an
``::error::``; it never stops on a traceback (exit 1, no ``::error::``, an empty job summary, no comment).

A real report (the quickstart made to regress, gated per group, over a history) is mutated with a fixed seed: types
changed, keys deleted (the optional ones are what the door lets through), extreme numbers (1e308, -0.0, 10**400,
1e400 as JSON text, 5e-324), long strings, bidi controls, lone surrogates, lists emptied or grown. Each mutation is
written as the artifact and read by ``gate.github.action.main`` in this process, against the GitHub stand-in.
"""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from gate.github import action
from gate.io.reports import check_document, is_valid_document
from tests.support.action import HEAD, PR, REPO, Result, regressed_quickstart, report_workspace, run_action, workflow_run_event
from tests.support.github_server import WRITE_TOKEN, GitHubServer
from tests.support.markup import inert_problems

SEED = 20261201
MUTATIONS = 300
TIME_BOUND_S = 30.0
INF = 1.0e-307 * 3.0  # a sentinel float, written as the JSON text 1e400 (which Python reads as infinity)

NUMBERS: list[Any] = [1e308, -1e308, 1.7976931348623157e308, -0.0, 0, 5e-324, 10**400, -(10**400), 2**64 + 1, 10**300,
                      float(10**300), INF, 0.5, -1, 3]
TEXTS = ["x" * 5000, "\u202e✅ passed\u202c", "\u2066#1\u2069 \u200e\u200f\u061c", "a\u0301\u0301\u0301" * 50, "🙂" * 300,
         "\ud800 lone surrogate", "## ✅ rag-gate passed\n- forged\n1. item", "", " ", "\u0000\u0007", "\u2028\u2029x"]
OTHERS: list[Any] = [None, True, False, [], {}, [1, "a"], {"k": 1}, "text"]


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return regressed_quickstart(tmp_path_factory.mktemp("fuzz") / "ws")


def _nodes(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    out = [(path, doc)]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _nodes(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _nodes(v, path + (i,))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def mutate(doc: Any, rng: random.Random) -> str:
    """One mutation of ``doc`` in place; what it did, in words. Mostly what keeps the type (a number for a number, a
    string for a string, an optional key deleted), which the door lets through; sometimes another type."""
    op = rng.choice(["number", "number", "number", "delete", "delete", "delete", "text", "text", "empty", "grow", "other"])
    fits = {"number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "text": lambda v: isinstance(v, str),
            "empty": lambda v: isinstance(v, (dict, list)) and v, "grow": lambda v: isinstance(v, list) and v}
    nodes = [(p, v) for p, v in _nodes(doc) if p and fits.get(op, lambda v: True)(v)]
    if op == "delete":
        nodes = [(p, v) for p, v in nodes if isinstance(p[-1], str)]
    path, value = rng.choice(nodes)
    parent, key = _parent(doc, path), path[-1]
    if op == "delete":
        del parent[key]
    elif op == "number":
        parent[key] = rng.choice(NUMBERS)
    elif op == "text":
        parent[key] = rng.choice(TEXTS)
    elif op == "empty":
        value.clear()
    elif op == "grow":
        value.extend(copy.deepcopy(value[: 1 + rng.randrange(len(value))]) * rng.choice([2, 20, 200]))
    else:
        parent[key] = copy.deepcopy(rng.choice(OTHERS))
    return f"{op} at {'.'.join(map(str, path))}"


def artifact_text(doc: Any) -> str:
    """The JSON text a fork would upload: lone surrogates as escapes, the sentinel as 1e400 (no float is infinite in
    JSON text, but Python's parser reads that number as infinity)."""
    return json.dumps(doc).replace(repr(INF), "1e400")


class ReportMode:
    """``action.main`` in mode report, in this process, against the GitHub stand-in."""

    def __init__(self, gh: GitHubServer, folder: Path) -> None:
        folder.mkdir()
        self.folder, self.artifact = folder, folder / "rag-gate-report.json"
        (folder / "event.json").write_text(json.dumps(workflow_run_event(HEAD)), encoding="utf-8")
        self.env = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.api_url,
                    "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": str(folder / "event.json"),
                    "GITHUB_OUTPUT": str(folder / "output"), "GITHUB_STEP_SUMMARY": str(folder / "summary"),
                    "INPUT_GITHUB-TOKEN": WRITE_TOKEN, "INPUT_MODE": "report", "INPUT_REPORT-PATH": str(self.artifact),
                    "INPUT_CONFIG": str(folder / "no-spec.yml"), "GITHUB_SERVER_URL": "https://github.com"}

    def __call__(self, text: str) -> tuple[int, str]:
        self.artifact.write_text(text, encoding="utf-8")
        for name in ("output", "summary"):
            (self.folder / name).write_text("", encoding="utf-8")
        return action.main(env=self.env), (self.folder / "summary").read_text(encoding="utf-8")


def _passes_the_door(doc: Any) -> bool | None:
    """Whether the door lets ``doc`` through (None: the check itself stopped, which report mode must survive too)."""
    try:
        return is_valid_document(json.loads(artifact_text(doc)), "report")
    except Exception:  # noqa: BLE001
        return None


def test_report_mode_survives_every_mutation_of_a_real_report(real_report, tmp_path, capsys):
    """Every mutation is posted as a comment that is only text, or refused with exit 2, an ::error:: and the job summary
    saying why (of the ones the door refuses, 1 in 5 is tried: the refusal's words cost a fifth of a second)."""
    rng = random.Random(SEED)
    problems: list[str] = []
    outcomes = {"posted": 0, "refused": 0, "not tried": 0}
    with GitHubServer(repos=(REPO,)) as gh:
        gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
        report_mode = ReportMode(gh, tmp_path / "runner")
        code, _ = report_mode(artifact_text(real_report))
        assert code == 0 and len(gh.comments(PR, REPO)) == 1, capsys.readouterr().out  # the control: the real report posts
        start, done = time.monotonic(), 0
        while done < MUTATIONS and time.monotonic() - start < TIME_BOUND_S:
            doc = copy.deepcopy(real_report)
            what = "; ".join(mutate(doc, rng) for _ in range(rng.choice([1, 1, 2, 3])))
            done += 1
            door = _passes_the_door(doc)
            if door is False and rng.random() > 0.2:
                outcomes["not tried"] += 1
                continue
            try:
                code, summary = report_mode(artifact_text(doc))
            except BaseException as exc:  # noqa: BLE001 - what the fuzzer looks for
                problems.append(f"{what}: {type(exc).__name__}: {exc}"[:300])
                continue
            errors = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::error")]
            if code == 0 and door and not errors and summary:
                outcomes["posted"] += 1
                body = gh.comments(PR, REPO)[0]["body"]
                bad = inert_problems(body)
                if bad:
                    problems.append(f"{what}: the comment is more than text: {bad[:3]}")
            elif code == 2 and errors and summary:  # refused at the door, or by report mode's checks (run.head_sha, run.pr)
                outcomes["refused"] += 1
            else:
                problems.append(f"{what}: exit {code}, door {door}, {errors[:1]}, summary {summary[:80]!r}")
    assert problems == [], "\n".join(problems[:20])
    assert done >= 100, f"only {done} mutations in {TIME_BOUND_S} s"
    assert outcomes["posted"] >= done // 3, outcomes  # most mutations reach the renderers


# --------------------------------------------------------------------------- the cases the fuzzer found, one by one


def _posted(gh: GitHubServer, tmp_path: Path, text: str) -> tuple[Result, list[str]]:
    """Report mode through the action's real entry point on the artifact ``text``: what it did, the comments."""
    gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
    r = run_action(gh, report_workspace(tmp_path, text=text), "workflow_run", workflow_run_event(HEAD), mode="report")
    return r, [c["body"] for c in gh.comments(PR, REPO)]


@pytest.mark.parametrize("number", ["1" + "0" * 400, "-1" + "0" * 400, "1e400"])
def test_a_number_beyond_the_float_range_is_refused_at_the_door_as_not_finite(real_report, tmp_path, number):
    """10**400 as a metric's value broke the value formatting (OverflowError: exit 1, no ::error::, no summary, no
    comment); 1e400 (which Python reads as infinity) got through one of the two validators. Both are refused."""
    doc = copy.deepcopy(real_report)
    doc["stages"]["retrieval"]["metrics"]["mrr"] = INF
    with GitHubServer(repos=(REPO,)) as gh:
        r, comments = _posted(gh, tmp_path, artifact_text(doc).replace("1e400", number))
    assert r.code == 2, str(r)
    (error,) = r.lines("error")
    assert "not a rag-gate report: not a finite number (beyond the float range)" in error and "stages.retrieval.metrics.mrr" in error
    assert "not a finite number" in r.summary and comments == []


def test_a_noise_section_and_a_rejection_case_without_their_optional_keys_are_posted(real_report, tmp_path):
    """noise.method and noise.distractors, a rejection case's refused: optional in the schema, so the door lets an
    artifact without them through; the comment (KeyError before) shows what is there."""
    doc = copy.deepcopy(real_report)
    robustness = doc["stages"]["robustness"]
    del robustness["noise"]["method"], robustness["noise"]["distractors"]
    for case in robustness["rejection"]["cases"]:
        case.pop("refused", None)
    check_document(doc, "report", file="artifact")
    with GitHubServer(repos=(REPO,)) as gh:
        r, comments = _posted(gh, tmp_path, artifact_text(doc))
    assert r.code == 0 and r.lines("error") == [], str(r)
    (body,) = comments
    assert "Noise test: distractors from corpus at the front; correct ≥ 0.3." in body and inert_problems(body) == []
    assert "rejection miss" not in body  # no case says whether it was refused: none is shown as a miss


def test_an_unexpected_error_is_a_clear_exit_3_with_an_error_line_and_a_job_summary(real_report, tmp_path, capsys, monkeypatch):
    """Whatever goes wrong that rag-gate did not foresee ends as exit 3, one ::error:: naming the error and where it
    happened, and a job summary that says so; never a traceback, an empty summary and exit 1."""
    def broken(report: Any) -> str:
        raise RuntimeError("a bug in the renderer")

    monkeypatch.setattr("gate.render.markdown.render_summary", broken)
    with GitHubServer(repos=(REPO,)) as gh:
        gh.add_pull(PR, HEAD, gh.branch_sha("main", REPO), fork=True)
        code, summary = ReportMode(gh, tmp_path / "runner")(artifact_text(real_report))
        assert gh.comments(PR, REPO) == []
    out = capsys.readouterr()
    (error,) = [ln for ln in out.out.splitlines() if ln.startswith("::error")]
    assert code == 3 and "internal error: RuntimeError: a bug in the renderer" in error and "test_report_mode_fuzz.py" in error
    assert "internal error" in summary and "RuntimeError" in summary and "Traceback" not in out.out + out.err

"""JUnit XML (gate.render.junit) that other tools can read: well-formed XML 1.0 whatever text the report holds, and
valid against Jenkins' JUnit schema (tests/data/junit-10.xsd, from the xunit plugin)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from gate.app import Destinations, run_and_write
from gate.render.junit import render_junit, xml_safe
from gate.run.options import RunOptions
from tests.conftest import JUNIT_XSD, junit_problem

GOLD = Path(__file__).resolve().parents[1] / "gold"
# every C0 control character, DEL, and the two non-characters XML 1.0 forbids as well
CONTROL = "".join(chr(c) for c in range(0x20)) + "\x7f" + "\ufffe\uffff"
FORBIDDEN = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"] + ["\ufffe", "\uffff"]
ANSI = "upstream \x1b[31mtimeout\x1b[0m\x01\x0b"


def escaped(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def gate(metric: str, status: str, reason: str) -> dict[str, Any]:
    return {"stage": "retrieval", "metric": metric, "status": status, "value": 0.5, "baseline": 0.9,
            "rule": f"min 0.8 {CONTROL}", "reason": reason, "checks": []}


def hostile_report() -> dict[str, Any]:
    """A report whose every text a target or a spec can put into the JUnit file holds control characters: gate
    reasons, metric names (ids), rules, a skipped stage's reason, the run errors."""
    return {
        "verdict": "error", "errors": [f"target error {ANSI} {CONTROL}", f"second {CONTROL}"],
        "stages": {
            "retrieval": {"status": "fail", "gates": [
                gate(f"hit_rate@5{CONTROL}", "fail", f"fail {ANSI} {CONTROL}"),
                gate(f"mrr{CONTROL}", "error", f"error {CONTROL}"),
                gate(f"ndcg@5{CONTROL}", "skipped", f"skipped {CONTROL}"),
                gate(f"recall@5{CONTROL}", "pass", f"pass {CONTROL}"),
            ]},
            "generation": {"status": "skipped", "reason": f"no judge {ANSI} {CONTROL}", "gates": []},
            f"custom{CONTROL}": {"status": "pass", "gates": [gate("p95_latency_ms", "pass", "ok")]},
        },
    }


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(JUNIT_XSD)))


def test_the_schema_is_jenkins_junit_10_with_its_source() -> None:
    head = JUNIT_XSD.read_text(encoding="utf-8").splitlines()[:3]
    assert "jenkinsci/xunit-plugin" in head[1] and "junit-10.xsd" in head[1] and "MIT" in head[1]
    root = etree.parse(str(JUNIT_XSD)).getroot()
    assert {e.get("name") for e in root.iterfind("{http://www.w3.org/2001/XMLSchema}element")} >= {"testsuites", "testsuite", "testcase"}


@pytest.mark.parametrize("c", [chr(c) for c in range(0x20)] + ["\x7f", "\x85", "\ud7ff", "\ue000", "\ufffd", "\ufffe", "\uffff", "\U0001f600"])
def test_xml_safe_escapes_exactly_what_xml_1_0_forbids(c: str) -> None:
    expected = escaped(c) if c in FORBIDDEN else c
    assert xml_safe(f"a{c}b") == f"a{expected}b"


def test_hostile_text_is_well_formed_valid_and_still_visible(schema: etree.XMLSchema) -> None:
    text = render_junit(hostile_report())  # type: ignore[arg-type]
    assert not any(c in text for c in FORBIDDEN)
    root = etree.fromstring(text.encode("utf-8"))
    schema.assertValid(root)
    ET.fromstring(text)  # the standard library's parser (expat) reads it too
    # what was there is still visible, escaped: in attributes and text alike
    failure = root.find(".//failure")
    assert failure is not None
    assert failure.get("message") == "fail upstream \\x1b[31mtimeout\\x1b[0m\\x01\\x0b " + xml_safe(CONTROL)
    # the rule, in the element's text (where XML parsers read a carriage return as a newline)
    assert f"gate: min 0.8 {xml_safe(CONTROL)}".replace("\r", "\n") in (failure.text or "")
    run_error = root.find(".//testsuite[@name='rag-gate.run']/testcase/error")
    assert run_error is not None and run_error.get("type") == "RunError"
    assert "\\x1b[31mtimeout" in run_error.get("message", "") and "\\x00" in (run_error.text or "")
    skipped_stage = root.find(".//testcase[@name='generation stage']/skipped")
    assert skipped_stage is not None and "\\x1b[31m" in skipped_stage.get("message", "")
    # tab, newline and carriage return are allowed: kept as they are (attributes carry them as character references)
    assert all(c in run_error.get("message", "") for c in "\t\n\r\x7f")
    for c in FORBIDDEN:
        assert escaped(c) in text


def test_each_gate_is_one_testcase_with_the_right_element(schema: etree.XMLSchema) -> None:
    root = etree.fromstring(render_junit(hostile_report()).encode("utf-8"))  # type: ignore[arg-type]
    suites = {s.get("name"): s for s in root.iterfind("testsuite")}
    retrieval = suites["rag-gate.retrieval"]
    kinds = [[child.tag for child in case] for case in retrieval.iterfind("testcase")]
    assert kinds == [["failure"], ["error"], ["skipped"], ["system-out"]]
    assert [case.get("name") for case in retrieval.iterfind("testcase")] == [
        f"{m}{xml_safe(CONTROL)}" for m in ("hit_rate@5", "mrr", "ndcg@5", "recall@5")]
    assert {k: retrieval.get(k) for k in ("tests", "failures", "errors", "skipped")} == {"tests": "4", "failures": "1", "errors": "1", "skipped": "1"}
    assert suites["rag-gate.generation"].get("skipped") == "1"
    assert f"rag-gate.custom{xml_safe(CONTROL)}" in suites
    # the run's totals; its skipped count is the sum of the suites' own (junit-10.xsd has no skipped on testsuites)
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == {"tests": "7", "failures": "1", "errors": "2"}
    assert root.get("skipped") is None
    assert sum(int(s.get("skipped", "0")) for s in suites.values()) == 2


def test_the_gold_file_is_valid(schema: etree.XMLSchema) -> None:
    schema.assertValid(etree.parse(str(GOLD / "junit_regressed.xml")))


def test_a_target_error_with_control_characters_reaches_a_valid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       schema: etree.XMLSchema) -> None:
    """The real path: a results file whose every call failed with ANSI colours and control characters in its error;
    the run error quotes it. The autouse fixture in conftest.py checks the file too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rag-eval.yml").write_text("version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\n"
                                           "stages:\n  retrieval:\n    metrics: [hit_rate@2]\n    gates:\n      hit_rate@2: {min: 0.5}\n")
    golden = [{"id": f"q{i}", "question": f"question {i}", "relevant_doc_ids": [f"d{i}"]} for i in range(3)]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in golden))
    (tmp_path / "results.jsonl").write_text("".join(json.dumps({"id": c["id"], "error": f"{ANSI} {CONTROL}"}) + "\n" for c in golden))
    report = run_and_write("rag-eval.yml", Destinations(junit="junit.xml"), RunOptions(), show_progress=False, quiet=True)
    assert report["verdict"] == "error"
    data = (tmp_path / "junit.xml").read_bytes()
    doc = etree.fromstring(data)
    schema.assertValid(doc)
    ET.fromstring(data)
    assert b"\\x1b[31mtimeout" in data
    assert junit_problem(tmp_path / "junit.xml", schema) is None


def test_the_conftest_check_finds_invalid_junit(tmp_path: Path, schema: etree.XMLSchema) -> None:
    """What the autouse check reports (checked here on files outside tmp_path's check: each is removed after)."""
    good = tmp_path / "good.xml"
    good.write_text(render_junit(hostile_report()))  # type: ignore[arg-type]
    assert junit_problem(good, schema) is None
    cases = {
        "skipped-on-testsuites.xml": '<testsuites skipped="0"><testsuite name="a" tests="0" failures="0" errors="0"/></testsuites>',
        "ill-formed.xml": '<testsuites><testsuite name="a" tests="0" failures="0" errors="0">\x01</testsuite></testsuites>',
        "missing-attribute.xml": '<testsuite name="a"/>',
        # ill-formed past the first chunk the check reads (64 KiB), after many well-formed cases
        "ill-formed-late.xml": '<testsuites><testsuite name="a" tests="5000" failures="0" errors="0">'
                               + '<testcase name="c" classname="k"/>' * 5000 + '\x01</testsuite></testsuites>',
        "ill-formed-in-the-root-tag.xml": '<testsuites name="a\x01"></testsuites>',
    }
    for name, body in cases.items():
        path = tmp_path / name
        path.write_text(body)
        problem = junit_problem(path, schema)
        path.unlink()  # so the autouse check does not fail this test
        assert problem, name
    other = tmp_path / "other.xml"
    other.write_text("<project><skipped/></project>")
    assert junit_problem(other, schema) is None  # not JUnit XML: not checked

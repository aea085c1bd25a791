"""JUnit XML: one test case per gate, so CI test reporters show each gate. Pure.

The output is well-formed XML 1.0 whatever the report holds, and valid against Jenkins' junit-10.xsd
(tests/data/junit-10.xsd): that schema has no `skipped` attribute on <testsuites>, so the run's skipped
count is only on each <testsuite> (their sum)."""

from __future__ import annotations

import re

from gate.core.report import Report
from gate.render import fmt_value, ordered_stages
from gate.render import xmltree as ET  # ElementTree's parts that this file uses, without its import

# Every character XML 1.0 forbids (outside its Char production: the C0 controls but tab, LF and CR, the surrogates,
# U+FFFE and U+FFFF), e.g. the control characters of a target's error message. No escape can carry them, so each is
# replaced by a visible escape: \x01 for U+0001. (Written as what is forbidden, it compiles in microseconds; the
# allowed ranges took 3 ms.)
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_safe(text: str) -> str:
    """`text` with every character XML 1.0 forbids replaced by a visible escape ("\\x1b" for ESC)."""
    return _NOT_XML_CHAR.sub(_visible, text)


def _make_xml_safe(root: ET.Element) -> None:
    for el in root.iter():
        for key, value in list(el.attrib.items()):
            if isinstance(value, str):
                el.set(key, xml_safe(value))
        if isinstance(el.text, str):
            el.text = xml_safe(el.text)


def render_junit(report: Report) -> str:
    suites = ET.Element("testsuites", name="rag-gate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, stage in ordered_stages(report):
        suite = ET.SubElement(suites, "testsuite", name=f"rag-gate.{name}")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        gates = stage.get("gates", [])
        if stage["status"] == "skipped":
            case = ET.SubElement(suite, "testcase", classname=f"rag-gate.{name}", name=f"{name} stage")
            ET.SubElement(case, "skipped", message=stage.get("reason", "skipped"))
            counts["tests"] += 1
            counts["skipped"] += 1
        for g in gates:
            case = ET.SubElement(suite, "testcase", classname=f"rag-gate.{name}", name=g["metric"])
            counts["tests"] += 1
            detail = f"{g['metric']} = {fmt_value(g['metric'], g['value'])} (baseline {fmt_value(g['metric'], g['baseline'])}); gate: {g['rule']}"
            if g["status"] == "fail":
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=g["reason"], type="GateFailed").text = detail
            elif g["status"] == "error":
                counts["errors"] += 1
                ET.SubElement(case, "error", message=g["reason"], type="MetricError").text = detail
            elif g["status"] == "skipped":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=g["reason"])
            else:
                ET.SubElement(case, "system-out").text = detail
        for key, v in counts.items():
            suite.set(key, str(v))
            totals[key] += v
    if report.get("errors"):
        suite = ET.SubElement(suites, "testsuite", name="rag-gate.run", tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="rag-gate.run", name="run completed")
        ET.SubElement(case, "error", message=report["errors"][0], type="RunError").text = "\n".join(report["errors"])
        totals["tests"] += 1
        totals["errors"] += 1
    for key, v in totals.items():
        if key != "skipped":  # junit-10.xsd allows no `skipped` on <testsuites>: the suites' own counts carry it
            suites.set(key, str(v))
    _make_xml_safe(suites)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites) + "\n"

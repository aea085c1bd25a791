"""JUnit XML: one test case per gate, so CI test reporters show each gate. Pure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gate.core.report import Report
from gate.render import fmt_value, ordered_stages


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
        suites.set(key, str(v))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

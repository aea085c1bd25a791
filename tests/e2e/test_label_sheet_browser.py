"""The label sheet (`rag-gate label`) in the distribution's headless Chromium, driven over the DevTools protocol: every
sampled case is shown, the judge's score stays hidden until the person has answered, answers survive a reload, the
download is what was entered, and hostile golden text and answers show as text."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gate.core.labelsample import sheet_data
from gate.render.html import Assets
from gate.render.page import self_contained_page
from tests.support.cdp import Browser, chromium

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
HOSTILE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'

pytestmark = [pytest.mark.browser, pytest.mark.skipif(chromium() is None, reason="needs Chromium (apt-get install chromium)")]


class Case:
    def __init__(self, cid: str, question: str, truth: str) -> None:
        self.id, self.question, self.ground_truth = cid, question, truth


def sheet(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    texts = {f"a{i:023d}": (HOSTILE if i == 2 else f"Answer {i}.") for i in range(4)}
    texts.update({f"p{i:023d}": f"Passage {i} {HOSTILE if i == 1 else ''}" for i in range(4)})
    samples = [{"id": f"q{i}", "metrics": {"faithfulness": 0.1 + 0.25 * i, "answer_relevancy": 0.9 - 0.2 * i},
                "output": {"answer": f"a{i:023d}", "contexts": [f"p{i:023d}"]}} for i in range(4)]
    report: Any = {"run": {"created_at": "2026-12-01T10:00:00+00:00", "commit": "abc"}, "texts": texts,
                   "stages": {"generation": {"samples": samples}}}
    golden = {f"q{i}": Case(f"q{i}", f"Question {i}? {HOSTILE if i == 0 else ''}", f"Truth {i}") for i in range(4)}
    data = sheet_data(report, samples, ["faithfulness", "answer_relevancy"], golden, "1-5")
    assets = ROOT / "gate" / "render" / "assets"
    page = self_contained_page(data, Assets((assets / "label.css").read_text(), (assets / "label.js").read_text()),
                               title="sheet", noscript="needs its script")
    path = tmp_path / "sheet.html"
    path.write_text(page, encoding="utf-8")
    return path, data


def wait_ready(b: Browser) -> None:
    for _ in range(50):
        if b.evaluate("document.body.dataset.ready === '1'"):
            return
        time.sleep(0.05)
    raise AssertionError("the sheet's script did not finish")


def test_the_sheet_hides_the_judge_keeps_answers_across_a_reload_and_downloads_what_was_entered(tmp_path: Path) -> None:
    path, data = sheet(tmp_path)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Browser(tmp_path) as b:
        b.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        b.open(path.as_uri())
        wait_ready(b)
        assert b.evaluate("document.querySelector('#case h2').textContent") == "Case 1 of 4: q0"
        judge_lines = b.evaluate("[...document.querySelectorAll('.judge')].map(e => e.textContent)")
        assert all("shown once you have answered" in t for t in judge_lines) and "0.100" not in b.evaluate("document.body.innerText")
        b.evaluate("document.querySelector('[data-metric=\"faithfulness\"] [data-index=\"2\"]').click()")  # 2 of 5 -> 0.25
        assert b.evaluate("document.querySelector('[data-metric=\"faithfulness\"] .judge').textContent") == "The judge's score: 0.100"
        assert "shown once" in b.evaluate("document.querySelector('[data-metric=\"answer_relevancy\"] .judge').textContent")
        b.evaluate("document.getElementById('labeler').value = 'ana'; document.getElementById('labeler').dispatchEvent(new Event('input'))")
        # the keyboard: next case, then "5" answers its first unanswered metric
        b.send("Input.dispatchKeyEvent", type="keyDown", key="ArrowRight", code="ArrowRight", windowsVirtualKeyCode=39)
        b.send("Input.dispatchKeyEvent", type="keyUp", key="ArrowRight", code="ArrowRight", windowsVirtualKeyCode=39)
        assert b.evaluate("document.querySelector('#case').dataset.caseId") == "q1"
        b.send("Input.dispatchKeyEvent", type="keyDown", key="5", code="Digit5", text="5", windowsVirtualKeyCode=53)
        b.send("Input.dispatchKeyEvent", type="keyUp", key="5", code="Digit5", windowsVirtualKeyCode=53)
        assert b.evaluate("document.getElementById('progress').textContent") == "2 of 8 labelled"

        stored = json.loads(b.evaluate(f"window.localStorage.getItem({json.dumps(data['storage_key'])})"))
        assert len(stored["answers"]) == 2 and stored["labeler"] == "ana" and stored["current"] == 1
        b.reload(until="document.body.dataset.ready === '1' && document.getElementById('progress').textContent !== '0 of 8 labelled'")
        wait_ready(b)  # the answers come back from the page's storage
        assert b.evaluate("document.getElementById('progress').textContent") == "2 of 8 labelled"
        assert b.evaluate("document.querySelector('#case').dataset.caseId") == "q1"
        assert b.evaluate("document.getElementById('labeler').value") == "ana"
        text = b.evaluate("window.ragGateLabels()")
        labels = [json.loads(line) for line in text.splitlines()]
        assert [(x["case_id"], x["metric"], x["score"], x["labeler"]) for x in labels] == [
            ("q0", "faithfulness", 0.25, "ana"), ("q1", "faithfulness", 1.0, "ana")]
        assert labels[0]["answer_id"] == data["cases"][0]["answer_id"] and labels[1]["answer_id"] == data["cases"][1]["answer_id"]
        b.evaluate("document.getElementById('download').click()")
        for _ in range(100):
            files = list(downloads.glob("labels*.jsonl"))
            if files:
                break
            time.sleep(0.05)
        assert files and files[0].read_text(encoding="utf-8") == text

        # hostile text: shown as text, nothing runs, nothing is fetched
        for _ in range(3):
            b.evaluate("document.getElementById('next').click()")
        assert b.evaluate("document.querySelector('#case').dataset.caseId") == "q3"
        b.evaluate("document.getElementById('prev').click()")
        shown = b.evaluate("document.querySelector('#case .answer').textContent")
        assert shown == HOSTILE
        assert b.evaluate("document.querySelectorAll('img').length") == 0 and b.evaluate("window.__pwned") is None
        assert [r for r in b.requests() if r != path.as_uri()] == [] and b.console_errors() == [] and b.dialogs() == []
        SHOTS.mkdir(parents=True, exist_ok=True)
        b.screenshot(SHOTS / "label-sheet.png")

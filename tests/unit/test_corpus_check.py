"""The corpus check (gate.core.corpuscheck) on a crafted corpus with each defect once: it finds exactly those."""

from __future__ import annotations

from gate.core.corpuscheck import check_corpus

GOOD = [
    ("ok-prose", "Printed books can be borrowed for 21 days. Renewals are allowed twice online."),
    ("ok-json", 'The config is {"loan_days": 21, "renewals": [1, 2]} for every branch.'),
    ("ok-code", "Run this:\n```\nrag-gate run --config rag-eval.yml\n```\nThen read the report."),
    ("ok-table", "| item | days |\n| --- | --- |\n| book | 21 |\n| dvd | 7 |"),
    ("ok-heading", "## Loans\nPrinted books can be borrowed for 21 days."),
    ("ok-braces-in-strings", '{"note": "a } inside a string does not count", "n": 1}'),
]
BAD = [
    ("cut-json", '{"loan_days": 21, "renewals": [1, 2'),
    ("cut-code", "Run this:\n```\nrag-gate run --config"),
    ("cut-table", "| book | 21 |\n| dvd | 7 |"),
    ("orphan-heading", "Renewals are allowed twice.\n\n## Fines"),
    ("empty", "   \n"),
    ("dup-1", "The cafe opens at nine."),
    ("dup-2", "The  cafe opens\nat nine."),
    ("big", " ".join(["word"] * 50)),
]


def test_a_crafted_corpus_gives_exactly_its_defects() -> None:
    findings = check_corpus([*GOOD, *BAD], max_tokens=40)
    got = sorted((f["code"], tuple(f["chunks"])) for f in findings)
    assert got == sorted([("cut_json", ("cut-json",)), ("cut_code_block", ("cut-code",)), ("cut_table", ("cut-table",)),
                          ("orphan_heading", ("orphan-heading",)), ("empty_chunk", ("empty",)),
                          ("duplicate_chunk", ("dup-1", "dup-2")), ("oversized_chunk", ("big",))])
    levels = [f["level"] for f in findings]
    assert levels == sorted(levels, key=["error", "warning"].index)  # errors first
    by_code = {f["code"]: f for f in findings}
    assert "1 '{' and 0 '}', 1 '[' and 0 ']'" in by_code["cut_json"]["message"]
    assert by_code["cut_table"]["level"] == "error" and "no header row" in by_code["cut_table"]["message"]
    assert "ends with a heading: '## Fines'" in by_code["orphan_heading"]["message"]
    assert "50 tokens, more than --max-tokens 40" in by_code["oversized_chunk"]["message"]


def test_a_clean_corpus_has_no_finding_and_no_size_check_without_a_limit() -> None:
    assert check_corpus(GOOD) == []
    assert check_corpus([("big", " ".join(["word"] * 5000))]) == []

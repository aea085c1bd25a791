"""The fast paths of a retrieval-only run give what the general paths give: the golden set decoded straight into its
cases (gate.io.golden), the golden set's fingerprint written piece by piece (gate.core.cases), and the stale-label
check's shortcut (gate.stages.retrieval). Each is compared with the general path on tricky inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gate.core.answers import AnswerChecks
from gate.core.cases import fingerprint, parse_case
from gate.core.digest import digest_text
from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
from gate.core.settings import MatchSettings
from gate.io.golden import iter_jsonl, load_golden_set
from gate.stages.retrieval import stale_labels, text_ids

# lines of every kind: the usual shape (fast), and what the general path reads or refuses
LINES = [
    '{"id": "a", "question": "Q a?", "relevant_doc_ids": ["d1", "d2", "d1"]}',
    '{"id": "b", "question": "Q b?", "relevant_doc_ids": {"d1": 3, "d2": 1}, "ground_truth": "yes"}',
    '{"question": "no id here?", "relevant_doc_ids": ["d9"]}',
    '{"id": null, "question": "null id?", "relevant_doc_ids": ["d9"], "tags": null, "category": null}',
    '{"id": "c", "question": "Ünïcødé \\u00e9 \\ud83d\\ude00 \u2028 ok?", "relevant_doc_ids": ["döc#1"], "tags": ["t\\u00e9", "x"]}',
    '{"id": "d", "question": "dup keys?", "question": "second wins?", "relevant_doc_ids": {"x": 1, "x": 2}}',
    '{"id": "e", "question": "oos", "type": "out_of_scope"}',
    '{"id": "f", "question": "empty cat", "category": "", "relevant_doc_ids": ["z"], "tags": []}',
    '{"id": "g", "question": "pending", "metadata": {"review": "pending"}}',
    '{"id": "h", "question": "texts", "relevant_texts": ["a passage"], "expected_keywords": ["k"]}',
    '{"id": "i", "question": "checks", "relevant_doc_ids": ["q"], "checks": {"max_words": 5}, "paraphrases": ["p"]}',
    '{"id": "j", "question": "grade max", "relevant_doc_ids": {"m": 1000}}',
    '{"id": "k", "question": "adv", "type": "adversarial", "relevant_doc_ids": []}',
    '{"id":"l","question":"compact","relevant_doc_ids":["c1"],"question_type":"simple"}',
]
BAD = [  # each refused, by the general path's words
    '{"id": "x1", "question": "bool grade", "relevant_doc_ids": {"d": true}}',
    '{"id": "x2", "question": "float grade", "relevant_doc_ids": {"d": 1.0}}',
    '{"id": "x3", "question": "zero grade", "relevant_doc_ids": {"d": 0}}',
    '{"id": "x4", "question": "huge grade", "relevant_doc_ids": {"d": 99999999999999999999999}}',
    '{"id": "x5", "question": "empty key", "relevant_doc_ids": {"": 1}}',
    '{"id": "x6", "question": "empty id in list", "relevant_doc_ids": ["a", ""]}',
    '{"id": "  ", "question": "blank id", "relevant_doc_ids": ["a"]}',
    '{"id": "x7", "question": "   ", "relevant_doc_ids": ["a"]}',
    '{"id": "x8", "question": "no labels"}',
    '{"id": "x9", "question": "empty labels", "relevant_doc_ids": []}',
    '{"id": "x10", "question": "bad type", "type": "other", "relevant_doc_ids": ["a"]}',
    '{"id": "x11", "question": "null type", "type": null, "relevant_doc_ids": ["a"]}',
    '{"id": "x12", "question": "unknown", "extra": 1, "relevant_doc_ids": ["a"]}',
    '{"id": 7, "question": "int id", "relevant_doc_ids": ["a"]}',
    '{"id": "x13", "question": "tags", "tags": "t", "relevant_doc_ids": ["a"]}',
    '"just a string"',
    '{"id": "a", "question": "duplicate of a", "relevant_doc_ids": ["a"]}',
    '{"id": "m", "question": "lone \\ud800 surrogate (the json module takes it, not UTF-8)", "relevant_doc_ids": ["a"]}',
]


def reference(path: Path) -> list[GoldenCase] | list[tuple[int | None, str]]:
    """The general path alone (iter_jsonl + parse_case, as load_golden_set read every line before): the cases, or
    the errors as (line, message)."""
    cases, errors, seen = [], [], {}
    try:
        for lineno, row in iter_jsonl(path):
            parsed = parse_case(row, lineno)
            if isinstance(parsed, str):
                errors.append((lineno, InputError(parsed, file=str(path), line=lineno).message))
            elif parsed.id in seen:
                message = f"duplicate id {parsed.id!r} (first at line {seen[parsed.id]})"
                errors.append((lineno, InputError(message, file=str(path), line=lineno).message))
            else:
                seen[parsed.id] = lineno
                cases.append(parsed)
    except InputError as exc:
        return [(exc.line, exc.message)]
    return errors or cases


def loaded(path: Path) -> list[GoldenCase] | list[tuple[int | None, str]]:
    try:
        return load_golden_set(path)
    except InputErrors as exc:
        return [(e.line, e.message) for e in exc.errors]
    except InputError as exc:
        return [(exc.line, exc.message)]


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "golden_set.jsonl"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_the_usual_lines_give_the_cases_the_general_path_gives(tmp_path: Path) -> None:
    path = write(tmp_path, "\n".join(LINES) + "\n")
    cases = load_golden_set(path)
    assert cases == reference(path)
    assert [c.line for c in cases] == list(range(1, len(LINES) + 1))
    by_id = {c.id: c for c in cases}
    assert by_id["a"].relevant == {"d1": 1, "d2": 1} and by_id["b"].relevant == {"d1": 3, "d2": 1}
    assert by_id["d"].question == "second wins?" and by_id["d"].relevant == {"x": 2}
    assert by_id["c"].question.startswith("Ünïcødé é \U0001f600") and by_id["c"].tags == ("té", "x")
    assert by_id["f"].category == "" and by_id["g"].pending_review
    assert by_id["l"].question_type == "simple"


@pytest.mark.parametrize("bad", BAD)
def test_a_refused_line_is_reported_with_its_line_as_before(tmp_path: Path, bad: str) -> None:
    lines = [LINES[0], "", bad, LINES[1]]
    path = write(tmp_path, "\n".join(lines))
    got = loaded(path)
    assert got == reference(path)
    assert got and all(isinstance(e, tuple) for e in got) and got[0][0] == 3  # type: ignore[index]


def test_bad_json_blank_lines_crlf_bom_and_a_last_line_without_newline(tmp_path: Path) -> None:
    body = "\r\n".join([LINES[0], "   ", "\t", LINES[1], LINES[2]])
    assert loaded(write(tmp_path, "\ufeff" + body)) == reference(tmp_path / "golden_set.jsonl")
    cases = load_golden_set(tmp_path / "golden_set.jsonl")
    assert [c.line for c in cases] == [1, 4, 5]
    for broken in ('{"id": "z", "question": "q", "relevant_doc_ids": ["a"]', '[{"id": "z"}]', '{"question": NaN}',
                   '{"id": "y", "question": "q", "relevant_doc_ids": ["a"]} {"x": 1}'):
        path = write(tmp_path, "\n".join([LINES[0], "", broken, LINES[1]]) + "\n")
        got = loaded(path)
        assert got == reference(path) and got[0][0] == 3, broken  # type: ignore[index]
    path = write(tmp_path, (LINES[0] + "\n").encode() + b'{"id": "q", "question": "\xff"}\n')
    assert loaded(path) == reference(path) == [(None, InputError("not UTF-8 text", file=str(path)).message)]
    path = write(tmp_path, "\n\n  \n")
    assert loaded(path) == [(None, InputError("the golden set is empty", file=str(path)).message)]


USUAL = [line for line in LINES if not any(f'"{k}"' in line for k in ("metadata", "relevant_texts", "checks", "question_type"))]


def test_a_file_of_usual_lines_is_decoded_in_one_call_to_the_cases_of_the_general_path(tmp_path: Path) -> None:
    from gate.io import golden

    assert len(USUAL) >= 9
    taken = {"\n".join(USUAL) + "\n": True, "\n".join(USUAL): True, "\r\n".join(USUAL) + "\r\n": True,
             "\r\n".join(USUAL[:3]) + "\n" + "\n".join(USUAL[3:]): False,  # CRLF not throughout
             "\n".join(USUAL) + "\n\n": False, "\n".join(USUAL[:2]) + "\n \n" + "\n".join(USUAL[2:]): False,
             "\ufeff" + "\n".join(USUAL): False, " " + "\n".join(USUAL): True,  # JSON space before the first line
             "\n".join(USUAL) + " \n": False,
             "\n".join(USUAL + [BAD[0]]): False, "\n".join(USUAL + [USUAL[0]]): True,  # a duplicate id: load_golden_set says it
             "\n".join([*USUAL, LINES[8]]): False, "\n".join([USUAL[0], BAD[-1]]): False}
    for text, whole in taken.items():
        path = write(tmp_path, text)
        assert (golden._whole_file(path) is not None) is whole, text
        got = loaded(path)
        assert got == reference(path), text
        if whole and text.count('"id": "a"') == 1:
            assert [c.line for c in got] == list(range(1, len(USUAL) + 1))  # type: ignore[union-attr]
    path = write(tmp_path, "")
    assert golden._whole_file(path) == [] and loaded(path) == [(None, InputError("the golden set is empty", file=str(path)).message)]
    path = write(tmp_path, ("\n".join(USUAL[:2]) + "\n").encode() + b'{"id": "q", "question": "\xff", "relevant_doc_ids": ["a"]}\n')
    assert golden._whole_file(path) is None and loaded(path) == reference(path)


def test_mutated_lines_agree(tmp_path: Path) -> None:
    rng = random.Random(5)
    for _ in range(300):
        line = rng.choice(LINES + BAD)
        pos = rng.randrange(len(line))
        mutated = line[:pos] + rng.choice(['"', "}", ",", "1", " ", "\\", "\u00e9", "", "null", "[", ":"]) + line[pos + 1:]
        path = write(tmp_path, mutated + "\n" + LINES[0].replace('"a"', '"zz"', 1) + "\n")
        assert loaded(path) == reference(path), mutated


def old_fingerprint(cases: list[GoldenCase]) -> str:
    """The fingerprint as it was written before: one list a case, encoded by the json module."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    rows = "".join(encode([c.id, c.question, c.ground_truth, sorted(c.relevant.items()), c.type,
                           *([list(c.relevant_texts)] if c.relevant_texts else []),
                           *([["keywords", list(c.expected_keywords)]] if c.expected_keywords else []),
                           *([["checks", repr(c.checks)]] if c.checks else []),
                           *([["paraphrases", list(c.paraphrases)]] if c.paraphrases else [])]) + "\n"
                   for c in sorted(cases, key=lambda c: c.id))
    return digest_text(rows)


def test_the_fingerprint_is_the_text_it_was(tmp_path: Path) -> None:
    cases = load_golden_set(write(tmp_path, "\n".join(LINES) + "\n"))
    tricky = [GoldenCase("q\"\\\n\t\x00\x1f\u2028", "\x7f é \U0001f600", 3, None, {"b": 2, "a": 1000, "\"": 1}),
              GoldenCase("w", "x", 4, "gt\r\n", {}, "out_of_scope", checks=AnswerChecks.read({"max_words": 3}))]
    for subset in (cases, tricky, cases + tricky, cases[:1]):
        assert fingerprint(subset) == old_fingerprint(subset)
    assert fingerprint(cases) != fingerprint(cases[1:])


def old_stale_labels(cases: list[GoldenCase], outputs: dict[str, TargetOutput], match: MatchSettings, cutoff: int) -> str | None:
    """The stale-label check as it was written before (one set of every retrieved id)."""
    to_id = match.to_id()
    known: set[str] = set()
    retrieved: set[str] = set()
    answered = [c for c in cases if c.answerable and outputs[c.id].error is None]
    if match.level != "text":
        known = {to_id(r) for c in cases for r in c.relevant}
    for c in answered:
        top = outputs[c.id].retrieved[:cutoff]
        if match.level == "text":
            ids, relevant = text_ids(c.relevant_texts, TargetOutput(c.id, top), match.min_overlap)
            known |= {f"{c.id}\x00{i}" for i in ids if i in relevant}
            retrieved |= {f"{c.id}\x00{i}" if i in relevant else i for i in ids}
        else:
            retrieved |= {to_id(d.id) for d in top}
    hits = len(retrieved & known)
    if len(retrieved) < 20 or hits * 100 >= len(retrieved):
        return None
    return f"{hits:,} of the {len(retrieved):,}"


@pytest.mark.parametrize("level", ["exact", "document"])
def test_the_stale_label_shortcut_agrees_with_the_whole_count(level: str) -> None:
    rng = random.Random(3)
    match = MatchSettings(level, "#", 0.5)
    outcomes = set()
    for trial in range(200):
        pool = [f"doc{i}#c{i % 3}" for i in range(rng.choice((30, 300, 3000)))]
        cases, outputs = [], {}
        for i in range(rng.randint(1, 40)):
            relevant = dict.fromkeys(rng.sample(pool, rng.randint(1, 3)), 1)
            kind = "answerable" if rng.random() < 0.9 else "out_of_scope"
            cases.append(GoldenCase(f"c{i}", "q", i + 1, relevant=relevant, type=kind))
            ids = [rng.choice(pool) for _ in range(rng.randint(0, 15))]  # repeated ids too
            if rng.random() < 0.02 * (trial % 10):
                ids[rng.randrange(len(ids)) if ids else 0:] = [next(iter(relevant))]
            outputs[f"c{i}"] = (TargetOutput.failed(f"c{i}", "boom") if rng.random() < 0.05
                                else TargetOutput(f"c{i}", [RetrievedDoc(d) for d in ids]))
        cutoff = rng.choice((1, 5, 10))
        got, want = stale_labels(cases, outputs, match, cutoff), old_stale_labels(cases, outputs, match, cutoff)
        assert (got is None) == (want is None)
        if got is not None:
            assert want in got
        outcomes.add(got is None)
    assert outcomes == {True, False}  # both answers were seen



def test_the_fingerprint_made_while_the_results_file_is_read_is_the_reports(tmp_path: Path) -> None:
    from gate.run.flow import run
    from gate.run.load import load
    from gate.run.options import RunOptions

    write(tmp_path, "\n".join(USUAL) + "\n")
    (tmp_path / "results.jsonl").write_text("".join(json.dumps({"id": c.id, "retrieved": [{"id": "d1", "score": 0.5}]}) + "\n"
                                                    for c in load_golden_set(tmp_path / "golden_set.jsonl")), encoding="utf-8")
    config = tmp_path / "rag-eval.yml"
    config.write_text("version: 1\ngolden_set: golden_set.jsonl\ntarget:\n  results: results.jsonl\n"
                      "stages:\n  retrieval:\n    metrics: [mrr]\n", encoding="utf-8")
    loaded = load(str(config), RunOptions())
    assert loaded.results_read is not None and loaded.fingerprint == fingerprint(loaded.cases)
    report = run(str(config))
    assert report["fingerprints"]["golden_set"] == fingerprint(load_golden_set(tmp_path / "golden_set.jsonl"))


def test_the_rows_made_into_cases_in_c_are_the_python_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gate.io import golden

    if golden._cases_of_rows is None:
        pytest.skip("gate.core._native is not built")
    rng = random.Random(17)
    spaces = ["", " ", "\u3000", "\x1c", "\t\n", "\u2028"]

    def row(i: int) -> dict:
        r: dict = {"question": rng.choice([f"Q{i}?", f"{rng.choice(spaces)}Q{i}{rng.choice(spaces)}", rng.choice(spaces)])}
        if rng.random() < 0.8:
            r["id"] = rng.choice([f"c{i}", f"c{i}", None, rng.choice(spaces), f" c{i} ", "ç"])
        rel = rng.choice([None, [f"d{i}", f"d{i + 1}"], [f"d{i}", ""], [], {f"d{i}": rng.choice([1, 3, 1000])},
                          {f"d{i}": rng.choice([0, 1001, 2**70, -1])}, {"": 1}, {f"d{i}": 2, f"e{i}": 1}])
        if rel is not None or rng.random() < 0.5:
            r["relevant_doc_ids"] = rel
        for key, values in (("type", ["answerable", "out_of_scope", "adversarial", "other"]), ("tags", [None, [], ["t"], ["a", "b"]]),
                            ("category", [None, "", "cards"]), ("ground_truth", [None, "", "yes"])):
            if rng.random() < 0.5:
                r[key] = rng.choice(values)
        return r

    made = 0
    for _ in range(300):
        rows = [row(i) for i in range(rng.randint(1, 6))]
        if rng.random() < 0.6:  # mostly rows every case takes, to reach the end of the file in C
            for r in rows:
                r.update(question="Q?", id=f"c{id(r)}", relevant_doc_ids=["d"], type="answerable")
        path = write(tmp_path, "\n".join(json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in rows) + "\n")
        in_c = golden._whole_file(path)
        monkeypatch.setattr(golden, "_cases_of_rows", None)
        in_python = golden._whole_file(path)
        monkeypatch.undo()
        assert in_c == in_python, rows
        if in_c is not None:
            made += 1
            assert in_c == reference(path)
            assert all(type(c.metadata) is dict for c in in_c) and len({id(c.metadata) for c in in_c}) == len(in_c)
    assert 150 < made < 300  # files taken in C, and files left to the line-by-line reading

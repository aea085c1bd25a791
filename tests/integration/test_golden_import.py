"""`rag-gate golden import` and `golden export` through the real CLI: RAGAS and DeepEval files written by the real
ragas and deepeval classes, a TREC topics and qrels pair written by hand (graded and grade-0 rows, a stray topic), a
spreadsheet through a column mapping; every dropped row said with its file and line, bad input refused with exit 2
naming the file and line and nothing written, and export then import the identity on the fields each format holds,
the exported files loaded by the real ragas and deepeval classes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gate.core.cases import derive_id
from gate.core.model import GoldenCase
from gate.io.golden import load_golden_set

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "golden_set.jsonl"


def rag_gate(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=ws, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


def imported(ws: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    proc = rag_gate(ws, "golden", "import", *args)
    assert proc.returncode == 0, proc.stderr
    out = ws / args[args.index("--out") + 1]
    return proc, [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n") if line]  # not splitlines: U+2028


def refused(ws: Path, *args: str) -> str:
    proc = rag_gate(ws, "golden", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


def golden_check_errors(ws: Path, golden: str) -> list[str]:
    """The codes of the errors `rag-gate golden check` finds in the written golden set (it loads: exit 0 or 1)."""
    (ws / "spec.yml").write_text(f"version: 1\ngolden_set: {golden}\ntarget:\n  results: results.jsonl\nstages:\n"
                                 "  retrieval:\n    metrics: [hit_rate@5]\n", encoding="utf-8")
    check = rag_gate(ws, "golden", "check", "--config", "spec.yml", "--json", "findings.json")
    assert check.returncode in (0, 1), check.stdout + check.stderr
    findings = json.loads((ws / "findings.json").read_text(encoding="utf-8"))["findings"]
    return [f["code"] for f in findings if f["level"] == "error"]


def passes_golden_check(ws: Path, golden: str) -> None:
    assert golden_check_errors(ws, golden) == []


def ragas_samples() -> list[Any]:
    from ragas.dataset_schema import SingleTurnSample

    return [SingleTurnSample(user_input="How long is a loan?", reference="21 days.", reference_contexts=["Loans, 21 days."],
                             reference_context_ids=["lending#1"], retrieved_contexts=["x"], response="3 weeks"),
            SingleTurnSample(user_input="Who runs the café?", reference="Volunteers.", reference_contexts=['The "café", run by '
                             "volunteers.", "It's open at 9."]),
            SingleTurnSample(user_input="What is the weather?", reference="No idea."),  # no contexts: dropped
            SingleTurnSample(user_input="How long is a loan?", reference="Three weeks.", reference_contexts=["Loans."])]


@pytest.mark.parametrize("form", ["jsonl", "json", "csv"])
def test_ragas_files_written_by_ragas_become_a_golden_set_the_loader_and_check_accept(tmp_path: Path, form: str) -> None:
    from ragas.dataset_schema import EvaluationDataset

    dataset = EvaluationDataset(samples=ragas_samples())
    path = tmp_path / f"ragas.{form}"
    if form == "jsonl":
        dataset.to_jsonl(path)
    elif form == "csv":
        dataset.to_csv(path)
    else:
        path.write_text(json.dumps(dataset.to_list(), indent=2), encoding="utf-8")
    proc, rows = imported(tmp_path, "--format", "ragas", "--in", path.name, "--out", "golden.jsonl")
    first = derive_id("How long is a loan?")
    assert rows == [
        {"id": first, "question": "How long is a loan?", "ground_truth": "21 days.", "relevant_doc_ids": ["lending#1"],
         "relevant_texts": ["Loans, 21 days."]},
        {"id": derive_id("Who runs the café?"), "question": "Who runs the café?", "ground_truth": "Volunteers.",
         "relevant_texts": ['The "café", run by volunteers.', "It's open at 9."]},
        {"id": first + "-2", "question": "How long is a loan?", "ground_truth": "Three weeks.", "relevant_texts": ["Loans."]}]
    where = ": item 3" if form == "json" else ":4" if form == "csv" else ":3"  # the CSV's header is its line 1
    assert f"dropped: {path.name}{where}: no 'reference_contexts' nor 'reference_context_ids'" in proc.stdout
    assert "3 id(s) derived from the question, 1 made unique, 1 row(s) dropped" in proc.stdout
    assert f"renamed: {path.name}{': item 4' if form == 'json' else ':5' if form == 'csv' else ':4'}: " in proc.stdout
    assert "match: {level: text}" in proc.stdout and "not imported: response, retrieved_contexts" in proc.stdout
    assert "(the same question as" in proc.stdout
    assert len(load_golden_set(tmp_path / "golden.jsonl")) == 3
    assert golden_check_errors(tmp_path, "golden.jsonl") == ["duplicate_question"]  # the question asked twice, said above


def deepeval_dataset() -> Any:
    from deepeval.dataset import EvaluationDataset, Golden

    return EvaluationDataset(goldens=[
        Golden(input="How long is a loan?", expected_output="21 days.", context=["Loans last 21 days.", "Renew twice."],
               retrieval_context=["what a run retrieved"], name="loan", additional_metadata={"owner": "ann"}),
        Golden(input="Who runs the café?", expected_output="Volunteers.", context=["Volunteers run the café."]),
        Golden(input="No context here?", expected_output="Dropped.")])


@pytest.mark.parametrize("form", ["json", "jsonl", "csv"])
def test_deepeval_files_written_by_save_as_become_a_golden_set(tmp_path: Path, form: str) -> None:
    written = Path(deepeval_dataset().save_as(form, directory=str(tmp_path), file_name="goldens"))
    proc, rows = imported(tmp_path, "--format", "deepeval", "--in", written.name, "--out", "golden.jsonl")
    assert rows == [
        {"id": "loan", "question": "How long is a loan?", "ground_truth": "21 days.",
         "relevant_texts": ["Loans last 21 days.", "Renew twice."], "metadata": {"owner": "ann"}},
        {"id": derive_id("Who runs the café?"), "question": "Who runs the café?", "ground_truth": "Volunteers.",
         "relevant_texts": ["Volunteers run the café."]}]
    where = {"json": ": item 3", "jsonl": ":3", "csv": ":4"}[form]
    assert f"dropped: {written.name}{where}: no 'context' (the ideal contexts)" in proc.stdout
    assert "not imported: retrieval_context" in proc.stdout
    passes_golden_check(tmp_path, "golden.jsonl")


TOPICS = """<top>
<num> Number: 301
<title> International Organized Crime
<desc> Description:
Identify organizations that take part in international crime.
<narr> Narrative:
A relevant document names an organization.
</top>

<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio
</top>

<top>
<num> Number: 303
<title> Hubble Telescope Achievements
</top>

<top>
<num> Number: 304
<title> Endangered Species (Mammals)
</top>
"""
QRELS = "301 0 FBIS3-10082 1\n301 0 FBIS3-10169 0\n301 0 FT921-7107 2\n302 0 LA010189-0018 0\n304 0 FR940104-0-00001 1\n" \
        "999 0 FT911-1 1\n999 0 FT911-2 2\n"


def test_trec_topics_and_qrels_keep_grades_and_say_every_drop(tmp_path: Path) -> None:
    (tmp_path / "topics.txt").write_text(TOPICS, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    proc, rows = imported(tmp_path, "--format", "trec", "--topics", "topics.txt", "--qrels", "qrels.txt", "--out", "golden.jsonl")
    assert rows == [
        {"id": "301", "question": "International Organized Crime", "relevant_doc_ids": {"FBIS3-10082": 1, "FT921-7107": 2},
         "metadata": {"description": "Identify organizations that take part in international crime.",
                      "narrative": "A relevant document names an organization."}},
        {"id": "304", "question": "Endangered Species (Mammals)", "relevant_doc_ids": {"FR940104-0-00001": 1}}]
    dropped = [line for line in proc.stdout.splitlines() if line.startswith("dropped: ")]
    assert dropped == [
        "dropped: topics.txt:10: topic 302 has only grade-0 judgements (1) in the qrels: an answerable case needs a "
        "relevant document",
        "dropped: topics.txt:15: topic 303 has no judgement in the qrels: an answerable case needs a relevant document",
        "dropped: qrels.txt:6 (and 1 more line(s)): a judgement for topic 999, which the topics do not hold"]
    assert "0 id(s) derived" in proc.stdout and "graded relevance" in proc.stdout
    passes_golden_check(tmp_path, "golden.jsonl")


def test_trec_tsv_queries_and_binary_qrels_give_lists(tmp_path: Path) -> None:
    (tmp_path / "queries.tsv").write_text("1048585\twhat is paula deen's brother\n2\tandrew jackson\n", encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("1048585\t0\t7187158\t1\n2\t0\t88\t1\n2\t0\t89\t1\n", encoding="utf-8")
    _, rows = imported(tmp_path, "--format", "trec", "--topics", "queries.tsv", "--qrels", "qrels.tsv", "--out", "g.jsonl")
    assert rows == [{"id": "1048585", "question": "what is paula deen's brother", "relevant_doc_ids": ["7187158"]},
                    {"id": "2", "question": "andrew jackson", "relevant_doc_ids": ["88", "89"]}]


SHEET = ('Question,Expected,Doc IDs,Kind,Owner\n'
         '"How long, exactly, is a loan?",21 days.,lending#1; lending#2,,ann\n'
         ',,,,\n'
         ',orphan answer,lending#3,,bob\n'
         'What is the weather?,,,out_of_scope,\n'
         '"A question\nover two lines?",Yes.,faq#9,answerable,\n'
         'No documents?,None.,,,carol\n')
MAPPING = "question=Question,ground_truth=Expected,relevant_doc_ids=Doc IDs,type=Kind,metadata.owner=Owner"


def test_a_spreadsheet_through_a_column_mapping(tmp_path: Path) -> None:
    (tmp_path / "sheet.csv").write_text(SHEET, encoding="utf-8")
    proc, rows = imported(tmp_path, "--format", "csv", "--in", "sheet.csv", "--map", MAPPING, "--out", "golden.jsonl")
    assert rows == [
        {"id": derive_id("How long, exactly, is a loan?"), "question": "How long, exactly, is a loan?", "ground_truth": "21 days.",
         "relevant_doc_ids": ["lending#1", "lending#2"], "metadata": {"owner": "ann"}},
        {"id": derive_id("What is the weather?"), "question": "What is the weather?", "type": "out_of_scope"},
        {"id": derive_id("A question\nover two lines?"), "question": "A question\nover two lines?", "ground_truth": "Yes.",
         "relevant_doc_ids": ["faq#9"], "type": "answerable"}]
    dropped = [line for line in proc.stdout.splitlines() if line.startswith("dropped: ")]
    assert [d.split(": ")[1] for d in dropped] == ["sheet.csv:3", "sheet.csv:4", "sheet.csv:8"]
    assert "an empty row" in dropped[0] and "the column 'Question' is empty" in dropped[1]
    assert "needs a non-empty 'relevant_doc_ids'" in dropped[2]
    passes_golden_check(tmp_path, "golden.jsonl")


def test_bad_input_exits_2_naming_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "sheet.csv").write_text(SHEET, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text('{"question": "kept as it was", "type": "out_of_scope"}\n', encoding="utf-8")
    before = (tmp_path / "golden.jsonl").read_bytes()
    said = refused(tmp_path, "import", "--format", "csv", "--in", "sheet.csv", "--map", "question=Question,ground_truth=Answer",
                   "--out", "golden.jsonl")
    assert "sheet.csv:1: --map names the column 'Answer', which the header does not have" in said
    (tmp_path / "bad.jsonl").write_text('{"user_input": "fine", "reference_contexts": ["c"]}\n{"user_input": oops}\n',
                                        encoding="utf-8")
    assert "bad.jsonl:2: invalid JSON" in refused(tmp_path, "import", "--format", "ragas", "--in", "bad.jsonl", "--out", "golden.jsonl")
    assert "missing.json: file not found" in refused(tmp_path, "import", "--format", "deepeval", "--in", "missing.json",
                                                     "--out", "golden.jsonl")
    said = refused(tmp_path, "import", "--format", "csv", "--in", "sheet.csv", "--map", MAPPING, "--strict", "--out", "golden.jsonl")
    assert "sheet.csv:3: an empty row (--strict" in said and "sheet.csv:8:" in said
    (tmp_path / "qrels.txt").write_text("301 0 D1\n", encoding="utf-8")
    (tmp_path / "topics.txt").write_text(TOPICS, encoding="utf-8")
    assert "qrels.txt:1: expected 4 columns" in refused(tmp_path, "import", "--format", "trec", "--topics", "topics.txt",
                                                        "--qrels", "qrels.txt", "--out", "golden.jsonl")
    assert "--out: ./sheet.csv is the input sheet.csv" in refused(tmp_path, "import", "--format", "csv", "--in", "sheet.csv", "--map",
                                                         MAPPING, "--out", "./sheet.csv")
    assert "trec reads two files" in refused(tmp_path, "import", "--format", "trec", "--in", "topics.txt", "--out", "g.jsonl")
    assert (tmp_path / "golden.jsonl").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "golden.jsonl", "qrels.txt", "sheet.csv", "topics.txt"]


def without_line(cases: list[GoldenCase]) -> list[GoldenCase]:
    return [replace(c, line=0) for c in cases]


def test_deepeval_export_loads_in_deepeval_and_imports_back_unchanged(tmp_path: Path) -> None:
    from deepeval.dataset import EvaluationDataset

    original = load_golden_set(QUICKSTART)
    for name in ("goldens.json", "goldens.jsonl"):
        proc = rag_gate(tmp_path, "golden", "export", "--format", "deepeval", "--golden", str(QUICKSTART), "--out", name)
        assert proc.returncode == 0, proc.stderr
        assert f"wrote 40 golden(s) to {name}" in proc.stdout and "not carried" not in proc.stdout
        dataset = EvaluationDataset()
        (dataset.add_goldens_from_json_file if name.endswith(".json") else dataset.add_goldens_from_jsonl_file)(str(tmp_path / name))
        assert [g.input for g in dataset.goldens] == [c.question for c in original]
        assert [g.name for g in dataset.goldens] == [c.id for c in original]
        assert [g.expected_output for g in dataset.goldens] == [c.ground_truth for c in original]
        imported(tmp_path, "--format", "deepeval", "--in", name, "--out", "back.jsonl")
        assert without_line(load_golden_set(tmp_path / "back.jsonl")) == without_line(original)


def test_ragas_export_loads_in_ragas_and_imports_back_on_what_ragas_holds(tmp_path: Path) -> None:
    from ragas.dataset_schema import EvaluationDataset

    (tmp_path / "rag-eval.yml").write_text(f"version: 1\ngolden_set: {QUICKSTART}\ntarget:\n  results: r.jsonl\n"
                                           "stages:\n  retrieval:\n    metrics: [hit_rate@5]\n", encoding="utf-8")
    proc = rag_gate(tmp_path, "golden", "export", "--format", "ragas", "--out", "samples.jsonl")  # the spec's golden_set
    assert proc.returncode == 0, proc.stderr
    assert "wrote 40 sample(s) to samples.jsonl" in proc.stdout
    assert "not carried (a RAGAS sample has no place for them): id of 40 case(s), type of 8 case(s)" in proc.stdout
    assert "note: 8 sample(s) hold the question alone" in proc.stdout and "drops such samples" in proc.stdout  # said before import
    original = load_golden_set(QUICKSTART)
    samples = EvaluationDataset.from_jsonl(tmp_path / "samples.jsonl").samples
    assert [s.user_input for s in samples] == [c.question for c in original]
    assert [s.reference_context_ids or [] for s in samples] == [list(c.relevant) for c in original]
    proc, rows = imported(tmp_path, "--format", "ragas", "--in", "samples.jsonl", "--out", "back.jsonl")
    answerable = [c for c in original if c.answerable]
    back = load_golden_set(tmp_path / "back.jsonl")
    fields = ("question", "ground_truth", "relevant_texts")
    assert [[getattr(c, f) for f in fields] + [list(c.relevant)] for c in back] == \
           [[getattr(c, f) for f in fields] + [list(c.relevant)] for c in answerable]
    assert "8 row(s) dropped" in proc.stdout  # the out_of_scope and adversarial cases: RAGAS has no place for their type


def test_line_separators_inside_a_cell_and_a_long_cell_stay_in_their_row(tmp_path: Path) -> None:
    """U+2028 and U+0085 are no line ends in a CSV (str.splitlines took them for some); a cell over Python's csv limit
    of 131,072 characters (a long passage) is read."""
    long = "x" * 200_000
    (tmp_path / "sheet.csv").write_text(f"question,ground_truth,relevant_texts\nIs it A\u2028or B?,Both\u0085of them.,{long}\n",
                                        encoding="utf-8")
    _, rows = imported(tmp_path, "--format", "csv", "--in", "sheet.csv", "--out", "golden.jsonl")
    assert [(r["question"], r["ground_truth"], len(r["relevant_texts"][0])) for r in rows] == [
        ("Is it A\u2028or B?", "Both\u0085of them.", 200_000)]
    assert [c.question for c in load_golden_set(tmp_path / "golden.jsonl")] == ["Is it A\u2028or B?"]  # and it loads


COVID_TOPICS = """<topics>
<topic number="1">
  <query>coronavirus origin</query>
  <question>what is the origin of COVID-19</question>
  <narrative>seeking range of information about the SARS-CoV-2 virus's origin</narrative>
</topic>
<topic number="2">
  <query>coronavirus response to weather changes</query>
  <question>how does the coronavirus respond to changes in the weather</question>
</topic>
</topics>
"""


def test_trec_covid_topics_keep_each_field_apart_and_the_question_field_can_be_asked(tmp_path: Path) -> None:
    (tmp_path / "topics.xml").write_text(COVID_TOPICS, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text("1 0.5 010vptx3 2\n2 0 01goni72 1\n02 0 x 1\n", encoding="utf-8")
    proc, rows = imported(tmp_path, "--format", "trec", "--topics", "topics.xml", "--qrels", "qrels.txt", "--out", "g.jsonl")
    assert [r["question"] for r in rows] == ["coronavirus origin", "coronavirus response to weather changes"]
    assert rows[0]["metadata"]["question"] == "what is the origin of COVID-19"
    assert "topic 02, which the topics do not hold (the topics have '2': the numbers must be written alike)" in proc.stdout
    _, asked = imported(tmp_path, "--format", "trec", "--topics", "topics.xml", "--qrels", "qrels.txt", "--query-field",
                        "question", "--out", "q.jsonl")
    assert [r["question"] for r in asked] == ["what is the origin of COVID-19", "how does the coronavirus respond to changes in the weather"]


def test_the_qrels_of_a_dropped_topic_are_not_called_strays(tmp_path: Path) -> None:
    (tmp_path / "topics.tsv").write_text("1\tfirst\n2\t\n", encoding="utf-8")
    (tmp_path / "qrels.txt").write_text("1 0 a 1\n2 0 b 1\n", encoding="utf-8")
    proc, rows = imported(tmp_path, "--format", "trec", "--topics", "topics.tsv", "--qrels", "qrels.txt", "--out", "g.jsonl")
    assert [r["id"] for r in rows] == ["1"]
    dropped = [line for line in proc.stdout.splitlines() if line.startswith("dropped: ")]
    assert dropped == ["dropped: topics.tsv:2: topic 2 has no text"]


def test_the_output_is_never_put_in_place_of_a_device_and_a_link_is_written_through(tmp_path: Path) -> None:
    (tmp_path / "sheet.csv").write_text("question,relevant_doc_ids\nQ?,d1\n", encoding="utf-8")
    said = refused(tmp_path, "import", "--format", "csv", "--in", "sheet.csv", "--out", "/dev/full")
    assert "/dev/full: is a character device, not a regular file" in said
    assert Path("/dev/full").is_char_device()
    (tmp_path / "real.jsonl").write_text("old\n", encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    imported(tmp_path, "--format", "csv", "--in", "sheet.csv", "--out", "link.jsonl")
    assert (tmp_path / "link.jsonl").is_symlink() and json.loads((tmp_path / "real.jsonl").read_text(encoding="utf-8"))["question"] == "Q?"


def test_export_refuses_to_overwrite_the_spec_and_to_write_json_lines_under_another_name(tmp_path: Path) -> None:
    (tmp_path / "golden.jsonl").write_text(QUICKSTART.read_text(encoding="utf-8"), encoding="utf-8")
    spec = "version: 1\ngolden_set: golden.jsonl\ntarget:\n  results: r.jsonl\nstages:\n  retrieval:\n    metrics: [mrr]\n"
    (tmp_path / "rag-eval.yml").write_text(spec, encoding="utf-8")
    said = refused(tmp_path, "export", "--format", "deepeval", "--config", "rag-eval.yml", "--out", "rag-eval.yml")
    assert "--out: must end in .jsonl (JSON lines) or .json (a JSON list), got 'rag-eval.yml'" in said
    assert (tmp_path / "rag-eval.yml").read_text(encoding="utf-8") == spec
    said = refused(tmp_path, "export", "--format", "ragas", "--config", "rag-eval.yml", "--out", "ragas.csv")
    assert "--out: must end in .jsonl (JSON lines) or .json (a JSON list), got 'ragas.csv'" in said
    assert not (tmp_path / "ragas.csv").exists()


def test_keys_no_field_is_read_from_are_said_and_a_ragas_id_is_kept(tmp_path: Path) -> None:
    rows = [{"id": "r1", "user_input": "How long is a loan?", "reference": "21 days", "reference_contexts": ["Loans: 21 days."],
             "source_file": "handbook.pdf", "difficulty": "easy"},
            {"user_input": "What is a fine?", "reference_contexts": ["Fines: 10 cents."], "response": "10 cents"}]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc, out = imported(tmp_path, "--format", "ragas", "--in", "samples.jsonl", "--out", "g.jsonl")
    assert [r["id"] for r in out] == ["r1", derive_id("What is a fine?")]
    assert "note: not imported: 'difficulty', 'source_file' (no golden field is read from them in a ragas file)" in proc.stdout
    assert "note: not imported: response (what a system once retrieved or answered is no label)" in proc.stdout

"""The pure conversions of `golden import` / `golden export` (gate.core.goldenformats) and the TREC and CSV readers'
text parsing (gate.io.goldenformats): rows -> golden rows or the reason each is dropped, ids derived and made unique,
and the export's inverse on the fields each format has."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.core import goldenformats as gf
from gate.core.cases import derive_id, parse_case
from gate.core.errors import InputError
from gate.core.goldenformats import Record
from gate.core.goldentrec import Qrel, from_trec
from gate.core.model import GoldenCase
from gate.io.goldenformats import parse_qrels, parse_topics, read_csv


def case(row: dict) -> GoldenCase:
    parsed = parse_case(row)
    assert not isinstance(parsed, str), parsed
    return parsed


def test_a_ragas_sample_maps_reference_to_ground_truth_ids_and_contexts() -> None:
    row = gf.from_ragas({"user_input": "Q?", "reference": "A.", "reference_contexts": ["c1", "c2"],
                         "reference_context_ids": ["d1", "d1", "d2"], "response": "r", "retrieved_contexts": ["x"]})
    assert row == {"question": "Q?", "ground_truth": "A.", "relevant_doc_ids": ["d1", "d2"], "relevant_texts": ["c1", "c2"]}


def test_ragas_lists_written_as_python_text_by_to_csv_are_read() -> None:
    row = gf.from_ragas({"user_input": "Q?", "reference_contexts": "[\"it's\", 'x, \"y\"']", "reference_context_ids": '["a"]'})
    assert isinstance(row, dict)
    assert row["relevant_texts"] == ["it's", 'x, "y"'] and row["relevant_doc_ids"] == ["a"]


def test_numpy_arrays_written_by_a_hugging_face_datasets_to_csv_are_one_item_a_string() -> None:
    """``Dataset.to_csv`` writes a list column as numpy's repr: no commas, lines wrapped. Python would read the
    adjacent literals as one string."""
    text = "['Loans last 21 days.' 'Renew twice.'\n 'Fines are 10 cents.']"
    row = gf.from_ragas({"user_input": "Q?", "reference_contexts": text})
    assert isinstance(row, dict) and row["relevant_texts"] == ["Loans last 21 days.", "Renew twice.", "Fines are 10 cents."]
    row = gf.from_ragas({"user_input": "Q?", "reference_contexts": "['it' 's']"})
    assert isinstance(row, dict) and row["relevant_texts"] == ["it", "s"]


def test_a_deepeval_context_that_starts_with_a_bracket_is_text() -> None:
    row = gf.from_deepeval({"input": "Q?", "context": "[1] Loans last 21 days.|[2] Renew twice."})
    assert isinstance(row, dict) and row["relevant_texts"] == ["[1] Loans last 21 days.", "[2] Renew twice."]
    row = gf.from_deepeval({"input": "Q?", "context": "[1] Loans last 21 days. [see 2]"})
    assert isinstance(row, dict) and row["relevant_texts"] == ["[1] Loans last 21 days. [see 2]"]


def test_a_testset_sample_keeps_its_synthesizer_as_question_type_and_metadata() -> None:
    row = gf.from_ragas({"user_input": "Q?", "reference_contexts": ["c"], "synthesizer_name": "multi_hop_abstract_query_synthesizer"})
    assert isinstance(row, dict)
    assert row["question_type"] == "multi_context"
    assert row["metadata"] == {"synthesizer_name": "multi_hop_abstract_query_synthesizer"}


@pytest.mark.parametrize(("value", "said"), [
    ({"reference": "A"}, "no question"),
    ({"user_input": "  "}, "no question"),
    ({"user_input": [{"content": "hi", "type": "human"}]}, "multi-turn"),
    ({"user_input": "Q?", "reference": "A"}, "an answerable case needs"),
    ({"user_input": "Q?", "reference": 3, "reference_contexts": ["c"]}, "'reference' must be a string"),
    ({"user_input": "Q?", "reference_contexts": "[broken"}, "neither JSON nor Python"),
    ({"user_input": 42, "reference_contexts": ["c"]}, "'user_input' must be a string (the question), got a number"),
    ({"user_input": "Q?", "reference_contexts": [1.5]}, "list of strings"),
    (["not", "a", "sample"], "must be an object"),
])
def test_a_ragas_sample_that_cannot_be_a_case_says_why(value: object, said: str) -> None:
    why = gf.from_ragas(value)
    assert isinstance(why, str) and said in why


def test_a_deepeval_golden_reads_name_context_and_its_rag_gate_block() -> None:
    row = gf.from_deepeval({"input": "Q?", "expected_output": "A.", "context": "c1|c2| ", "name": "case-7",
                            "actual_output": "ignored", "retrieval_context": ["ignored"],
                            "additional_metadata": '{"owner": "ann", "rag_gate": {"tags": ["t"], "category": "billing", '
                                                   '"relevant_doc_ids": {"d1": 2}, "metadata": {"team": "x"}}}'})
    assert row == {"id": "case-7", "question": "Q?", "ground_truth": "A.", "relevant_texts": ["c1", "c2"], "tags": ["t"],
                   "category": "billing", "relevant_doc_ids": {"d1": 2}, "metadata": {"owner": "ann", "team": "x"}}


@pytest.mark.parametrize(("value", "said"), [
    ({"scenario": "a user asks", "turns": []}, "conversational"),
    ({"input": "Q?"}, "an answerable case needs"),
    ({"input": "Q?", "context": ["c"], "additional_metadata": "not json"}, "must be a JSON object"),
    ({"input": "Q?", "context": ["c"], "additional_metadata": {"rag_gate": {"colour": "red"}}}, "unknown field 'colour'"),
    ({"input": "Q?", "expected_output": ["A"], "context": ["c"]}, "'expected_output' must be a string"),
])
def test_a_deepeval_golden_that_cannot_be_a_case_says_why(value: object, said: str) -> None:
    why = gf.from_deepeval(value)
    assert isinstance(why, str) and said in why


def test_an_out_of_scope_deepeval_golden_needs_no_context() -> None:
    row = gf.from_deepeval({"input": "Weather?", "additional_metadata": {"rag_gate": {"type": "out_of_scope"}}})
    assert row == {"question": "Weather?", "type": "out_of_scope"}


def test_finish_derives_ids_as_the_loader_does_makes_them_unique_and_checks_each_row() -> None:
    out = gf.finish([("f line 1", {"question": "Same?", "relevant_texts": ["x"]}),
                     ("f line 2", {"question": "Same?", "relevant_texts": ["y"]}),
                     ("f line 3", "an empty row"),
                     ("f line 4", {"question": "Bad type", "type": "maybe", "relevant_texts": ["x"]}),
                     ("f line 5", {"id": "k", "question": "Other?", "relevant_doc_ids": ["d"]}),
                     ("f line 6", {"id": "k", "question": "Third?", "relevant_doc_ids": ["d"]}),
                     ("f line 7", {"id": "k-2", "question": "Fourth?", "relevant_doc_ids": ["d"]})])
    ids = [r["id"] for r in out.rows]
    # the file's own k-2 keeps its id: the second k becomes k-3, not the k-2 a later row holds
    assert ids == [derive_id("Same?"), derive_id("Same?") + "-2", "k", "k-3", "k-2"]
    assert out.derived == 2
    assert out.renamed == [("f line 2", derive_id("Same?"), derive_id("Same?") + "-2", "the same question as f line 1"),
                           ("f line 6", "k", "k-3", "the id of f line 5")]
    assert [w for w, _ in out.dropped] == ["f line 3", "f line 4"]
    assert "'type' must be one of" in out.dropped[1][1]
    assert all(not isinstance(parse_case(r), str) for r in out.rows)


def test_trec_keeps_grades_when_one_is_above_one_and_drops_what_has_no_relevant_document() -> None:
    topics = [Record("t line 1", {"id": "301", "question": "Crime"}), Record("t line 5", {"id": "302", "question": "Polio"}),
              Record("t line 9", {"id": "303", "question": "Hubble"}), Record("t line 12", "topic 304 has no title")]
    qrels = [Qrel("q line 1", "301", "D1", 1), Qrel("q line 2", "301", "D2", 0), Qrel("q line 3", "301", "D3", 2),
             Qrel("q line 4", "302", "D4", 0), Qrel("q line 5", "999", "D5", 1), Qrel("q line 6", "999", "D6", 1),
             Qrel("q line 7", "301", "D1", 3), Qrel("q line 8", "303", "D7", -1)]
    rows, notes = from_trec(topics, qrels)
    by_where = dict(rows)
    assert by_where["t line 1"] == {"id": "301", "question": "Crime", "relevant_doc_ids": {"D1": 3, "D3": 2}}
    assert "only grade-0 judgements" in str(by_where["t line 5"])
    assert "only grade-0 judgements" in str(by_where["t line 9"])  # -1: not relevant either
    assert by_where["t line 12"] == "topic 304 has no title"
    assert "topic 999, which the topics do not hold" in str(by_where["q line 5 (and 1 more line(s))"])
    assert notes == ["1 judgement(s) repeated in the qrels: the highest grade kept"]


def test_binary_qrels_give_a_list() -> None:
    rows, _ = from_trec([Record("t", {"id": "1", "question": "Q"})], [Qrel("q", "1", "a", 1), Qrel("q", "1", "b", 1)])
    assert rows == [("t", {"id": "1", "question": "Q", "relevant_doc_ids": ["a", "b"]})]


CLASSIC = """<top>
<num> Number: 301
<title> International
  Organized Crime
<desc> Description:
Identify organizations.
<narr> Narrative:
A relevant document names one.
</top>
<top>
<num> Number: 302
<desc> Description:
Only a description.
</top>
"""


def test_classic_topics_read_with_their_line_and_the_other_fields_as_metadata() -> None:
    records = parse_topics(CLASSIC, "topics.txt")
    assert records[0] == Record("topics.txt:1", {"id": "301", "question": "International Organized Crime", "metadata": {
        "description": "Identify organizations.", "narrative": "A relevant document names one."}})
    assert records[1] == Record("topics.txt:10", "topic 302 has no title")
    by_desc = parse_topics(CLASSIC, "topics.txt", "description")
    assert by_desc[1].value == {"id": "302", "question": "Only a description."}


def test_topic_number_attribute_form_and_tsv_form() -> None:
    xml = '<topics>\n<topic number="7" type="faceted">\n<query>obama family tree</query>\n' \
          '<description>Find the family tree.</description>\n</topic>\n</topics>\n'
    assert parse_topics(xml, "t.xml")[0].value == {"id": "7", "question": "obama family tree",
                                                   "metadata": {"description": "Find the family tree."}}
    tsv = "query_id\ttext\n1048585\twhat is paula deen's brother\n\n2\t\n"
    assert [r.value for r in parse_topics(tsv, "q.tsv")] == [{"id": "1048585", "question": "what is paula deen's brother"},
                                                             "topic 2 has no text"]
    assert parse_topics(tsv, "q.tsv")[0].where == "q.tsv:2"


@pytest.mark.parametrize(("text", "line", "said"), [
    ("1\tfine\njust words\n", 2, "qid<TAB>text"),
    ("<top>\n<title> no number\n</top>\n", 1, "without a number"),
])
def test_unreadable_topics_name_the_line(text: str, line: int, said: str) -> None:
    with pytest.raises(InputError) as err:
        parse_topics(text, "topics.txt")
    assert (err.value.file, err.value.line) == ("topics.txt", line) and said in err.value.message


@pytest.mark.parametrize(("text", "line", "said"), [
    ("1 0 d 1\n1 d 1\n", 2, "expected 4 columns"),
    ("1 0 d 1\n\n1 0 e high\n", 3, "whole number, got 'high'"),
    ("\n\n", None, "no judgement"),
])
def test_unreadable_qrels_name_the_line(text: str, line: int | None, said: str) -> None:
    with pytest.raises(InputError) as err:
        parse_qrels(text, "qrels.txt")
    assert err.value.line == line and said in err.value.message


def test_csv_mapping_lists_metadata_and_the_header_check(tmp_path: Path) -> None:
    path = tmp_path / "sheet.csv"
    path.write_text('Question,Expected,Doc IDs,Owner\n"Loan, how long?",3 weeks,a; b;;a,ann\n,,,\n', encoding="utf-8")
    header, rows = read_csv(path)
    mapping = gf.parse_mapping("question=Question,ground_truth=Expected,relevant_doc_ids=Doc IDs,metadata.owner=Owner",
                               header, str(path))
    first = gf.from_cells(dict(zip(header, rows[0][1])), mapping, ";")
    assert first == {"question": "Loan, how long?", "ground_truth": "3 weeks", "relevant_doc_ids": ["a", "b"],
                     "metadata": {"owner": "ann"}}
    assert [line for line, _ in rows] == [2, 3]
    assert gf.from_cells(dict(zip(header, rows[1][1])), mapping, ";") == "an empty row"
    with pytest.raises(InputError) as err:
        gf.parse_mapping("question=Question,ground_truth=Answer", header, str(path))
    assert err.value.line == 1 and "'Answer'" in err.value.message
    with pytest.raises(InputError) as err:
        gf.parse_mapping("answer=Expected", header, str(path))
    assert err.value.key == "--map" and "'answer' is no golden field" in err.value.message
    with pytest.raises(InputError, match="no column gives the question"):
        gf.parse_mapping(None, header, str(path))  # no column is named as a field


def test_a_csv_row_longer_than_its_header_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("question,relevant_doc_ids\nQ1,d1\nQ2,d2,extra\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_csv(path)
    assert err.value.line == 3 and "is the delimiter ',' right?" in err.value.message


FULL = {"id": "c1", "question": "Q?", "ground_truth": "A.", "relevant_doc_ids": {"d1": 2, "d2": 1}, "relevant_texts": ["t"],
        "type": "answerable", "tags": ["x"], "category": "cat", "question_type": "simple", "expected_keywords": ["k"],
        "checks": {"must_contain": ["A"], "max_words": 20}, "paraphrases": ["q"], "metadata": {"owner": "ann"}}


def test_deepeval_export_then_import_is_the_identity_on_every_field() -> None:
    for row in (FULL, {"id": "o", "question": "Weather?", "type": "out_of_scope"}, {"question": "Q2", "relevant_doc_ids": ["a"]}):
        original = case(row)
        back = gf.finish([("x", gf.from_deepeval(gf.to_deepeval(original)))])
        assert back.dropped == []
        assert case(back.rows[0]) == original


def test_ragas_export_then_import_is_the_identity_on_what_ragas_holds_and_counts_the_rest() -> None:
    original = case(FULL)
    back = case(gf.finish([("x", gf.from_ragas(gf.to_ragas(original)))]).rows[0])
    same = ("question", "ground_truth", "relevant_texts")
    assert [getattr(back, k) for k in same] == [getattr(original, k) for k in same]
    assert list(back.relevant) == list(original.relevant)  # the ids; RAGAS holds no grades
    assert back.id == derive_id("Q?")
    lost = gf.not_carried([original], "ragas")
    assert lost == {"id": 1, "tags": 1, "category": 1, "question_type": 1, "expected_keywords": 1, "checks": 1,
                    "paraphrases": 1, "metadata": 1, "relevance grades": 1}
    assert gf.not_carried([original], "deepeval") == {}


def test_an_id_the_file_gives_is_never_taken_by_a_derived_or_renamed_one() -> None:
    derived = derive_id("Where?")
    out = gf.finish([("f line 1", {"question": "Where?", "relevant_texts": ["x"]}),
                     ("f line 2", {"id": derived, "question": "Elsewhere?", "relevant_texts": ["y"]})])
    assert [r["id"] for r in out.rows] == [derived + "-2", derived]
    assert out.renamed == [("f line 1", derived, derived + "-2", "the id of f line 2")]

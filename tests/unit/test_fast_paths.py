"""The fast paths of a large run, held to the slow ones they replace (issue 13: scoring at C speed).

* ``gate.io.jsonparse.parse`` reads with msgspec first and falls back to the json module (``strict``): every text,
  valid or not, gets the same value or the same BadJSON (message, line, column) as ``strict`` alone gives it.
* ``ResultsFileTarget`` decodes a line of the usual shape straight into its passages (``fast_as``); any other line goes
  through dicts and ``parse_output``: the outputs, notes and input errors of a file are those of the dict path alone.
* ``report_json`` above 1,000 cases is written by msgspec's encoder: the same JSON value as json's encoder; a report
  holding NaN or an infinity, or a string msgspec refuses, is written by json as before.
* The retrieval stage finds each relevant id's rank by looking it up (``first_ranks``, ``CaseScorer.from_ranks``):
  the same ranks and the same metric values, to the last bit, as walking the de-duplicated list.
"""

from __future__ import annotations

import gc
import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gate.core.catalog import parse_metric
from gate.core.errors import InputError, InputErrors
from gate.core.model import GoldenCase
from gate.core.ranking import CaseScorer, aggregate, dedupe, first_ranks
from gate.io import jsonparse
from gate.io.golden import load_golden_set
from gate.io.jsonparse import BadJSON, parse, strict
from gate.io.reports import _NOT_FINITE, COMPACT_ABOVE, SELF_CHECK, fast_compact_json, report_json
from gate.run.flow import gc_paused
from gate.targets import results as results_module
from gate.targets.results import ResultsFileTarget

SEED = 1313

# --------------------------------------------------------------------------- the JSON parser


def outcome(fn: Any, text: str, max_depth: int | None) -> tuple[Any, ...]:
    """What a parser makes of a text, exactly: the value's repr (it tells 1 from 1.0 from True, -0.0 from 0.0, and
    shows key order) or the error with its place."""
    try:
        return ("value", repr(fn(text, max_depth=max_depth)))
    except BadJSON as exc:
        return ("error", exc.message, exc.line, exc.column)


TRICKY = [
    "", " ", "{}", "[]", '{"a": 1}', "[1, 2.5, -0, -0.0, 1e5, 1E-3, 0.1e1, true, false, null]",
    "NaN", "-NaN", "Infinity", "-Infinity", "[NaN]", '{"a": Infinity}', "1e400", "-1e400", "[1e309]", "1e-400",
    "9007199254740993", "9007199254740993.0", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
    "1" + "0" * 300, "-1" + "0" * 4299, "1" + "0" * 4299, "1" + "0" * 4300, "1" + "0" * 5000, "1" + "0" * 4299 + ".0",
    "123456789012345678901234567890.5", "2.2250738585072011e-308", "4.9e-324", "1.7976931348623157e308",
    "1.7976931348623159e308", "1.00000000000000011102230246251565404236316680908203125",
    '{"a": 1, "b": 2, "a": 3}', '{"a": {"x": 1}, "a": [2]}', '"\\ud800"', '"\\udc00"', '"\\ud800\\udc00"', '"\ud800"',
    '"\\u0000"', '"a\x01b"', '"\t"', '"\x7f"', '"\u2028"', '"\ufeff"', "\ufeff{}", '{"a": 1}\ufeff', "[1,]", '{"a": 1,}',
    "01", "-01", ".5", "1.", "+1", "1e", "-", "--1", "\x0c1", "1 2", '{"a": 1}x', '{"a" 1}', "{1: 2}", "'a'", '"\\x"',
    '"\\/"', "[1 2]", '{"a":1}\n', "\n\n[1]\n", '{"a": 1}\r\n', "[" * 10 + "]" * 10, "[" * 64 + "]" * 64,
    "[" * 65 + "]" * 65, '{"a":' * 64 + "1" + "}" * 64, '{"a":' * 65 + "1" + "}" * 65, "[" * 199 + "]" * 199,
    "[" * 200 + "]" * 200, "[" * 201 + "]" * 201, "[" * 900 + "]" * 900, "[" * 5000 + "]" * 5000, "[" * 100 + "]" * 99,
    '{"id": "q1", "retrieved": [{"id": "d1", "text": "t", "score": 0.9}], "answer": "a", "latency_ms": 10}',
    '[' + ", ".join(['{"a": [1, {"b": null}]}'] * 40) + "]",
]


def mutations(rng: random.Random, n: int) -> list[str]:
    """Texts near valid JSON: a valid document with a few characters inserted, deleted or replaced by ones that
    matter to a JSON parser."""
    seeds = [t for t in TRICKY if len(t) < 300] + [json.dumps({"id": f"q{i}", "v": [1.5, -2, "x\\y", None, True]}) for i in range(5)]
    alphabet = list('{}[]",:0123456789.-+eE \\tnulfasrNIy\x00\x01\u00e9\ud800\ufeff') + ["\\u", "NaN", "Infinity", "1e999"]
    out = []
    for _ in range(n):
        chars = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            op, at = rng.random(), rng.randint(0, len(chars))
            if op < 0.4:
                chars.insert(at, rng.choice(alphabet))
            elif op < 0.7 and chars:
                del chars[min(at, len(chars) - 1)]
            elif chars:
                chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
        out.append("".join(chars))
    return out


@pytest.mark.parametrize("max_depth", [jsonparse.MAX_DEPTH, None])
def test_parse_gives_what_the_json_module_alone_gives_value_or_error(max_depth: int | None) -> None:
    texts = TRICKY + mutations(random.Random(SEED), 6000)
    differ = [t for t in texts if outcome(parse, t, max_depth) != outcome(strict, t, max_depth)]
    assert not differ, [t[:60] for t in differ[:5]]


def test_the_fast_parser_reads_an_ordinary_line_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the json module was asked")

    monkeypatch.setattr(jsonparse, "strict", refuse)
    line = json.dumps({"id": "q1", "retrieved": [{"id": f"d{i}", "text": "t" * 200, "score": 1 - i / 20} for i in range(20)]})
    assert parse(line, max_depth=None)["retrieved"][19]["score"] == 1 - 19 / 20
    assert parse('{"a": [[[1]]]}') == {"a": [[[1]]]}


def test_refused_input_keeps_its_message_and_place() -> None:
    for text, message in (('{"a": NaN}', "invalid JSON: NaN is not a JSON number"),
                          ('{"a": -Infinity}', "invalid JSON: -Infinity is not a JSON number"),
                          ('{"a": ' + "1" * 5000 + "}", "invalid JSON: a number with too many digits"),
                          ("[" * 65 + "]" * 65, "invalid JSON: nested more than 64 levels deep")):
        with pytest.raises(BadJSON) as caught:
            parse(text)
        assert caught.value.message == message
    with pytest.raises(BadJSON) as caught:
        parse('{"a": 1,\n "b": }')
    assert (caught.value.line, caught.value.column) == (2, 7) and "Expecting value at column 7" in caught.value.message
    with pytest.raises(BadJSON) as caught:
        parse("\ufeff{}")
    assert "byte-order mark" in caught.value.message
    with pytest.raises(BadJSON) as caught:
        parse('{"q": "a\x01b"}')  # json's own message ends in "at"; the column follows it once
    assert caught.value.message.startswith("invalid JSON: Invalid control character at column 9, near")


def test_a_wrong_golden_field_says_what_it_received(tmp_path: Path) -> None:
    rows = [{"id": "a", "question": "Q?", "relevant_doc_ids": ["d"], "tags": ["x", 3]},
            {"id": "b", "question": "Q?", "relevant_doc_ids": ["d"], "relevant_texts": ["fine", " "]},
            {"id": "c", "question": "Q?", "relevant_doc_ids": ["d"], "metadata": [1]},
            {"id": "d", "question": "Q?", "relevant_doc_ids": ["d"], "category": 7}]
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(InputErrors) as caught:
        load_golden_set(path)
    said = [str(e) for e in caught.value.errors]
    assert said == [f"{path}:1: 'tags' must be a list of strings, got a list holding a number (3)",
                    f"{path}:2: 'relevant_texts' must be a list of non-empty strings (passages or key sentences that "
                    "answer the question), got a list holding a string (' ')",
                    f"{path}:3: 'metadata' must be an object, got a list",
                    f"{path}:4: 'category' must be a string, got a number (7)"]


# --------------------------------------------------------------------------- the results file


GOLDEN = [GoldenCase(id=f"q{i}", question=f"Question {i}?", line=i + 1, relevant={"d1": 1}) for i in range(12)]
BIG = "1" + "0" * 301


def random_item(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.03:
        return rng.choice(["bare-id", "", 7, None, ["d1"]])
    item: dict[str, Any] = {}
    if rng.random() < 0.97:
        item["id"] = rng.choice(["d1", "d2", "d3", "d1", f"d{rng.randint(1, 30)}", "", 5, None, True]) if rng.random() < 0.1 \
            else f"d{rng.randint(1, 30)}"
    if rng.random() < 0.9:
        item["text"] = rng.choice(["a passage", "", None, 3, ["t"]]) if rng.random() < 0.1 else f"text {rng.random()}"
    if rng.random() < 0.9:
        item["score"] = rng.choice([0.5, 1, 0, -0.0, True, "0.9", None, 1e300, -1e299, 2 ** 70, "BIG"]) if rng.random() < 0.15 \
            else round(rng.random(), 4)
    if rng.random() < 0.05:
        item["extra"] = {"deep": [1, {"x": None}]}
    return item


def random_line(rng: random.Random, i: int) -> str:
    row: dict[str, Any] = {}
    if rng.random() < 0.95:
        row["id"] = rng.choice([f"q{i}", f"q{rng.randint(0, 14)}", "", 3, None]) if rng.random() < 0.1 else f"q{i % 12}"
    if rng.random() < 0.1:
        row["question"] = rng.choice([f"Question {rng.randint(0, 14)}?", 5, None])
    if rng.random() < 0.97:
        row["retrieved"] = rng.choice([None, "d1", {"id": "d1"}]) if rng.random() < 0.03 \
            else [random_item(rng) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.9:
        row["answer"] = rng.choice([None, 3, ["a"], ""]) if rng.random() < 0.1 else "an answer"
    if rng.random() < 0.2:
        row["contexts"] = rng.choice([["c1", "c2"], [], ["c", 1], "c", None])
    if rng.random() < 0.8:
        row["latency_ms"] = rng.choice([-1, 1e10, True, "5", None, 0, 2 ** 70, 12.5]) if rng.random() < 0.15 else rng.randint(1, 900)
    if rng.random() < 0.08:
        row["error"] = rng.choice(["timeout", "", 0, False, ["x"], None])
    if rng.random() < 0.08:
        row["noise"] = rng.choice([{"noisy_answer": "n", "clean_answer": "c", "distractors": ["x"]}, {"noisy_answer": 1},
                                   "n", None, {"noisy_answer": "n", "deep": _nested(250)}])
    if rng.random() < 0.08:
        row["usage"] = rng.choice([{"tokens": 10}, [1], None, _nested(250), _nested(150)])
    text = json.dumps(row)
    if rng.random() < 0.05 and text.startswith('{"id"'):
        text = text.replace('{"id"', '{"id": "q0", "id"', 1)  # a repeated key: the last one counts
    if rng.random() < 0.05 and '"score": 0' in text:
        text = text.replace('"score": 0', '"score": -0', 1)  # an integer minus zero
    return text.replace('"BIG"', BIG)  # an integer score beyond float's 1e300: parse_output drops it


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


def read_target(path: Path, texts: bool, fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Everything a ResultsFileTarget made of the file: outputs, notes, unmatched lines, or the input errors."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(results_module, "fast_as", lambda *_, **__: None)
        try:
            target = ResultsFileTarget.read(path, GOLDEN, texts=texts)
        except (InputError, InputErrors) as exc:
            errors = exc.errors if isinstance(exc, InputErrors) else [exc]
            return ("errors", [(e.message, e.file, e.line, e.key) for e in errors])
    outputs = {}
    for cid, out in target.outputs.items():
        docs = [(d.id, d.score, type(d.score).__name__) + ((d.text,) if texts else ()) for d in out.retrieved]
        outputs[cid] = (docs, out.answer, out.contexts if texts else None, repr(out.latency_ms), out.error, out.usage)
    return ("outputs", outputs, target.unmatched, target.precomputed_noise)


@pytest.mark.parametrize("texts", [True, False])
def test_results_file_fast_decoding_gives_what_the_dict_path_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    texts: bool) -> None:
    rng = random.Random(SEED + texts)
    files = 0
    for n in range(250):
        path = tmp_path / f"results{n}.jsonl"
        lines = [random_line(rng, i) for i in range(rng.randint(1, 12))]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        fast, slow = read_target(path, texts, True, monkeypatch), read_target(path, texts, False, monkeypatch)
        assert fast == slow, "\n".join(lines)
        files += fast[0] == "outputs"
    assert files >= 15  # enough files were clean enough to be read whole, not only refused


def test_an_ordinary_line_is_decoded_fast_and_a_texts_free_run_keeps_no_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "retrieved": [{"id": "d1", "text": "one", "score": 0.9}, {"id": "d2", "text": "two"}],
                                        "answer": "a", "latency_ms": 5}) + "\n" for i in range(12)), encoding="utf-8")
    monkeypatch.setattr(results_module, "parse_line", lambda *_: pytest.fail("an ordinary line went the dict path"))
    with_texts, without = ResultsFileTarget.read(path, GOLDEN), ResultsFileTarget.read(path, GOLDEN, texts=False)
    assert [(d.id, d.text, d.score) for d in with_texts.outputs["q3"].retrieved] == [("d1", "one", 0.9), ("d2", "two", None)]
    assert with_texts.outputs["q3"].contexts == ["one", "two"]
    assert [(d.id, d.text, d.score) for d in without.outputs["q3"].retrieved] == [("d1", None, 0.9), ("d2", None, None)]
    assert without.outputs["q3"].contexts == []


def test_texts_are_kept_when_a_judge_stage_reads_them(tmp_path: Path) -> None:
    from gate.config.loader import load_spec
    from gate.targets.factory import make_target

    (tmp_path / "golden.jsonl").write_text('{"id": "q1", "question": "Q?", "ground_truth": "A", "relevant_doc_ids": ["d1"]}\n')
    (tmp_path / "results.jsonl").write_text('{"id": "q1", "retrieved": [{"id": "d1", "text": "A passage."}], "answer": "A"}\n')
    base = "version: 1\ngolden_set: golden.jsonl\ntarget: {results: results.jsonl}\nstages:\n  retrieval: {metrics: [mrr]}\n"
    for extra, kept in (("", None), ("  generation: {metrics: [token_f1]}\n", "A passage.")):
        (tmp_path / "rag-eval.yml").write_text(base + extra)
        spec = load_spec(str(tmp_path / "rag-eval.yml"))
        target = make_target(spec, [GoldenCase(id="q1", question="Q?", line=1, relevant={"d1": 1})])
        assert target.ask(GoldenCase(id="q1", question="Q?", line=1), 10).retrieved[0].text == kept


# --------------------------------------------------------------------------- report.json


def random_document(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth < 4 and r < 0.25:
        return {rng.choice(["a", "b", "é", "k\u2028", "x\"y", str(rng.randint(0, 9))]): random_document(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if depth < 4 and r < 0.45:
        return [random_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return rng.choice([
        rng.random(), -rng.random() * 10 ** rng.randint(-30, 30), 1e16, 1e-7, -0.0, 5e-324, 1.7976931348623157e308,
        rng.randint(-10 ** 6, 10 ** 6), 2 ** 70, -(2 ** 64), True, False, None, "", "plain", "é ü \u2028 \x00\x1f\x7f \\ \" / \b\f\n\r\t",
    ])


def test_compact_report_text_holds_the_json_modules_value() -> None:
    rng = random.Random(SEED)
    for _ in range(3000):
        doc = {"cases": random_document(rng), "x": random_document(rng)}
        reference = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        text = fast_compact_json(doc)
        assert repr(json.loads(text)) == repr(json.loads(reference))


@pytest.mark.parametrize("odd", [math.nan, math.inf, -math.inf, "lone \ud800 surrogate"])
def test_a_report_msgspec_would_write_otherwise_is_written_by_json(odd: Any) -> None:
    doc = {"stages": {"retrieval": {"gates": [{"limit": odd, "value": 0.5}]}}, "cases": [{"id": "q1", "latency_ms": 12.5}]}
    assert fast_compact_json(doc) == json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def test_every_non_finite_float_is_spotted_in_the_messagepack_bytes() -> None:
    rng = random.Random(SEED)
    patterns = [rng.getrandbits(64) for _ in range(20000)]
    patterns += [0x7FF0 << 48, 0xFFF0 << 48, 0x7FF8 << 48, 0xFFF8 << 48, (0x7FF0 << 48) | 1, (0xFFFF << 48) | 0xFFFF]
    patterns += [(rng.choice([0x7FF, 0xFFF]) << 52) | rng.getrandbits(52) for _ in range(2000)]  # NaNs with payloads
    for bits in patterns:
        x = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
        encoded = msgspec.msgpack.encode([x])
        assert encoded[1] == 0xCB  # every float as a double: what the search relies on
        if not math.isfinite(x):
            assert _NOT_FINITE.search(encoded), hex(bits)


def test_report_json_is_compact_above_a_thousand_cases_and_indented_below(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SELF_CHECK, raising=False)  # a made-up report, not one the schema would take

    def report(n: int) -> dict[str, Any]:
        return {"verdict": "pass", "cases": [{"id": f"q{i}", "retrieved": ["d1"], "answer": "é", "latency_ms": 1e-05} for i in range(n)]}

    small, large = report(COMPACT_ABOVE), report(COMPACT_ABOVE + 1)
    assert report_json(small) == json.dumps(small, indent=2, ensure_ascii=False) + "\n"  # type: ignore[arg-type]
    text = report_json(large)  # type: ignore[arg-type]
    assert "\n" not in text[:-1] and text.startswith('{"verdict":"pass","cases":[{"id":"q0"') and json.loads(text) == large


# --------------------------------------------------------------------------- ranks and metrics


METRICS = [parse_metric(m) for m in ("hit_rate@1", "hit_rate@5", "mrr", "mrr@3", "recall@5", "recall@50", "precision@1",
                                     "precision@10", "ndcg", "ndcg@3", "ndcg@10", "map", "map@5", "context_recall@5",
                                     "context_recall@20")]


def random_case(rng: random.Random) -> tuple[list[str], dict[str, int]]:
    pool = [f"d{i}" for i in range(rng.randint(2, 40))]
    ranked = [rng.choice(pool) for _ in range(rng.randint(0, 30))]  # repeats included
    relevant = {d: rng.randint(1, 3) for d in rng.sample(pool, rng.randint(1, min(6, len(pool))))}
    return ranked, relevant


def test_looked_up_ranks_equal_the_walk_of_the_deduplicated_list() -> None:
    rng = random.Random(SEED)
    for _ in range(3000):
        ids, relevant = random_case(rng)
        ranked = dedupe(ids)
        assert first_ranks(ids, relevant) == {rid: ranked.index(rid) + 1 if rid in ranked else None for rid in relevant}


def test_scores_from_looked_up_ranks_are_the_same_floats() -> None:
    rng = random.Random(SEED)
    walked, looked_up = [], []
    for _ in range(2000):
        ids, relevant = random_case(rng)
        walked.append(CaseScorer(dedupe(ids), relevant))
        looked_up.append(CaseScorer.from_ranks(first_ranks(ids, relevant), relevant))
    for metric in METRICS:
        a = [s.score(metric) for s in walked]
        b = [s.score(metric) for s in looked_up]
        assert a == b, metric.name
        assert aggregate(metric, walked, a) == aggregate(metric, looked_up, b)
        if metric.base == "context_recall":  # the micro average, by its definition
            hits = sum(sum(1 for r, _ in s.ranks if r <= metric.k) for s in walked)  # type: ignore[operator]
            assert aggregate(metric, looked_up, b) == hits / sum(s.n_relevant for s in walked)


def test_the_objects_a_run_leaves_are_not_rescanned_by_the_next_collection() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with gc_paused():
            kept = [{"i": i} for i in range(50_000)]
        young = gc.get_count()[0]
        assert gc.isenabled() and young < 700, young  # they went to the oldest generation, not the youngest
        assert len(kept) == 50_000
    finally:
        if not was:
            gc.disable()

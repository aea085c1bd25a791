"""gate.core._native, the retrieval run's hot loops in C, gives what the Python code it mirrors gives, bit for bit, and
hands back to it (None) what it does not take; it is built wherever rag-gate is installed with a C compiler."""

from __future__ import annotations

import random
import shutil
import struct
import sysconfig

import pytest

from gate.core.catalog import parse_metric
from gate.core.digest import digest_text
from gate.core.retrieval_onepass import case_scorer
from gate.io import golden as golden_module
from gate.targets import results as results_module
from tests.unit.test_metrics_onepass import METRICS, random_case

try:
    from gate.core import _native as native
except ImportError:  # not built: the tests below fail where a C compiler is (the install should have built it)
    native = None
pytestmark = pytest.mark.skipif(native is None and not shutil.which("cc"), reason="no C compiler: gate.core._native is not built")


def bits(row: list[float]) -> list[bytes]:
    return [struct.pack("<d", x) for x in row]


def test_the_module_is_built_where_a_c_compiler_is():
    # the install (pip install -e . / the wheel) compiles it; without it every run would take the Python steps
    assert native is not None, "gate.core._native is not built although a C compiler is here"
    assert native.__file__.endswith(sysconfig.get_config_var("EXT_SUFFIX"))
    assert case_scorer(METRICS).__qualname__ != case_scorer(METRICS, native=False).__qualname__


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_c_and_python_give_the_same_ranks_and_values_bit_for_bit(graded):
    rng = random.Random(21 + graded)
    in_c, in_python = case_scorer(METRICS), case_scorer(METRICS, native=False)
    taken = 0
    for _ in range(4000):
        ids, relevant = random_case(rng, graded)
        got, want = in_c(ids, relevant), in_python(ids, relevant)
        assert list(got[0].items()) == list(want[0].items())  # the ranks, keys in the order of relevant
        assert got[1] == want[1] and all(type(r) is int for r in got[1])
        assert bits(got[2]) == bits(want[2]), (ids, relevant)
        taken += native.score_case(tuple((m, k) for m, k in _plan(METRICS)), ids, relevant) is not None
    assert taken == 4000  # every one of these ran in C


def _plan(metrics):
    kinds = {"hit_rate": 0, "mrr": 1, "recall": 2, "context_recall": 2, "precision": 3, "ndcg": 4, "map": 5}
    return [(kinds[m.base], m.k) for m in metrics]


@pytest.mark.parametrize(("ids", "relevant"), [
    (["a", "b"], {"a": 0, "b": 0}),              # an ideal DCG of 0: the Python code's ZeroDivisionError
    (["a", "b"], {"a": 2**60, "b": 1}),          # a grade beyond 2**53: its float is not the int
    (["a"], {"a": 1.5}),                         # a grade that is no int
])
def test_what_c_does_not_take_is_handed_to_python(ids, relevant):
    plan = tuple(_plan([parse_metric("ndcg@10")]))
    assert native.score_case(plan, ids, relevant) is None
    in_c, in_python = case_scorer([parse_metric("ndcg@10")]), case_scorer([parse_metric("ndcg@10")], native=False)
    try:
        want = in_python(ids, relevant)
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            in_c(ids, relevant)
    else:
        assert bits(in_c(ids, relevant)[2]) == bits(want[2])


def test_odd_arguments_are_handed_back_not_misread():
    assert native.score_case(((0, None),), ["a"], {"a": 1}) is None  # hit_rate with no k
    assert native.score_case(((3, 0),), ["a"], {"a": 1}) is None  # precision@0
    assert native.score_case(((9, 1),), ["a"], {"a": 1}) is None  # no such kind
    assert native.score_case(((0, 1),), ("a",), {"a": 1}) is None  # a tuple of ids
    assert native.score_case(((0, 1),), ["a"], {"a": True}) == ({"a": 1}, [1], [1.0])
    with pytest.raises(TypeError):
        native.score_case(((0, 1),), ["a"])


def test_ids_that_are_equal_but_not_the_same_object_match():
    a = "".join(["doc", "1"])  # not the interned "doc1"
    assert native.score_case(((1, None),), ["x", a], {"doc1": 1}) == ({"doc1": 2}, [2], [0.5])


def test_repeated_ids_count_once_before_a_relevant_one():
    got = native.score_case(((1, None), (5, None)), ["x", "x", "y", "x", "r1", "r2"], {"r2": 1, "r1": 1, "z": 1})
    assert got == ({"r2": 4, "r1": 3, "z": None}, [3, 4], [1 / 3, (1 / 3 + 2 / 4) / 3])


def _random_file(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice([b'{"id": "a"}', b'{"x": [1, {}]}', b"[1]", b"", b" ", b"{}{}", "{\"t\": \"\u00e9\u4e2d\"}".encode()]))
        parts.append(rng.choice([b"\n", b"\r\n", b"\r", b"\n\n", b""]))
    raw = b"".join(parts)
    if raw and rng.random() < 0.2:
        raw = raw[: rng.randrange(len(raw))] + bytes([rng.choice([0x80, 0xC3, 0xED, 0xF5, 0xE0])]) + raw[rng.randrange(len(raw)):]
    return raw


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_the_line_count_and_utf8_check_are_the_python_ones():
    rng = random.Random(5)
    seen = set()
    for _ in range(5000):
        raw = _random_file(rng)
        lines, utf8 = native.one_value_a_line(raw)
        assert lines == golden_module.python_one_value_a_line(raw), raw
        assert utf8 is _utf8(raw), raw
        seen.add((lines is None, utf8))
    assert seen == {(True, True), (True, False), (False, True), (False, False)}


@pytest.mark.parametrize("raw", [
    b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xc3", b"\xef\xbb\xbf{}",
    "\U0010ffff\ud7ff\ue000".encode(), bytes(range(128)),
])
def test_utf8_edges(raw):
    assert native.one_value_a_line(raw)[1] is _utf8(raw)


def test_the_ascii_whitespace_is_what_str_strip_strips():
    # near_ids folds an ASCII id in C: its table of spaces must be str.isspace's below 128
    spaces = [chr(i) for i in range(128) if chr(i).isspace()]
    assert spaces == [chr(i) for i in (*range(0x09, 0x0E), *range(0x1C, 0x21))]
    for ch in spaces:
        assert native.near_ids([_case("q", {"doc": 1})], {"q": _out([f"{ch}DOC{ch}"])}) == [("q", f"{ch}DOC{ch}", "doc")]


def _case(cid, relevant, type_="answerable"):
    from gate.core.model import GoldenCase
    return GoldenCase(id=cid, question=f"question {cid}", line=1, relevant=relevant, type=type_)


def _out(ids, scores=None, error=None):
    from gate.core.model import RetrievedDoc, TargetOutput
    scores = scores or [None] * len(ids)
    return TargetOutput(case_id="x", retrieved=[RetrievedDoc(i, score=s) for i, s in zip(ids, scores, strict=True)], error=error)


SPELLINGS = ["d1", "D1", " d1", "d1\t", "\x1cd1", "d\u0130", "D\u0131", "stra\u00dfe", "STRASSE", "\u212a1", "k1", "K1",
             "d2", "D2 ", "caf\u00e9", "CAF\u00c9", "\u00a0d2", "d2\u2003", "", " ", "x"]


def _random_outputs(rng):
    cases, outputs = [], {}
    for i in range(300):
        cid = f"q{i}"
        relevant = {r: 1 for r in rng.sample(SPELLINGS, rng.randint(0, 4))}
        cases.append(_case(cid, relevant, rng.choice(["answerable"] * 5 + ["unanswerable"])))
        ids = [rng.choice(SPELLINGS) for _ in range(rng.randint(0, 12))]
        scores = [rng.choice([None, 0.5, 0.2, 0.9, 1, 0.9]) for _ in ids]
        if rng.random() < 0.2:
            scores = sorted([s for s in scores if s is not None], reverse=True) + [None] * sum(s is None for s in scores)
        if rng.random() < 0.05:
            continue  # no output for the case (near_ids skips it)
        outputs[cid] = _out(ids, scores, error="boom" if rng.random() < 0.05 else None)
    return cases, outputs


def test_the_notes_loops_are_the_python_ones():
    from gate.run import notes
    rng = random.Random(9)
    near_total = unsorted_total = 0
    for _ in range(40):
        cases, outputs = _random_outputs(rng)
        got = native.near_ids(cases, outputs)
        assert got == notes.near_ids(cases, outputs)
        near_total += len(got)
        present = [c for c in cases if c.id in outputs]
        count, first = native.unsorted_scores(present, outputs)
        assert (count, first) == notes.unsorted_scores(present, outputs)
        unsorted_total += count
    assert near_total > 100 and unsorted_total > 100  # the data reached both


def test_near_ids_pass_over_clean_ids_only_where_nothing_can_fold_alike():
    from gate.run import notes
    tried = [({"d1": 1, "d2": 1}, ["d3", "D1", "d2"], [("q", "D1", "d1")]),  # a capital retrieved, clean relevant ids
             ({" d1 ": 1}, ["d1"], [("q", "d1", " d1 ")]),                 # a clean id retrieved, a relevant id with spaces
             ({"Doc": 1, "doc": 1}, ["doc", "DOC"], [("q", "DOC", "Doc")]),  # Doc missed: DOC folds as it
             ({"d1": 1}, ["d2", "d3", ""], []),                              # clean on both sides: nothing near
             ({"d\u0130": 1}, ["d\u0069\u0307"], notes.near_ids([_case("q", {"d\u0130": 1})], {"q": _out(["d\u0069\u0307"])}))]
    for relevant, ids, want in tried:
        cases, outputs = [_case("q", relevant)], {"q": _out(ids)}
        assert native.near_ids(cases, outputs) == notes.near_ids(cases, outputs) == want


def test_a_missing_output_is_the_python_error():
    with pytest.raises(KeyError):
        native.unsorted_scores([_case("q", {"a": 1})], {})
    with pytest.raises(KeyError):
        native.clearly_fresh([_case("q", {"a": 1})], {}, 10)
    assert native.near_ids([_case("q", {"a": 1})], {}) == []


def test_the_fresh_bound_is_the_python_one():
    from gate.stages import retrieval
    rng = random.Random(4)
    seen = set()
    for _ in range(200):
        pool, stale = [f"doc{j}" for j in range(400)], rng.random() < 0.5
        cases = [_case(f"q{i}", {f"{'new' if stale else 'doc'}{j}": 1 for j in rng.sample(range(400), 3)}) for i in range(60)]
        outputs = {c.id: _out(rng.sample(pool, rng.randint(0, 20)) + list(c.relevant)[: rng.randint(0, 1)]) for c in cases}
        answered = [c for c in cases if rng.random() < 0.8]
        for cutoff in (0, 1, 3, 10):
            got = native.clearly_fresh(answered, outputs, cutoff)
            assert got is retrieval._clearly_fresh(answered, outputs, cutoff)
            seen.add(got)
    assert seen == {True, False}


PIECES = ["plain", 'a "quote"', "back\\slash", "tab\there", "new\nline", "\x00\x1f", "caf\u00e9", "\u4e2d\u6587", "\U0001f600",
          "\x7f", "\u2028", "", " "]


def test_the_fingerprint_bytes_are_the_python_text_in_utf8():
    from gate.core import cases as cases_module
    from gate.core.answers import AnswerChecks
    from gate.core.model import GoldenCase
    rng = random.Random(2)
    golden = []
    for i in range(2000):
        text = lambda: "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))  # noqa: E731
        optional = rng.random()
        golden.append(GoldenCase(
            id=f"q{i}{text()}", question=text(), line=i + 1, ground_truth=None if rng.random() < 0.3 else text(),
            relevant={text() or f"d{j}": rng.choice([1, 2, 3, True, 2**70]) for j in range(rng.randint(0, 4))},
            type=rng.choice(["answerable", "unanswerable", "out_of_scope"]),
            relevant_texts=(text(),) if optional < 0.05 else (),
            expected_keywords=("kw",) if 0.05 <= optional < 0.1 else (),
            checks=AnswerChecks.read({"must_include": ["x"]}) if 0.1 <= optional < 0.12 else None,
            paraphrases=("again",) if 0.12 <= optional < 0.15 else ()))
    ordered = sorted(golden, key=lambda c: c.id)
    want = "".join([cases_module._row(c) + "\n" for c in ordered])
    assert native.fingerprint_utf8(ordered, cases_module._STRING, cases_module._row) == want.encode("utf-8")
    assert native.fingerprint_utf8([], cases_module._STRING, cases_module._row) == b""
    assert cases_module.fingerprint(golden) == digest_text(want)
    many = [GoldenCase(id=f"m{n}", question="?", line=1, relevant={f"d{j:02d}é"[::-1] if j % 2 else f"D{j}": j for j in range(n, 0, -1)})
            for n in (2, 15, 16, 17, 40)]  # sorted in C up to 16 ids, by their items above
    want_many = "".join([cases_module._row(c) + "\n" for c in many])
    assert native.fingerprint_utf8(many, cases_module._STRING, cases_module._row) == want_many.encode("utf-8")
    big = [GoldenCase(id="q", question="x" * 200_000, line=1, relevant={"d": 2**70, "c": True})]  # past the first buffer
    assert native.fingerprint_utf8(big, cases_module._STRING, cases_module._row) == cases_module._row(big[0]).encode() + b"\n"


def test_the_fingerprint_bytes_fail_as_the_python_text_does():
    from gate.core import cases as cases_module
    from gate.core.model import GoldenCase
    lone = GoldenCase(id="q", question="half \ud800 of a pair", line=1, relevant={"d": 1})
    with pytest.raises(UnicodeEncodeError):
        (cases_module._row(lone) + "\n").encode("utf-8")
    with pytest.raises(UnicodeEncodeError):
        native.fingerprint_utf8([lone], cases_module._STRING, cases_module._row)
    graded = GoldenCase(id="q", question="?", line=1, relevant={"d": "high"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        cases_module._row(graded)
    with pytest.raises(TypeError):
        native.fingerprint_utf8([graded], cases_module._STRING, cases_module._row)


def test_the_stage_loop_is_the_python_one(monkeypatch):
    from gate.core.model import GoldenCase, RetrievedDoc, TargetOutput
    from gate.stages import retrieval
    from tests.support.settings import retrieval as settings_of
    rng = random.Random(8)
    cases, outputs = [], {}
    for i in range(1500):
        ids, relevant = random_case(rng, graded=True)
        kind = rng.random()
        cases.append(GoldenCase(id=f"q{i}", question=f"q {i}", line=i + 1, relevant={} if kind < 0.05 else relevant,
                                type="unanswerable" if kind > 0.93 else "out_of_scope" if kind > 0.9 else "answerable"))
        outputs[f"q{i}"] = TargetOutput(case_id=f"q{i}", retrieved=[RetrievedDoc(d) for d in ids],
                                        error="results file: boom" if 0.05 < kind < 0.08 else None)
    cases.append(GoldenCase(id="zero", question="z", line=9999, relevant={"a": 0}))  # ndcg's ideal DCG is 0: Python's error
    outputs["zero"] = TargetOutput(case_id="zero", retrieved=[RetrievedDoc("a")])
    names = ["hit_rate@5", "mrr", "recall@10", "precision@3", "ndcg@10", "map", "context_recall@5", "map@3"]
    settings = settings_of(names)
    in_c = retrieval._score_all(settings, names, cases[:-1], outputs)
    monkeypatch.setattr(retrieval, "_score_cases_c", None)
    in_python = retrieval._score_all(settings, names, cases[:-1], outputs)
    assert in_c == in_python
    samples = in_c[0]
    assert {s["error"] for s in samples} >= {None, "results file: boom", retrieval.NO_RELEVANT}
    assert in_c[3] == {"unanswerable": in_c[3]["unanswerable"], "out_of_scope": in_c[3]["out_of_scope"]}
    with pytest.raises(ZeroDivisionError):
        retrieval._score_all(settings_of(["ndcg@10"]), ["ndcg@10"], cases[-1:], outputs)
    monkeypatch.undo()
    with pytest.raises(ZeroDivisionError):  # C hands the case to the Python scorer, which says it
        retrieval._score_all(settings_of(["ndcg@10"]), ["ndcg@10"], cases[-1:], outputs)


def test_the_non_finite_check_is_the_messagepack_one():
    import math

    from gate.io import reports
    rng = random.Random(6)
    leaves = [0.5, -0.0, 1e308, 5e-324, 3, True, None, "nan", "\xcb\x7f\xf8", math.nan, math.inf, -math.inf]

    def doc(depth: int):
        kind = rng.random()
        if depth > 4 or kind < 0.4:
            return rng.choice(leaves[:9] if rng.random() < 0.9 else leaves)
        if kind < 0.7:
            return {f"k{i}": doc(depth + 1) for i in range(rng.randint(0, 4))}
        return (tuple if kind < 0.75 else list)(doc(depth + 1) for _ in range(rng.randint(0, 4)))

    seen = set()
    for _ in range(3000):
        d = doc(0)
        got = native.not_finite(d)
        assert got is (reports._NOT_FINITE.search(reports.msgspec.msgpack.encode(d)) is not None), d
        seen.add(got)
    assert seen == {True, False}
    deep: list = []
    for _ in range(150):
        deep = [deep]
    assert native.not_finite(deep) is None and reports._not_finite(deep) is False  # too deep: the encoder tells
    assert native.not_finite({"a": {1, 2}}) is None  # a set: not JSON's; the encoder tells
    assert native.not_finite({math.nan: 1}) is True


def test_a_case_built_in_c_is_the_case_its_class_builds():
    from gate.core.model import GoldenCase
    from gate.io import golden
    usual = ("q1", "What is it?", 3, None, {"d1": 2}, "answerable", ("x",), "cat")
    a, b = golden.new_case(usual), golden.new_case(usual)
    want = GoldenCase(id="q1", question="What is it?", line=3, relevant={"d1": 2}, tags=("x",), category="cat")
    assert a == want and repr(a) == repr(want) and hash(a.question) == hash(want.question)
    assert a.metadata == {} and a.metadata is not b.metadata  # a fresh default per case, as the dataclass gives it
    with pytest.raises(AttributeError):
        a.id = "other"  # still frozen  # type: ignore[misc]
    with pytest.raises(ValueError):
        native.build(GoldenCase, golden._SLOTS, usual)  # fewer values than slots
    with pytest.raises(TypeError):
        native.build(GoldenCase, (1,), (1,))


def test_an_attribute_read_from_its_slot_is_what_getattr_reads():
    """The C functions read a slot straight where the type keeps the attribute in one; a type changed since, an unset
    slot, a type with its own attribute lookup and a plain class read as getattr reads them."""
    from dataclasses import dataclass

    @dataclass(slots=True)
    class P:
        id: str

    ps = [P("a"), P("b")]
    assert native.retrieved_ids(ps) == ["a", "b"]
    assert native.retrieved_ids(ps) == ["a", "b"]  # from the slot now
    unset = P.__new__(P)
    with pytest.raises(AttributeError):
        native.retrieved_ids([unset])
    P.id = property(lambda self: "changed")  # the type changed: its slot is not what .id reads any more
    assert native.retrieved_ids(ps) == ["changed", "changed"]

    class Own:
        __slots__ = ("id",)

        def __getattribute__(self, name):
            return "own"

    o = Own()
    object.__setattr__(o, "id", "slot")
    assert native.retrieved_ids([o]) == ["own"]

    class Plain:
        def __init__(self, i):
            self.id = i

    assert native.retrieved_ids([Plain("x"), ps[0]]) == ["x", "changed"]
    assert native.retrieved_ids([results_module._RankedId("r", 0.5)]) == ["r"]


def test_the_report_s_case_rows_are_the_python_ones():
    """report["cases"] built in C (report_cases) is evaluate's Python rows: the same keys in the same order, the same
    values (the ids retrieved, the answer, the latency, the error), and a KeyError for a case with no output."""
    from dataclasses import replace

    from gate.run.evaluate import case_rows
    rng = random.Random(4)
    for _ in range(20):
        cases, outputs = _random_outputs(rng)
        present = [c for c in cases if c.id in outputs]
        for c in present[::3]:
            outputs[c.id] = replace(outputs[c.id], answer=rng.choice(["yes", None, "é"]), latency_ms=rng.choice([None, 12.5, 0]))
        got, want = native.report_cases(present, outputs), case_rows(present, outputs)
        assert got == want and [list(r) for r in got] == [list(r) for r in want]
        assert all(type(r["retrieved"]) is list for r in got)
        missing = next((c for c in cases if c.id not in outputs), None)
        if missing is not None:
            with pytest.raises(KeyError):
                native.report_cases([*present, missing], outputs)

"""A results file of ranked ids read in C (gate.core._native's scan_ranked and build_ranked) gives exactly the rows
msgspec's one-call decoding gives (gate.targets.results._whole_file), and takes no file that decoding does not take:
on generated files, on each of the edge cases below, and on thousands of files with a byte changed."""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

import msgspec
import pytest

from gate.core.model import GoldenCase
from gate.targets import results as results_module
from gate.targets.results import _DECODE_STR, _LineOfIds, _RankedId, _whole_file, prefetch, read_results

try:
    from gate.core import _native as native
except ImportError:
    native = None
pytestmark = pytest.mark.skipif(native is None and not shutil.which("cc"), reason="no C compiler: gate.core._native is not built")


def in_c(raw: bytes) -> list | None:
    scan = native.scan_ranked(raw)
    return None if scan is None else native.build_ranked(scan, _LineOfIds, _RankedId, _DECODE_STR)


def same(raw: bytes) -> bool:
    """Whether C took ``raw``; where it did, msgspec's decoding took it too, to equal rows (floats bit for bit)."""
    got = in_c(raw)
    if got is None:
        return False
    want = _whole_file(raw, _LineOfIds)
    assert want is not None, f"C took a file the one-call decoding does not: {raw[:200]!r}"
    assert got == want
    for g, w in zip(got, want):
        assert [type(x) for x in (g.id, g.question, g.answer, g.latency_ms)] == [type(x) for x in (w.id, w.question, w.answer, w.latency_ms)]
        assert repr(g) == repr(w)
        assert [struct.pack("<d", d.score) for d in g.retrieved if d.score is not None] == \
               [struct.pack("<d", d.score) for d in w.retrieved if d.score is not None]
    return True


WORDS = ["loan", "branch", "é", "日本", "😀", "a\"b", "back\\slash", "new\nline", "tab\t", "\u2028", "/"]


def score(rng: random.Random) -> object:
    return rng.choice([
        round(rng.random(), rng.randint(0, 8)), rng.random(), rng.uniform(-1e5, 1e5), rng.randint(-10**6, 10**6), 0, -0.0,
        rng.random() * 10 ** rng.randint(-30, 30), None, 1e299, -1e299, 5e-324, 123456789012345678, 0.1 + 0.2])


def passage(rng: random.Random, n: int) -> dict:
    d: dict = {"id": rng.choice([f"doc{rng.randint(0, 40)}#c{n % 3}", f"d{rng.randint(0, 9)}", "Ünï", "q\"x", "a\\u"])}
    if rng.random() < 0.8:
        d["text"] = rng.choice([" ".join(rng.choices(WORDS, k=rng.randint(0, 60))), None, ""])
    if rng.random() < 0.9:
        d["score"] = score(rng)
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def line(rng: random.Random, i: int) -> dict:
    row: dict = {"id": rng.choice([f"q{i}", f"q{i}", None, "", "ç\u00e0"]),
                 "retrieved": [passage(rng, n) for n in range(rng.randint(0, 8))]}
    for key, value in (("question", "what is a loan?"), ("answer", rng.choice(["yes", "a \"quoted\"\nanswer", None, "ß"])),
                       ("latency_ms", rng.choice([12, 0, 3.5, 1e3, None, 10**12, -0.0]))):
        if rng.random() < 0.5:
            row[key] = value
    items = list(row.items())
    rng.shuffle(items)
    return dict(items)


def dumps(rng: random.Random, row: dict) -> str:
    return json.dumps(row, ensure_ascii=rng.random() < 0.5, separators=rng.choice([(", ", ": "), (",", ":"), (" ,\t", " :  ")]))


def test_c_reads_generated_files_to_the_rows_msgspec_decodes():
    rng = random.Random(5)
    taken = 0
    for _ in range(300):
        rows = [dumps(rng, line(rng, i)) for i in range(rng.randint(0, 12))]
        raw = "\n".join(rows).encode() + rng.choice([b"\n", b""])
        taken += same(raw)
    assert taken > 250  # the plain shape is taken, whatever its spacing, escapes and numbers


def test_a_changed_byte_never_makes_c_take_what_msgspec_refuses():
    rng = random.Random(9)
    base = [("\n".join(dumps(rng, line(rng, i)) for i in range(3)) + "\n").encode() for _ in range(40)]
    taken = refused = 0
    for _ in range(4000):
        raw = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(raw))
            raw[at] = rng.choice(b'"\\{}[],:-+.eE0 \t\r\n\x00\x1fxnul\xc3\xa9\xff\xed\xa0\x80')
        if same(bytes(raw)):
            taken += 1
        else:
            refused += 1
    assert taken > 100 and refused > 1000


@pytest.mark.parametrize("text", [
    '{"retrieved": []}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 1}, {"id": "e", "score": -0}, {"id": "f", "score": -0.0}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 0.1e1}, {"id": "e", "score": 1E-2}, {"id": "f", "score": 12.50e+2}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 0.30000000000000004}, {"id": "e", "score": 2.2250738585072011e-308}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 9007199254740993.0}, {"id": "e", "score": 123456789012345678}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 1e299}], "latency_ms": 999999999999999999}',
    '{"id": "q1", "retrieved": [{"id": "d", "text": "\\ud83d\\ude00 \\u00e9 \\n \\/"}], "answer": "\\"x\\""}',
    '{"id": "\\u0071\\u0031", "retrieved": [{"id": "\\u00e9"}, {"id": "é"}], "latency_ms": 1e3}',
    '{"id": "q1", "retrieved": [ ], "question": null, "answer": null, "latency_ms": null}',
])
def test_edge_cases_c_takes_give_msgspec_s_rows(text):
    assert same((text + "\n" + text.replace('"q1"', '"q2"')).encode())


@pytest.mark.parametrize("text", [
    '{"id": "q1"}',                                                          # no retrieved
    '{"id": "q1", "retrieved": [{"text": "t"}]}',                            # a passage without its id
    '{"id": "q1", "retrieved": [{"id": ""}]}',                               # an empty id
    '{"id": "q1", "retrieved": [{"id": "d", "score": 1e300}]}',              # out of the scores' range
    '{"id": "q1", "retrieved": [{"id": "d", "score": -1e300}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 1e400}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": NaN}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 01}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": 1.}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "score": "1"}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "text": 5}]}',
    '{"id": "q1", "retrieved": [{"id": "d", "page_content": "t"}]}',        # a framework's document: the dict way
    '{"id": "q1", "retrieved": [{"id": "d", "id": "e"}]}',                   # a key twice
    '{"id": "q1", "retrieved": [{"id": "d", "text": "\\ud800"}]}',           # a lone surrogate
    '{"id": "q1", "retrieved": [{"id": "d", "text": "\\x"}]}',               # a bad escape
    '{"id": "q1", "retrieved": [{"id": "d", "text": "a\tb"}]}',              # a raw control character
    '{"id": "q1", "retrieved": [{"id": "d"}], "noise": {"noisy_answer": "x"}}',  # any other line key
    '{"id": "q1", "retrieved": [{"id": "d"}], "contexts": ["x"]}',
    '{"id": "q1", "retrieved": [{"id": "d"}], "error": "timeout"}',
    '{"\\u0069d": "q1", "retrieved": []}',                                   # an escaped key
    '{"id": "q1", "retrieved": [{"id": "d"}]} ',                             # a byte after the brace
    '{"id": "q1", "retrieved": [{"id": "d"},]}',
    '{"id": 5, "retrieved": []}',
    '{"id": "q1", "retrieved": null}',
    ' {"id": "q1", "retrieved": []}',
    '\ufeff{"id": "q1", "retrieved": []}',                                   # a byte order mark
    '{"id": "q1", "retrieved": [], "latency_ms": 1e999}',
])
def test_c_leaves_to_msgspec_what_it_does_not_take(text):
    raw = (text + "\n").encode()
    assert in_c(raw) is None


def test_invalid_utf8_in_a_skipped_text_is_not_taken():
    for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"):
        raw = b'{"id": "q1", "retrieved": [{"id": "d", "text": "a' + bad + b'b"}]}\n'
        assert in_c(raw) is None
        assert _whole_file(raw, _LineOfIds) is None


def test_crlf_and_blank_lines_go_msgspec_s_way():
    assert in_c(b'{"id": "q1", "retrieved": []}\r\n') is None
    assert in_c(b'{"id": "q1", "retrieved": []}\n\n{"id": "q2", "retrieved": []}\n') is None
    assert in_c(b"") == []


def test_equal_ids_share_one_str():
    rows = in_c(b'{"id": "q1", "retrieved": [{"id": "d1"}, {"id": "d2"}]}\n{"id": "q2", "retrieved": [{"id": "d1"}]}\n')
    assert rows[0].retrieved[0].id is rows[1].retrieved[0].id == "d1"


def test_an_escaped_string_msgspec_refuses_gives_none():
    def refuse(raw: bytes) -> str:
        raise msgspec.DecodeError("no")

    scan = native.scan_ranked(b'{"id": "q\\n1", "retrieved": []}\n')
    assert native.build_ranked(scan, _LineOfIds, _RankedId, refuse) is None


def test_a_run_reads_the_scan_when_its_stages_read_no_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """read_results with the prefetched scan gives the outputs the decoding gives, and the scan is what was read."""
    path = tmp_path / "results.jsonl"
    rng = random.Random(3)
    rows = [line(rng, i) for i in range(50)]
    for i, r in enumerate(rows):
        r["id"] = f"q{i}"
        r["latency_ms"] = rng.choice([5, 7.25, None])
        r.pop("question", None)
    path.write_text("\n".join(dumps(rng, r) for r in rows) + "\n", encoding="utf-8")
    cases = [GoldenCase(id=f"q{i}", question=f"question {i}", line=i + 1, relevant={"doc1": 1}) for i in range(50)]
    read = prefetch(path, ranked=True)
    got = read()
    assert got[2] is not None and got[1] is None  # scanned in C, the line count not needed
    fast = read_results(path, cases, texts=False, read=prefetch(path, ranked=True))
    monkeypatch.setattr(results_module, "build_ranked", lambda *a: None)
    slow = read_results(path, cases, texts=False, read=prefetch(path, ranked=True))
    assert fast.outputs == slow.outputs and fast.unmatched == slow.unmatched


def _outcome(path: Path, cases: list[GoldenCase]) -> object:
    try:
        r = read_results(path, cases, texts=False, read=prefetch(path, ranked=True))
    except Exception as exc:  # InputError(s): what the loop says of the file, compared word for word
        return type(exc).__name__, str(exc)
    return ([(k, repr(v), [struct.pack("<d", d.score) for d in v.retrieved if d.score is not None]) for k, v in r.outputs.items()],
            r.unmatched, r.near, r.noise)


def test_the_outputs_made_in_c_are_read_results_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where every line is a plain one (an id of a golden case, once, a latency in range), the outputs come straight from
    the scan (ranked_outputs); any other file is read by read_results' loop: the two agree on every file."""
    rng = random.Random(21)
    cases = [GoldenCase(id=f"q{i}", question=f"question {i}", line=i + 1, relevant={"doc1": 1}) for i in range(12)]
    made, real = [0], native.ranked_outputs

    def counted(*args):
        got = real(*args)
        made[0] += got is not None
        return got

    path = tmp_path / "results.jsonl"
    for _ in range(400):
        rows = []
        for i in rng.sample(range(12), rng.randint(0, 12)):
            row = line(rng, i)
            if rng.random() < 0.85:  # mostly plain lines, now and then an odd one
                row["id"] = f"q{i}"
                row["latency_ms"] = rng.choice([5, 7.25, None, 0, -0.0, 1e9])
            elif rng.random() < 0.5:
                row["id"] = rng.choice([f"q{(i + 1) % 12}", "Q1 ", "nope", None])  # a second line, a near miss, none
                row["question"] = rng.choice(["question 3", "what is a loan?"])
            else:
                row["latency_ms"] = rng.choice([-1, 10**12, 1e9 + 1, 2**70])
            rows.append(dumps(rng, row))
        path.write_text("\n".join(rows) + rng.choice(["\n", ""]), encoding="utf-8")
        monkeypatch.setattr(results_module, "ranked_outputs", counted)
        fast = _outcome(path, cases)
        monkeypatch.setattr(results_module, "ranked_outputs", None)
        loop = _outcome(path, cases)
        assert fast == loop, path.read_text(encoding="utf-8")[:400]
    assert 100 < made[0] < 400  # both kinds of file were met
    monkeypatch.setattr(results_module, "ranked_outputs", real)
    out = read_results(path, cases, texts=False, read=prefetch(path, ranked=True)).outputs
    assert all(type(o.contexts) is list and o.contexts == [] and o.error is None for o in out.values())
    assert len({id(o.contexts) for o in out.values()}) == len(out)  # a list of its own each


def test_ranked_outputs_refuses_a_shape_it_cannot_build():
    scan = native.scan_ranked(b'{"id": "q1", "retrieved": [{"id": "d", "score": 1}]}\n')
    from gate.core.model import TargetOutput
    with pytest.raises(TypeError):
        native.ranked_outputs(scan, _RankedId, _DECODE_STR, {"q1"}, TargetOutput, (), (), 1e9)  # no slots to build into
    got = native.ranked_outputs(scan, _RankedId, _DECODE_STR, {"q1"}, TargetOutput, results_module._OUTPUT_SLOTS,
                                results_module._OUTPUT_REST, 1e9)
    assert got == {"q1": TargetOutput("q1", [_RankedId("d", 1.0)], None, [], None)}
    assert native.ranked_outputs(scan, _RankedId, _DECODE_STR, set(), TargetOutput, results_module._OUTPUT_SLOTS,
                                 results_module._OUTPUT_REST, 1e9) is None  # a line of no golden case: the loop says it


def _ranked_and_lists(tmp_path: Path, seed: int) -> tuple[list[GoldenCase], dict, dict]:
    """A generated file of plain lines read twice: by the scan (outputs holding RankedPassages) and by read_results'
    loop (outputs holding lists); relevant ids drawn from the passages' own ids (some in another case or spacing)."""
    rng = random.Random(seed)
    cases = []
    rows = []
    for i in range(30):
        row = line(rng, i)
        row["id"], row["latency_ms"] = f"q{i}", rng.choice([5, None, 7.25])
        ids = [p["id"] for p in row["retrieved"]]
        relevant = {rng.choice(ids) if ids and rng.random() < seed / 10 else f"absent{rng.randint(0, 99)}": 1 for _ in range(rng.randint(1, 3))}
        if ids and rng.random() < 0.3:
            relevant[" " + ids[-1].upper()] = 1  # a near id: differs in case and spaces only
        cases.append(GoldenCase(id=f"q{i}", question=f"question {i}", line=i + 1, relevant=relevant))
        rows.append(dumps(rng, row))
    path = tmp_path / f"results{seed}.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    fast = read_results(path, cases, texts=False, read=prefetch(path, ranked=True)).outputs
    real = results_module.ranked_outputs
    try:
        results_module.ranked_outputs = None
        loop = read_results(path, cases, texts=False, read=prefetch(path, ranked=True)).outputs
    finally:
        results_module.ranked_outputs = real
    return cases, fast, loop


def test_ranked_passages_read_as_the_list_they_stand_for(tmp_path: Path):
    """The outputs made from the scan hold RankedPassages: read from Python, each is the list read_results' loop makes
    (items, negative indexes, slices, iteration, equality both ways, repr, pickling; a passage made once; the same
    errors as a list's), with its scores bit for bit."""
    import pickle
    from collections.abc import Sequence

    for seed in range(6):
        _, fast, loop = _ranked_and_lists(tmp_path, seed)
        assert fast == loop and list(fast) == list(loop)
        for cid, out in fast.items():
            r, want = out.retrieved, loop[cid].retrieved
            assert type(r) is native.RankedPassages and type(want) is list
            assert isinstance(r, Sequence) and len(r) == len(want) and bool(r) == bool(want)
            assert r == want and want == r and not (r != want) and r == r
            assert r != [*want, _RankedId("x")] and r != tuple(want)
            assert list(r) == want and [r[i] for i in range(-len(r), len(r))] == want + want
            for s in (slice(None), slice(1, None), slice(None, 3), slice(None, None, -1), slice(-3, None, 2), slice(5, 1)):
                assert r[s] == want[s] and type(r[s]) is list
            assert all(r[i] is r[i] for i in range(len(r)))  # made once, then the same object
            assert repr(r) == repr(want)
            assert [struct.pack("<d", d.score) for d in r if d.score is not None] == \
                   [struct.pack("<d", d.score) for d in want if d.score is not None]
            assert pickle.loads(pickle.dumps(r)) == want and type(pickle.loads(pickle.dumps(r))) is list
            for bad, error in ((len(r), IndexError), (-len(r) - 1, IndexError), ("0", TypeError), (1.0, TypeError)):
                with pytest.raises(error):
                    r[bad]  # type: ignore[index]
            with pytest.raises(TypeError):
                hash(r)


def test_the_c_loops_read_ranked_passages_as_they_read_lists(tmp_path: Path):
    """Every loop in C that reads passages (the metrics, the notes' near ids and unsorted scores, the fresh-label bound,
    the report's ids and rows) reads RankedPassages' ids and scores where they are kept: the values the lists give."""
    from gate.run.evaluate import case_rows
    from gate.stages.retrieval import retrieval_stage
    from tests.support.settings import retrieval

    settings = retrieval(["hit_rate@3", "mrr", "recall@5", "precision@2", "ndcg@4", "map"])
    for seed in range(6):
        cases, fast, loop = _ranked_and_lists(tmp_path, seed)
        for cid in fast:
            assert native.retrieved_ids(fast[cid].retrieved) == [d.id for d in loop[cid].retrieved]
        assert native.near_ids(cases, fast) == native.near_ids(cases, loop)
        assert native.unsorted_scores(cases, fast) == native.unsorted_scores(cases, loop)
        for cutoff in (0, 1, 3, 100):
            assert native.clearly_fresh(cases, fast, cutoff) == native.clearly_fresh(cases, loop, cutoff)
        assert retrieval_stage(settings, cases, fast) == retrieval_stage(settings, cases, loop)
        assert native.report_cases(cases, fast) == case_rows(cases, loop)


def test_the_outputs_are_keyed_by_the_cases_own_ids(tmp_path: Path):
    """ranked_outputs given each case's id mapped to itself keys each output, and names its case, by the case's own
    str (a lookup by case id then finds it at once); given a set, by an equal str of its own, as before."""
    cases, fast, _ = _ranked_and_lists(tmp_path, 3)
    by_id = {c.id: c for c in cases}
    assert all(k is by_id[k].id and out.case_id is k for k, out in fast.items())
    scan = native.scan_ranked(b'{"id": "q1", "retrieved": [{"id": "d", "score": 1}]}\n')
    from gate.core.model import TargetOutput
    args = (_RankedId, _DECODE_STR)
    rest = (TargetOutput, results_module._OUTPUT_SLOTS, results_module._OUTPUT_REST, 1e9)
    own = "".join(["q", "1"])
    assert next(iter(native.ranked_outputs(scan, *args, {own: own}, *rest))) is own
    assert next(iter(native.ranked_outputs(scan, *args, {own}, *rest))) is not own
    with pytest.raises(TypeError):
        native.ranked_outputs(scan, *args, [own], *rest)

"""Trace files (gate.io.traces): the same six requests in the four formats read into the same traces, every trace
that cannot be read named with its line and why, and a file that cannot be read at all refused naming its path.

The fixtures (tests/fixtures/traces/, see its README.md) hold the six requests of REQUESTS below, each written with
the names its tool publishes; REQUESTS is what the fixtures were written to say.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gate.core.errors import InputError
from gate.core.traces import FORMATS, Trace
from gate.io.openinference import flatten
from gate.io.traces import read_traces, row_trace
from gate.io.tracespans import Bad, parse_time

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
TEXTS = {
    "loans#1": "Books may be borrowed for three weeks and renewed twice, online or at any branch.",
    "fees#2": "Overdue books cost 20 cents a day, up to 5 euros per item.",
    "account#3": "Sign in to your account with your card number and PIN to see your loans and holds.",
    "fees#4": "DVDs and games are charged 1 euro a day when they are late.",
    "hours#5": "The central library opens on Sundays from 1 pm to 5 pm; the branches are closed.",
    "services#6": "Free wifi is available in every branch, study rooms included.",
}
# id, timestamp (UTC), question, retrieved (id, score), answer, latency ms, total tokens, feedback, error
REQUESTS = [
    ("4bf92f3577b34da6a3ce929d0e0e4736", "2024-05-06T09:15:00", "How long can I keep a borrowed book?",
     [("loans#1", 0.91), ("fees#2", 0.62)], "You can keep a book for three weeks and renew it twice.", 1240.0, 430, 1.0, None),
    ("5c0a6b9e2d1f4a3b8c7d6e5f4a3b2c1d", "2024-05-06T14:02:30.250", "Can I renew a loan online?",
     [("loans#1", 0.88), ("account#3", 0.71)], "Yes: sign in to your account and renew it from your loans.", 980.0, 414, None, None),
    ("6d1b7c0f3e2a4b5c9d8e7f6a5b4c3d2e", "2024-05-06T18:45:10", "What is the fine for a late DVD?",
     [("fees#4", 0.84), ("fees#2", 0.8), ("loans#1", 0.35)], "A late DVD costs 1 euro a day.", 1512.5, 464, -1.0, None),
    ("7e2c8d1a4f3b4c6d0e9f8a7b6c5d4e3f", "2024-05-07T08:30:00", "When does the central library open on Sundays?",
     [("hours#5", 0.93)], "On Sundays the central library opens from 1 pm to 5 pm.", 870.0, 318, 1.0, None),
    ("8f3d9e2b5a4c4d7e1f0a9b8c7d6e5f4a", "2024-05-07T11:20:45.500", "Is there wifi in the study rooms?",
     [("services#6", 0.77), ("hours#5", 0.4)], "Yes, free wifi covers every study room.", 1105.0, 377, None, None),
    ("9a4e0f3c6b5d4e8f2a1b0c9d8e7f6a5b", "2024-05-08T16:05:00", "How do I reset my PIN?",
     [("account#3", 0.69)], None, 30000.0, None, None, "generation timed out"),
]
WITH_TEXTS = ("rag-gate", "langfuse", "openinference")  # the GenAI convention's retrieved documents carry id and score only


def total(t: Trace) -> float | None:
    return None if t.usage is None else t.usage["total_tokens"]


def facts(t: Trace) -> tuple:
    """What every format must agree on (latency rounded to the microsecond the span formats carry)."""
    return (t.id, t.timestamp, t.question, [(d.id, d.score) for d in t.retrieved], t.answer, round(t.latency_ms or 0, 3),
            total(t), t.feedback, t.error, (t.system or {}).get("model"))


def fixture(fmt: str, malformed: bool = False) -> Path:
    return FIXTURES / f"{fmt}{'.malformed' if malformed else ''}.jsonl"


def write(tmp_path: Path, rows: list, name: str = "traces.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the six requests, four ways


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_reads_the_six_requests(fmt: str) -> None:
    read = read_traces(fixture(fmt), fmt)
    assert read.unreadable == []
    assert [t.id for t in read.traces] == [r[0] for r in REQUESTS]
    for t, (tid, ts, question, docs, answer, latency, tokens, feedback, error) in zip(read.traces, REQUESTS):
        assert t.timestamp == datetime.fromisoformat(ts).replace(tzinfo=UTC), tid
        assert t.timestamp is not None and t.timestamp.utcoffset() is not None
        assert t.question == question
        assert [d.id for d in t.retrieved] == [d for d, _ in docs]
        assert [d.score for d in t.retrieved] == pytest.approx([s for _, s in docs])
        assert [d.text for d in t.retrieved] == ([TEXTS[d] for d, _ in docs] if fmt in WITH_TEXTS else [None] * len(docs))
        assert t.answer == answer
        assert t.latency_ms == pytest.approx(latency, abs=0.01)
        assert total(t) == tokens
        assert t.feedback == feedback
        assert t.error == error
        assert t.system == {"model": "gpt-4o-mini"}


def test_the_four_formats_give_the_same_traces() -> None:
    reads = {fmt: read_traces(fixture(fmt), fmt) for fmt in FORMATS}
    first = [facts(t) for t in reads["rag-gate"].traces]
    assert len(first) == 6
    for fmt, read in reads.items():
        assert [facts(t) for t in read.traces] == first, fmt
        assert {t.timestamp.date().isoformat() for t in read.traces if t.timestamp} == {"2024-05-06", "2024-05-07", "2024-05-08"}


def test_each_trace_starts_on_the_line_of_its_first_span() -> None:
    assert [t.line for t in read_traces(fixture("rag-gate"), "rag-gate").traces] == [1, 2, 3, 5, 6, 7]  # line 4 is blank
    # langfuse: three observations for each of the first three requests (a root span), two for the others
    assert [t.line for t in read_traces(fixture("langfuse"), "langfuse").traces] == [1, 4, 7, 10, 12, 14]
    assert [t.line for t in read_traces(fixture("openinference"), "openinference").traces] == [1, 4, 7, 10, 13, 16]
    # otel-genai: the third request's retrieval span comes in line 3, its other spans with the fifth request's in line 5
    assert [t.line for t in read_traces(fixture("otel-genai"), "otel-genai").traces] == [1, 2, 3, 4, 5, 6]


def test_non_blank_lines_are_counted() -> None:
    assert read_traces(fixture("rag-gate"), "rag-gate").lines == 6  # 7 lines, one blank
    assert read_traces(fixture("otel-genai"), "otel-genai").lines == 6


def test_the_fast_and_the_plain_reading_of_a_line_agree() -> None:
    """Each line of the usual shape is decoded by msgspec; read as a dict it gives the same Trace."""
    traces = read_traces(fixture("rag-gate"), "rag-gate").traces
    lines = [(n, line) for n, line in enumerate(fixture("rag-gate").read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    assert [row_trace(json.loads(line), n) for n, line in lines] == traces


# --------------------------------------------------------------------------- the fixtures use published names only

LANGFUSE_NAMES = {  # Observation / ObservationsView / Score of Langfuse's public API; a LangChain Document; chat messages
    "id", "traceId", "type", "name", "startTime", "endTime", "parentObservationId", "input", "output", "model", "level",
    "statusMessage", "latency", "usageDetails", "observationId", "value", "dataType", "source", "timestamp", "comment",
    "page_content", "metadata", "score", "role", "content", "total"}
OPENINFERENCE_NAMES = {
    "name", "context.trace_id", "context.span_id", "span_kind", "parent_id", "start_time", "end_time", "status_code",
    "status_message", "events", "attributes.openinference.span.kind", "attributes.input.value", "attributes.input.mime_type",
    "attributes.output.value", "attributes.output.mime_type", "attributes.retrieval.documents.N.document.id",
    "attributes.retrieval.documents.N.document.content", "attributes.retrieval.documents.N.document.score",
    "attributes.llm.model_name", "attributes.llm.input_messages.N.message.role", "attributes.llm.input_messages.N.message.content",
    "attributes.llm.output_messages.N.message.role", "attributes.llm.output_messages.N.message.content",
    "attributes.llm.token_count.prompt", "attributes.llm.token_count.completion", "attributes.llm.token_count.total",
    "attributes.trace.annotations.N.annotation.name", "attributes.trace.annotations.N.annotation.score",
    "attributes.trace.annotations.N.annotation.label", "attributes.trace.annotations.N.annotation.annotator_kind"}
OTEL_ATTRIBUTES = {  # GenAI semantic conventions v1.41.0, plus the HTTP and resource conventions for the service span
    "service.name", "service.version", "http.request.method", "url.path", "error.type", "gen_ai.operation.name",
    "gen_ai.data_source.id", "gen_ai.retrieval.query.text", "gen_ai.retrieval.documents", "gen_ai.provider.name",
    "gen_ai.request.model", "gen_ai.response.model", "gen_ai.system_instructions", "gen_ai.input.messages",
    "gen_ai.output.messages", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.evaluation.name",
    "gen_ai.evaluation.score.value", "gen_ai.evaluation.score.label"}
OTLP_FIELDS = {"resourceSpans", "resource", "attributes", "scopeSpans", "scope", "name", "version", "spans", "traceId", "spanId",
               "parentSpanId", "kind", "startTimeUnixNano", "endTimeUnixNano", "events", "status", "code", "message",
               "timeUnixNano", "key", "value", "stringValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "values"}
OTEL_VALUE_FIELDS = {"role", "parts", "type", "content", "finish_reason", "id", "score"}  # messages and documents


def keys(value, skip: tuple[str, ...] = ()) -> set[str]:
    """Every object key in ``value``, at any depth (not under the keys ``skip``)."""
    out: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.update(v)
            stack.extend(x for k, x in v.items() if k not in skip)
        elif isinstance(v, list):
            stack.extend(v)
    return out


def test_the_langfuse_fixture_uses_langfuse_names() -> None:
    rows = [json.loads(line) for line in fixture("langfuse").read_text(encoding="utf-8").splitlines()]
    assert keys(rows) <= LANGFUSE_NAMES, keys(rows) - LANGFUSE_NAMES


def test_the_openinference_fixture_uses_openinference_names() -> None:
    names = set()
    for line in fixture("openinference").read_text(encoding="utf-8").splitlines():
        names |= {re.sub(r"\.\d+\.", ".N.", k) for k in flatten(json.loads(line))}
    names.discard("")
    assert names <= OPENINFERENCE_NAMES, names - OPENINFERENCE_NAMES
    assert "attributes.retrieval.documents.N.document.content" in names


def test_the_otel_fixture_uses_otlp_and_genai_names() -> None:
    attributes, values = set(), set()
    for line in fixture("otel-genai").read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        assert keys(request) - OTEL_VALUE_FIELDS <= OTLP_FIELDS, keys(request) - OTLP_FIELDS - OTEL_VALUE_FIELDS
        stack = [request]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                if "key" in v and "value" in v and v["key"] not in OTEL_VALUE_FIELDS:
                    attributes.add(v["key"])
                    if "stringValue" in v["value"] and v["value"]["stringValue"][:1] in "[{":
                        values |= keys(json.loads(v["value"]["stringValue"]))
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
    assert attributes <= OTEL_ATTRIBUTES, attributes - OTEL_ATTRIBUTES
    assert values <= OTEL_VALUE_FIELDS, values - OTEL_VALUE_FIELDS
    assert "gen_ai.retrieval.documents" in attributes


# --------------------------------------------------------------------------- traces that cannot be read

MALFORMED = {
    "rag-gate": (["ok-1", "ok-2", "42"], [
        (2, None, "invalid JSON"), (3, "q-int", "'question' must be a string, got int"),
        (4, None, "must be a JSON object (one trace), got list"), (5, "no-question", "'question' is required"),
        (6, "ok-1", "duplicate trace id 'ok-1', first on line 1"),
        (8, "bad-ts", "'timestamp' must be an ISO 8601 date and time, got 'yesterday'"),
        (9, "bad-score", "'retrieved[0].score' must be a number, got str"), (10, None, "'id' is required"),
        (11, "neg-latency", "'latency_ms' must be a number of at least 0, got -5"),
        (12, "bad-feedback", "'feedback' must be a number"), (15, "bad-usage", "'usage.prompt_tokens' must be a number, got str"),
        (16, "bad-system", "system.model must be a string or a number, got list")]),
    "langfuse": (["t-good"], [
        (2, None, "invalid JSON"), (3, None, "'traceId' is required"),
        (4, "t-bad-docs", "a RETRIEVER's 'output' must be a list of documents, got str"),
        (6, "t-good", "score 'user-feedback' value must be a number, got str"), (7, "t-no-question", "no question"),
        (8, "t-missing", "feedback for trace 't-missing', which has nothing else in the file"),
        (9, "t-bad-time", "'startTime' must be an ISO 8601 date and time, got 'soon'"), (10, "t-bad-type", "'type' must be"),
    ]),
    "openinference": (["oi-good"], [
        (2, None, "'context.trace_id' is required"),
        (3, "oi-bad-score", "'retrieval.documents.0.document.score' must be a number, got str"),
        (5, None, "must be a JSON object (a span), got str"), (6, "oi-no-question", "no question"),
        (7, "oi-bad-doc-id", "'retrieval.documents.0.document.id' is required")]),
    "otel-genai": (["a1" * 16], [
        (2, None, 'must be an OTLP/JSON export request {"resourceSpans": [...]}'), (3, None, "each span needs a 'traceId'"),
        (3, "b2" * 16, "attribute 'gen_ai.retrieval.documents' must be JSON text"),
        (5, "c3" * 16, "'startTimeUnixNano' must be nanoseconds since 1970"), (6, None, "invalid JSON"),
        (7, "d4" * 16, "no question")]),
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_unreadable_trace_is_named_with_its_line_and_reason(fmt: str) -> None:
    read = read_traces(fixture(fmt, malformed=True), fmt)
    ids, problems = MALFORMED[fmt]
    assert [t.id for t in read.traces] == ids
    assert [(u.line, u.id) for u in read.unreadable] == [(line, tid) for line, tid, _ in problems]
    for u, (_, _, said) in zip(read.unreadable, problems):
        assert said in u.reason, (u, said)
    assert all(not u.reason.startswith("line ") for u in read.unreadable)  # the line is a field of its own


def test_a_json_error_says_where_in_the_line() -> None:
    reason = read_traces(fixture("rag-gate", malformed=True), "rag-gate").unreadable[0].reason
    assert "column 44" in reason and "Cut short?" in reason, reason


def test_a_trace_spoiled_by_one_span_is_unreadable_whole() -> None:
    """A bad retriever span makes its trace unreadable, even though its other spans could be read (t-bad-docs)."""
    read = read_traces(fixture("langfuse", malformed=True), "langfuse")
    assert "t-bad-docs" not in [t.id for t in read.traces]
    assert [u.line for u in read.unreadable if u.id == "t-bad-docs"] == [4]


def test_a_duplicate_id_counts_against_the_traces_read_only(tmp_path: Path) -> None:
    path = write(tmp_path, [{"id": "x", "question": 3}, {"id": "x", "question": "Read?"}, {"id": "x", "question": "Again?"},
                            {"id": 7, "question": "Seven?"}, {"id": "7", "question": "Seven again?"}])
    read = read_traces(path, "rag-gate")
    assert [(t.id, t.line) for t in read.traces] == [("x", 2), ("7", 4)]
    assert [(u.line, u.reason) for u in read.unreadable][1:] == [
        (3, "duplicate trace id 'x', first on line 2"), (5, "duplicate trace id '7', first on line 4")]


def test_a_trace_split_over_lines_is_one_trace() -> None:
    """Spans of one trace come wherever the exporter wrote them: the third request's spans are in lines 3 and 5."""
    t = next(t for t in read_traces(fixture("otel-genai"), "otel-genai").traces if t.id.startswith("6d1b"))
    assert t.line == 3 and [d.id for d in t.retrieved] == ["fees#4", "fees#2", "loans#1"] and t.answer == "A late DVD costs 1 euro a day."


# --------------------------------------------------------------------------- a file that cannot be read at all


def test_a_missing_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "traces.jsonl"
    with pytest.raises(InputError) as info:
        read_traces(path, "rag-gate")
    assert info.value.exit_code == 2
    assert str(path) in str(info.value) and "not found" in str(info.value)


def test_an_unknown_format_is_an_input_error(tmp_path: Path) -> None:
    path = write(tmp_path, [{"id": "a", "question": "q?"}])
    with pytest.raises(InputError) as info:
        read_traces(path, "jaeger")
    assert "'jaeger'" in str(info.value) and "otel-genai" in str(info.value) and str(path) in str(info.value)


def test_a_file_that_is_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps({"id": "a", "question": "Où?"}).encode() + b"\n" + '{"id": "b", "question": "Déjà?"}\n'.encode("latin-1"))
    for fmt in FORMATS:
        with pytest.raises(InputError, match="not UTF-8"):
            read_traces(path, fmt)


def test_a_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory"):
        read_traces(tmp_path, "langfuse")


def test_an_empty_file_reads_as_no_traces(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    read = read_traces(path, "openinference")
    assert (read.traces, read.unreadable, read.lines) == ([], [], 0)


# --------------------------------------------------------------------------- rag-gate's own format


def test_rag_gate_format_values(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"id": "a", "question": "Epoch?", "timestamp": 1714989600, "feedback": False, "retrieved": ["d1", {"id": 2, "score": 3}],
         "usage": {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 2}, "contexts": ["c1"]},
        {"id": "b", "question": "Naive?", "timestamp": "2024-05-06T12:00:00", "feedback": 0.5, "answer": None,
         "usage": {"total_tokens": 99}, "user_id": "ignored"},
        {"id": "c", "question": "Offset?", "timestamp": "2024-05-06T23:30:00-02:00", "feedback": True},
    ])
    a, b, c = read_traces(path, "rag-gate").traces
    assert a.timestamp == datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
    assert a.feedback == -1.0 and b.feedback == 0.5 and c.feedback == 1.0
    assert [(d.id, d.text, d.score) for d in a.retrieved] == [("d1", None, None), ("2", None, 3)]
    assert a.usage == {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 2, "total_tokens": 15}
    assert a.contexts == ("c1",) and b.contexts is None
    assert b.timestamp == datetime(2024, 5, 6, 12, 0, tzinfo=UTC) and b.usage == {"total_tokens": 99}
    assert c.timestamp == datetime(2024, 5, 7, 1, 30, tzinfo=UTC) and c.timestamp.tzinfo is UTC


@pytest.mark.parametrize(("row", "said"), [
    ({"id": "", "question": "q?"}, "'id' must be a non-empty string, got an empty string"),
    ({"id": True, "question": "q?"}, "'id' must be a non-empty string, got bool"),
    ({"id": "a", "question": "   "}, "'question' must not be empty"),
    ({"id": "a", "question": "q?", "answer": 3}, "'answer' must be a string, got int"),
    ({"id": "a", "question": "q?", "error": {"code": 500}}, "'error' must be a string, got object"),
    ({"id": "a", "question": "q?", "retrieved": "d1"}, "'retrieved' must be a list"),
    ({"id": "a", "question": "q?", "retrieved": [{"text": "no id"}]}, "'retrieved[0].id' is required"),
    ({"id": "a", "question": "q?", "retrieved": [{"id": "d", "text": 5}]}, "'retrieved[0].text' must be a string, got int"),
    ({"id": "a", "question": "q?", "retrieved": [None]}, "'retrieved[0]' must be a passage"),
    ({"id": "a", "question": "q?", "contexts": ["a", 1]}, "'contexts' must be a list of strings, got a list holding int"),
    ({"id": "a", "question": "q?", "usage": [1]}, "'usage' must be an object of token counts"),
    ({"id": "a", "question": "q?", "usage": {"completion_tokens": -1}}, "'usage.completion_tokens' must be a number of at least 0"),
    ({"id": "a", "question": "q?", "latency_ms": "fast"}, "'latency_ms' must be a number, got str"),
    ({"id": "a", "question": "q?", "timestamp": [2024]}, "'timestamp' must be an ISO 8601 string or a Unix time in seconds, got list"),
    ({"id": "a", "question": "q?", "timestamp": 1e20}, "'timestamp' is a Unix time out of range"),
    ({"id": "a", "question": "q?", "system": "gpt"}, "'system' must be an object of strings and numbers"),
])
def test_rag_gate_format_reasons(tmp_path: Path, row: dict, said: str) -> None:
    read = read_traces(write(tmp_path, [row]), "rag-gate")
    assert read.traces == []
    assert len(read.unreadable) == 1 and said in read.unreadable[0].reason, read.unreadable


def test_parse_time_takes_iso_and_unix_seconds() -> None:
    assert parse_time("2024-05-29 13:46:19.963000", "t") == datetime(2024, 5, 29, 13, 46, 19, 963000, tzinfo=UTC)
    assert parse_time("2024-05-06T10:00:00.123456789Z", "t") == datetime(2024, 5, 6, 10, 0, 0, 123456, tzinfo=UTC)
    assert parse_time(0.5, "t") == datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)
    assert parse_time(None, "t") is None
    with pytest.raises(Bad, match="got bool"):
        parse_time(True, "t")


# --------------------------------------------------------------------------- the span formats' variants


def test_langfuse_blob_export_names_and_json_text(tmp_path: Path) -> None:
    """The blob storage export: snake_case names, input and output as JSON text, timestamps without a zone (UTC)."""
    path = write(tmp_path, [
        {"id": "r", "trace_id": "t1", "type": "RETRIEVER", "start_time": "2024-05-29 13:46:19.963000", "end_time": "2024-05-29 13:46:20.100000",
         "parent_observation_id": None, "input": "Opening hours?",
         "output": json.dumps({"documents": [{"content": "Open 9 to 5.", "metadata": {"id": "hours#1", "score": 0.5}}]})},
        {"id": "g", "trace_id": "t1", "type": "GENERATION", "start_time": "2024-05-29 13:46:20.200000", "end_time": "2024-05-29 13:46:21.463000",
         "parent_observation_id": None, "provided_model_name": "claude-sonnet", "usage_details": json.dumps({"input": 50, "output": 7}),
         "input": json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "Opening hours?"}]}]}),
         "output": json.dumps({"role": "assistant", "content": "From 9 to 5."})},
        {"id": "s", "trace_id": "t1", "name": "User Feedback", "value": 0, "data_type": "BOOLEAN"},
        {"id": "s2", "trace_id": "t1", "name": "user-feedback", "value": 1, "data_type": "BOOLEAN"},
        {"id": "s3", "trace_id": "t1", "name": "user-feedback", "value": 1, "data_type": "BOOLEAN"},
    ])
    read = read_traces(path, "langfuse")
    assert read.unreadable == []
    (t,) = read.traces
    assert t.question == "Opening hours?" and t.answer == "From 9 to 5."
    assert [(d.id, d.text, d.score) for d in t.retrieved] == [("hours#1", "Open 9 to 5.", 0.5)]
    assert t.usage == {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
    assert t.system == {"model": "claude-sonnet"}
    assert t.timestamp == datetime(2024, 5, 29, 13, 46, 19, 963000, tzinfo=UTC)
    assert t.latency_ms == pytest.approx(1500.0)  # no single root: the first start to the last end
    assert t.feedback == pytest.approx(1 / 3)  # the mean of -1 (false), +1, +1


def test_langfuse_root_observation_gives_question_answer_latency_and_error(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"id": "root", "traceId": "t", "type": "AGENT", "startTime": "2024-05-06T10:00:00Z", "endTime": "2024-05-06T10:00:09Z",
         "latency": 2.5, "input": "What the user asked", "output": "What the user got", "level": "ERROR", "statusMessage": "tool failed"},
        {"id": "g", "traceId": "t", "type": "GENERATION", "parentObservationId": "root", "startTime": "2024-05-06T10:00:01Z",
         "input": [{"role": "user", "content": "Rewritten question"}], "output": "Draft", "usageDetails": {"input": 1, "output": 2, "total": 4}},
        {"id": "g2", "traceId": "t", "type": "GENERATION", "parentObservationId": "root", "startTime": "2024-05-06T10:00:02Z",
         "input": "x", "output": "Final draft", "usageDetails": {"input": 3, "output": 4}},
    ])
    (t,) = read_traces(path, "langfuse").traces
    assert (t.question, t.answer, t.latency_ms, t.error) == ("What the user asked", "What the user got", 2500.0, "tool failed")
    assert t.usage == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 11}  # both generations, each total as given


def test_openinference_reranker_comes_after_its_retriever_and_contents_are_read(tmp_path: Path) -> None:
    def span(span_id: str, parent: str | None, start: str, end: str, attributes: dict) -> dict:
        return {"name": span_id, "context": {"trace_id": "t", "span_id": span_id}, "parent_id": parent, "start_time": start,
                "end_time": end, "status_code": "OK", "attributes": attributes}
    path = write(tmp_path, [
        span("rr", "root", "2024-05-06T10:00:01+00:00", "2024-05-06T10:00:02+00:00", {
            "openinference.span.kind": "RERANKER", "reranker.output_documents": [{"document.id": "b", "document.score": 0.9}]}),
        span("r", "root", "2024-05-06T10:00:00+00:00", "2024-05-06T10:00:01+00:00", {
            "openinference.span.kind": "RETRIEVER", "retrieval.documents": [{"document.id": "a"}, {"document.id": "b"}]}),
        span("llm", "root", "2024-05-06T10:00:02+00:00", "2024-05-06T10:00:03+00:00", {
            "openinference.span.kind": "LLM", "llm.response.model_name": "m-2",
            "llm.input_messages": [{"message.role": "user", "message.contents": [
                {"message_content.type": "text", "message_content.text": "Part one."},
                {"message_content.type": "image", "message_content.image": {"image.url": "x"}},
                {"message_content.type": "text", "message_content.text": "Part two?"}]}],
            "output.value": "Plain answer", "annotations.0.annotation.name": "helpfulness", "annotations.0.annotation.score": 0.1,
            "evaluations.0.evaluation.name": "user_feedback", "evaluations.0.evaluation.score": -1}),
        span("root", None, "2024-05-06T09:59:59+00:00", "2024-05-06T10:00:04+00:00", {
            "openinference.span.kind": "CHAIN", "input.value": json.dumps({"query": "q"}), "input.mime_type": "application/json"}),
    ])
    (t,) = read_traces(path, "openinference").traces
    assert [(d.id, d.score) for d in t.retrieved] == [("b", 0.9)]
    assert t.question == "Part one.\n\nPart two?"  # the root's input is JSON, not text: the LLM's user message
    assert t.answer == "Plain answer" and t.system == {"model": "m-2"}
    assert t.feedback == -1.0 and t.latency_ms == pytest.approx(5000.0) and t.line == 1


def test_otel_values_status_names_and_model(tmp_path: Path) -> None:
    attrs = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "asked-for"}},
        {"key": "gen_ai.response.model", "value": {"stringValue": "answered-by"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": 12}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "First?"}]}, {"role": "assistant", "parts": []},
             {"role": "user", "parts": [{"type": "text", "content": "Second?"}]}])}},
    ]
    span = {"traceId": "ab" * 16, "spanId": "1" * 16, "startTimeUnixNano": 1714989600000000000, "endTimeUnixNano": "1714989600250000000",
            "status": {"code": "STATUS_CODE_ERROR", "message": "rate limited"}, "attributes": attrs}
    (t,) = read_traces(write(tmp_path, [{"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}]), "otel-genai").traces
    assert t.question == "Second?" and t.answer is None and t.error == "rate limited"
    assert t.system == {"model": "answered-by"}
    assert t.usage == {"prompt_tokens": 12, "total_tokens": 12}
    assert t.latency_ms == pytest.approx(250.0) and t.timestamp == datetime(2024, 5, 6, 10, 0, tzinfo=UTC)


def test_flatten_makes_nested_and_listed_attributes_dotted() -> None:
    assert flatten({"a": {"b": [{"c.d": 1}, 2]}, "e.f": "g", "h": [], "i": {}}) == {"a.b.0.c.d": 1, "a.b.1": 2, "e.f": "g", "h": [], "i": {}}


def test_a_span_written_twice_spoils_its_trace(tmp_path: Path) -> None:
    """An export written twice over would double the trace's tokens: the trace is unreadable, the others are read."""
    gen = {"id": "g", "traceId": "t", "type": "GENERATION", "input": "Twice?", "usageDetails": {"input": 5, "output": 1}}
    other = {"id": "g", "traceId": "u", "type": "GENERATION", "input": "Once?"}
    read = read_traces(write(tmp_path, [gen, other, gen]), "langfuse")
    assert [t.id for t in read.traces] == ["u"]
    assert [(u.line, u.id, u.reason) for u in read.unreadable] == [(3, "t", "duplicate observation id 'g', first on line 1")]
    span = {"traceId": "ab" * 16, "spanId": "1" * 16, "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Q?"}]}])}}]}
    read = read_traces(write(tmp_path, [{"resourceSpans": [{"scopeSpans": [{"spans": [span, span]}]}]}], "otel.jsonl"), "otel-genai")
    assert read.traces == [] and [(u.line, u.reason) for u in read.unreadable] == [(1, f"duplicate span id {'1' * 16!r}, first on line 1")]


def test_a_langfuse_event_is_neither_the_root_nor_a_duration(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"id": "root", "traceId": "t", "type": "SPAN", "startTime": "2024-05-06T10:00:00Z", "endTime": "2024-05-06T10:00:02Z",
         "input": "Asked?", "output": "Answered."},
        {"id": "e", "traceId": "t", "type": "EVENT", "startTime": "2024-05-06T10:00:30Z", "input": "thumbs up clicked"},
    ])
    (t,) = read_traces(path, "langfuse").traces
    assert (t.question, t.answer, t.latency_ms) == ("Asked?", "Answered.", 2000.0)

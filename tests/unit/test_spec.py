"""load_spec: defaults, env expansion, paths, and every malformed class named with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.config.loader import load_spec
from gate.core.errors import EXIT_INPUT, InputError, InputErrors

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "rag-eval.yml"

# Block style throughout, so that every key has a line of its own.
BASE = """\
version: 1
golden_set: golden.jsonl
target:
  results: results.jsonl
stages:
  retrieval:
    metrics:
      - hit_rate@5
      - mrr
    gates:
      hit_rate@5:
        min: 0.8
        max_drop: 0.02
"""
#  line:  1 version  2 golden_set  3 target  4 results  5 stages  6 retrieval  7 metrics
#         8 - hit_rate@5  9 - mrr  10 gates  11 hit_rate@5  12 min  13 max_drop   (14 = first appended line)

HTTP_TARGET = """\
target:
  http:
    url: https://rag.example/ask
    headers:
      Authorization: Bearer ${RAG_TOKEN}
      X-Literal: $${NOT_EXPANDED}
"""

SECRET = "s3cr3t-t0ken-value"


def write(tmp_path: Path, text: str, name: str = "rag-eval.yml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def with_http(base: str = BASE) -> str:
    return base.replace("target:\n  results: results.jsonl\n", HTTP_TARGET)


def load_error(path: Path, env: dict[str, str] | None = None) -> InputError:
    with pytest.raises(InputError) as info:
        load_spec(path, env=env or {})
    assert info.value.exit_code == EXIT_INPUT
    return info.value


# --------------------------------------------------------------------------- valid specs


def test_quickstart_spec_loads():
    spec = load_spec(QUICKSTART, env={})
    assert spec.path == QUICKSTART
    assert "python" in spec.target
    assert spec.golden_set_path == QUICKSTART.parent / "golden_set.jsonl"
    assert spec.golden_set_path.is_file()
    assert spec.stages.retrieval is not None and [m.name for m in spec.stages.retrieval.metrics][:2] == ["hit_rate@5", "mrr"]
    assert spec.secrets == []


def test_base_spec_loads_and_fills_defaults(tmp_path):
    spec = load_spec(write(tmp_path, BASE), env={})
    d = spec.data
    assert d["max_error_rate"] == 0
    assert d["baseline"] == {"path": "eval/baseline.json", "on_mismatch": "warn"}
    assert spec.baseline_path == tmp_path / "eval" / "baseline.json"
    assert d["report"]["comment_id"] == "default"
    assert d["stages"]["retrieval"]["match"] == {"level": "exact", "separator": "#", "min_overlap": 0.8}
    assert d["stages"]["retrieval"]["gates"] == {"hit_rate@5": {"min": 0.8, "max_drop": 0.02}}
    assert "http" not in d["target"]
    assert spec.target_k == 10  # at least 10 when no metric asks for more
    # raw keeps what the user wrote (no defaults)
    assert "max_error_rate" not in spec.raw and "baseline" not in spec.raw
    assert spec.line("stages", "retrieval", "gates", "hit_rate@5", "max_drop") == 13


def test_http_defaults(tmp_path):
    spec = load_spec(write(tmp_path, with_http()), env={"RAG_TOKEN": SECRET})
    http = spec.target["http"]
    assert http["concurrency"] == 8
    assert http["timeout_s"] == 30 and http["retries"] == 3
    assert http["request"] == {"question": "question", "k": "k", "contexts": "contexts"}
    assert http["response"]["retrieved"] == "retrieved"


def test_user_values_beat_defaults(tmp_path):
    text = BASE + "max_error_rate: 0.1\nbaseline:\n  path: other/base.json\n  on_mismatch: fail\n"
    spec = load_spec(write(tmp_path, text), env={})
    assert spec.data["max_error_rate"] == 0.1
    assert spec.data["baseline"] == {"path": "other/base.json", "on_mismatch": "fail"}
    assert spec.baseline_path == tmp_path / "other" / "base.json"


def test_target_k_follows_the_largest_cut_off(tmp_path):
    spec = load_spec(write(tmp_path, BASE.replace("      - mrr\n", "      - ndcg@20\n")), env={})
    assert spec.target_k == 20


def test_paths_resolve_relative_to_the_spec_file(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = BASE.replace("golden_set: golden.jsonl", "golden_set: ../data/golden.jsonl")
    spec = load_spec(write(tmp_path, text, "conf/rag-eval.yml"), env={})
    assert spec.golden_set_path.resolve() == (tmp_path / "data" / "golden.jsonl").resolve()
    assert spec.baseline_path == tmp_path / "conf" / "eval" / "baseline.json"
    assert spec.resolve(spec.target["results"]) == tmp_path / "conf" / "results.jsonl"
    absolute = tmp_path / "abs" / "golden.jsonl"
    spec = load_spec(write(tmp_path, BASE.replace("golden.jsonl", str(absolute)), "conf/b.yml"), env={})
    assert spec.golden_set_path == absolute


def test_relative_spec_path_resolves_from_cwd(tmp_path, monkeypatch):
    write(tmp_path, BASE, "conf/rag-eval.yml")
    monkeypatch.chdir(tmp_path)
    spec = load_spec("conf/rag-eval.yml", env={})
    assert spec.golden_set_path.resolve() == (tmp_path / "conf" / "golden.jsonl").resolve()


# --------------------------------------------------------------------------- env expansion and secrets


def test_env_expansion_in_headers(tmp_path):
    spec = load_spec(write(tmp_path, with_http()), env={"RAG_TOKEN": SECRET})
    headers = spec.target["http"]["headers"]
    assert headers["Authorization"] == f"Bearer {SECRET}"
    assert headers["X-Literal"] == "${NOT_EXPANDED}"  # $${X} stays literal
    assert SECRET in spec.secrets
    assert "NOT_EXPANDED" not in " ".join(spec.secrets)
    # raw is never expanded (what a message may quote)
    assert spec.raw["target"]["http"]["headers"]["Authorization"] == "Bearer ${RAG_TOKEN}"


def test_env_comes_from_os_environ_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_TOKEN", SECRET)
    spec = load_spec(write(tmp_path, with_http()))
    assert spec.target["http"]["headers"]["Authorization"] == f"Bearer {SECRET}"


def test_missing_env_var_names_the_variable_the_key_and_the_line(tmp_path):
    path = write(tmp_path, with_http())
    err = load_error(path, env={"OTHER": "x"})
    msg = str(err)
    assert "RAG_TOKEN" in msg
    assert "target.http.headers.Authorization" in msg
    assert f"{path}:7:" in msg  # the Authorization line
    assert "NOT_EXPANDED" not in msg


def test_env_var_in_a_checked_field(tmp_path):
    """The schema says any string may reference ${NAME}: a URL from the environment must work."""
    text = BASE.replace("target:\n  results: results.jsonl\n", "target:\n  http:\n    url: ${RAG_URL}\n")
    url = "https://rag.internal.example/ask"
    spec = load_spec(write(tmp_path, text), env={"RAG_URL": url})
    assert spec.target["http"]["url"] == url


def test_env_var_in_a_checked_field_with_a_bad_value_is_reported_without_the_value(tmp_path):
    text = BASE.replace("target:\n  results: results.jsonl\n", "target:\n  http:\n    url: ${RAG_URL}\n")
    path = write(tmp_path, text)
    bad = "ftp://user:hunter2-secret@host/ask"
    err = load_error(path, env={"RAG_URL": bad})
    msg = str(err) + (err.hint or "")
    assert f"{path}:5:" in msg and "target.http.url" in msg
    assert "RAG_URL" in msg
    assert bad not in msg and "hunter2" not in msg


@pytest.mark.parametrize(
    "target, env, line, key, rule",
    [
        ("  python: ${FN}\n", {"FN": "no-colon-here"}, 4, "target.python", "must match"),
        ("  http:\n    url: https://x\n    timeout_s: ${T}\n", {"T": "987654321"}, 6, "target.http.timeout_s", "number"),
        ("  results: ${RESULTS}\n", {"RESULTS": ""}, 4, "target.results", "empty"),
    ],
    ids=["python ref", "number from env", "empty path"],
)
def test_expanded_values_are_checked_too(tmp_path, target, env, line, key, rule):
    path = write(tmp_path, BASE.replace("  results: results.jsonl\n", target))
    err = load_error(path, env=env)
    msg = str(err)
    assert f"{path}:{line}: {key}:" in msg
    assert rule in msg
    for name, value in env.items():
        assert "${" + name + "}" in msg
        assert not value or value not in msg


def test_python_target_from_env(tmp_path):
    spec = load_spec(write(tmp_path, BASE.replace("  results: results.jsonl\n", "  python: ${FN}\n")), env={"FN": "pkg.mod:answer"})
    assert spec.target["python"]["function"] == "pkg.mod:answer"  # the short form, as the loader fills it


@pytest.mark.parametrize(
    "extra",
    [
        "colour: red\n",  # a schema error
        "      ndcg@10:\n        min: 0.5\n",  # a semantic error
    ],
    ids=["schema error", "semantic error"],
)
def test_secret_never_in_error_messages(tmp_path, extra):
    path = write(tmp_path, with_http(BASE + extra))
    err = load_error(path, env={"RAG_TOKEN": SECRET})
    text = str(err) + (err.hint or "") + repr(err.args)
    assert SECRET not in text
    assert str(path) in text


# --------------------------------------------------------------------------- malformed: one class a row


def _mut(old: str, new: str):
    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return apply


def _add(extra: str):
    return lambda text: text + extra


BAD = [
    # (id, mutation of BASE, line of the offending key, words the message must contain)
    ("unknown top-level key", _add("colour: red\n"), 14, ["colour", "unknown key"]),
    ("unknown nested key", _mut("    metrics:", "    metrcs:"), 7, ["metrcs", "stages.retrieval"]),
    ("unknown gate key", _mut("        min: 0.8", "        minimum: 0.8"), 12, ["minimum"]),
    ("unknown target key", _mut("  results: results.jsonl", "  results: results.jsonl\n  timeout: 3"), 5, ["timeout"]),
    ("wrong type: golden_set", _mut("golden_set: golden.jsonl", "golden_set: 5"), 2, ["golden_set"]),
    ("wrong type: max_error_rate", _add("max_error_rate: high\n"), 14, ["max_error_rate"]),
    ("out of range: max_error_rate", _add("max_error_rate: 1.5\n"), 14, ["max_error_rate"]),
    ("wrong type: metrics", _mut("    metrics:\n      - hit_rate@5\n      - mrr\n", "    metrics: hit_rate@5\n"), 7, ["metrics"]),
    ("wrong type: min", _mut("        min: 0.8", "        min: high"), 12, ["min"]),
    ("wrong type: stages", _mut("stages:\n  retrieval:", "stages: 3\nx_stages:\n  retrieval:"), 5, ["stages"]),
    ("bad metric name", _mut("      - mrr", "      - hits@5"), 9, ["hits@5"]),
    ("metric without k", _mut("      - mrr", "      - recall"), 9, ["recall"]),
    ("metric k zero", _mut("      - mrr", "      - ndcg@0"), 9, ["ndcg@0"]),
    ("gate on a metric not computed", _add("      ndcg@10:\n        min: 0.5\n"), 14, ["ndcg@10", "not computed"]),
    ("target with two kinds", _mut("  results: results.jsonl", "  results: results.jsonl\n  http:\n    url: https://x"), 3, ["results", "http"]),
    ("target with none", _mut("  results: results.jsonl", "  k: 10"), 3, ["results", "http", "python"]),
    ("bad max_drop string", _mut("max_drop: 0.02", "max_drop: 3 percent"), 13, ["max_drop", "3 percent"]),
    ("negative max_drop", _mut("max_drop: 0.02", "max_drop: -0.02"), 13, ["max_drop"]),
    ("min above max", _mut("max_drop: 0.02", "max: 0.5"), 11, ["min", "max"]),
    ("empty gate", _add("      mrr: {}\n"), 14, ["mrr"]),
    ("bad on_mismatch", _add("baseline:\n  on_mismatch: ignore\n"), 15, ["on_mismatch", "ignore"]),
    ("bad python target", _mut("  results: results.jsonl", "  python: not a function ref"), 4, ["python"]),
    ("bad url", _mut("  results: results.jsonl", "  http:\n    url: rag.example/ask"), 5, ["url"]),
    ("duplicate key", _add("version: 1\n"), 14, ["duplicate", "version", "first at line 1"]),
    ("duplicate nested key", _mut("        max_drop: 0.02", "        max_drop: 0.02\n        min: 0.7"), 14, ["duplicate", "min", "first at line 12"]),
    ("YAML syntax error", _mut("golden_set: golden.jsonl", "golden_set: golden.jsonl: x"), 2, ["invalid YAML"]),
    ("YAML tab indent", _mut("        min: 0.8", "\tmin: 0.8"), 12, ["invalid YAML"]),
    ("version 2", _mut("version: 1", "version: 2"), 1, ["version", "2"]),
    ("version as string", _mut("version: 1", "version: '1'"), 1, ["version"]),
    ("missing golden_set", _mut("golden_set: golden.jsonl\n", ""), None, ["golden_set"]),
]


@pytest.mark.parametrize("mutate, line, words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed_spec_names_file_and_line(tmp_path, mutate, line, words):
    path = write(tmp_path, mutate(BASE))
    err = load_error(path)
    msg = str(err)
    assert err.file == str(path)
    if line is None:
        assert f"{path}:" in msg
    else:
        assert f"{path}:{line}:" in msg, msg
    for w in words:
        assert w in msg, msg


def test_bad_max_drop_message_is_not_misleading(tmp_path):
    """max_drop accepts a number or a "3%" string: the message must not claim only numbers are allowed."""
    err = load_error(write(tmp_path, BASE.replace("max_drop: 0.02", "max_drop: 3 percent")))
    assert "is not of type 'number'" not in str(err)
    assert "%" in str(err)
    err = load_error(write(tmp_path, BASE.replace("max_drop: 0.02", "max_drop: -0.02"), "neg.yml"))
    assert "is not of type 'string'" not in str(err)
    assert "minimum" in str(err)


def test_python_tag_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = write(tmp_path, BASE + f'evil: !!python/object/apply:os.system ["touch {marker}"]\n')
    err = load_error(path)
    assert not marker.exists()
    assert f"{path}:14:" in str(err)
    assert "python" in str(err).lower()


@pytest.mark.parametrize(
    "tag",
    ["!!python/object/apply:subprocess.call [[touch, {m}]]", "!!python/name:os.system", "!!python/object/new:os.system [touch {m}]"],
)
def test_other_python_tags_are_refused(tmp_path, tag):
    marker = tmp_path / "pwned"
    path = write(tmp_path, BASE.replace("golden_set: golden.jsonl", "golden_set: " + tag.format(m=marker)))
    err = load_error(path)
    assert not marker.exists()
    assert f"{path}:2:" in str(err)


def test_several_schema_errors_are_all_reported(tmp_path):
    text = BASE.replace("version: 1", "version: 2") + "colour: red\nmax_error_rate: high\n"
    path = write(tmp_path, text)
    with pytest.raises(InputErrors) as info:
        load_spec(path, env={})
    lines = sorted(e.line for e in info.value.errors)
    assert lines == [1, 14, 15]
    for n in (1, 14, 15):
        assert f"{path}:{n}:" in str(info.value)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- a\n- b\n", "just a string\n"], ids=["empty", "comment", "list", "scalar"])
def test_not_a_mapping(tmp_path, text):
    path = write(tmp_path, text)
    err = load_error(path)
    assert str(path) in str(err)
    assert "mapping" in str(err)


def test_missing_spec_file(tmp_path):
    path = tmp_path / "nope.yml"
    err = load_error(path)
    assert str(path) in str(err) and "not found" in str(err)


def test_not_utf8_spec(tmp_path):
    path = tmp_path / "rag-eval.yml"
    path.write_bytes(BASE.encode("utf-8") + b"# caf\xe9\n")
    err = load_error(path)
    assert str(path) in str(err)


def test_env_default_is_used_only_when_unset(tmp_path: Path) -> None:
    spec_path = tmp_path / "rag-eval.yml"
    spec_path.write_text(
        "version: 1\ngolden_set: g.jsonl\ntarget:\n  http:\n    url: \"${RAG_URL:-http://127.0.0.1:9/ask}\"\n"
        "    headers: {X-Token: \"${TOK:-none}\"}\nstages:\n  retrieval:\n    metrics: [mrr]\n"
    )
    unset = load_spec(spec_path, env={})
    assert unset.target["http"]["url"] == "http://127.0.0.1:9/ask"
    assert unset.secrets == []  # a default is written in the spec: no secret
    given = load_spec(spec_path, env={"RAG_URL": "http://10.0.0.1/q", "TOK": "tok-value"})
    assert given.target["http"]["url"] == "http://10.0.0.1/q"
    assert given.target["http"]["headers"]["X-Token"] == "tok-value"
    assert "tok-value" in given.secrets


# --------------------------------------------------------------------------- unknown metrics: the right stage, and a "did you mean"

GENERATION = "  generation:\n    metrics:\n      - {name}\n"  # lines 14 generation, 15 metrics, 16 the name


@pytest.mark.parametrize(
    "stage, name, line, expected",
    [
        ("generation", "token-f1", 16, "unknown generation metric 'token-f1' (did you mean 'token_f1'?); generation metrics are "),
        ("generation", "Faithfulness", 16, "unknown generation metric 'Faithfulness' (did you mean 'faithfulness'?)"),
        ("generation", "deepeval/answer-relevancy", 16, "(did you mean 'deepeval/answer_relevancy'?)"),
        ("generation", "faithfulnes", 15, "'faithfulnes' is not a ragas metric (did you mean 'faithfulness'?); known: "),
        ("generation", "hit_rate@5", 16, "unknown generation metric 'hit_rate@5' (a retrieval metric: list it under stages.retrieval.metrics)"),
        ("retrieval", "hits@5", 9, "unknown retrieval metric 'hits@5' (did you mean 'hit_rate@5'?); retrieval metrics are hit_rate@k, mrr[@k]"),
        ("retrieval", "NDCG@10", 9, "unknown retrieval metric 'NDCG@10' (did you mean 'ndcg@10'?)"),
        ("retrieval", "token_f1", 9, "unknown retrieval metric 'token_f1' (a generation metric: list it under stages.generation.metrics)"),
        ("retrieval", "error_rate", 9, "'error_rate' is a health metric: always computed, gate it under stages.retrieval.gates"),
        ("retrieval", "recall", 9, "metric 'recall' needs a cut-off, e.g. recall@5"),
    ],
)
def test_unknown_metric_names_its_stage_and_the_closest_name(tmp_path, stage, name, line, expected):
    text = BASE + GENERATION.format(name=name) if stage == "generation" else BASE.replace("      - mrr", f"      - {name}")
    path = write(tmp_path, text)
    msg = str(load_error(path))
    assert f"{path}:{line}: stages.{stage}.metrics" in msg, msg
    assert expected in msg, msg
    if stage == "generation":
        assert "hit_rate@k" not in msg  # the retrieval list is not offered for a generation metric
    else:
        assert "faithfulness" not in msg and "token_f1, " not in msg


@pytest.mark.parametrize(
    "stage, name",
    [("generation", "zzz-qqq"), ("generation", "wordcount"), ("retrieval", "zzz"), ("retrieval", "bleu@4")],
)
def test_unknown_metric_with_no_close_name_has_no_did_you_mean(tmp_path, stage, name):
    text = BASE + GENERATION.format(name=name) if stage == "generation" else BASE.replace("      - mrr", f"      - {name}")
    msg = str(load_error(write(tmp_path, text)))
    assert "did you mean" not in msg, msg
    assert f"{name}'" in msg
    assert ("generation metrics are " if stage == "generation" else "retrieval metrics are ") in msg or "is not a ragas metric" in msg


def test_did_you_mean_uses_the_spec_criteria(tmp_path):
    text = BASE + GENERATION.format(name="cites-source") + "    criteria:\n      cites_source: The answer names the document it uses.\n"
    msg = str(load_error(write(tmp_path, text)))
    assert "(did you mean 'cites_source'?)" in msg and "or a name from criteria (cites_source)" in msg


def test_did_you_mean_helper():
    from gate.core.catalog import OFFLINE_METRICS, did_you_mean

    assert did_you_mean("token-f1", OFFLINE_METRICS) == "token_f1"
    assert did_you_mean("ROUGE_L", OFFLINE_METRICS) == "rouge_l"
    assert did_you_mean("token_f1", OFFLINE_METRICS) is None  # a known name is no typo
    assert did_you_mean("zzz", OFFLINE_METRICS) is None
    assert did_you_mean("anything", []) is None

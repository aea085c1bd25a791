"""config.schema.json and `rag-gate validate` agree on the project's own specs.

Every example spec, every spec the e2e suite derives from them, every rag-eval block of README.md and docs/*.md
and a few specs written by the tests must pass `check-jsonschema --schemafile config.schema.json` (the real console
script, as an editor or a pre-commit hook would run it) and `rag-gate validate`. A ${NAME} or
${NAME:-default} is accepted by the schema wherever a string has a pattern, a list of values or a length
that the reference itself would break; ordinary mistakes are still refused by both.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.config.loader import _ENV_REF, _fill_defaults, _has_env_ref, config_schema, strict_config_schema
from gate.core.errors import EXIT_INPUT, EXIT_PASS
from tests.integration.test_cli_input_errors import GOLDEN
from tests.integration.test_cli_input_errors import SPEC as CLI_SPEC
from tests.unit.test_spec import BASE as SPEC_BASE
from tests.unit.test_spec import with_http

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "config.schema.json"
QUICKSTART = ROOT / "examples" / "quickstart"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
ENV_REF_BRANCH = {"$ref": "#/$defs/env_ref"}

pytestmark = pytest.mark.skipif(not CHECK_JSONSCHEMA.exists(), reason="check-jsonschema is not installed: pip install '.[test]'")


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHECK_JSONSCHEMA), "--schemafile", str(SCHEMA), str(path)],
                          capture_output=True, text=True, timeout=120)


def rag_gate_validate(spec: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "JUDGE_", "GITHUB_"))}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "gate", "validate", "--config", str(spec)],
                          cwd=spec.parent, env=full_env, capture_output=True, text=True, timeout=120)


def jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def is_spec(doc: Any) -> bool:
    return isinstance(doc, dict) and "version" in doc and ("stages" in doc or "target" in doc)


# --------------------------------------------------------------------------- the specs to check


def example_specs() -> list[Path]:
    """examples/**/*.yml that are rag-eval specs."""
    found = []
    for path in sorted(ROOT.glob("examples/**/*.y*ml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        if is_spec(doc):
            found.append(path)
    return found


def e2e_specs() -> dict[str, str]:
    """The specs tests/e2e/test_e2e_act.py derives from the examples (an HTTP target at ${RAG_URL}), built the same way."""
    spec = (QUICKSTART / "rag-eval.yml").read_text(encoding="utf-8")
    start, end = spec.index("  python:"), spec.index("  k: 10")
    judge = (QUICKSTART / "rag-eval.judge.yml").read_text(encoding="utf-8")
    assert '  python: "quickrag:answer"\n' in judge
    return {
        "rag-eval.e2e.yml": spec[:start] + '  http: {url: "${RAG_URL}", concurrency: 4}\n' + spec[end:],
        "rag-eval.e2e-judge.yml": judge.replace('  python: "quickrag:answer"\n', '  http: {url: "${RAG_URL}", concurrency: 4}\n'),
    }


def readme_yaml_blocks(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every ```yaml block of a Markdown file, dedented by its fence's indent."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"( *)```ya?ml\s*", lines[i])
        if not m:
            i += 1
            continue
        indent, start, body = len(m.group(1)), i + 1, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        yield start, "\n".join(body) + "\n"
        i += 1


def doc_pages() -> list[Path]:
    """README.md and the pages of docs/: the Markdown files whose examples are checked."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_specs() -> dict[str, str]:
    """The rag-eval blocks of README.md and docs/*.md: whole specs as written, and fragments (a judge or a stage,
    no version) with the required keys they leave out put in front. GitHub workflow blocks are left out."""
    keys = set(config_schema()["properties"])
    found = {}
    blocks = [(page.relative_to(ROOT).as_posix(), line, text) for page in doc_pages() for line, text in readme_yaml_blocks(page)]
    for where, line, text in blocks:
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            continue
        if len(docs) != 1 or not isinstance(docs[0], dict):
            continue  # a list of steps, several workflows
        doc = docs[0]
        if "jobs" in doc or "on" in doc or True in doc:  # a workflow (YAML 1.1 reads `on` as True)
            continue
        if is_spec(doc):
            found[f"{where}:{line}"] = text
        elif set(doc) <= keys and set(doc) & {"stages", "target", "judge"}:
            missing = {"version": "version: 1\n", "golden_set": "golden_set: eval/golden_set.jsonl\n",
                       "target": "target: {results: eval/results.jsonl}\n"}
            found[f"{where}:{line} (fragment)"] = "".join(v for k, v in missing.items() if k not in doc) + text
    return found


TEST_SPECS_ENV = {"RAG_TOKEN": "t0ken", "RAG_URL": "http://127.0.0.1:9/ask"}


TEST_SPECS = {
    "tests/unit/test_spec.py BASE": SPEC_BASE,
    "tests/unit/test_spec.py with_http": with_http(SPEC_BASE),
    "tests/unit/test_spec.py env defaults": "version: 1\ngolden_set: golden.jsonl\ntarget:\n  http:\n"
                                       "    url: \"${RAG_URL:-http://127.0.0.1:9/ask}\"\n    headers: {X-Token: \"${TOK:-none}\"}\n"
                                       "stages:\n  retrieval:\n    metrics: [mrr]\n",
    "tests/integration/test_cli_input_errors.py SPEC": CLI_SPEC,
}


def test_the_specs_are_found() -> None:
    """The collection above cannot silently shrink: the quickstart specs and the blocks of README.md and docs/ are
    all there."""
    assert {p.name for p in example_specs()} >= {"rag-eval.yml", "rag-eval.judge.yml"}
    readme = readme_specs()
    assert sum("fragment" not in k for k in readme) >= 1, readme
    assert sum("fragment" in k for k in readme) >= 2, readme
    assert any("${" in text for text in readme.values())


# --------------------------------------------------------------------------- valid for both


@pytest.mark.parametrize("path", example_specs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_example_spec_is_valid_for_check_jsonschema_and_rag_gate(path: Path) -> None:
    proc = check_jsonschema(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = rag_gate_validate(path)
    assert proc.returncode == EXIT_PASS, proc.stderr


@pytest.mark.parametrize("name", list(e2e_specs()))
def test_e2e_spec_is_valid_for_check_jsonschema_and_rag_gate(tmp_path: Path, name: str) -> None:
    spec = tmp_path / name
    spec.write_text(e2e_specs()[name], encoding="utf-8")
    shutil.copy(QUICKSTART / "golden_set.jsonl", tmp_path / "golden_set.jsonl")
    proc = check_jsonschema(spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = rag_gate_validate(spec, env={"RAG_URL": "http://127.0.0.1:9/ask"})
    assert proc.returncode == EXIT_PASS, proc.stderr


@pytest.mark.parametrize("name", list(readme_specs()))
def test_readme_spec_is_valid_for_check_jsonschema_and_rag_gate(tmp_path: Path, name: str) -> None:
    text = readme_specs()[name]
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(text, encoding="utf-8")
    proc = check_jsonschema(spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the files it names do not exist: give it a golden set and a value for each ${NAME} without a default
    doc = yaml.safe_load(text)
    traces = (doc.get("target") or {}).get("traces")
    if traces:  # a traces spec names no golden set: give it a trace file of its format instead
        fixture = ROOT / "tests" / "fixtures" / "traces" / f"{traces.get('format', 'rag-gate')}.jsonl"
        shutil.copy(fixture, tmp_path / traces["path"])
    else:
        golden = tmp_path / doc["golden_set"]
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(jsonl(GOLDEN), encoding="utf-8")
    env = {m.group(2): "x-value" for m in _ENV_REF.finditer(text) if not m.group(1) and m.group(3) is None}
    proc = rag_gate_validate(spec, env=env)
    assert proc.returncode == EXIT_PASS, proc.stderr


@pytest.mark.parametrize("name", list(TEST_SPECS))
def test_specs_of_the_tests_are_valid_for_check_jsonschema_and_rag_gate(tmp_path: Path, name: str) -> None:
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(TEST_SPECS[name], encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(jsonl(GOLDEN), encoding="utf-8")
    proc = check_jsonschema(spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = rag_gate_validate(spec, env=TEST_SPECS_ENV)
    assert proc.returncode == EXIT_PASS, proc.stderr


# --------------------------------------------------------------------------- ${NAME} wherever a string is constrained

MINIMAL = "version: 1\ngolden_set: golden.jsonl\n"
JUDGE = "judge:\n  base_url: https://api.example/v1\n  model: gpt-4o-mini-2024-07-18\n  embeddings_model: text-embedding-3-small\n"
RESULTS = "target: {results: results.jsonl}\n"

# (id, spec text after MINIMAL, environment): each puts a reference where the field's own rule would refuse it
ENV_REFS = [
    ("judge.base_url default", RESULTS + JUDGE.replace("https://api.example/v1", '"${JUDGE_BASE_URL:-https://api.openai.com/v1}"'), {}),
    ("judge.base_url set", RESULTS + JUDGE.replace("https://api.example/v1", "${JUDGE_BASE_URL}"), {"JUDGE_BASE_URL": "http://localhost:11434/v1"}),
    ("judge.api_key_env", RESULTS + JUDGE + '  api_key_env: "${KEY_VAR:-OPENAI_API_KEY}"\n', {}),
    ("http.url with text around", 'target:\n  http: {url: "http://${HOST}:8000/q"}\n', {"HOST": "rag"}),
    ("http.url whole", "target:\n  http: {url: \"${RAG_URL}\"}\n", {"RAG_URL": "https://rag.example/ask"}),
    ("http header", 'target:\n  http: {url: "https://x", headers: {Authorization: "Bearer ${RAG_TOKEN}"}}\n', {"RAG_TOKEN": "t"}),
    ("python string", 'target: {python: "${FN:-pkg.mod:answer}"}\n', {}),
    ("python function", 'target:\n  python: {function: "${FN}", contexts_function: "${CFN:-pkg.mod:ctx}"}\n', {"FN": "pkg.mod:answer"}),
    ("baseline.on_mismatch", RESULTS + 'baseline: {on_mismatch: "${ON_MISMATCH:-warn}"}\n', {}),
    ("report.comment_id", RESULTS + "report: {comment_id: \"${COMMENT_ID}\"}\n", {"COMMENT_ID": "docs-bot"}),
    ("match.level", RESULTS + 'stages:\n  retrieval:\n    metrics: [mrr]\n    match: {level: "${LEVEL:-document}"}\n', {}),
    ("max_drop", RESULTS + 'stages:\n  retrieval:\n    metrics: [mrr]\n    gates:\n      mrr: {max_drop: "${DROP:-3%}"}\n', {}),
    ("trend.max_drop", RESULTS + 'stages:\n  retrieval:\n    metrics: [mrr]\n    gates:\n      mrr: {trend: {max_drop: "${DROP}"}}\n',
     {"DROP": "5%"}),
    ("generation.engine", RESULTS + 'stages:\n  generation:\n    engine: "${ENGINE:-deepeval}"\n    metrics: [token_f1]\n', {}),
    ("criteria", RESULTS + 'stages:\n  generation:\n    metrics: [token_f1]\n    criteria: {cites: "${CRIT}"}\n',
     {"CRIT": "The answer names its source."}),
    ("sample.size", RESULTS + 'stages:\n  generation:\n    metrics: [token_f1]\n    sample: {size: "${SIZE:-all}"}\n', {}),
    ("self_check.on_unstable", RESULTS + 'stages:\n  generation:\n    metrics: [token_f1]\n    self_check: {on_unstable: "${U:-fail}"}\n', {}),
    ("noise", RESULTS + 'stages:\n  robustness:\n    noise:\n      source: "${SRC:-corpus}"\n      position: "${POS}"\n'
              '      correctness: {method: "${METHOD:-offline}", engine: "${ENGINE:-deepeval}"}\n', {"POS": "back"}),
]


@pytest.mark.parametrize("text, env", [c[1:] for c in ENV_REFS], ids=[c[0] for c in ENV_REFS])
def test_env_reference_in_a_constrained_string_is_valid_for_both(tmp_path: Path, text: str, env: dict[str, str]) -> None:
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(MINIMAL + text, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(jsonl(GOLDEN), encoding="utf-8")
    proc = check_jsonschema(spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = rag_gate_validate(spec, env=env)
    assert proc.returncode == EXIT_PASS, proc.stderr


# --------------------------------------------------------------------------- ordinary mistakes: refused by both

BAD = [
    # (id, spec text after MINIMAL, words rag-gate's message must hold)
    ("base_url ftp", RESULTS + JUDGE.replace("https://api.example/v1", "ftp://x"), ["rag-eval.yml:5", "judge.base_url", "https?://"]),
    ("base_url not a URL", RESULTS + JUDGE.replace("https://api.example/v1", "not-a-url"), ["rag-eval.yml:5", "judge.base_url"]),
    ("http.url not a URL", "target:\n  http: {url: rag.example/ask}\n", ["rag-eval.yml:4", "target.http.url"]),
    ("escaped reference is no reference", 'target:\n  http: {url: "$${HOST}/ask"}\n', ["rag-eval.yml:4", "target.http.url"]),
    ("wrong enum value", RESULTS + "baseline: {on_mismatch: ignore}\n", ["rag-eval.yml:4", "must be one of 'warn', 'skip', 'fail', got 'ignore'"]),
    ("wrong engine", RESULTS + "stages:\n  generation:\n    engine: openai\n    metrics: [token_f1]\n", ["rag-eval.yml:6", "engine"]),
    ("bad comment_id", RESULTS + "report: {comment_id: two words}\n", ["rag-eval.yml:4", "comment_id"]),
    ("bad max_drop", RESULTS + "stages:\n  retrieval:\n    metrics: [mrr]\n    gates:\n      mrr: {max_drop: 3 percent}\n",
     ["rag-eval.yml:8", "max_drop"]),
    ("short criterion", RESULTS + "stages:\n  generation:\n    metrics: [token_f1]\n    criteria: {cites: short}\n", ["rag-eval.yml:7", "cites"]),
]


@pytest.mark.parametrize("text, words", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_ordinary_mistakes_are_refused_by_both(tmp_path: Path, text: str, words: list[str]) -> None:
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(MINIMAL + text, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(jsonl(GOLDEN), encoding="utf-8")
    proc = check_jsonschema(spec)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "validation errors" in proc.stdout + proc.stderr
    proc = rag_gate_validate(spec, env={"HOST": "rag"})
    assert proc.returncode == EXIT_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


@pytest.mark.parametrize(
    "text, line, key",
    [
        ("target:\n  results: results.jsonl\n  k: ${K}\n", 5, "target.k"),
        (RESULTS + "report: {max_cases: \"${MAX_CASES}\"}\n", 4, "report.max_cases"),
        (RESULTS + JUDGE + "  concurrency: ${JUDGE_CONCURRENCY}\n", 8, "judge.concurrency"),
    ],
    ids=["target.k", "report.max_cases", "judge.concurrency"],
)
def test_env_reference_in_an_integer_field_is_refused(tmp_path: Path, text: str, line: int, key: str) -> None:
    """A ${NAME} gives a string: a number or a boolean cannot come from the environment, for both."""
    spec = tmp_path / "rag-eval.yml"
    spec.write_text(MINIMAL + text, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(jsonl(GOLDEN), encoding="utf-8")
    proc = check_jsonschema(spec)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    env = {"K": "10", "MAX_CASES": "5", "JUDGE_CONCURRENCY": "4"}
    proc = rag_gate_validate(spec, env=env)
    assert proc.returncode == EXIT_INPUT, proc.stderr
    assert f"rag-eval.yml:{line}: {key}:" in proc.stderr, proc.stderr
    assert "integer" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the schema itself


def _constrained_strings(node: Any, where: str = "#") -> Iterator[str]:
    """Places with a rule a ${NAME} would break and no env_ref alternative."""
    if isinstance(node, list):
        for i, v in enumerate(node):
            yield from _constrained_strings(v, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    breaks = (isinstance(node.get("pattern"), str) or isinstance(node.get("format"), str) or "maxLength" in node or node.get("minLength", 0) > 4
              or (isinstance(node.get("const"), str)) or any(isinstance(v, str) for v in node.get("enum", [])))
    if breaks:
        yield where
    for k, v in node.items():
        if k == "anyOf" and ENV_REF_BRANCH in v:
            continue  # this constraint has its env_ref alternative
        yield from _constrained_strings(v, f"{where}/{k}")


def test_every_constrained_string_accepts_an_env_reference() -> None:
    # Metric names are not expanded before they are checked (rag-gate refuses ${NAME} there); keys are never expanded.
    allowed = {
        "#/$defs/retrieval_stage/properties/metrics/items",
        "#/$defs/generation_stage/properties/metrics/items",
        "#/$defs/robustness_stage/properties/paraphrase/properties/metrics/items",
        "#/$defs/generation_stage/properties/criteria/propertyNames",
        "#/$defs/env_ref",
    }
    assert set(_constrained_strings(config_schema())) == allowed


@pytest.mark.parametrize(
    "value, expected",
    [
        ("${A}", True), ("${JUDGE_BASE_URL:-https://api.openai.com/v1}", True), ("Bearer ${RAG_TOKEN}", True),
        ("http://${HOST}:8000/q", True), ("${A:-}", True), ("$${A} and ${B}", True), ("x${_b1}", True),
        ("$${A}", False), ("$$${A}", False), ("${1A}", False), ("${A B}", False), ("$A", False), ("{A}", False),
        ("${A:default}", False), ("", False), ("https://x/", False),
    ],
)
def test_env_ref_pattern_matches_what_the_loader_expands(value: str, expected: bool) -> None:
    pattern = config_schema()["$defs"]["env_ref"]["pattern"]
    assert _has_env_ref(value) is expected
    assert (re.search(pattern, value) is not None) is expected


def test_the_loader_checks_the_constraints_themselves() -> None:
    """The loader drops the env_ref alternatives (it checks a ${NAME} once expanded): nothing else changes."""
    strict = strict_config_schema()
    assert "env_ref" not in json.dumps(strict)
    assert strict["properties"]["judge"]["properties"]["base_url"] == {
        "description": config_schema()["properties"]["judge"]["properties"]["base_url"]["description"],
        "type": "string", "pattern": "^https?://",
    }
    assert strict["properties"]["baseline"]["properties"]["on_mismatch"]["enum"] == ["warn", "skip", "fail"]
    assert strict["properties"]["baseline"]["properties"]["on_mismatch"]["default"] == "warn"


def test_defaults_are_the_same_with_and_without_the_env_ref_alternatives() -> None:
    spec: dict[str, Any] = {
        "version": 1, "golden_set": "g.jsonl", "target": {"http": {"url": "https://x"}},
        "stages": {"retrieval": {"metrics": ["mrr"]}, "generation": {"metrics": ["token_f1"], "self_check": {}},
                   "robustness": {"noise": {}}},
    }
    full, strict = copy.deepcopy(spec), copy.deepcopy(spec)
    _fill_defaults(full, config_schema(), config_schema())
    _fill_defaults(strict, strict_config_schema(), strict_config_schema())
    assert full == strict
    assert full["baseline"]["on_mismatch"] == "warn"
    assert full["stages"]["generation"]["engine"] == "ragas"
    assert full["stages"]["generation"]["self_check"]["on_unstable"] == "warn"
    assert full["stages"]["robustness"]["noise"]["correctness"] == {"method": "offline", "engine": "ragas", "threshold": 0.5}

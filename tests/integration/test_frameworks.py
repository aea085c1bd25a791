"""The frameworks' own objects against the real packages (LangChain, LlamaIndex, Haystack): each module of
docs/frameworks.md, as printed there, run through the real CLI scores exactly as the same results given as plain
dicts; the serialised forms in a results file read as the plain lines; a wrong shape stops after one case."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gate.core.model import GoldenCase
from gate.targets.results import ResultsFileTarget

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "frameworks"
PAGE = ROOT / "docs" / "frameworks.md"
FRAMEWORKS = {"langchain": "LangChain", "llamaindex": "LlamaIndex", "haystack": "Haystack"}
K = 5


def snippet(heading: str) -> str:
    """The first python block under the h3 ``heading`` of docs/frameworks.md, as printed."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"\n### {heading}\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, heading
    return match.group(1)


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args, "--no-progress"], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def project(tmp_path: Path, name: str) -> Path:
    """The example's corpus, golden set and spec, with the module as docs/frameworks.md prints it."""
    for file in ("corpus.jsonl", "golden_set.jsonl", f"rag-eval.{name}.yml"):
        (tmp_path / file).write_text((EXAMPLE / file).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / f"{name}_rag.py").write_text(snippet(FRAMEWORKS[name]), encoding="utf-8")
    return tmp_path


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"fw_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_dicts(name: str, docs: list[Any]) -> list[dict[str, Any]]:
    """What a user converting by hand writes: {id, text, score} from each framework's attributes."""
    if name == "langchain":
        return [{"id": d.metadata["id"], "text": d.page_content} for d in docs]
    if name == "llamaindex":
        return [{"id": d.node.node_id, "text": d.node.text, "score": float(d.score)} for d in docs]
    return [{"id": d.id, "text": d.content, "score": d.score} for d in docs]


def per_case(report: dict[str, Any]) -> dict[str, Any]:
    stages = report["stages"]
    return {stage: {s["id"]: (s["metrics"], s.get("error")) for s in stages[stage]["samples"]} for stage in ("retrieval", "generation")}


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_the_printed_module_scores_as_plain_dicts(tmp_path: Path, name: str) -> None:
    assert snippet(FRAMEWORKS[name]) == (EXAMPLE / f"{name}_rag.py").read_text(encoding="utf-8")  # the example is the snippet
    work = project(tmp_path, name)
    proc = rag_gate(work, "run", "--config", f"rag-eval.{name}.yml", "--report", "native.json")
    assert proc.returncode in (0, 1), proc.stderr
    native = json.loads((work / "native.json").read_text(encoding="utf-8"))

    module = load(work / f"{name}_rag.py")  # the real package, in this process
    golden = [json.loads(line) for line in (work / "golden_set.jsonl").read_text(encoding="utf-8").splitlines()]
    with (work / "results.jsonl").open("w", encoding="utf-8") as f:
        for case in golden:
            docs = module.retrieve(case["question"], K)
            f.write(json.dumps({"id": case["id"], "retrieved": as_dicts(name, docs), "answer": module.answer(case["question"], docs)}) + "\n")
    spec = yaml.safe_load((work / f"rag-eval.{name}.yml").read_text(encoding="utf-8"))
    spec["target"] = {"results": "results.jsonl"}
    (work / "plain.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    proc = rag_gate(work, "run", "--config", "plain.yml", "--report", "plain.json")
    assert proc.returncode in (0, 1), proc.stderr
    plain = json.loads((work / "plain.json").read_text(encoding="utf-8"))

    assert per_case(native) == per_case(plain)
    assert len(per_case(native)["retrieval"]) == len(golden) and all(e is None for _, e in per_case(native)["retrieval"].values())
    assert native["stages"]["retrieval"]["metrics"]["mrr"] > 0.5  # the ids matched the golden set's


def serialised_lines(work: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per framework and form, a results line of the serialised objects, and the plain line they stand for."""
    from langchain_core.load import dumpd

    lc = load(work / "langchain_rag.py")
    li = load(work / "llamaindex_rag.py")
    hs = load(work / "haystack_rag.py")
    question = "How much does a single ferry ticket cost?"
    lc_docs, li_nodes, hs_docs = lc.retrieve(question, K), li.retrieve(question, K), hs.retrieve(question, K)
    forms = [
        ("langchain", {"context": [d.model_dump() for d in lc_docs], "answer": "a"}),
        ("langchain", {"context": [dumpd(d) for d in lc_docs], "answer": "a"}),
        ("llamaindex", {"response": "a", "source_nodes": [n.model_dump() for n in li_nodes]}),
        ("haystack", {"retriever": {"documents": [d.to_dict(flatten=False) for d in hs_docs]}, "llm": {"replies": ["a"]}}),
        ("haystack", {"retrieved": [d.to_dict() for d in hs_docs], "answer": "a"}),
    ]
    plain = {"langchain": as_dicts("langchain", lc_docs), "llamaindex": as_dicts("llamaindex", li_nodes),
             "haystack": as_dicts("haystack", hs_docs)}
    lines = [{"id": f"s{n}", **json.loads(json.dumps(obj, default=str))} for n, (_, obj) in enumerate(forms)]
    return lines, [{"id": f"s{n}", "retrieved": plain[fw], "answer": "a"} for n, (fw, _) in enumerate(forms)]


def test_serialised_framework_objects_in_a_results_file_read_as_plain_lines(tmp_path: Path) -> None:
    for name in FRAMEWORKS:
        project(tmp_path, name)
    serialised, plain = serialised_lines(tmp_path)
    cases = [GoldenCase(id=line["id"], question="q", line=n + 1, relevant={"fares#1": 1}) for n, line in enumerate(plain)]
    read = {}
    for label, lines in (("serialised", serialised), ("plain", plain)):
        path = tmp_path / f"{label}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        target = ResultsFileTarget.read(path, cases)
        read[label] = {cid: ([(d.id, d.text, d.score) for d in out.retrieved], out.answer, out.contexts, out.error)
                       for cid, out in target.outputs.items()}
    assert read["serialised"] == read["plain"]
    assert all(docs and docs[0][0] == "fares#1" for docs, *_ in read["plain"].values())


WRONG = '''\
import json
from pathlib import Path

from langchain_core.documents import Document

CALLS = Path(__file__).with_name("calls.txt")


def chain(question, k):
    with CALLS.open("a", encoding="utf-8") as f:
        f.write(question + "\\n")
    return {"input": question, "docs": [Document(page_content="A ticket costs $3.50.")], "output": "$3.50"}
'''


def test_a_wrong_shape_stops_the_cli_after_one_case(tmp_path: Path) -> None:
    work = project(tmp_path, "langchain")
    (work / "wrong_rag.py").write_text(WRONG, encoding="utf-8")
    spec = yaml.safe_load((work / "rag-eval.langchain.yml").read_text(encoding="utf-8"))
    spec["target"]["python"] = {"function": "wrong_rag:chain", "concurrency": 4}
    (work / "wrong.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    proc = rag_gate(work, "run", "--config", "wrong.yml", "--report", "report.json")
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-2] == ("rag-gate: the target returned the wrong shape for case g01: no 'retrieved' field "
                         "(got an object with keys 'input', 'docs', 'output')")
    assert lines[-1].startswith("hint: return one of:") and lines[-1].endswith("no other case was asked")
    assert len((work / "calls.txt").read_text(encoding="utf-8").splitlines()) == 1  # no second call
    assert not (work / "report.json").exists() and "Traceback" not in proc.stderr


README = ROOT / "README.md"


def readme_snippets() -> dict[str, tuple[str, dict[str, Any]]]:
    """The README's python blocks by framework: (the module as printed, the target its first line names)."""
    found = {}
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        first = block.splitlines()[0]
        match = re.fullmatch(r"# rag\.py \((\w+)\)\. target: (\{.*\})", first)
        assert match, f"README.md: a python block whose first line names no framework and target: {first!r}"
        name = {v: k for k, v in FRAMEWORKS.items()}[match.group(1)]
        found[name] = (block, yaml.safe_load(match.group(2)))
    return found


def test_the_readme_shows_each_framework_in_about_ten_lines() -> None:
    snippets = readme_snippets()
    assert set(snippets) == set(FRAMEWORKS)
    for name, (block, _) in snippets.items():
        code = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        assert len(code) <= 11, f"{name}: {len(code)} lines of code in the README's example"


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_the_readme_example_runs_as_printed_and_scores_as_the_docs_module(tmp_path: Path, name: str) -> None:
    block, target = readme_snippets()[name]
    docs_run, readme_run = tmp_path / "docs", tmp_path / "readme"
    docs_run.mkdir()
    project(docs_run, name)
    readme_run.mkdir()
    for file in ("corpus.jsonl", "golden_set.jsonl"):
        (readme_run / file).write_text((EXAMPLE / file).read_text(encoding="utf-8"), encoding="utf-8")
    (readme_run / "rag.py").write_text(block, encoding="utf-8")
    spec = yaml.safe_load((EXAMPLE / f"rag-eval.{name}.yml").read_text(encoding="utf-8"))
    spec["target"] = {**target, "k": spec["target"]["k"]}
    (readme_run / "rag-eval.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    reports = {}
    for work, config in ((docs_run, f"rag-eval.{name}.yml"), (readme_run, "rag-eval.yml")):
        proc = rag_gate(work, "run", "--config", config, "--report", "report.json")
        assert proc.returncode in (0, 1), proc.stderr
        reports[work] = per_case(json.loads((work / "report.json").read_text(encoding="utf-8")))
    assert reports[readme_run] == reports[docs_run]
    assert all(error is None for _, error in reports[readme_run]["retrieval"].values())

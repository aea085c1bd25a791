"""Inputs that exist but are not regular files: a FIFO (which blocks a reader until a writer comes, forever in CI), a
character device (/dev/zero never ends, /dev/null is no SQLite file), a directory. Each is refused before it is read,
naming the file and what it is: exit 2, no traceback. Through the real CLI in a subprocess with a timeout, its
address space capped so that a regression reading /dev/zero fails fast instead of filling the machine's memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gate.core.errors import InputError
from gate.io.golden import iter_lines, load_corpus, load_distractor_file, load_golden_set
from gate.judges.cache import JudgeCache

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
TIMEOUT = 60
MEMORY = 4 << 30  # the child's address space


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def rag_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAG_GATE_DEBUG" and not k.startswith("GITHUB_")}
    return subprocess.run([sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, preexec_fn=_limit)


def refused(proc: subprocess.CompletedProcess[str], path: str, what: str) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: is {what}, not a regular file" in proc.stderr, proc.stderr  # ``path``: its end, as the spec names it


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def retrieval_spec(d: Path, golden: str, target: dict[str, Any] | None = None) -> None:
    if not (d / "golden.jsonl").exists():
        (d / "golden.jsonl").write_text(json.dumps({"id": "c1", "question": "q?", "relevant_doc_ids": ["d1"]}) + "\n", encoding="utf-8")
    spec = {"version": 1, "golden_set": golden, "target": target or {"results": "results.jsonl"},
            "stages": {"retrieval": {"metrics": ["hit_rate@5"]}}}
    (d / "rag-eval.yml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    if not (d / "results.jsonl").exists():
        (d / "results.jsonl").write_text(json.dumps({"id": "c1", "retrieved": [{"id": "d1"}]}) + "\n", encoding="utf-8")


def quickstart_copy(dest: Path) -> Path:
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns(".rag-gate", "eval", "__pycache__"))
    return dest


def edit_spec(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def run(d: Path) -> subprocess.CompletedProcess[str]:
    return rag_gate(d, "run", "--config", "rag-eval.yml", "--no-progress", "--report", "report.json")


# --------------------------------------------------------------------------- the golden set


def test_a_fifo_as_the_golden_set_is_refused(tmp_path: Path) -> None:
    path = fifo(tmp_path / "golden.fifo")
    retrieval_spec(tmp_path, "golden.fifo")
    refused(run(tmp_path), path.name, "a FIFO")
    refused(rag_gate(tmp_path, "validate", "--config", "rag-eval.yml"), path.name, "a FIFO")


def test_dev_zero_as_the_golden_set_is_refused(tmp_path: Path) -> None:
    retrieval_spec(tmp_path, "/dev/zero")
    refused(run(tmp_path), "/dev/zero", "a character device")


def test_a_directory_as_the_golden_set_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    retrieval_spec(tmp_path, "cases")
    refused(run(tmp_path), "cases", "a directory")


# --------------------------------------------------------------------------- the results file


def test_a_fifo_as_the_results_file_is_refused(tmp_path: Path) -> None:
    path = fifo(tmp_path / "results.fifo")
    retrieval_spec(tmp_path, "golden.jsonl", {"results": "results.fifo"})
    refused(run(tmp_path), path.name, "a FIFO")


def test_dev_null_as_the_results_file_is_refused(tmp_path: Path) -> None:
    retrieval_spec(tmp_path, "golden.jsonl", {"results": "/dev/null"})
    refused(run(tmp_path), "/dev/null", "a character device")


# --------------------------------------------------------------------------- the distractor file, the corpus


def test_a_fifo_as_the_distractor_file_is_refused(tmp_path: Path) -> None:
    d = quickstart_copy(tmp_path / "qs")
    path = fifo(d / "distractors.jsonl")
    edit_spec(d / "rag-eval.yml", "      source: corpus               # hard negatives from what the RAG retrieved for other questions\n",
              "      source: file\n      file: distractors.jsonl\n")
    refused(run(d), path.name, "a FIFO")


def test_a_fifo_as_the_corpus_is_refused(tmp_path: Path) -> None:
    path = fifo(tmp_path / "corpus.fifo")
    retrieval_spec(tmp_path, "golden.jsonl")
    refused(rag_gate(tmp_path, "golden", "check", "--config", "rag-eval.yml", "--corpus", str(path)), str(path), "a FIFO")


# --------------------------------------------------------------------------- the judge cache


@pytest.mark.parametrize("where", ["/dev/null", "fifo"])
def test_a_special_file_as_the_judge_cache_is_refused(tmp_path: Path, where: str) -> None:
    d = quickstart_copy(tmp_path / "qs")
    path = str(fifo(d / "cache.fifo")) if where == "fifo" else where
    edit_spec(d / "rag-eval.yml", "  path: .rag-gate/judge-cache.sqlite", f"  path: {path}")
    proc = run(d)
    refused(proc, path, "a FIFO" if where == "fifo" else "a character device")
    assert "locked" not in proc.stderr
    assert "cache.path" in proc.stderr  # the hint says which key to change


@contextlib.contextmanager
def unblocked_after(path: Path, seconds: float) -> Iterator[None]:
    """After ``seconds``, open the FIFO ``path`` for writing and close it at once, so that a reader blocked on it sees
    an empty file and the test fails instead of hanging."""
    done = threading.Event()

    def writer() -> None:
        if done.wait(seconds):
            return
        while not done.is_set():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader yet (ENXIO)
                done.wait(0.05)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


# --------------------------------------------------------------------------- in process: every reader refuses before it opens


@pytest.mark.parametrize("reader", [load_golden_set, load_distractor_file, load_corpus, lambda p: list(iter_lines(p))],
                         ids=["golden", "distractors", "corpus", "iter_lines"])
def test_every_reader_refuses_a_fifo_without_blocking(tmp_path: Path, reader: Any) -> None:
    path = fifo(tmp_path / "f.jsonl")
    with unblocked_after(path, 5), pytest.raises(InputError) as err:
        reader(path)  # were the FIFO opened, it would block until the writer of ``unblocked_after`` comes
    assert str(err.value).startswith(f"{path}: is a FIFO, not a regular file"), err.value


def test_the_judge_cache_refuses_a_character_device() -> None:
    with pytest.raises(InputError) as err:
        JudgeCache(Path("/dev/null"), busy_timeout_s=0.1, retries=0)
    assert str(err.value).startswith("/dev/null: is a character device, not a regular file")

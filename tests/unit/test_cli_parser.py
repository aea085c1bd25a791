"""The command line's arguments: every command reads rag-eval.yml unless --config says otherwise, but `show`, which
reads the spec the report was made from."""

from __future__ import annotations

import pytest

from gate.cli.parser import build_parser

COMMANDS = [["run"], ["merge", "p.json"], ["validate"], ["plan"], ["baseline", "update", "--report", "r.json"],
            ["history", "record", "--report", "r.json"], ["golden", "check"],
            ["golden", "generate", "--corpus", "c.jsonl", "--n", "1", "--out", "o.jsonl"], ["cache", "merge", "c.sqlite"],
            ["golden", "export", "--format", "ragas", "--out", "o.jsonl"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_reads_rag_eval_yml_by_default_even_after_show_was_parsed(argv: list[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["show", "q1", "--report", "r.json"]).config is None
    assert parser.parse_args(argv).config == "rag-eval.yml"
    assert parser.parse_args([*argv, "--config", "other.yml"]).config == "other.yml"

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


RUN_LINES = [["run"], ["run", "--config", "x.yml", "--report", "-", "--junit", "j.xml", "-q", "--shard", "1/2"],
             ["run", "--no-cache", "--corpus", "c.jsonl", "--html", "r.html", "--no-progress"], ["merge", "a.json", "b", "--quiet"],
             ["run", "--bogus"], ["run", "--shard"], ["merge"], ["run", "extra"]]


def _outcome(parser, argv: list[str], capsys) -> tuple[object, str, str]:
    try:
        got: object = vars(parser.parse_args(argv))
    except SystemExit as exc:
        got = ("exit", exc.code)
    out, err = capsys.readouterr()
    return got, out, err


@pytest.mark.parametrize("argv", [*RUN_LINES, ["run", "--help"], ["merge", "-h"]], ids=" ".join)
def test_the_parser_of_a_run_alone_reads_a_run_as_the_whole_parser_does(argv: list[str], capsys) -> None:
    whole, alone = _outcome(build_parser(), argv, capsys), _outcome(build_parser(argv[0]), argv, capsys)
    assert alone == whole  # the same values, the same help and the same errors, word for word
    assert whole[1] or whole[2] or whole[0]["command"] == argv[0]


def test_any_other_first_word_builds_every_command(capsys) -> None:
    for first in (None, "validate", "--help", "ru", "-q"):
        assert {"run", "merge", "validate", "golden", "watch"} <= set(build_parser(first)._subparsers._group_actions[0].choices)
    assert set(build_parser("run")._subparsers._group_actions[0].choices) == {"run", "merge"}


@pytest.mark.parametrize("columns", [None, "70", "0", "-3", "wide", "200"])
def test_the_help_is_as_wide_as_shutil_says_the_terminal_is(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> None:
    """The parser's width is shutil.get_terminal_size's (read without importing shutil), so the help wraps as
    argparse's own formatter wraps it."""
    import argparse
    import shutil

    from gate.cli.parser import build_parser, terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
    ours = build_parser().format_help()
    plain = argparse.ArgumentParser(prog="rag-gate", description="Gate pull requests on the quality of a RAG system.")
    plain.add_argument("--version", action="version", version="x")
    plain.add_subparsers(dest="command", required=True, metavar="COMMAND")
    assert ours.splitlines()[0] == plain.format_help().splitlines()[0]  # the usage line, wrapped alike

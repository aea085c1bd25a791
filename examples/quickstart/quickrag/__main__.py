"""Command line: ``python -m quickrag serve`` and ``python -m quickrag ask``."""

from __future__ import annotations

import argparse
import json
import sys

from .rag import answer
from .server import serve


def _add_mode_flags(command: argparse.ArgumentParser) -> None:
    """--gullible / --never-refuse: the deliberately broken behaviours (quickrag.rag.MODES)."""
    broken = command.add_mutually_exclusive_group()
    broken.add_argument(
        "--gullible", dest="mode", action="store_const", const="gullible",
        help="deliberately broken: always answer from the first passage (and never refuse given contexts)",
    )
    broken.add_argument(
        "--never-refuse", dest="mode", action="store_const", const="never_refuse",
        help="deliberately broken: never answer with the refusal, even when nothing relevant was found",
    )
    command.set_defaults(mode="normal")


def main(argv: list[str] | None = None) -> int:
    """Run the ``serve`` or ``ask`` command; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m quickrag", description="A tiny BM25 + extractive RAG demo.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the HTTP service")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    serve_cmd.add_argument("--latency-ms", type=float, default=0.0, help="sleep this long per request")
    _add_mode_flags(serve_cmd)
    ask_cmd = commands.add_parser("ask", help="answer one question and print the JSON result")
    ask_cmd.add_argument("question")
    ask_cmd.add_argument("-k", type=int, default=5, help="passages to retrieve (default 5)")
    _add_mode_flags(ask_cmd)
    args = parser.parse_args(argv)

    try:
        if args.command == "serve":
            serve(args.host, args.port, args.latency_ms, args.mode)
        else:
            print(json.dumps(answer(args.question, args.k, mode=args.mode), indent=2, ensure_ascii=False))
    except (OSError, ValueError) as exc:
        print(f"quickrag: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``rag-gate corpus check``: the corpus's chunks checked for the cuts a chunker makes (gate.core.corpuscheck)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gate.core.errors import EXIT_FAIL, EXIT_PASS, InputError


def cmd_corpus_check(args: argparse.Namespace) -> int:
    from gate.core.corpuscheck import check_corpus
    from gate.io.files import write_text
    from gate.io.golden import load_corpus
    from gate.render.console import log_safe

    if args.max_tokens is not None and args.max_tokens < 1:
        raise InputError(f"must be at least 1, got {args.max_tokens}", key="--max-tokens")
    chunks = load_corpus(Path(args.corpus))
    findings = check_corpus(chunks, args.max_tokens)
    if args.json:
        write_text(args.json, json.dumps({"findings": findings, "counts": {"chunks": len(chunks)}}, indent=2, ensure_ascii=False) + "\n",
                   what="findings")
    out = sys.stderr if args.json == "-" else sys.stdout
    print(f"{args.corpus}: {len(chunks)} chunks", file=out)
    for f in findings:
        print(log_safe(f"{f['level']:<7} {f['code']:<21} {f['message']}"), file=out)
    errors = sum(1 for f in findings if f["level"] == "error")
    print(f"{errors} error(s), {len(findings) - errors} warning(s)", file=out)
    return EXIT_FAIL if errors else EXIT_PASS



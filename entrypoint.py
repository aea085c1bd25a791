"""Docker action entry point: GitHub's INPUT_* / GITHUB_* environment -> the CLI code path.

GitHub passes each input as INPUT_<NAME> (upper case, hyphens kept). The run's report,
comment body and JUnit XML are written next to each other; the verdict and the report
path become step outputs and the comment body is appended to the job summary.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def action_input(name: str, default: str = "") -> str:
    return os.environ.get(f"INPUT_{name.upper()}", "").strip() or default


def append(path_var: str, text: str) -> None:
    path = os.environ.get(path_var)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def main() -> int:
    from gate.cli import main as cli_main

    workspace = Path(os.environ.get("GITHUB_WORKSPACE", "."))
    os.chdir(workspace)
    config = action_input("config", "rag-eval.yml")
    report = action_input("report-path", "rag-gate-report.json")
    markdown = str(Path(report).with_suffix(".md"))
    junit = str(Path(report).with_suffix(".xml"))
    code = cli_main(["run", "--config", config, "--report", report, "--markdown", markdown, "--junit", junit])
    verdict = {0: "pass", 1: "fail", 3: "error"}.get(code, "invalid")
    append("GITHUB_OUTPUT", f"verdict={verdict}\nreport={report}\n")
    if Path(report).exists():
        data = json.loads(Path(report).read_text(encoding="utf-8"))
        headline = {name: stage.get("metrics", {}) for name, stage in data.get("stages", {}).items()}
        append("GITHUB_OUTPUT", f"metrics={json.dumps(headline, separators=(',', ':'))}\n")
    if Path(markdown).exists():
        append("GITHUB_STEP_SUMMARY", Path(markdown).read_text(encoding="utf-8"))
    return code


if __name__ == "__main__":
    sys.exit(main())

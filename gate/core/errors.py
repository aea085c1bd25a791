"""Every error rag-gate reports to a user.

    RagGateError            any failure the CLI turns into a message and an exit code
    ├── InputError          exit 2: the spec, golden set, results file or another input is invalid
    └── RunError            exit 3: the run could not be completed (target unreachable, ...)

The CLI prints ``str(error)`` (and the hint) and never a traceback for these.
"""

from __future__ import annotations

from typing import Any

KeyPath = tuple[str | int, ...]

# The exit codes, in one place: 0 every gate passed, 1 a gate failed, 2 an input is invalid, 3 the run could not complete
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_INPUT = 2
EXIT_ERROR = 3
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C), as a shell reports it
EXIT_TERMINATED = 143  # SIGTERM (a cancelled job, docker stop), as a shell reports it
EXIT_BROKEN_PIPE = 141  # SIGPIPE: what the command wrote to stdout was read no further (`| head`), as a shell reports it
EXIT_CODES: dict[str, int] = {"pass": EXIT_PASS, "fail": EXIT_FAIL, "error": EXIT_ERROR}  # a report's verdict -> its exit code


class RagGateError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = EXIT_ERROR
    slug = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(RagGateError):
    """An input is invalid. The message names the file and the line or key at fault."""

    exit_code = EXIT_INPUT
    slug = "invalid-input"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if file:
            where = file if line is None else f"{file}:{line}"
        if key:
            where = f"{where}: {key}" if where else key
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file, self.line, self.key = file, line, key


class InputErrors(InputError):
    """Several input errors found in one pass (all reported at once)."""

    def __init__(self, errors: list[InputError], *, limit: int = 20) -> None:
        shown = errors[:limit]
        lines = [e.message for e in shown]
        if len(errors) > limit:
            lines.append(f"... and {len(errors) - limit} more errors")
        RagGateError.__init__(self, "\n".join(lines), hint=errors[0].hint)
        self.errors = errors
        self.file, self.line, self.key = errors[0].file, errors[0].line, errors[0].key


class RunError(RagGateError):
    """The run could not be completed."""

    exit_code = EXIT_ERROR
    slug = "run-error"


class ApiError(RunError):
    """A call to a forge's REST API (GitHub's, GitLab's) that failed: ``status`` is the HTTP status, None when no
    answer came."""

    slug = "api-error"

    def __init__(self, status: int | None, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


def key_path(path: KeyPath) -> str:
    """('stages', 'retrieval', 'gates', 'mrr') -> 'stages.retrieval.gates.mrr'; list items as [i]."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def value_at(data: Any, path: KeyPath | tuple[Any, ...]) -> Any:
    """data[p0][p1]...; None where a step is missing."""
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data

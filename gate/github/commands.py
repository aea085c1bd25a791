"""Talking to the Actions runner: inputs, workflow commands (``::error::``, ``::add-mask::``, groups), step
outputs, the job summary, and ``fail`` (the one way the action reports an error: summary, ``::error::``,
exit code)."""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


def action_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """An input as GitHub passes it: INPUT_<NAME upper-cased, hyphens kept>."""
    return env.get(f"INPUT_{name.upper()}", "").strip() or default


def command_escape(text: str) -> str:
    """Escape a workflow command's message (GitHub's rules for %, CR and LF; and ``##[``, the runner's older command
    form, which it finds anywhere in a line)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A").replace("##[", "## [")


def workflow_command(name: str, message: str, **props: str) -> str:
    params = ",".join(f"{k}={command_escape(v).replace(':', '%3A').replace(',', '%2C')}" for k, v in props.items())
    return f"::{name}{' ' + params if params else ''}::{command_escape(message)}"


def emit(name: str, message: str, **props: str) -> None:
    print(workflow_command(name, message, **props), flush=True)


@contextmanager
def group(title: str) -> Iterator[None]:
    print(f"::group::{title}", flush=True)
    try:
        yield
    finally:
        print("::endgroup::", flush=True)


@contextmanager
def commands_stopped() -> Iterator[None]:
    """Nothing printed inside starts a workflow command: ``::stop-commands::`` with a random token, and the token
    again at the end (a target's answer or a library's warning cannot know it). On top of the escaping of what
    rag-gate itself prints, this covers what the judge libraries print."""
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}", flush=True)
    try:
        yield
    finally:
        sys.stderr.flush()
        print(f"::{token}::", flush=True)


def mask(values: Iterable[str], done: set[str] | None = None) -> None:
    """::add-mask:: for each value (line by line, as GitHub masks), skipping values too short to be secrets and the
    ones in ``done`` (which it extends)."""
    done = set() if done is None else done
    for v in dict.fromkeys(values):
        if len(v) < 4 or v in done:  # as redaction: shorter values are not secrets worth masking
            continue
        done.add(v)
        for line in v.splitlines() or [v]:
            if len(line.strip()) >= 4:
                print(f"::add-mask::{line}", flush=True)


def append_file(env: Mapping[str, str], var: str, text: str) -> None:
    """Append to the file a runner variable names (GITHUB_STEP_SUMMARY, GITHUB_OUTPUT); nothing when it is unset."""
    path = env.get(var)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def set_outputs(env: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Step outputs through GITHUB_OUTPUT (heredoc form: values may hold newlines). The delimiter is random, as
    GitHub advises, so that no value (metric names come from the spec, or from a fork's report) can end it early."""
    text = ""
    for key, value in outputs.items():
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        text += f"{key}<<{delimiter}\n{value}\n{delimiter}\n"
    append_file(env, "GITHUB_OUTPUT", text)


def mask_secrets(env: Mapping[str, str], token: str, spec_path: str) -> set[str]:
    """::add-mask:: for the token, the judge's key and the value of every ${NAME} the spec reads from the environment
    (header tokens, URLs with credentials: the reports redact the same values), so no log line can show them. Read
    from the spec's text, before it is even parsed; returns the values masked."""
    if token:
        print(f"::add-mask::{token}", flush=True)
    values: list[str] = []
    try:
        import yaml

        text = Path(spec_path).read_text(encoding="utf-8")
        values += [env[name] for name in _REFERENCE.findall(text) if env.get(name)]
        data = yaml.safe_load(text) or {}
        key_env = (data.get("judge") or {}).get("api_key_env")
        if key_env and env.get(key_env):
            values.append(env[key_env])
    except Exception:  # the spec is validated later, with a proper message
        pass
    done = {token}
    mask(values, done)
    return done


def fail(env: Mapping[str, str], title: str, message: str, *, hint: str | None = None, code: int) -> int:
    """Report an error the action stops or fails on: a section in the job summary (cause and fix), one ``::error::``
    line, and the exit code to return."""
    from gate.render.markdown import cell

    summary = f"## ❌ {cell(title)}\n\n{cell(message, 2000)}\n" + (f"\n**How to fix it:** {cell(hint, 1000)}\n" if hint else "")
    append_file(env, "GITHUB_STEP_SUMMARY", summary)
    emit("error", message + (f" (hint: {hint})" if hint else ""), title=title)
    return code

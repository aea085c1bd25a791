"""Talking to the Actions runner: inputs, workflow commands (``::error::``, ``::add-mask::``, groups), step
outputs, the job summary, ``fail`` (the one way the action reports an error: summary, ``::error::``,
exit code), and ``Cancellation`` (what SIGINT and SIGTERM do: stop, and say so the same way)."""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from gate.core.errors import EXIT_INTERRUPTED, EXIT_TERMINATED

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


_STOPPED: list[str] = []  # the tokens of the ::stop-commands:: in force, innermost last
_STOPPED_LOCK = threading.RLock()


@contextmanager
def commands_stopped() -> Iterator[None]:
    """Nothing printed inside starts a workflow command: ``::stop-commands::`` with a random token, and the token
    again at the end (a target's answer or a library's warning cannot know it). On top of the escaping of what
    rag-gate itself prints, this covers what the judge libraries print."""
    token = secrets.token_hex(16)
    with _STOPPED_LOCK:
        _STOPPED.append(token)  # first: a signal between the two lines leaves at worst a resume with nothing to resume
        print(f"::stop-commands::{token}", flush=True)
    try:
        yield
    finally:
        sys.stderr.flush()
        resume_commands(token)


def resume_commands(token: str | None = None) -> None:
    """Print the token that resumes the workflow commands stopped with ``token`` (None: every stop still in force,
    innermost first), once: the end of ``commands_stopped``, or a cancelled run that cannot get there."""
    with _STOPPED_LOCK:
        for t in [t for t in reversed(_STOPPED) if token in (None, t)]:
            _STOPPED.remove(t)
            print(f"::{t}::", flush=True)


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


GRACE_S = 5.0  # after SIGINT or SIGTERM, how long the main thread may take to stop before the process ends without it
CANCEL_EXIT: dict[int, int] = {signal.SIGINT: EXIT_INTERRUPTED, signal.SIGTERM: EXIT_TERMINATED}


class Cancelled(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread: the job was cancelled (or its container stopped)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Cancellation:
    """While in force, SIGINT and SIGTERM stop the action: the first one is raised in the main thread as ``Cancelled``
    (in the Docker image Python is PID 1, which ignores a SIGTERM it has no handler for; Python's own SIGINT handler
    ends in a traceback), and ``finish`` resumes the workflow commands, writes the job summary, prints ``::error::``
    and gives the exit code: 130 for SIGINT, 143 for SIGTERM. A later signal is ignored while it finishes.

    ``own_process`` (the action's entry point): ``finish`` then ends the process at once, without waiting for threads
    still asking a target whose answers nothing would use; and if the main thread has not got to ``finish`` within
    ``grace_s`` (it waits for answers in flight), a watchdog thread finishes in its place."""

    def __init__(self, env: Mapping[str, str], *, own_process: bool, grace_s: float = GRACE_S) -> None:
        self.env, self.own_process, self.grace_s = env, own_process, grace_s
        self.signum: int | None = None
        self._code: int | None = None
        self._once = threading.Lock()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Cancellation:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set signal handlers
            self._previous = {signum: signal.signal(signum, self._raise) for signum in CANCEL_EXIT}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _raise(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            return  # the first signal is being handled
        self.signum = signum
        if self.own_process:
            threading.Thread(target=self._watchdog, name="rag-gate-cancelled", daemon=True).start()
        raise Cancelled(signum)

    def finish(self, signum: int | None = None) -> int:
        """Once, whichever thread gets here first: the stopped workflow commands resumed, the job summary and the
        ``::error::`` saying the run was cancelled; the exit code (in the own process: the process ends here)."""
        with self._once:
            if self._code is None:
                signum = self.signum or signum or signal.SIGINT
                resume_commands()
                self._code = fail(self.env, "rag-gate: cancelled", f"the run was cancelled ({signal.Signals(signum).name}) "
                                  "before it finished: no verdict; nothing more is written or posted, and what was written "
                                  "stays (a judge cache keeps the scores it has)", code=CANCEL_EXIT.get(signum, EXIT_INTERRUPTED))
        if self.own_process:
            _exit_now(self._code)
        return self._code

    def _watchdog(self) -> None:
        time.sleep(self.grace_s)
        self.finish()  # the main thread is still held up (else the process would have ended): finish in its place


def _exit_now(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

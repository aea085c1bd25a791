"""Target: a Python function, "package.module:function", called as function(question, k)."""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gate.core.errors import InputError
from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.targets import Target, answer_field, parse_output

if TYPE_CHECKING:
    from gate.config.spec import Spec


def import_callable(ref: str, paths: list[str], error: Callable[[str], InputError]) -> Callable[..., Any]:
    """Import "package.module:attr.attr" with ``paths`` in front of sys.path."""
    module_name, _, attr = ref.partition(":")
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise error(f"cannot import {module_name!r}: {exc} (searched {', '.join(paths)} and the installed packages)") from None
    except Exception as exc:  # the user's module failed while importing
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise error(f"importing {module_name!r} raised {type(exc).__name__}: {exc} ({last.filename}:{last.lineno})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise error(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise error(f"{ref!r} is not callable")
    return obj


class PythonTarget(Target):
    kind = "python"

    def __init__(self, function: Callable[..., Any], concurrency: int = 1, contexts_function: Callable[..., Any] | None = None) -> None:
        self.function = function
        self.concurrency = concurrency
        self.contexts_function = contexts_function

    @classmethod
    def from_spec(cls, spec: Spec) -> PythonTarget:
        cfg = spec.target["python"]  # the object form (the loader turns "module:function" into it)
        paths = [str(spec.resolve(p)) for p in cfg.get("path", ["."])]  # the spec's folder, as the schema says
        fn = import_callable(cfg["function"], paths, lambda m: spec.error(m, "target", "python"))
        ctx_fn = None
        if cfg.get("contexts_function"):
            ctx_fn = import_callable(cfg["contexts_function"], paths, lambda m: spec.error(m, "target", "python", "contexts_function"))
        return cls(fn, int(cfg["concurrency"]), ctx_fn)

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        start = time.perf_counter()
        try:
            result = self.function(case.question, k)
        except Exception as exc:  # the user's code failed for this case: record it, go on
            return TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            return parse_output(case.id, result, latency_ms=latency)
        except ValueError as exc:
            return TargetOutput.failed(case.id, f"unexpected return value: {exc}", latency)

    @property
    def answers_from_contexts(self) -> bool:
        return self.contexts_function is not None

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """contexts_function(question, contexts) -> {"answer": str} (or the answer string)."""
        if self.contexts_function is None:
            return Answer(None, "the python target has no contexts_function")
        start = time.perf_counter()
        try:
            result = self.contexts_function(case.question, list(contexts))
        except Exception as exc:  # the user's code failed for this case
            return Answer(None, f"{type(exc).__name__}: {exc}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        if isinstance(result, str):
            return Answer(result, None, latency)
        try:
            return Answer(answer_field(result, "answer"), None, latency)
        except ValueError as exc:
            return Answer(None, f"unexpected return value: {exc}", latency)

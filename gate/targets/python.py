"""Target: a Python function, "package.module:function", called as function(question, k); or a retriever and an answerer."""

from __future__ import annotations

import importlib
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from types import GeneratorType
from typing import TYPE_CHECKING, Any

from gate.core.errors import InputError
from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.targets import Beside, ShapeError, Target, output_from
from gate.targets.shapes import ACCEPTED, DOCUMENTS, answer_of, read_documents, read_output

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



def awaited(value: Any) -> Any:
    """What a call returned, or, for an ``async def`` function's coroutine, what it returns once run (on an event loop
    of its own: the run asks each case on a worker thread)."""
    if inspect.iscoroutine(value):
        import asyncio

        return asyncio.run(value)
    return value


class PythonTarget(Target):
    """``function(question, k)`` returning the usual shape or a framework's output (gate.targets.shapes); or
    ``retriever(question, k)`` returning the ranked documents and ``answerer(question, documents)`` the answer."""

    kind = "python"
    ask_first_alone = True  # a return value of the wrong shape stops the run after the first case

    def __init__(self, function: Callable[..., Any] | None, concurrency: int = 1, contexts_function: Callable[..., Any] | None = None,
                 *, retriever: Callable[..., Any] | None = None, answerer: Callable[..., Any] | None = None,
                 id_key: str | None = None) -> None:
        if (function is None) == (retriever is None):
            raise ValueError("a python target has a function or a retriever, not both")
        self.function = function
        self.concurrency = concurrency
        self.contexts_function = contexts_function
        self.retriever, self.answerer, self.id_key = retriever, answerer, id_key
        self.wrong_shape: str | None = None
        self.shape_hint: str | None = None

    @classmethod
    def from_spec(cls, spec: Spec) -> PythonTarget:
        cfg = spec.target["python"]  # the object form (the loader turns "module:function" into it)
        paths = [str(spec.resolve(p)) for p in cfg.get("path", ["."])]  # the spec's folder, as the schema says

        def imported(key: str) -> Callable[..., Any] | None:
            if not cfg.get(key):
                return None
            return import_callable(cfg[key], paths, lambda m: spec.error(m, "target", "python", *(() if key == "function" else (key,))))

        return cls(imported("function"), int(cfg["concurrency"]), imported("contexts_function"), retriever=imported("retriever"),
                   answerer=imported("answerer"), id_key=cfg.get("id_key"))

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        start = time.perf_counter()
        try:
            if self.retriever is not None:
                return self._ask_pair(self.retriever, case, k, start)
            result = awaited(self.function(case.question, k))  # type: ignore[misc]
        except Exception as exc:  # the user's code failed for this case: record it, go on
            return TargetOutput.failed(case.id, f"{type(exc).__name__}: {exc}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            out = read_output(case.id, result, latency_ms=latency, id_key=self.id_key)
        except ShapeError as exc:
            return self._wrong(case, exc, f"return one of: {ACCEPTED}", latency)
        self.wrong_shape = None
        return out

    def _ask_pair(self, retriever: Callable[..., Any], case: GoldenCase, k: int, start: float) -> TargetOutput:
        """retriever(question, k), then answerer(question, documents) given the documents as the retriever returned them."""
        docs = awaited(retriever(case.question, k))
        if isinstance(docs, GeneratorType):  # a retriever that yields its documents: the list, given to the answerer too
            docs = list(docs)
        try:
            retrieved = read_documents(docs, "retriever(question, k)", self.id_key)
        except ShapeError as exc:
            return self._wrong(case, exc, f"return a list of {DOCUMENTS}", (time.perf_counter() - start) * 1000)
        try:
            answer = None if self.answerer is None else awaited(self.answerer(case.question, docs))
        except Exception as exc:  # the user's answerer failed for this case
            return TargetOutput.failed(case.id, f"answerer: {type(exc).__name__}: {exc}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            out = output_from(case.id, retrieved, Beside(answer_of(answer, "answerer(question, documents)"), None, None), latency_ms=latency)
        except ShapeError as exc:
            return self._wrong(case, exc, "return the answer as a string (or an object holding it)", latency)
        self.wrong_shape = None
        return out

    def _wrong(self, case: GoldenCase, exc: ShapeError, hint: str, latency: float) -> TargetOutput:
        """A return value of the wrong shape: recorded in ``wrong_shape`` (with what to do in ``shape_hint``) and as
        the case's error."""
        self.wrong_shape, self.shape_hint = str(exc), exc.hint or hint
        return TargetOutput.failed(case.id, f"returned the wrong shape: {exc}", latency)

    @property
    def answers_from_contexts(self) -> bool:
        return self.contexts_function is not None or self.answerer is not None

    def answer_from(self, case: GoldenCase, contexts: list[str]) -> Answer:
        """contexts_function(question, contexts) -> {"answer": str} (or the answer string); without one,
        answerer(question, contexts) with the contexts as strings."""
        fn = self.contexts_function or self.answerer
        if fn is None:
            return Answer(None, "the python target has no contexts_function")
        who = "" if self.contexts_function is not None else "answerer (given the contexts as strings): "
        start = time.perf_counter()
        try:
            result = awaited(fn(case.question, list(contexts)))
        except Exception as exc:  # the user's code failed for this case
            why = (" (the noise test gives the answerer its contexts as strings, not documents: take strings too, or set "
                   "target.python.contexts_function)") if who and isinstance(exc, (AttributeError, TypeError)) else ""
            return Answer(None, f"{who}{type(exc).__name__}: {exc}{why}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            answer = answer_of(result, "the answer")
        except ShapeError as exc:
            return Answer(None, f"{who}returned the wrong shape: {exc}", latency)
        return Answer(answer, None if answer is not None else f"{who}returned no answer", latency)

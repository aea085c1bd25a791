"""Target: a Python function, "package.module:function", called as function(question, k); or a retriever and an answerer."""

from __future__ import annotations

import importlib
import inspect
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from itertools import islice
from types import AsyncGeneratorType, GeneratorType
from typing import TYPE_CHECKING, Any

from gate.core.errors import InputError
from gate.core.model import Answer, GoldenCase, TargetOutput
from gate.deadline import ABANDONED, NO_DEADLINE, REACHED, Deadline
from gate.targets import Beside, ShapeError, Target, output_from, received
from gate.targets.shapes import ACCEPTED, DOCUMENTS, MAX_DOCUMENTS, answer_of, read_documents, read_output

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



class Overrun(Exception):
    """A call still running at the deadline (max_duration_s): left running on its thread, its result ignored."""


def awaited(value: Any) -> Any:
    """What a call returned, or, for an ``async def`` function's coroutine, what it returns once run (on an event loop
    of its own: the run asks each case on a worker thread)."""
    if inspect.iscoroutine(value):
        import asyncio

        return asyncio.run(value)
    return value


def drained(value: Any, where: str) -> Any:
    """A generator's (or an async generator's) documents as a list, at most MAX_DOCUMENTS of them; anything else as
    it is. ShapeError for one that yields more (one that never ends, or ignores k)."""
    if isinstance(value, AsyncGeneratorType):
        import asyncio

        async def first(agen: Any) -> list[Any]:
            got = []
            async for item in agen:
                got.append(item)
                if len(got) > MAX_DOCUMENTS:
                    break
            return got

        items = asyncio.run(first(value))
    elif isinstance(value, GeneratorType):
        items = list(islice(value, MAX_DOCUMENTS + 1))
    else:
        return value
    if len(items) > MAX_DOCUMENTS:
        raise ShapeError(f"{where} yielded more than {MAX_DOCUMENTS} documents (a generator that never ends?)",
                         hint="yield (or return) the top k documents only: k is the second argument")
    return items


def said(exc: BaseException) -> str:
    """An exception of the user's code, in words: its type and message (even one whose ``__str__`` raises)."""
    try:
        return str(exc) if isinstance(exc, Overrun) else f"{type(exc).__name__}: {exc}"
    except Exception as inner:  # the exception's own __str__ failed
        return f"{type(exc).__name__} (its message could not be read: its __str__ raised {type(inner).__name__})"


class _Caller:
    """The thread that makes the user's calls for one of the run's threads, one call at a time: the same thread for
    every call (what the user's code keeps per thread, a connection or a session, stays valid; a thread it starts is
    not a daemon and is waited for, as from the run's own threads), until a call runs past the deadline: that thread
    is then left to it (marked ``ABANDONED``; the console's run ends the process without waiting for it; it ends when
    that call returns), and the next call gets a new one. ``close_callers`` ends the others once the run is done with
    the target, or at the interpreter's exit."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], threading.Event] | None] = queue.SimpleQueue()
        self.closed = False
        self.thread = threading.Thread(target=self._serve, name="rag-gate-python-call")
        self.thread.start()

    def _serve(self) -> None:
        while (call := self.calls.get()) is not None:
            fn, args, box, done = call
            try:
                box["value"] = awaited(fn(*args))
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()


_CALLERS = threading.local()  # each of the run's threads: its _Caller
_LIVE: list[_Caller] = []  # every caller not abandoned, for close_callers
_LIVE_LOCK = threading.Lock()


def close_callers() -> None:
    """End every caller thread not left to a call still running (each finishes the call it has, if any)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
        _LIVE.clear()
    for caller in live:
        caller.closed = True  # a thread that kept it gets a new one on its next call
        caller.calls.put(None)
    for caller in live:
        caller.thread.join()


# The interpreter's exit ends the idle callers of a target never closed (a library use that makes a PythonTarget and
# drops it) before it waits for the threads that are not daemons, as concurrent.futures does for its workers (with
# the same CPython hook): none of them would get another call.
getattr(threading, "_register_atexit", lambda fn: None)(close_callers)


def within(deadline: Deadline, fn: Callable[..., Any], *args: Any) -> Any:
    """``awaited(fn(*args))``, made on this thread's caller thread when the run has a deadline: Overrun if it has not
    returned by then (a coroutine that never completes, a call that hangs), which the run cannot stop but need not
    wait for."""
    left = deadline.left()
    if left is None:
        return awaited(fn(*args))
    if left <= 0:
        raise Overrun(f"{REACHED}: the call was not made")
    caller = getattr(_CALLERS, "caller", None)
    if caller is None or caller.closed:
        caller = _CALLERS.caller = _Caller()
        with _LIVE_LOCK:
            _LIVE.append(caller)
    box: dict[str, Any] = {}
    done = threading.Event()
    caller.calls.put((fn, args, box, done))
    if not done.wait(left):
        _CALLERS.caller = None  # that thread is busy with the call still running: the next call gets a new one
        with _LIVE_LOCK:
            _LIVE.remove(caller)
        setattr(caller.thread, ABANDONED, True)
        caller.calls.put(None)  # it ends once that call returns, if ever (else the interpreter's exit would wait on it)
        raise Overrun(f"{REACHED}: the call was still running, it was left running and its result ignored")
    if "error" in box:
        raise box["error"]
    return box["value"]


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
        self.deadline: Deadline = NO_DEADLINE  # max_duration_s: a call still running then is left, its case errored
        self.wrong_shape: str | None = None
        self.shape_hint: str | None = None

    @classmethod
    def from_spec(cls, spec: Spec, deadline: Deadline = NO_DEADLINE) -> PythonTarget:
        cfg = spec.target["python"]  # the object form (the loader turns "module:function" into it)
        paths = [str(spec.resolve(p)) for p in cfg.get("path", ["."])]  # the spec's folder, as the schema says

        def imported(key: str) -> Callable[..., Any] | None:
            if not cfg.get(key):
                return None
            return import_callable(cfg[key], paths, lambda m: spec.error(m, "target", "python", *(() if key == "function" else (key,))))

        target = cls(imported("function"), int(cfg["concurrency"]), imported("contexts_function"), retriever=imported("retriever"),
                     answerer=imported("answerer"), id_key=cfg.get("id_key"))
        target.deadline = deadline
        return target

    def ask(self, case: GoldenCase, k: int) -> TargetOutput:
        start = time.perf_counter()
        where = "function(question, k)" if self.retriever is None else "retriever(question, k)"
        try:
            result = within(self.deadline, self._call, self.function or self.retriever, where, case.question, k)
        except ShapeError as exc:
            return self._wrong(case, exc, f"return one of: {ACCEPTED}", (time.perf_counter() - start) * 1000)
        except Exception as exc:  # the user's code failed for this case (or ran past the deadline): record it, go on
            return TargetOutput.failed(case.id, said(exc), (time.perf_counter() - start) * 1000)
        if self.retriever is not None:
            return self._ask_pair(result, case, start)
        latency = (time.perf_counter() - start) * 1000
        try:
            out = read_output(case.id, result, latency_ms=latency, id_key=self.id_key)
        except ShapeError as exc:
            return self._wrong(case, exc, f"return one of: {ACCEPTED}", latency)
        except Exception as exc:  # an attribute (a property) of the returned object raised
            return TargetOutput.failed(case.id, f"reading what {where} returned ({received(result)}) raised {said(exc)}", latency)
        self.wrong_shape = None
        return out

    @staticmethod
    def _call(fn: Callable[..., Any], where: str, *args: Any) -> Any:
        """fn(*args) run to its result: a coroutine awaited, a generator's documents listed (``drained``)."""
        return drained(awaited(fn(*args)), where)

    def _ask_pair(self, docs: Any, case: GoldenCase, start: float) -> TargetOutput:
        """The retriever's documents read, then answerer(question, documents) given them as the retriever returned them."""
        try:
            retrieved = read_documents(docs, "retriever(question, k)", self.id_key)
        except ShapeError as exc:
            return self._wrong(case, exc, f"return a list of {DOCUMENTS}", (time.perf_counter() - start) * 1000)
        except Exception as exc:  # an attribute (a property) of a returned document raised
            return TargetOutput.failed(case.id, f"reading the retriever's documents raised {said(exc)}", (time.perf_counter() - start) * 1000)
        try:
            answer = None if self.answerer is None else within(self.deadline, self.answerer, case.question, docs)
            text = answer_of(answer, "answerer(question, documents)")
        except ShapeError as exc:
            return self._wrong(case, exc, "return the answer as a string (or an object holding it)", (time.perf_counter() - start) * 1000)
        except Exception as exc:  # the user's answerer failed for this case
            return TargetOutput.failed(case.id, f"answerer: {said(exc)}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            out = output_from(case.id, retrieved, Beside(text, None, None), latency_ms=latency)
        except ShapeError as exc:
            return self._wrong(case, exc, "return the answer as a string (or an object holding it)", latency)
        self.wrong_shape = None
        return out

    def close(self) -> None:
        close_callers()  # the threads that made the calls (one left to a call past the deadline stays)

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
            result = within(self.deadline, fn, case.question, list(contexts))
        except Exception as exc:  # the user's code failed for this case
            why = (" (the noise test gives the answerer its contexts as strings, not documents: take strings too, or set "
                   "target.python.contexts_function)") if who and isinstance(exc, (AttributeError, TypeError)) else ""
            return Answer(None, f"{who}{said(exc)}{why}", (time.perf_counter() - start) * 1000)
        latency = (time.perf_counter() - start) * 1000
        try:
            answer = answer_of(result, "the answer")
        except ShapeError as exc:
            return Answer(None, f"{who}returned the wrong shape: {exc}", latency)
        except Exception as exc:  # an attribute of the returned object raised
            return Answer(None, f"{who}reading the answer raised {said(exc)}", latency)
        return Answer(answer, None if answer is not None else f"{who}returned no answer", latency)

"""One OpenAI-compatible client for every judge call of a run.

    JudgeClient
    ├── .openai        one AsyncOpenAI (chat and embeddings, ragas and deepeval alike)
    ├── budget         max_judge_calls, checked before a request is built (JudgeBudgetExceeded)
    └── transport      one asyncio.Semaphore(concurrency) around every HTTP request; counts
                       calls, retries and the tokens the judge reports, for usage()

The OpenAI SDK does the retrying (429 with Retry-After, 408/409, 5xx, timeouts, lost
connections; ``max_retries``). Every attempt is a call: it counts and it takes a slot.

The budget is enforced in ``AsyncOpenAI._prepare_request`` rather than in the transport
because the SDK treats any exception a transport raises as a lost connection: it would
retry it with back-off and then hide it inside an APIConnectionError.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gate.core.redact import Redactor
from gate.core.report import Usage
from gate.judges import JudgeBudgetExceeded, JudgeError, JudgeSettings, judge_cost

_CLASSES: dict[str, type] = {}


class JudgeClient:
    """The run's single judge client. Build it inside or outside the event loop; use it inside one loop."""

    def __init__(self, settings: JudgeSettings) -> None:
        import httpx

        self.settings = settings
        self.redactor = Redactor([settings.api_key or "", *settings.secrets])
        self.cut_replies = 0  # replies the judge stopped at its token limit (finish_reason "length")
        self.budget_exceeded = False
        self._reserved = 0
        self._calls = {"chat": 0, "embeddings": 0, "other": 0}
        self._retried = 0
        self._tokens = {"prompt": 0, "completion": 0, "embedding": 0}
        self._in_flight = 0
        self._max_in_flight = 0
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None

        slots = max(1, settings.concurrency)
        # No pool limit: the semaphore is the one limit (a pool wait would count against the request's timeout).
        inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None, max_keepalive_connections=slots))
        http_client = httpx.AsyncClient(transport=_transport_class()(self, inner), follow_redirects=True)
        self.openai: Any = _openai_class()(
            judge_client=self,
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
            http_client=http_client,
        )

    # -- budget ---------------------------------------------------------------------------

    def reserve_call(self) -> None:
        """Take one call from the budget or raise JudgeBudgetExceeded (nothing is sent then)."""
        limit = self.settings.max_judge_calls
        if limit is not None and self._reserved >= limit:
            self.budget_exceeded = True
            raise JudgeBudgetExceeded(
                f"judge call budget used up: judge.max_judge_calls is {limit} and {self._reserved} calls were made; "
                "raise judge.max_judge_calls or sample fewer cases"
            )
        self._reserved += 1

    def check_budget(self) -> None:
        """Raise JudgeBudgetExceeded at once when an earlier call already used the budget up."""
        if self.budget_exceeded:
            self.reserve_call()

    # -- concurrency ----------------------------------------------------------------------

    def semaphore(self) -> asyncio.Semaphore:
        """The run's one concurrency limit, created in (and bound to) the running event loop."""
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem = asyncio.Semaphore(max(1, self.settings.concurrency))
            self._sem_loop = loop
        return self._sem

    # -- accounting -----------------------------------------------------------------------

    def _record_request(self, kind: str, retry_count: int) -> None:
        self._calls[kind] += 1
        if retry_count > 0:
            self._retried += 1

    def _record_body(self, kind: str, body: bytes) -> None:
        try:
            data = json.loads(body)
            usage = data.get("usage") or {}
        except (ValueError, AttributeError):
            return
        choices = data.get("choices") if kind == "chat" else None
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") == "length" for c in choices):
            self.cut_replies += 1
        if not isinstance(usage, dict):
            return
        if kind == "chat":
            self._tokens["prompt"] += _int(usage.get("prompt_tokens"))
            self._tokens["completion"] += _int(usage.get("completion_tokens"))
        elif kind == "embeddings":
            self._tokens["embedding"] += _int(usage.get("prompt_tokens") or usage.get("total_tokens"))

    def usage(self) -> Usage:
        """Calls (every HTTP attempt), tokens the judge reported, and the cost when prices are set."""
        cost = judge_cost(self.settings.prices or {}, self._tokens["prompt"], self._tokens["completion"], self._tokens["embedding"])
        return {
            "calls": sum(self._calls.values()),
            "chat_calls": self._calls["chat"],
            "embedding_calls": self._calls["embeddings"],
            "retried": self._retried,
            "prompt_tokens": self._tokens["prompt"],
            "completion_tokens": self._tokens["completion"],
            "embedding_tokens": self._tokens["embedding"],
            "cost": cost,
            "max_in_flight": self._max_in_flight,
            "budget_exceeded": self.budget_exceeded,
        }

    async def chat(self, body: dict[str, Any]) -> Any:
        """One chat completion, ``body`` sent as it is; a ChatCompletion back. Through the client's documented ``post``
        rather than ``chat.completions.create``: the same retries, budget, timeout and transport, without the SDK's
        per-call transform of the parameters, which was a third of a call's client CPU (bench/bench_judges.py)."""
        from openai.types.chat import ChatCompletion

        return await self.openai.post("/chat/completions", body=body, cast_to=ChatCompletion)

    async def aclose(self) -> None:
        await self.openai.close()

    # -- errors ---------------------------------------------------------------------------

    def error_reason(self, exc: BaseException) -> str:
        """A short, secret-free sentence saying why a judge call failed (for JudgeError): redacted, then cut. When the
        judge has been cutting replies at its token limit, a reply that is not valid JSON is most likely one of
        those: the sentence says so, and what to change."""
        reason = _describe(exc, self.settings)
        if self.cut_replies and ("JSON" in reason or "cut off" in reason) and "max_tokens" not in reason:
            were = "y was" if self.cut_replies == 1 else "ies were"
            reason += f" ({self.cut_replies} judge repl{were} cut at the token limit: raise judge.max_tokens)"
        return self.redactor.shorten(reason, 240)

    def judge_error(self, exc: BaseException) -> JudgeError:
        """The JudgeError to raise for ``exc``; a JudgeBudgetExceeded anywhere in its chain stays one."""
        budget = _find_in_chain(exc, JudgeBudgetExceeded)
        if budget is not None:
            return JudgeBudgetExceeded(str(budget))
        if isinstance(exc, JudgeError):
            return JudgeError(self.redactor(str(exc)))
        return JudgeError(self.error_reason(exc))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _kind(path: str) -> str:
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/embeddings"):
        return "embeddings"
    return "other"


def _transport_class() -> type:
    if "transport" not in _CLASSES:
        import httpx

        class JudgeTransport(httpx.AsyncBaseTransport):
            """Holds the shared semaphore for the whole request and reads what the judge reports."""

            def __init__(self, owner: JudgeClient, inner: httpx.AsyncBaseTransport) -> None:
                self._owner = owner
                self._inner = inner

            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                owner = self._owner
                kind = _kind(request.url.path)
                try:
                    retry_count = int(request.headers.get("x-stainless-retry-count", "0"))
                except ValueError:
                    retry_count = 0
                async with owner.semaphore():
                    owner._in_flight += 1
                    owner._max_in_flight = max(owner._max_in_flight, owner._in_flight)
                    try:
                        owner._record_request(kind, retry_count)
                        response = await self._inner.handle_async_request(request)
                        if response.status_code == 200 and kind != "other":
                            body = await response.aread()
                            owner._record_body(kind, body)
                        return response
                    finally:
                        owner._in_flight -= 1

            async def aclose(self) -> None:
                await self._inner.aclose()

        _CLASSES["transport"] = JudgeTransport
    return _CLASSES["transport"]


def _openai_class() -> type:
    if "openai" not in _CLASSES:
        import openai

        class BudgetedAsyncOpenAI(openai.AsyncOpenAI):
            """AsyncOpenAI that takes each attempt from the run's call budget before building it."""

            def __init__(self, *, judge_client: JudgeClient, **kwargs: Any) -> None:
                super().__init__(**kwargs)
                self._judge_client = judge_client

            async def _prepare_request(self, request: Any) -> None:
                self._judge_client.reserve_call()
                await super()._prepare_request(request)

        _CLASSES["openai"] = BudgetedAsyncOpenAI
    return _CLASSES["openai"]


def _find_in_chain(exc: BaseException | None, kind: type) -> Any:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _describe(exc: BaseException, settings: JudgeSettings) -> str:
    import openai

    attempts = settings.max_retries + 1
    status_error = _find_in_chain(exc, openai.APIStatusError)
    if status_error is not None:
        code = status_error.status_code
        retryable = code in (408, 409, 429) or code >= 500
        text = f"HTTP {code} from the judge"
        if retryable and attempts > 1:
            text += f" after {attempts} attempts"
        detail = _status_detail(status_error)
        return f"{text}: {detail}" if detail else text
    if _find_in_chain(exc, openai.APITimeoutError) is not None:
        return f"the judge did not answer within {settings.timeout_s:g} s ({attempts} attempts)"
    if _find_in_chain(exc, openai.APIConnectionError) is not None:
        return f"cannot reach the judge at {settings.base_url} ({attempts} attempts)"
    if _find_named(exc, "IncompleteOutputException") is not None:
        return "judge reply was cut off by its token limit (finish_reason=length) before the JSON was complete: raise judge.max_tokens"
    retry_exc = _find_named(exc, "InstructorRetryException")
    if retry_exc is not None:
        n = getattr(retry_exc, "n_attempts", None) or "several"
        if _find_in_chain(retry_exc, json.JSONDecodeError) is not None or _mentions_json_error(retry_exc):
            return f"judge returned malformed JSON {n} times"
        return f"judge output did not match the expected JSON schema {n} times"
    if isinstance(exc, json.JSONDecodeError):
        return "judge returned malformed JSON"
    if type(exc).__name__ == "ValidationError":
        return "judge output did not match the expected JSON schema"
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else f"{type(exc).__name__} from the judge library"


def _find_named(exc: BaseException | None, name: str) -> BaseException | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if type(exc).__name__ == name:
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _mentions_json_error(exc: BaseException) -> bool:
    text = str(exc)
    return "Invalid JSON" in text or "json_invalid" in text or "JSONDecodeError" in text


def _status_detail(error: Any) -> str:
    body = getattr(error, "body", None)
    message: Any = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    elif isinstance(body, str):
        message = body
    return str(message) if message else ""


from gate.judges.models import is_floating_model  # noqa: E402,F401  (re-exported)

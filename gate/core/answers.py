"""Answer checks that need no model: expected keywords and the checks a team writes for its answers' form. Pure.

    keyword_coverage   per case with ``expected_keywords``: the share of them the answer holds
    check_pass_rate    per answer: 1 when it passes every check that applies to it, else 0

Text is matched as the offline metrics match it (gate.core.textmatch: NFKC, case, punctuation and articles dropped,
CJK one token per character): a keyword or a ``must_contain`` phrase counts when all its tokens appear in the answer
in order, side by side ("21 days" is in "loans last 21 days", not in "21 loans, 3 days"). ``regex`` is matched on
the answer as written (its lines: ``^`` and ``$`` at each line), so a check can hold the answer's format: a model
upgrade that turns every "### Steps" heading into "**Steps**" fails ``regex: "^### "`` on every case. ``max_words``
counts the answer's words as rouge_l does (letters and digits, CJK one word per character), ``max_chars`` its code
points. ``json_schema`` (a file) is validated by the caller, which hands in the validator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gate.core.textmatch import rouge_tokens, squad_tokens

CHECK_KEYS = ("must_contain", "must_not_contain", "regex", "max_words", "max_chars", "json_schema")
SHOWN = 80  # characters of an answer's line shown as evidence


@dataclass(frozen=True)
class AnswerChecks:
    """The checks an answer must pass: the spec's (``stages.generation.checks``, for every answer) and a golden case's
    own (``checks``), merged by ``merged``. Every key is optional."""

    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    regex: str | None = None
    max_words: int | None = None
    max_chars: int | None = None
    json_schema: str | None = None  # a path (the spec's: relative to the spec file; a case's: to the golden set)

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> AnswerChecks:
        return cls(tuple(d.get("must_contain") or ()), tuple(d.get("must_not_contain") or ()), d.get("regex"),
                   d.get("max_words"), d.get("max_chars"), d.get("json_schema"))

    def merged(self, case: AnswerChecks) -> AnswerChecks:
        """These checks and a case's: the phrases of both, the case's value where both set one."""
        return AnswerChecks((*self.must_contain, *case.must_contain), (*self.must_not_contain, *case.must_not_contain),
                            case.regex or self.regex, case.max_words if case.max_words is not None else self.max_words,
                            case.max_chars if case.max_chars is not None else self.max_chars, case.json_schema or self.json_schema)

    any_check: bool = field(init=False, repr=False, compare=False)  # some key is set (worked out once: asked per answer)

    def __post_init__(self) -> None:
        object.__setattr__(self, "any_check", any(getattr(self, k) not in (None, ()) for k in CHECK_KEYS))

    def __bool__(self) -> bool:
        return self.any_check


@dataclass(frozen=True)
class Failure:
    """One check an answer failed, and the evidence: the missing phrase, the phrase found, the line that did not match."""

    check: str
    evidence: str


@dataclass(slots=True)
class AnswerResult:
    """What the checks found in one answer."""

    keywords: int = 0  # expected keywords of the case
    missing: tuple[str, ...] = ()  # the expected keywords the answer lacks
    failures: tuple[Failure, ...] = field(default_factory=tuple)
    checked: bool = False  # some check applied to this answer

    @property
    def coverage(self) -> float | None:
        return (self.keywords - len(self.missing)) / self.keywords if self.keywords else None

    @property
    def passed(self) -> bool | None:
        return not self.failures if self.checked else None


@lru_cache(maxsize=1 << 14)
def _phrase(phrase: str) -> str | None:
    """The phrase's tokens as they stand in a ``Tokens`` text (between spaces), None when it has none."""
    want = squad_tokens(phrase)
    return f" {' '.join(want)} " if want else None


class Tokens(str):
    """An answer's squad tokens as one text, each between spaces: a phrase's tokens in order, side by side, are a
    substring of it (a token holds no space), found in C."""

    __slots__ = ()

    @classmethod
    def of(cls, tokens: Sequence[str]) -> Tokens:
        return cls(f" {' '.join(tokens)} ")


def holds(tokens: Sequence[str] | Tokens, phrase: str) -> bool:
    """Whether the phrase's tokens appear in ``tokens`` in order, side by side (a phrase with no token: never)."""
    want = _phrase(phrase)
    if want is None:
        return False
    return want in (tokens if isinstance(tokens, Tokens) else Tokens.of(tokens))


def _missing(joined: str, phrases: Sequence[str]) -> list[str]:
    """The phrases whose tokens ``joined`` (a ``Tokens`` text) does not hold: ``holds`` over many, in one loop."""
    out = []
    for p in phrases:
        want = _phrase(p)
        if want is None or want not in joined:
            out.append(p)
    return out


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def _few_words(answer: str, most: int) -> bool:
    """True when an ASCII answer cannot hold more than ``most`` words: its words are separated, so there are at most
    half its characters, rounded up (a text that is not ASCII may grow under NFKC: it is counted)."""
    return (len(answer) + 1) // 2 <= most and answer.isascii()


def _first_line(answer: str) -> str:
    line = next((ln for ln in answer.splitlines() if ln.strip()), "")
    return line if len(line) <= SHOWN else line[:SHOWN] + "…"


def failures(answer: str, checks: AnswerChecks, tokens: Sequence[str] | Tokens,
             json_problem: Callable[[str], str | None] | None = None) -> list[Failure]:
    """Every check of ``checks`` the answer fails (``tokens``: its squad tokens; ``json_problem``: what is wrong with
    the answer against ``checks.json_schema``, None when it is valid)."""
    tokens = tokens if isinstance(tokens, Tokens) else Tokens.of(tokens)
    out = [Failure("must_contain", f"missing {p!r}") for p in _missing(tokens, checks.must_contain)] if checks.must_contain else []
    if checks.must_not_contain:
        absent = _missing(tokens, checks.must_not_contain)
        found = next((p for p in checks.must_not_contain if p not in absent), None)
        if found is not None:
            out.append(Failure("must_not_contain", f"found {found!r}"))
    if checks.regex is not None and _compiled(checks.regex).search(answer) is None:
        out.append(Failure("regex", f"no line matches {checks.regex!r}; the first line is {_first_line(answer)!r}"))
    if checks.max_words is not None and not _few_words(answer, checks.max_words) \
            and (words := len(rouge_tokens(answer))) > checks.max_words:
        out.append(Failure("max_words", f"{words} words, more than {checks.max_words}"))
    if checks.max_chars is not None and len(answer) > checks.max_chars:
        out.append(Failure("max_chars", f"{len(answer)} characters, more than {checks.max_chars}"))
    if checks.json_schema is not None and json_problem is not None:
        problem = json_problem(answer)
        if problem:
            out.append(Failure("json_schema", problem))
    return out


def check_answer(answer: str | None, keywords: Sequence[str], checks: AnswerChecks,
                 json_problem: Callable[[str], str | None] | None = None) -> AnswerResult:
    """The keyword coverage and the failed checks of one answer (no answer: every keyword missing, every check failed)."""
    text = answer or ""
    phrases = keywords or checks.must_contain or checks.must_not_contain
    tokens = Tokens.of(squad_tokens(text)) if phrases else Tokens.of(())  # tokenised only when a phrase is looked for
    missing = tuple(_missing(tokens, keywords)) if keywords else ()
    if not checks:
        return AnswerResult(len(keywords), missing)
    if answer is None:
        return AnswerResult(len(keywords), missing, (Failure("answer", "the target gave no answer"),), True)
    return AnswerResult(len(keywords), missing, tuple(failures(text, checks, tokens, json_problem)), True)

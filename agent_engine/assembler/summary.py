"""Summaries of what was paged out: a few tokens that say what the budget left out.

A package under pressure leaves out candidates that more room would have brought in
(:data:`~agent_engine.assembler.package.LACK_OF_ROOM`). MemGPT keeps a recursive summary of
what it evicted from its context; here a build may do the same for one step: with
``AssemblerConfig(summary=SummaryConfig(...))`` it keeps a share of the budget for a summary
section while it packs the items, then asks a :class:`Summarizer` to say what the left-out
candidates hold within the room the items leave (the kept share and whatever they did not
use, at most ``max_tokens``). The section's tokens come out of the request's budget: the
whole render, summary included, never costs more than ``budget_tokens``. A build that left
nothing out for lack of room gives the kept share back to the items.

Two summarizers ship:

* :class:`ExtractiveSummarizer`, the default: offline, deterministic and cheap. It takes the
  left-out candidates in the order of the scores the build gave them (nothing is embedded
  again), keeps the sentence of each that shares the most words with the query, drops
  repeats, cuts each to a few tokens, and fills the allowance to the last word that fits.
* :class:`LLMSummarizer`: a callable of the user's (any LLM client: prompt in, text out).
  Its answer is cut to the room with the assembler's token counter, never trusted to fit.

A summarizer that raises, answers something other than text, or answers nothing is
contained: the build falls back to ``SummaryConfig.fallback`` (the extractive summarizer by
default; ``None``: no summary), and the package's :class:`~.package.Summary` names the
failure (``strict=True`` raises instead).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from agent_engine.assembler._cut import cut
from agent_engine.errors import SummaryError, ValidationError
from agent_engine.models import ContextItem, Tier, fingerprint_text
from agent_engine.retrieval.text import analyze
from agent_engine.tokens import TokenCounter

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummaryConfig",
    "SummaryRequest",
    "SummarySource",
]


@attrs.frozen
class SummarySource:
    """A candidate left out for lack of room: the item, its tier and the score the build gave."""

    item: ContextItem
    tier: Tier
    score: float | None


@attrs.frozen
class SummaryRequest:
    """What a summarizer is asked: say what ``sources`` hold in ``allowance`` tokens or fewer.

    ``query``: what the build ranked against. ``sources``: the candidates left out for lack
    of room, most relevant first (by the build's scores). ``allowance``: the most tokens the
    answer may cost, as ``counter`` counts them (the section's header is paid already).
    """

    query: str
    sources: tuple[SummarySource, ...]
    allowance: int
    counter: TokenCounter


@runtime_checkable
class Summarizer(Protocol):
    """**Protocol:** says in a few tokens what the candidates a build left out hold.

    ``name`` identifies it in the package (``Summary.summarizer``) and the log.
    ``summarize(request)`` returns the text of the summary section: non-blank, within
    ``request.allowance`` tokens as ``request.counter`` counts them. The assembler does not
    trust either: an answer past the allowance is cut to fit, and one that is not text, or
    blank, counts as a failure (the package names it, and the fallback summarizes instead).
    """

    @property
    def name(self) -> str:
        """What the package and the log call this summarizer."""
        ...

    def summarize(self, request: SummaryRequest) -> str:
        """The summary of ``request.sources`` within ``request.allowance`` tokens."""
        ...


def _positive_int(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(
            f"{attribute.name} must be a whole number >= 1, got {value!r}",
            field=attribute.name,
            value=value,
        )


# ----------------------------------------------------------------------------- extractive

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_LABEL = re.compile(r"^[^\s:][^:\n]{0,40}:\s")
"""A speaker's or a field's label at the start of a text ("Caroline: ", "error: ")."""


READ_CHARACTERS = 4000
"""How much of each left-out item the extractive summarizer reads: a tool's output of
megabytes costs it no more than a page."""


def _sentences(body: str) -> list[str]:
    """The sentences (and lines) of the body's start, whitespace collapsed, empty ones dropped."""
    start = body[:READ_CHARACTERS]
    return [" ".join(part.split()) for part in _SENTENCE_END.split(start) if part.strip()]


def _relevant_sentence(body: str, terms: frozenset[str]) -> str:
    """The sentence of ``body`` sharing the most distinct terms with the query (first on ties).

    A sentence other than the first keeps the label the first starts with, so a turn's
    speaker stays with what they said.
    """
    sentences = _sentences(body)
    if not sentences:
        return ""
    best, best_shared = 0, 0
    if terms:
        for at, sentence in enumerate(sentences):
            shared = len(terms.intersection(analyze(sentence)))
            if shared > best_shared:
                best, best_shared = at, shared
    chosen = sentences[best]
    label = _LABEL.match(sentences[0])
    if best and label is not None:
        chosen = label.group(0) + chosen
    return chosen


@attrs.frozen
class ExtractiveSummarizer:
    """The default summarizer: the left-out candidates' most relevant sentences, fitted.

    For each source in the build's order (best score first), the sentence that shares the
    most words with the query (the first on ties; the speaker's label kept; read from the
    first :data:`READ_CHARACTERS` of its text), cut to at most
    ``fragment_tokens`` at a word boundary; a fragment that repeats one taken already (up to
    case and spacing) is skipped. Fragments go one per line while they fit the allowance;
    the first that does not is cut to fill it to the last word that fits, and the summary
    ends there. Offline and deterministic: the same request gives the same text.

    ``fragment_tokens`` trades how many left-out candidates the summary names against how
    much of each it says: 24 tokens hold most conversation turns' key sentence whole.
    """

    fragment_tokens: int = attrs.field(default=24, validator=_positive_int)
    name: str = "extractive"

    def summarize(self, request: SummaryRequest) -> str:
        """The fragments of ``request.sources`` that fit ``request.allowance`` (see the class)."""
        count = request.counter.count
        terms = frozenset(analyze(request.query))
        lines: list[str] = []
        seen: set[str] = set()
        for source in request.sources:
            sentence = _relevant_sentence(source.item.body, terms)
            fragment = cut(sentence, self.fragment_tokens, count) if sentence else ""
            key = fingerprint_text(fragment)
            if not fragment or key in seen:
                continue
            seen.add(key)
            if count("\n".join([*lines, fragment])) <= request.allowance:
                lines.append(fragment)
                continue
            # The first fragment that does not fit fills what is left, word by word.
            last = cut(fragment, request.allowance, lambda text: count("\n".join([*lines, text])))
            return "\n".join([*lines, last] if last else lines)
        return "\n".join(lines)


# ----------------------------------------------------------------------------- LLM

DEFAULT_SUMMARY_PROMPT = """\
These memories did not fit in an assistant's context. The assistant is working on: {query}

Summarize what they say that bears on it: names, dates, numbers, decisions. One short line \
per fact, at most {tokens} tokens in all, no preamble.

Memories, most relevant first:
{memories}"""
"""The prompt :class:`LLMSummarizer` sends: ``{query}``, ``{tokens}`` and ``{memories}``."""


def _prompt_fields(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    del instance
    if not isinstance(value, str):
        raise ValidationError(f"{attribute.name} must be text", field=attribute.name, value=value)
    try:
        value.format(query="", tokens=0, memories="")
    except (KeyError, IndexError, ValueError) as error:
        raise ValidationError(
            f"{attribute.name} may use only {{query}}, {{tokens}} and {{memories}} "
            f"(double other braces): {error!r}",
            field=attribute.name,
            value=value,
        ) from None


def _optional_positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive_int(instance, attribute, value)


def _memory_line(source: SummarySource) -> str:
    """A source as the prompt lists it: its date, then its text on one line."""
    when = source.item.timestamp
    return f"- ({when.day} {when:%b %Y}) {' '.join(source.item.body.split())}"


@attrs.frozen
class LLMSummarizer:
    """A :class:`Summarizer` that asks a user-supplied LLM: ``complete(prompt) -> text``.

    The prompt (:data:`DEFAULT_SUMMARY_PROMPT`, or ``prompt`` with the same fields) gives the
    query, the allowance and the left-out memories, most relevant first, each with its date;
    with ``max_prompt_tokens`` (the model's limit for a prompt, counted with the request's
    counter) only as many memories as keep the prompt within it. The answer is returned as
    the model gave it, stripped: the assembler cuts it to the room with its own counter, so
    a model that says more than it was asked costs the budget nothing. An answer that is not
    text raises :class:`~agent_engine.errors.SummaryError`; whatever ``complete`` raises
    propagates, and the assembler falls back (:class:`SummaryConfig`). Nothing here makes a
    network call: ``complete`` is the caller's.
    """

    complete: Callable[[str], str]
    prompt: str = attrs.field(default=DEFAULT_SUMMARY_PROMPT, validator=_prompt_fields)
    max_prompt_tokens: int | None = attrs.field(default=None, validator=_optional_positive)
    name: str = "llm"

    def summarize(self, request: SummaryRequest) -> str:
        """The model's summary of ``request.sources``."""
        answer: object = self.complete(self.prompt_for(request))
        if not isinstance(answer, str):
            raise SummaryError(
                f"the model answered {type(answer).__name__}, not text", summarizer=self.name
            )
        return answer.strip()

    def prompt_for(self, request: SummaryRequest) -> str:
        """The prompt for ``request``: as many memories, best first, as the limit allows."""
        lines = [_memory_line(source) for source in request.sources]

        def prompt(count: int) -> str:
            return self.prompt.format(
                query=request.query, tokens=request.allowance, memories="\n".join(lines[:count])
            )

        limit = self.max_prompt_tokens
        if limit is None:
            return prompt(len(lines))
        counter = request.counter
        if counter.count(prompt(0)) > limit:
            raise SummaryError(
                f"the prompt alone costs more than max_prompt_tokens ({limit})",
                summarizer=self.name,
            )
        low, high = 0, len(lines)  # the most memories that keep the prompt within the limit
        while low < high:
            middle = (low + high + 1) // 2
            if counter.count(prompt(middle)) <= limit:
                low = middle
            else:
                high = middle - 1
        return prompt(low)


# ----------------------------------------------------------------------------- settings


def _share(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValidationError(
            f"{attribute.name} must be a number between 0 and 1 (exclusive), got {value!r}",
            field=attribute.name,
            value=value,
        )


def _summarizer(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name == "fallback":
        return
    if not isinstance(value, Summarizer):
        raise ValidationError(
            f"{attribute.name} must have a name and summarize(request), got {type(value).__name__}",
            field=attribute.name,
            value=value,
        )


@attrs.frozen
class SummaryConfig:
    """Whether and how builds summarize what they leave out for lack of room.

    ``share``: the share of each budget kept for the summary section while items are
    packed (given back when nothing is left out for lack of room). ``max_tokens``: the most
    the section may cost; it may also use what the items left unused, up to this.
    ``min_tokens``: the fewest tokens of text worth a summary: a budget whose share holds
    fewer (after the section's header) gets none, and keeps all its room for items.
    ``summarizer``: who writes it; ``fallback``: who writes it when ``summarizer`` fails
    (``None``: no summary then). ``max_sources``: how many left-out candidates, best first,
    a summarizer is given at most (what a prompt lists, and what the extractive summarizer
    reads).
    """

    share: float = attrs.field(default=0.1, validator=_share)
    max_tokens: int = attrs.field(default=128, validator=_positive_int)
    min_tokens: int = attrs.field(default=16, validator=_positive_int)
    summarizer: Summarizer = attrs.field(factory=ExtractiveSummarizer, validator=_summarizer)
    fallback: Summarizer | None = attrs.field(factory=ExtractiveSummarizer, validator=_summarizer)
    max_sources: int = attrs.field(default=32, validator=_positive_int)

    def __attrs_post_init__(self) -> None:
        if self.min_tokens > self.max_tokens:
            raise ValidationError(
                "min_tokens must not exceed max_tokens", field="min_tokens", value=self.min_tokens
            )

    def reserve(self, budget: int, header: int) -> int:
        """The tokens of ``budget`` kept for the section (0: too few for ``min_tokens``).

        ``header``: what the section's opening and closing cost.
        """
        kept = min(self.max_tokens, math.floor(budget * self.share))
        return kept if kept - header >= self.min_tokens else 0

    def summarizers(self) -> Sequence[Summarizer]:
        """Who to ask, in order: the summarizer, then its fallback (if any, and another)."""
        if self.fallback is None or self.fallback == self.summarizer:
            return (self.summarizer,)
        return (self.summarizer, self.fallback)

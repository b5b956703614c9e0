"""The summary step of a build: ask the summarizers, and fit their answer into the budget.

The build packs its items into the budget less the summary's share (:func:`reserve`), then
:func:`summarize` hands the candidates left out for lack of room to the configured
summarizer, best score first, with the room the items left (at most ``max_tokens``, the
section's header paid). Whatever comes back is checked (text, not blank) and cut at a word
boundary until the whole render, summary section included, counts within the budget, with
the build's counter: a summarizer's own idea of its length is never trusted. A summarizer
that fails is recorded and the next one (the fallback) is asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_engine.assembler._cut import cut
from agent_engine.assembler.package import LACK_OF_ROOM, ContextPackage, Omission, Summary
from agent_engine.assembler.plans import TierPlan
from agent_engine.assembler.render import Layout, Line, render_lines
from agent_engine.assembler.summary import (
    Summarizer,
    SummaryConfig,
    SummaryRequest,
    SummarySource,
)
from agent_engine.errors import SummaryError
from agent_engine.models import Tier
from agent_engine.tokens import TokenCounter

__all__ = ["header_cost", "reserve", "summarize"]


def header_cost(layout: Layout, counter: TokenCounter) -> int:
    """What the summary section's opening and closing cost, counted apart."""
    return sum(counter.count(part) for part in layout.summary() if part)


def reserve(
    config: SummaryConfig | None, budget: int, layout: Layout, counter: TokenCounter
) -> int:
    """The tokens of ``budget`` kept for a summary while items are packed (0: none)."""
    if config is None:
        return 0
    return config.reserve(budget, header_cost(layout, counter))


def summarize(
    package: ContextPackage,
    plans: Mapping[Tier, TierPlan],
    *,
    config: SummaryConfig,
    budget: int,
    query: str,
    counter: TokenCounter,
    strict: bool,
    log: Any,
) -> Summary | None:
    """The summary of what ``package`` left out for lack of room (``None``: it left nothing).

    ``budget``: the request's whole budget, which the render with the summary must fit.
    A summary whose every summarizer failed has empty text and names the failures.
    """
    sources = _sources(package.omissions, plans, config.max_sources)
    if not sources:
        return None
    layout = package.layout
    used = sum(usage.used for usage in package.usage)
    room = min(budget - used, config.max_tokens)
    request = SummaryRequest(
        query=query,
        sources=sources,
        allowance=room - header_cost(layout, counter),
        counter=counter,
    )
    ids = tuple(source.item.id for source in sources)
    lines = [Line(s.item, s.tier, s.body) for s in package.selections]
    errors: list[str] = []
    for summarizer in config.summarizers():
        try:
            text = _ask(summarizer, request)
        except Exception as error:
            if strict:
                raise
            errors.append(f"{summarizer.name}: {type(error).__name__}: {error}")
            log.warning("summarizer_failed", summarizer=summarizer.name, error=str(error))
            continue
        fitted = _fit(text, lines, layout, counter, budget=budget, room=room)
        if fitted is not None:
            body, total = fitted
            return Summary(
                text=body,
                tokens=total - used,
                allowance=request.allowance,
                sources=ids,
                summarizer=summarizer.name,
                truncated=body != text,
                error="; ".join(errors) or None,
            )
        errors.append(f"{summarizer.name}: not a word of its answer fits")
    return Summary(
        text="",
        tokens=0,
        allowance=request.allowance,
        sources=ids,
        summarizer=config.summarizer.name,
        error="; ".join(errors),
    )


def _sources(
    omissions: Sequence[Omission], plans: Mapping[Tier, TierPlan], limit: int
) -> tuple[SummarySource, ...]:
    """The candidates left out for lack of room, best first (then by id), ``limit`` at most."""
    out = [o for o in omissions if o.reason in LACK_OF_ROOM and o.tier in plans]
    out.sort(key=lambda o: (-(o.score if o.score is not None else float("-inf")), o.item_id))
    sources: list[SummarySource] = []
    for omission in out:
        item = plans[omission.tier].pool.get(omission.item_id)
        if item is not None:
            sources.append(SummarySource(item, omission.tier, omission.score))
            if len(sources) == limit:
                break
    return tuple(sources)


def _ask(summarizer: Summarizer, request: SummaryRequest) -> str:
    """``summarizer``'s answer, stripped; :class:`SummaryError` when it is no summary."""
    answer: object = summarizer.summarize(request)
    if not isinstance(answer, str):
        raise SummaryError(
            f"answered {type(answer).__name__}, not text", summarizer=summarizer.name
        )
    if not answer.strip():
        raise SummaryError("answered no text", summarizer=summarizer.name)
    return answer.strip()


def _fit(
    text: str, lines: list[Line], layout: Layout, counter: TokenCounter, *, budget: int, room: int
) -> tuple[str, int] | None:
    """``text`` cut until its section costs ``room`` and the whole render ``budget`` at most.

    Returns the body and the whole render's count; ``None`` when not a word fits. The
    section alone is cut to ``room`` first; a counter that counts the whole render above its
    parts (the protocol allows none, a tokenizer may) shrinks the room by what it is over.
    """
    count = counter.count
    while room > 0:
        body = cut(text, room, lambda shown: count(layout.summary_section(shown)))
        if not body:
            return None
        total = count(render_lines(lines, layout, body))
        if total <= budget:
            return body, total
        room -= total - budget
    return None

"""Diversity: one long thread must not fill a tier.

A relevant conversation session, or one chatty tool, can hold dozens of candidates that all
score well, and a tier's room fills with them while evidence elsewhere (another session, the
other half of a multi-hop question) waits below. A cap per session and per source keeps each
tier's ranked candidates spread: past ``per_session`` candidates of one session (or
``per_source`` of one source), the rest of that session's are offered only after every
candidate within the caps. Nothing is dropped: when room is left, the capped candidates come
in after all, best first, so a build never packs less than it would without the caps.

Pinned, HEAD and TAIL items are not counted and never moved: they are in on other grounds.
Items without a session (or source) are not capped by it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agent_engine.assembler.packer import Entry
from agent_engine.errors import ValidationError

__all__ = ["Diversity", "spread"]


def _cap(field: str) -> Callable[[Any, Any, Any], None]:
    def check(_instance: object, _attribute: object, value: object) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValidationError(
                f"{field} must be a positive integer or None", field=field, value=value
            )

    return check


@attrs.frozen
class Diversity:
    """How many ranked candidates of one session, or one source, a tier offers before others.

    ``None`` leaves that one uncapped.
    """

    per_session: int | None = attrs.field(default=None, validator=_cap("per_session"))
    per_source: int | None = attrs.field(default=None, validator=_cap("per_source"))


def spread(ranked: Sequence[Entry], diversity: Diversity) -> list[Entry]:
    """``ranked`` (best first) with the candidates past a cap moved after the rest, in order."""
    sessions: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    within: list[Entry] = []
    past: list[Entry] = []
    for entry in ranked:
        item = entry.item
        over = (
            diversity.per_session is not None
            and bool(item.session)
            and sessions[item.session] >= diversity.per_session
        ) or (
            diversity.per_source is not None
            and bool(item.source)
            and sources[item.source] >= diversity.per_source
        )
        if over:
            past.append(entry)
            continue
        within.append(entry)
        sessions[item.session] += 1
        sources[item.source] += 1
    return within + past

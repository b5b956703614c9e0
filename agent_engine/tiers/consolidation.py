"""What a task's memory leaves behind when the task ends: promotion candidates, reported.

Seed 003 consolidates what was accessed three times or more; seed 001 section 9 promotes what
scores enough under a preset. Here nothing moves unless asked. When a task ends
(:meth:`~agent_engine.tiers.task.TaskMemoryStore.finish`, which ``on_state`` with a terminal
state and ``cleanup_task`` run), every item of its working set that was accessed three times
or more (:data:`CANDIDATE_ACCESSES`; the instruction excepted, see
:class:`~agent_engine.tiers.signals.PromotionPreset`) is a *promotion candidate*, reported in
a :class:`TaskEnd` with the signals behind it. Task memory stays ephemeral: the candidates
are cleared with the rest, unless the end *holds* them (``hold=True``,
``MemoryStores(hold_candidates=True)``): then they stay in the task's memory, everything else
goes, and the application or a person (``agent-engine memory candidates --task T``) promotes
them with :func:`~agent_engine.tiers.promotion.promote` or dismisses them by clearing the
task's memory. To promote before the end instead, :func:`promotion_candidates` lists the same
candidates without writing anything.

Auto-promotion is opt-in: given a preset (``MemoryStores(promotion="balanced")``), the task's
items are scored, and those that pass the preset's hard filters and reach its threshold are
promoted into the project's memory as quarantined candidates, with provenance
(:mod:`agent_engine.tiers.quarantine` confirms or penalises them later); the other candidates
are reported (and held, if asked) as without a preset. Presets promote into the project only
(from a task, or from a finalised session: :mod:`agent_engine.tiers.session`), never into
global memory: the seed's pipeline promotes a session's findings into project
memory, and global memory is its user's, every promotion into it asked for first. Project ->
global stays an explicit ``promote``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import attrs

from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Tier
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.checkpoints import forget_checkpoints
from agent_engine.tiers.promotion import PromotionResult, check_owners, promote
from agent_engine.tiers.quarantine import CandidateReview
from agent_engine.tiers.signals import (
    BALANCED,
    Evidence,
    PromotionPreset,
    Signal,
    evidence,
    hard_filter,
    resolve_preset,
)

if TYPE_CHECKING:
    from agent_engine.tiers.task import TaskMemoryStore

__all__ = [
    "CANDIDATE_ACCESSES",
    "PromotionCandidate",
    "TaskEnd",
    "check_into",
    "end_scope",
    "end_task",
    "promotion_candidates",
]

CANDIDATE_ACCESSES: Final = 3
"""How many accesses make a task's item a promotion candidate (seed 003)."""
_CHUNK: Final = 500


@attrs.frozen
class PromotionCandidate:
    """A task's item worth a look before its memory goes, and why.

    ``evidence`` lists the signals it carries and ``score`` their points under the scoring
    preset (the one configured, else the balanced one). ``filtered`` says which of that
    preset's hard filters it fails (``None``: none), and ``qualifies`` whether the preset
    would promote it (no filter in the way, score at the threshold or over).
    """

    item: ContextItem
    evidence: tuple[Evidence, ...]
    score: float
    filtered: str | None
    qualifies: bool

    @property
    def signals(self) -> tuple[Signal, ...]:
        """The signals it carries."""
        return tuple(found.signal for found in self.evidence)

    @property
    def why(self) -> str:
        """The evidence in one line, for a person."""
        return "; ".join(found.detail for found in self.evidence)


@attrs.frozen
class TaskEnd:
    """What ending a task did to its memory.

    ``candidates``: the items worth a look, best first (as they were before the end).
    ``promoted``: what a preset promoted into the project (``preset`` names it; ``None``:
    nothing was auto-promoted). ``held``: the ids of the other candidates, when the end held
    them in the task's memory for review. ``removed``: how many items (versions included)
    were cleared. ``review``: the confirmation step this end ran on the project's earlier
    candidates (with a preset), else ``None``.
    """

    namespace: str
    removed: int
    candidates: tuple[PromotionCandidate, ...] = ()
    promoted: tuple[PromotionResult, ...] = ()
    held: tuple[str, ...] = ()
    preset: str | None = None
    review: CandidateReview | None = None


def promotion_candidates(
    store: TierStore, preset: PromotionPreset | str | None = None
) -> list[PromotionCandidate]:
    """The promotion candidates of ``store``'s working set, best first; nothing is written.

    Without ``preset``: the items accessed :data:`CANDIDATE_ACCESSES` times or more, scored
    with the balanced preset for information. With one: those, and every item the preset
    would promote. One item per content (fingerprint): the best scored.
    """
    chosen = resolve_preset(preset) if preset is not None else None
    scoring = chosen or BALANCED
    if chosen is None:
        frequent = store.query(
            {"access_count": {"$gte": CANDIDATE_ACCESSES}}, limit=None, order_by="+timestamp"
        )
        pool = frequent
        related = _same_content(store, {item.fingerprint for item in frequent})
    else:
        pool = related = store.query(None, limit=None, order_by="+timestamp")
    sessions = _sessions(related)
    best: dict[str, PromotionCandidate] = {}
    for item in pool:
        if item.kind in scoring.skip_kinds:
            continue
        candidate = _assess(item, scoring, len(sessions.get(item.fingerprint, ())))
        if item.access_count < CANDIDATE_ACCESSES and not (chosen and candidate.qualifies):
            continue
        held = best.get(item.fingerprint)
        if held is None or _rank(candidate) < _rank(held):
            best[item.fingerprint] = candidate
    return sorted(best.values(), key=_rank)


def end_task(
    store: TaskMemoryStore,
    *,
    into: TierStore | None = None,
    preset: PromotionPreset | str | None = None,
    hold: bool = False,
) -> TaskEnd:
    """End ``store``'s task: report its candidates, promote with ``preset``, clear the rest.

    ``into`` is the project store a preset promotes into (both or neither are given). With
    ``hold``, the candidates not promoted stay in the task's memory
    (:meth:`~agent_engine.tiers.task.TaskMemoryStore.clear_except`).
    """
    return end_scope(store, into=into, preset=preset, hold=hold)


def check_into(store: TierStore, into: TierStore) -> None:
    """Refuse ``into`` unless it is the project memory of ``store``'s own project.

    What a scope's end writes into (promotions, and a session's summary) goes to its
    project; a caller that writes there before the end starts checks with this first.
    """
    if into.tier is not Tier.PROJECT:
        raise ValidationError(
            f"a {store.tier.value}'s end goes into its project, not into "
            f"{into.tier.value} memory; promote there explicitly",
            field="into",
            value=into.namespace,
        )
    check_owners(store, into, field="into")


def end_scope(
    store: TierStore,
    *,
    into: TierStore | None = None,
    preset: PromotionPreset | str | None = None,
    hold: bool = False,
) -> TaskEnd:
    """End a task's or a session's memory as :func:`end_task` does.

    Auto-promotion goes into the project, whichever scope ends: a session's end is where its
    findings reach the project (seed 001 section 9), and a task's goes there too, session or
    not (an explicit :func:`~agent_engine.tiers.promotion.promote` may move an item into its
    session).
    """
    chosen = resolve_preset(preset) if preset is not None else None
    if (chosen is None) != (into is None):
        raise ValidationError(
            "auto-promotion takes both a preset and the project store to promote into",
            field="into" if into is None else "preset",
            value=into if into is not None else preset,
        )
    if into is not None:
        check_into(store, into)
    candidates = promotion_candidates(store, chosen)
    promoted: list[PromotionResult] = []
    held: list[str] = []
    for candidate in candidates:
        if chosen is not None and into is not None and candidate.qualifies:
            reason = (
                f"auto-promoted by the {chosen.name} preset ({candidate.score:g} points: "
                f"{', '.join(candidate.signals)})"
            )
            promoted.append(promote(store, into, candidate.item.id, reason=reason, quarantine=True))
        elif hold:
            held.append(candidate.item.id)
    removed = store.clear_except(held)
    forget_checkpoints(store)  # nothing rolls back into an ended scope
    return TaskEnd(
        namespace=store.namespace,
        removed=removed,
        candidates=tuple(candidates),
        promoted=tuple(promoted),
        held=tuple(held),
        preset=chosen.name if chosen is not None else None,
    )


def _assess(item: ContextItem, preset: PromotionPreset, sessions: int) -> PromotionCandidate:
    found = evidence(item, preset, sessions)
    score = preset.score(found)
    filtered = hard_filter(item, preset)
    return PromotionCandidate(
        item, found, score, filtered, filtered is None and score >= preset.threshold
    )


def _rank(candidate: PromotionCandidate) -> tuple[float, int, float]:
    """Best first: the higher score, then the more accessed, then the older."""
    item = candidate.item
    return (-candidate.score, -item.access_count, item.timestamp.timestamp())


def _same_content(store: TierStore, fingerprints: Iterable[str]) -> list[ContextItem]:
    """The working set's items of these fingerprints (the multi-session signal's evidence)."""
    wanted = sorted(fingerprints)
    found: list[ContextItem] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        found += store.query({"fingerprint": {"$in": chunk}}, limit=None)
    return found


def _sessions(items: Iterable[ContextItem]) -> Mapping[str, set[str]]:
    """The sessions that recorded each content: its items' and their merged duplicates'."""
    seen: defaultdict[str, set[str]] = defaultdict(set)
    for item in items:
        recorded = {item.session, *(origin.session for origin in item.merged_from)}
        seen[item.fingerprint] |= recorded - {""}
    return seen

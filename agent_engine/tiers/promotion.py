"""Promotion between tiers: task -> session -> project -> global (a task may skip its session).

Seed 002 section 5.3: promotion is a deliberate act, to keep shared memory free of one task's
noise; nothing here runs on its own. The promoted copy records where it came from
(:class:`~agent_engine.models.Provenance`). An auto-promotion preset, when one is configured
(:mod:`agent_engine.tiers.consolidation`), calls :func:`promote` with ``quarantine=True``: the
copy lands as a candidate that the confirmation step reviews later
(:mod:`agent_engine.tiers.quarantine`).
Promoting content the target already holds does not duplicate it: the same text (fingerprint)
or, under the target's merge policy, a near-duplicate of its kind
(:mod:`agent_engine.tiers.dedup`, the check every add makes). The held item is boosted
instead (importance + 0.1, capped at 1; access count + 1; the original joins its
``merged_from``; seed 001 section 12) and the result says it was a duplicate. Promoting into
global memory asks for confirmation first.

A promotion stays with the memory's owners: a task's or a session's item goes into its own
project (and a task's into a session of its own project and user), never another's. The
target is a store like any other, so the source's scope says whose the item is
(:func:`~agent_engine.tiers.scope.owner`). A project item may go into any user's global
memory: a project has no single user.
"""

from __future__ import annotations

from typing import Any

import attrs

from agent_engine import _validate
from agent_engine._telemetry import names, operation
from agent_engine.errors import ValidationError
from agent_engine.models import (
    ContextItem,
    Provenance,
    Status,
    Tier,
    new_id,
)
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.dedup import find_duplicate
from agent_engine.tiers.scope import owner

__all__ = ["PromotionResult", "check_owners", "promote"]

_ALLOWED = {
    (Tier.TASK, Tier.SESSION),
    (Tier.TASK, Tier.PROJECT),
    (Tier.SESSION, Tier.PROJECT),
    (Tier.PROJECT, Tier.GLOBAL),
}


@attrs.frozen
class PromotionResult:
    """The item now in the target tier, and whether it already existed there."""

    item: ContextItem
    duplicate: bool
    similarity: float | None = None
    """How alike the promoted item and the held one are (1.0: the same text), if a duplicate."""


def promote(
    source: TierStore,
    target: TierStore,
    item_id: str,
    *,
    reason: str = "",
    quarantine: bool = False,
) -> PromotionResult:
    """Copy ``item_id`` from ``source`` into ``target`` (or boost the copy it already has).

    The copy is confirmed (pinned if the original is). With ``quarantine`` it is a candidate
    instead, unless the original is pinned: a pin is explicit intent, and pinned items never
    decay. The promotion reports as the target's operation (its telemetry, its namespace).
    """
    with operation(
        target.telemetry,
        names.UPSERT_MEMORY,
        {
            names.OPERATION_NAME: names.UPSERT_MEMORY,
            names.METHOD: "promote",
            names.TIER: target.tier.value,
            names.STORE_ID: target.namespace,
            "agent_engine.promotion.source_tier": source.tier.value,
            "agent_engine.promotion.quarantine": quarantine,
        },
    ) as span:
        result = _promote(source, target, item_id, reason=reason, quarantine=quarantine)
        if span is not None:
            span.set(
                {
                    names.RECORD_COUNT: 1,
                    names.RECORD_ID: result.item.id,
                    "agent_engine.promotion.duplicate": result.duplicate,
                }
            )
            span.set_records([{"id": result.item.id, "content": result.item.text}])
        return result


def _promote(
    source: TierStore, target: TierStore, item_id: str, *, reason: str, quarantine: bool
) -> PromotionResult:
    if (source.tier, target.tier) not in _ALLOWED:
        raise ValidationError(
            f"cannot promote from {source.tier.value} to {target.tier.value}; "
            "promotion goes task -> session -> project -> global",
            field="tier",
            value=(source.tier.value, target.tier.value),
        )
    check_owners(source, target)
    _validate.text("reason", reason)
    original = source.require(item_id)
    embedder = target.query_embedder
    same_space = embedder is not None and source.query_embedder == embedder
    copy = attrs.evolve(
        original,
        id=new_id(),
        tier=target.tier,
        namespace=target.namespace,
        # The same embedder made it as the target would: its vector is the target's too.
        embedding=original.embedding if same_space else None,
        status=_landing_status(original, quarantine=quarantine),
        access_count=0,
        last_accessed_at=None,
        expires_at=None,
        merged_from=(),
        provenance=Provenance(original.id, source.tier, source.namespace, target.clock(), reason),
    )
    # An archived copy is the target's too: promoted again, it is in use again (reinforce
    # brings it back to the working set) rather than stored twice.
    copy, existing, similarity = find_duplicate(target, copy, target.merge)
    target.confirm_promotion(original, source.namespace, boost=existing is not None)
    detail: dict[str, Any] = {
        "source_item_id": original.id,
        "source_namespace": source.namespace,
        "reason": reason,
    }
    if quarantine:
        detail["quarantine"] = True
    if existing is not None:
        detail["similarity"] = similarity
        boosted = target.reinforce(existing, original, detail)
        return PromotionResult(boosted, duplicate=True, similarity=similarity)
    return PromotionResult(target.receive(copy, detail), duplicate=False)


def check_owners(source: TierStore, target: TierStore, *, field: str = "target") -> None:
    """Refuse a target of another project or user than the source's (see the module).

    ``field`` names the target as the caller's own parameters do (``into`` for a scope's end).
    """
    for part, mine, theirs in zip(
        ("project", "user"), owner(source.namespace), owner(target.namespace), strict=True
    ):
        if mine is not None and theirs is not None and mine != theirs:
            raise ValidationError(
                f"cannot promote from {source.namespace} into {target.namespace}: the item "
                f"belongs to {part} {mine!r}, the target to {part} {theirs!r} (an item goes "
                "into its project and user only)",
                field=field,
                value=target.namespace,
            )


def _landing_status(original: ContextItem, *, quarantine: bool) -> Status:
    if original.pinned:
        return Status.PINNED
    return Status.CANDIDATE if quarantine else Status.CONFIRMED

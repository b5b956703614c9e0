"""Explicit promotion between tiers: task -> project, project -> global. Nothing is automatic.

Seed 002 section 5.3: promotion is a deliberate act, to keep shared memory free of one task's
noise. The promoted copy records where it came from (:class:`~agent_engine.models.Provenance`).
Promoting content the target already holds (same fingerprint) does not duplicate it: the
existing item is boosted instead (importance + 0.1, capped at 1; access count + 1; seed 001
section 12) and the result says it was a duplicate. Promoting into global memory asks for
confirmation first.
"""

from __future__ import annotations

import attrs

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import (
    ContextItem,
    Provenance,
    Status,
    Tier,
    new_id,
)
from agent_engine.tiers.base import TierStore

__all__ = ["PromotionResult", "promote"]

_ALLOWED = {(Tier.TASK, Tier.PROJECT), (Tier.PROJECT, Tier.GLOBAL)}
DUPLICATE_BOOST = 0.1


@attrs.frozen
class PromotionResult:
    """The item now in the target tier, and whether it already existed there."""

    item: ContextItem
    duplicate: bool


def promote(
    source: TierStore, target: TierStore, item_id: str, *, reason: str = ""
) -> PromotionResult:
    """Copy ``item_id`` from ``source`` into ``target`` (or boost the copy it already has)."""
    if (source.tier, target.tier) not in _ALLOWED:
        raise ValidationError(
            f"cannot promote from {source.tier.value} to {target.tier.value}; "
            "promotion goes task -> project -> global",
            field="tier",
            value=(source.tier.value, target.tier.value),
        )
    _validate.text("reason", reason)
    original = source.require(item_id)
    existing = target.query({"fingerprint": original.fingerprint}, limit=1)
    target.confirm_promotion(original, source.namespace, boost=bool(existing))
    detail = {"source_item_id": original.id, "source_namespace": source.namespace, "reason": reason}
    if existing:
        boosted = target.reinforce(existing[0], DUPLICATE_BOOST, detail)
        return PromotionResult(boosted, duplicate=True)
    copy = attrs.evolve(
        original,
        id=new_id(),
        tier=target.tier,
        namespace=target.namespace,
        embedding=None,
        status=Status.PINNED if original.pinned else Status.CONFIRMED,
        access_count=0,
        last_accessed_at=None,
        expires_at=None,
        provenance=Provenance(original.id, source.tier, source.namespace, target.clock(), reason),
    )
    return PromotionResult(target.receive(copy, detail), duplicate=False)

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
    AuditAction,
    ContextItem,
    Provenance,
    Status,
    Tier,
    bump_count,
    new_id,
)
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.global_ import GlobalMemoryStore

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
    if isinstance(target, GlobalMemoryStore):
        verb = "Boost existing" if existing else "Promote"
        target.confirm_or_raise(
            "promote_to_global",
            f"{verb} global memory: {original.text!r} (from {source.namespace})?",
            (original,),
        )
    detail = {"source_item_id": original.id, "source_namespace": source.namespace, "reason": reason}
    if existing:
        current = existing[0]
        boosted = attrs.evolve(
            current,
            importance=min(1.0, current.importance + DUPLICATE_BOOST),
            access_count=bump_count(current.access_count),
            last_accessed_at=target.clock(),
        )
        with target.audit.journal(
            AuditAction.PROMOTE,
            target.tier,
            target.namespace,
            (current.id,),
            {**detail, "duplicate": True},
        ):
            target.backend.update(boosted)
        return PromotionResult(boosted, duplicate=True)
    copy = attrs.evolve(
        original,
        id=target.scoped_id(new_id()),
        tier=target.tier,
        namespace=target.namespace,
        embedding=None,
        status=Status.PINNED if original.pinned else Status.CONFIRMED,
        access_count=0,
        last_accessed_at=None,
        expires_at=None,
        provenance=Provenance(original.id, source.tier, source.namespace, target.clock(), reason),
    )
    with target.audit.journal(
        AuditAction.PROMOTE,
        target.tier,
        target.namespace,
        (copy.id,),
        {**detail, "duplicate": False},
    ):
        target.backend.add(copy)
    target._after_add()  # noqa: SLF001 - the target's own post-add hook (eviction)
    return PromotionResult(copy, duplicate=False)

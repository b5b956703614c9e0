"""A scope's checkpoints: take one, list them, roll back to one (seed 001 sections 2 and 14).

An agent checkpoints its task before a risky step and rolls back if the step goes wrong; an
executor checkpoints a long task for crash recovery. A checkpoint holds the scope whole (every
item in every state, its conflicts, its aliases; not its journal, which a rollback never
rewinds) in the export format, kept by the backend
(:mod:`agent_engine.memory.checkpoints`); rolling back is restoring that snapshot
(:func:`~agent_engine.memory.export.restore_scope`): what the scope gained since is forgotten,
what changed is put back, what it lost comes back, and the rollback is journaled.

A checkpoint belongs to its scope: another scope's id is not found, as an item's would not be.
A task's checkpoints end with it (:func:`~agent_engine.tiers.consolidation.end_task`).

A fork (:mod:`agent_engine.tiers.forks`) is checkpointed as it reads, inherited items and all,
without copying them into it; rolling one back first gives it (and every fork of the scope)
a copy of all it sees, since the restore then writes the scope whole.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, TYPE_CHECKING

from agent_engine.errors import CheckpointNotFoundError, ValidationError
from agent_engine.memory.checkpoints import Checkpoint
from agent_engine.memory.export import RestorePlan, export_store, restore_plan, restore_scope

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = [
    "checkpoints_of",
    "plan_restore",
    "restore",
    "saved_state",
    "forget_checkpoints",
    "rollback",
    "rollback_plan",
    "take_checkpoint",
]


def take_checkpoint(store: TierStore, label: str = "") -> Checkpoint:
    """Save ``store``'s scope as it is now; return the checkpoint."""
    saved = io.StringIO()
    report = export_store(
        store.backend,
        saved,
        namespace=store.namespace,
        tier=store.tier,
        journal=False,
        items=store.inherited_view(),
    )
    checkpoint = Checkpoint(
        namespace=store.namespace,
        tier=store.tier,
        label=label,
        items=report.items,
        created_at=store.clock(),
    )
    store.backend.checkpoints.save(checkpoint, saved.getvalue())
    return checkpoint


def checkpoints_of(store: TierStore) -> list[Checkpoint]:
    """``store``'s checkpoints, newest first."""
    return store.backend.checkpoints.of_scope(store.namespace, store.tier)


def rollback_plan(store: TierStore, checkpoint_id: str) -> RestorePlan:
    """What rolling ``store`` back to the checkpoint would change; nothing is written.

    Another scope's checkpoint, or an unknown id, raises
    :class:`~agent_engine.errors.CheckpointNotFoundError`.
    """
    return plan_restore(store, io.StringIO(saved_state(store, checkpoint_id)))


def plan_restore(store: TierStore, source: IO[str] | Path | str) -> RestorePlan:
    """What restoring ``source`` (a snapshot of ``store``'s scope) would change; nothing is written.

    The snapshot is compared with all the scope reads (a fork's inherited items included).
    A snapshot of another scope is the caller's to refuse (the plan names its scope).
    """
    return restore_plan(store.backend, source, current=store.inherited_view())


def restore(store: TierStore, plan: RestorePlan) -> RestorePlan:
    """Carry out a plan of :func:`plan_restore` or :func:`rollback_plan` on ``store``'s scope."""
    if (plan.namespace, plan.tier) != (store.namespace, store.tier):
        raise ValidationError(
            f"the plan restores {plan.namespace}, not {store.namespace}",
            field="plan",
            value=plan.namespace,
        )
    # A fork is detached first, and so is every fork of the scope: neither reads anything
    # different, and the restore then writes the scope whole without reaching the forks.
    store.detach()
    return restore_scope(store.backend, plan)


def saved_state(store: TierStore, checkpoint_id: str) -> str:
    """What checkpoint ``checkpoint_id`` of ``store``'s scope saved (an export's text).

    Another scope's checkpoint, or an unknown id, raises
    :class:`~agent_engine.errors.CheckpointNotFoundError`.
    """
    checkpoint = store.backend.checkpoints.get(checkpoint_id)
    data = None if checkpoint is None else store.backend.checkpoints.data(checkpoint_id)
    if (
        checkpoint is None
        or data is None
        or (checkpoint.namespace, checkpoint.tier) != (store.namespace, store.tier)
    ):
        raise CheckpointNotFoundError(checkpoint_id, namespace=store.namespace)
    return data


def rollback(store: TierStore, checkpoint_id: str) -> RestorePlan:
    """Make ``store``'s scope what checkpoint ``checkpoint_id`` saved; return what changed."""
    return restore(store, rollback_plan(store, checkpoint_id))


def forget_checkpoints(store: TierStore) -> int:
    """Delete all of ``store``'s checkpoints (its task ended: nothing will roll back to them)."""
    return sum(store.backend.checkpoints.delete(c.id) for c in checkpoints_of(store))

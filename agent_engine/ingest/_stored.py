"""Which of the items about to be written a store holds already (one read for all of them).

The write path's ids come from idempotency keys, so "already stored" is how a replayed batch
or a re-found memory shows itself; the worker and the extraction hook both ask it before
they write, instead of letting the write fail on the first duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_engine.models import ContextItem
from agent_engine.tiers.base import TierStore

__all__ = ["stored_ids"]


def stored_ids(store: TierStore, items: Iterable[ContextItem]) -> set[str]:
    """The ids (as ``store`` writes them) of those of ``items`` it holds already."""
    return {item.id for item in store.get_many(store.scoped_id(i.id) for i in items)}

"""A tier store's full-text index as one unit of work reads it.

:meth:`~agent_engine.tiers.base.TierStore.lexical` looks the scope's index up once (for a
persistent store that reads the scope's change counter, a database round trip) and hands it
out in a :class:`LexicalView`; everything a context build then asks of it (matches, known
sources, session neighbours, links within its pool) costs no further lookup. The index holds
the store's scope and nothing else, so no answer names another scope's item.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from agent_engine.retrieval.lexical import LexicalMatches, LexicalScope, Neighbourhoods

__all__ = ["LexicalView"]


@attrs.frozen
class LexicalView:
    """The full-text index of one store's scope, looked up once for a unit of work.

    The index stays live (a write through the backend shows in later answers); take a new
    view per unit of work so that a write by another process is seen by the next one.
    """

    index: LexicalScope

    def __len__(self) -> int:
        """How many items the scope holds."""
        return len(self.index)

    def hits(self, query: str) -> LexicalMatches:
        """The scope's items matching ``query``, with their scores."""
        return self.index.hits(query)

    def sources(self) -> frozenset[str]:
        """Every distinct non-empty ``source`` among the scope's items."""
        return self.index.sources()

    def neighbours(self, seeds: Iterable[str], radius: int) -> list[str]:
        """The session neighbours of ``seeds`` within ``radius``, each once, in the seeds' order.

        What brings the turn next to a match into a candidate pool; a seed may itself be
        another seed's neighbour, and then appears.
        """
        near: dict[str, None] = {}
        for found in self.index.neighbourhoods(dict.fromkeys(seeds), radius).values():
            near.update(dict.fromkeys(other for other, _ in found))
        return list(near)

    def links(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """Each of ``item_ids``' session neighbours within ``radius`` that is one of them too."""
        return self.index.links(item_ids, radius)

"""What full-text search over one namespace/tier scope must answer: the lexical contract.

A backend hands out one :class:`LexicalScope` per scope (``MemoryBackend.lexical_index``);
the assembler asks it for a query's matches, for the sources it knows and for the session
order of the items it holds. The in-process BM25 index
(:class:`~agent_engine.retrieval.bm25.LexicalIndex`) is one implementation, which the
in-memory, FAISS and SQL backends share today; a backend may serve the same questions from
its database's own full-text search instead (SQLite FTS5, PostgreSQL ``tsvector``), so
nothing above the backends names the BM25 class. The backend conformance suite
(:mod:`agent_engine.testing.conformance`) checks every implementation against these
docstrings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["LexicalMatches", "LexicalScope", "Neighbourhoods"]

Neighbourhoods = dict[str, list[tuple[str, int]]]
"""Item id -> its session neighbours as ``(id, offset)`` pairs (offset < 0: earlier), by
increasing offset; items without any neighbour are left out."""


class LexicalMatches(Protocol):
    """**Protocol:** one query's full-text scores over a scope.

    Every item that shares a term with the query matches (an implementation may match more:
    the BM25 index lends an item its session neighbours' terms); every score is positive.
    A build asks for the best few hundred ids and for the scores of its candidate pool, never
    for every match, so an implementation may keep its matches in whatever form ranks
    cheapest.
    """

    def __len__(self) -> int:
        """How many items matched.

        It may cost a pass over the matches: a build never asks, it asks :meth:`best` for one
        more than it takes to learn whether more matched.
        """
        ...

    def best(self, k: int) -> list[str]:
        """The ``k`` best-scoring matching ids, best first, ties broken by id."""
        ...

    def of(self, item_ids: Iterable[str]) -> dict[str, float]:
        """The score of each of ``item_ids``, ``0.0`` for those that did not match."""
        ...


class LexicalScope(Protocol):
    """**Protocol:** the full-text index of one namespace/tier scope, kept current with it.

    It holds every item of the scope and nothing else, so what it answers never names
    another scope's items. Sessions are the items sharing a non-empty ``session``, ordered
    by ``(timestamp, id)``; an item's neighbours within ``radius`` are the members at most
    ``radius`` places before or after it.
    """

    def __len__(self) -> int:
        """How many items the scope holds (``0``: the scope is empty)."""
        ...

    def hits(self, query: str) -> LexicalMatches:
        """The scope's items matching ``query`` (an empty or term-less query matches none)."""
        ...

    def sources(self) -> frozenset[str]:
        """Every distinct non-empty ``source`` among the scope's items."""
        ...

    def neighbourhoods(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """The session neighbours within ``radius`` of each of ``item_ids`` (unknown ids: none).

        The items appear in the order of ``item_ids``: callers keep their seeds' order.
        """
        ...

    def links(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """:meth:`neighbourhoods` of ``item_ids`` keeping only neighbours among ``item_ids``."""
        ...

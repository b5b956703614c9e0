"""Filtered top-k search over vector rows held in the process, exact or through HNSW.

Shared by the backends that rank with a :class:`~agent_engine.memory._vector_rows.RowIndex`
while their items live elsewhere (:class:`~agent_engine.memory.faiss.FaissBackend` over a
record store, the SQLite store over its index file). Filters apply before the top-k cut,
exactly:

1. A ``namespace`` equality (every tier store sends one) restricts scoring to that
   namespace's rows, which the rows track themselves; other namespaces cost nothing.
2. Remaining conditions are checked on the stored items while walking the ranking in
   windows of ``4k``, ``16k``, ... rows. A walk is exact because the ranking is complete
   (exact) or rows are taken in HNSW's order (approximate).
3. If ``walk_limit`` rows were walked without finding ``k`` matches, the filter is
   selective (fewer than ``k`` in ``walk_limit`` rows match), so the matching items are
   asked from the record store (whose own filtering may use SQL indexes) and scored exactly.
   Work is thus bounded by ``walk_limit`` fetched rows plus the matches themselves.

A hit always carries the stored item, fetched by id after ranking: rows name items, never
hold them.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine.embeddings import Matrix
from agent_engine.filters import Filter, Op
from agent_engine.memory._vector_rows import RowIndex
from agent_engine.memory.backend import SearchHit
from agent_engine.models import ContextItem, Vector

__all__ = ["Approximate", "search_rows"]

Fetch = Callable[[list[str]], dict[str, ContextItem]]
"""Stored items by id (those still stored), as the record store holds them."""
Matching = Callable[[Filter], list[ContextItem]]
"""Every stored item matching a filter (asked only when a walk finds too few)."""


@attrs.frozen
class Approximate:
    """Rank through the HNSW graph, save for scopes of at most ``exact_below`` rows."""

    exact_below: int
    ef_search: int


def search_rows(
    rows: RowIndex | None,
    queries: Matrix,
    k: int,
    where: Filter,
    *,
    fetch: Fetch,
    matching: Matching,
    walk_limit: int,
    approximate: Approximate | None = None,
) -> list[list[SearchHit]]:
    """The ``k`` best stored items matching ``where`` for each query, best first.

    Exact scores of a batch come from one pass over the scope's vectors.
    """
    if rows is None or rows.live == 0:
        return [[] for _ in queries]
    namespace = scoped_namespace(where)
    scope = rows.namespace_rows(namespace) if namespace is not None else None
    size = len(scope) if scope is not None else rows.live
    if size == 0:
        return [[] for _ in queries]
    exact = approximate is None or size <= approximate.exact_below
    every = rows.exact_scores_many(queries, scope) if exact and len(queries) > 1 else None
    found = []
    for at, query in enumerate(queries):
        ranking: _Ranking
        if exact or approximate is None:
            scores = every[at] if every is not None else None
            ranking = _ExactRanking(rows, query, scope, scores)
        else:
            ranking = _HnswRanking(rows, query, namespace, approximate.ef_search)
        hits = _walk(ranking, k, where, fetch, walk_limit)
        if hits is None:
            hits = _exact_over_matches(rows, query, k, matching(where))
        found.append(hits)
    return found


def _walk(
    ranking: _Ranking, k: int, where: Filter, fetch: Fetch, walk_limit: int
) -> list[SearchHit] | None:
    """Take ranked rows in growing windows until ``k`` stored, matching items are found.

    Returns ``None`` when ``walk_limit`` rows gave fewer than ``k`` (a selective filter).
    """
    hits: list[SearchHit] = []
    # Rows are already scoped to the namespace, and a tier store's other conditions (its
    # tier, not superseded) hold for nearly every item of it: such a walk asks for k rows,
    # not 4k, which saves the record store three fetches in four. Other filters start wider.
    window = k if _scope_only(where) else 4 * k
    walked = 0
    while len(hits) < k:
        batch = ranking.next(window)
        if not batch:
            return hits
        found = fetch([item_id for item_id, _ in batch])
        for item_id, score in batch:
            item = found.get(item_id)
            if item is not None and where.matches(item):
                hits.append(SearchHit(item, score))
                if len(hits) == k:
                    break
        walked += len(batch)
        if len(hits) < k and walked >= walk_limit:
            return None
        window *= 4
    return hits


def _exact_over_matches(
    rows: RowIndex, query: Vector, k: int, matches: list[ContextItem]
) -> list[SearchHit]:
    """Score exactly the rows of ``matches`` (the stored items a filter selects)."""
    by_id = {item.id: item for item in matches}
    wanted = np.fromiter((rows.row_of[i] for i in by_id if i in rows.row_of), dtype=np.int64)
    ranking = _ExactRanking(rows, query, np.sort(wanted))
    hits: list[SearchHit] = []
    while len(hits) < k:
        batch = ranking.next(4 * k)
        if not batch:
            break
        hits.extend(SearchHit(by_id[i], s) for i, s in batch)
    return hits[:k]


def scoped_namespace(where: Filter) -> str | None:
    """The namespace an equality pins the search to (served by per-namespace rows), if any."""
    for condition in where.conditions:
        if condition.field == "namespace" and condition.op is Op.EQ:
            value: str = condition.value
            return value
    return None


def _scope_only(where: Filter) -> bool:
    """Whether ``where`` is a tier store's scope: what nearly every item of it matches.

    Namespace and tier equalities, and "not superseded" (``valid_to`` null: history is a
    small part of a scope). Anything else may match few items: a walk starts wider.
    """
    return all(
        c.op is Op.EQ
        and (c.field in ("namespace", "tier") or (c.field == "valid_to" and c.value is None))
        for c in where.conditions
    )


# ----------------------------------------------------------------------------- rankings


class _Ranking:
    """Rows in descending score order, ties by id, handed out a window at a time."""

    def next(self, window: int) -> list[tuple[str, float]]:  # pragma: no cover - interface
        raise NotImplementedError


class _ExactRanking(_Ranking):
    """Exact scores of a scope, cut into score bands so ties at a band's edge stay whole."""

    def __init__(
        self,
        rows: RowIndex,
        query: Vector,
        scope: npt.NDArray[np.int64] | None,
        scores: npt.NDArray[np.float32] | None = None,
    ) -> None:
        self._rows = rows
        self._scope = scope if scope is not None else np.arange(rows.size, dtype=np.int64)
        # ``scores``: the scope's scores against ``query``, when a batch was scored at once.
        self._scores = scores if scores is not None else rows.exact_scores(query, scope)
        self._remaining = np.ones(len(self._scores), dtype=bool)
        if scope is None and rows.dead:
            self._remaining[rows.dead_rows()] = False

    def next(self, window: int) -> list[tuple[str, float]]:
        candidates = np.flatnonzero(self._remaining)
        if len(candidates) == 0:
            return []
        if len(candidates) > window:
            part = np.argpartition(-self._scores[candidates], window - 1)[:window]
            floor = self._scores[candidates[part]].min()
            # Every row tied with the band's lowest score joins it: ids break ties exactly.
            candidates = candidates[self._scores[candidates] >= floor]
        self._remaining[candidates] = False
        ids = self._rows.ids
        band = [(ids[self._scope[c]], float(self._scores[c])) for c in candidates]
        band.sort(key=lambda pair: (-pair[1], pair[0]))
        return band


class _HnswRanking(_Ranking):
    """HNSW's order: each window asks the graph for more neighbours and skips those given."""

    def __init__(self, rows: RowIndex, query: Vector, namespace: str | None, ef: int) -> None:
        self._rows = rows
        self._query = query
        self._namespace = namespace
        self._ef = ef
        self._given: set[str] = set()
        self._asked = 0
        self._limit = len(rows.namespace_rows(namespace)) if namespace is not None else rows.live

    def next(self, window: int) -> list[tuple[str, float]]:
        if self._asked >= self._limit:
            return []
        want = min(self._asked + window, self._limit)
        labels, scores = self._rows.approximate(self._query, want, self._ef, self._namespace)
        # A graph that cannot reach more rows has given all it will.
        self._asked = want if len(labels) >= want else self._limit
        ids = self._rows.ids
        batch = sorted(
            (
                (ids[int(row)], float(score))
                for row, score in zip(labels, scores, strict=True)
                if ids[int(row)] not in self._given
            ),
            key=lambda pair: (-pair[1], pair[0]),
        )
        self._given.update(item_id for item_id, _ in batch)
        return batch

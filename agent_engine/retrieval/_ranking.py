"""Adding BM25 weights up over an index's rows and picking the best: the cost of a query.

A query to :class:`~agent_engine.retrieval.bm25.LexicalIndex` costs what summing its terms'
weights over the rows holding them costs, and the synthetic stores of the cost benchmark are
the hard case: a vocabulary of a couple of hundred words, so each query word is held by 15-45%
of the items and a query matches most of a store. Pruning that stops early (MaxScore, WAND)
skips nothing there: their bounds let through more than half of the rows at 300k items,
because BM25 saturates and a common word's weight barely varies between items. What pays is
doing the unavoidable work in the cheapest form, with the same sums, in the same order, so
scores stay bit for bit what a plain scatter of every posting gives:

- a term held by at least :data:`DENSE_SHARE` of the rows keeps its weights as one array
  over every row, added in a single pass, instead of a scatter through its posting;
- the best ``k`` are found without reading out every match: the ``k``-th best score of an
  evenly spaced sample is a floor that at least ``k`` rows reach, so the rows at or above it
  (a few thousand) hold the ``k`` best and every tie at the boundary.

At 300k items this took a query from 6 ms to 2 ms. Term weights are made by the index and
handed out as :class:`TermWeights`, which no later write changes, so hits taken before a
write keep answering as of their query.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from itertools import repeat

import attrs
import numpy as np
import numpy.typing as npt

__all__ = ["DENSE_SHARE", "LexicalHits", "Scorer", "TermWeights"]

DENSE_SHARE = 1 / 8
"""A term held by at least this share of the rows keeps its weights over every row. A pass
over all rows beats a scatter through a posting this full (measured at 300k items); the array
costs 8 bytes a row, at most four times the posting it stands for."""


@attrs.frozen(eq=False)
class TermWeights:
    """One term's BM25 contribution to each live row holding it (all positive).

    ``rows`` ascending, ``values`` alike; ``dense``: the same values over every one of
    ``size`` rows, zero elsewhere, for a common term.
    """

    rows: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    dense: npt.NDArray[np.float64] | None

    @classmethod
    def of(
        cls, rows: npt.NDArray[np.int64], values: npt.NDArray[np.float64], size: int
    ) -> TermWeights:
        """The weights of ``rows`` among ``size`` rows, dense when the term is common."""
        dense = None
        if len(rows) >= DENSE_SHARE * size:
            dense = np.zeros(size, dtype=np.float64)
            dense[rows] = values
        return cls(rows, values, dense)

    def add_to(self, total: npt.NDArray[np.float64]) -> None:
        """Add these weights into ``total`` (one slot per row)."""
        if self.dense is not None:
            np.add(total, self.dense, out=total)
        else:
            total[self.rows] += self.values

    def at(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The weight of each of ``rows`` (rows of the index; ``0.0`` where the term is not)."""
        if self.dense is not None:
            return self.dense[rows]
        at = np.searchsorted(self.rows, rows)
        at[at == len(self.rows)] = 0
        found = np.zeros(len(rows), dtype=np.float64)
        if len(self.rows):
            held = self.rows[at] == rows
            found[held] = self.values[at[held]]
        return found


@attrs.frozen
class _Ranked:
    """Rows (ascending) of one query that hold its best ``len(rows)``, with their scores.

    ``complete``: they are every row that matched.
    """

    rows: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    complete: bool


class Scorer:
    """Sums a query's weights in one array kept across queries, and picks its best rows.

    The array is zeroed again after each query: a fresh array per query cost a page fault
    per 4 KiB in a process whose allocator had returned the last one, which made the same
    query up to twice as slow from one process to the next.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = np.zeros(0, dtype=np.float64)

    def ranked(self, weights: Sequence[TermWeights], size: int, k: int) -> _Ranked:
        """The rows holding the ``k`` best of ``size`` rows (every match when ``k >= size``)."""
        with self._lock:
            if len(self._total) < size:
                self._total = np.zeros(max(size, 2 * len(self._total)), dtype=np.float64)
            total = self._total[:size]
            try:
                for term in weights:  # in the query's order: the sums are the same everywhere
                    term.add_to(total)
                rows, complete = _at_or_above_kth(total, k)
                return _Ranked(rows, total[rows], complete)
            finally:
                if any(term.dense is not None for term in weights):
                    total.fill(0.0)
                else:
                    for term in weights:
                        total[term.rows] = 0.0


def _at_or_above_kth(total: npt.NDArray[np.float64], k: int) -> tuple[npt.NDArray[np.int64], bool]:
    """Rows scoring at least a floor that ``k`` rows reach; whether they are all that scored.

    The floor is the ``k``-th best score among every ``stride``-th row: those ``k`` rows reach
    it, so the ``k``-th best of all rows is at least as high, and every row that could be
    among the best ``k`` (or tie the last of them) is kept. A sample of about
    ``sqrt(k * rows)`` balances its own partition against the rows it lets through.
    """
    size = len(total)
    stride = math.isqrt(size // k) if 0 < k < size else 1
    if stride > 1:
        sample = total[::stride]
        positive = sample[sample > 0.0]
        if len(positive) >= k:
            floor = np.partition(positive, len(positive) - k)[len(positive) - k]
            return np.flatnonzero(total >= floor), False
    return np.flatnonzero(total), True


class LexicalHits:
    """One query's BM25 scores, ranked as far as asked.

    A build needs the best few hundred ids and the scores of its candidate pool; reading out
    every matching item (most of a large store) would cost more than the scoring did. So
    :meth:`best` ranks only as deep as asked (again, deeper, if asked for more), :meth:`of`
    reads each asked item's weights directly, and the number of matches is counted only
    when asked for. The scores are as of the query: later writes to the index change nothing
    here, and an item written since is not scored (``0.0``).
    """

    def __init__(
        self,
        scorer: Scorer,
        weights: Sequence[TermWeights],
        size: int,
        ids: list[str],
        row_of: dict[str, int],
    ) -> None:
        self._scorer = scorer
        self._weights = tuple(weights)
        self._size = size  # rows the index had when the query ran
        self._ids = ids
        self._row_of = row_of
        self._ranked = _Ranked(np.zeros(0, np.int64), np.zeros(0, np.float64), not weights)
        self._count: int | None = 0 if not weights else None

    def __len__(self) -> int:
        """How many items matched (counted on first asking: a build never asks)."""
        if self._count is None:
            held = np.zeros(self._size, dtype=bool)
            for term in self._weights:
                held[term.rows] = True
            self._count = int(np.count_nonzero(held))
        return self._count

    def __bool__(self) -> bool:
        """Whether anything matched, without counting: every term kept holds a live row."""
        return bool(self._weights)

    def get(self, item_id: str, default: float = 0.0) -> float:
        """The item's score (``default`` for an item the index does not hold)."""
        row = self._row_of.get(item_id)
        # A write after the query may have moved the item to a row this query never scored.
        if row is None or row >= self._size:
            return default
        return self.of([item_id])[item_id]

    def of(self, item_ids: Iterable[str]) -> dict[str, float]:
        """The score of each of ``item_ids`` (``0.0`` for those that did not match)."""
        ids = list(item_ids)
        size = self._size
        rows = np.fromiter(map(self._row_of.get, ids, repeat(size)), dtype=np.int64, count=len(ids))
        known = rows < size
        scores = np.zeros(len(ids), dtype=np.float64)
        asked = rows[known]
        summed = np.zeros(len(asked), dtype=np.float64)
        for term in self._weights:  # in the query's order, as the ranking summed them
            summed += term.at(asked)
        scores[known] = summed
        return dict(zip(ids, scores.tolist(), strict=True))

    def best(self, k: int) -> list[str]:
        """The ``k`` best-scoring matching ids, best first, ties by id."""
        if k <= 0:
            return []
        ranked = self._rank(k)
        rows, scores = ranked.rows, ranked.scores
        if len(rows) > k:
            # Everything scoring at least the k-th best, ties at the boundary included, so the
            # id tie-break below sees every candidate for the last places.
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            rows, scores = rows[keep], scores[keep]
        ids = self._ids
        ordered = sorted(
            zip((-scores).tolist(), rows.tolist(), strict=True),
            key=lambda pair: (pair[0], ids[pair[1]]),
        )
        return [ids[row] for _, row in ordered[:k]]

    def as_dict(self) -> dict[str, float]:
        """Every matching id with its score."""
        ranked = self._rank(self._size)
        ids, rows, scores = self._ids, ranked.rows.tolist(), ranked.scores.tolist()
        return {ids[row]: score for row, score in zip(rows, scores, strict=True)}

    def _rank(self, k: int) -> _Ranked:
        """Rows holding the ``k`` best, ranking again only when the kept ones may not."""
        ranked = self._ranked
        if ranked.complete or k <= len(ranked.rows):
            return ranked
        ranked = self._ranked = self._scorer.ranked(self._weights, self._size, k)
        if ranked.complete:
            self._count = len(ranked.rows)
        return ranked

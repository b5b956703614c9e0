"""BM25 over memory items that form sessions, with each item's neighbours lending it terms.

A memory is rarely self-contained: "Yes, yesterday!" answers the turn before it. So an item's
BM25 document is its own terms plus ``neighbour_weight`` times the terms of the items just
before and after it in the same session (``tf' = tf + 0.4 (tf_prev + tf_next)``). On the
LoCoMo tuning split this gained 1.5 recall points within 1024 tokens over plain BM25 documents,
which is why this index is our own rather than bm25s or rank-bm25 (neither takes fractional
term counts). It also knows each session's order, which the ranking uses to smooth scores
over neighbours.

The index is built lazily from its documents and rebuilt after changes (``O(terms)`` with
numpy postings); a query touches only the postings of its own terms.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine.models import ContextItem
from agent_engine.retrieval.text import analyze

__all__ = ["LexicalHits", "LexicalIndex"]


@attrs.frozen
class _Doc:
    terms: Counter[str]
    session: str
    source: str
    order: tuple[datetime, str]


class LexicalIndex:
    """A BM25 index of items (``k1``, ``b``: the Okapi parameters)."""

    def __init__(self, *, k1: float = 1.2, b: float = 0.75, neighbour_weight: float = 0.4) -> None:
        self.k1 = k1
        self.b = b
        self.neighbour_weight = neighbour_weight
        self._docs: dict[str, _Doc] = {}
        self._lock = threading.RLock()
        self._built = False
        self._ids: list[str] = []
        self._id_array: npt.NDArray[np.str_] = np.array([], dtype=np.str_)
        self._row_of: dict[str, int] = {}
        self._postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        self._position: dict[str, tuple[str, int]] = {}
        self._sessions: dict[str, list[str]] = {}
        self._sources: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._docs

    # ------------------------------------------------------------------ maintenance

    def upsert(self, items: Iterable[ContextItem]) -> None:
        """Add or replace items (analysis happens here, once per write)."""
        with self._lock:
            for item in items:
                self._docs[item.id] = _Doc(
                    Counter(analyze(item.text)),
                    item.session,
                    item.source,
                    (item.timestamp, item.id),
                )
            self._built = False

    def remove(self, item_ids: Iterable[str]) -> None:
        """Forget items (unknown ids are ignored)."""
        with self._lock:
            for item_id in item_ids:
                if self._docs.pop(item_id, None) is not None:
                    self._built = False

    def _build(self) -> None:
        sessions: dict[str, list[str]] = {}
        for item_id, doc in self._docs.items():
            if doc.session:
                sessions.setdefault(doc.session, []).append(item_id)
        for members in sessions.values():
            members.sort(key=lambda item_id: self._docs[item_id].order)
        position = {
            item_id: (session, index)
            for session, members in sessions.items()
            for index, item_id in enumerate(members)
        }
        ids = list(self._docs)
        rows_by_term: dict[str, list[int]] = {}
        tf_by_term: dict[str, list[float]] = {}
        lengths = np.zeros(len(ids), dtype=np.float64)
        for row, item_id in enumerate(ids):
            neighbours = []
            if item_id in position:
                session, index = position[item_id]
                members = sessions[session]
                neighbours = [members[i] for i in (index - 1, index + 1) if 0 <= i < len(members)]
            counts = self._term_counts(item_id, neighbours)
            lengths[row] = sum(counts.values())
            for term, weight in counts.items():
                rows_by_term.setdefault(term, []).append(row)
                tf_by_term.setdefault(term, []).append(weight)
        self._ids = ids
        self._id_array = np.array(ids, dtype=np.str_)
        self._row_of = {item_id: row for row, item_id in enumerate(ids)}
        self._postings = self._weights(rows_by_term, tf_by_term, lengths)
        self._position, self._sessions = position, sessions
        self._sources = frozenset(doc.source for doc in self._docs.values() if doc.source)
        self._built = True

    def _term_counts(self, item_id: str, neighbours: list[str]) -> dict[str, float]:
        """An item's own term counts plus its neighbours' at ``neighbour_weight``."""
        counts = {term: float(n) for term, n in self._docs[item_id].terms.items()}
        if self.neighbour_weight:
            for neighbour in neighbours:
                for term, n in self._docs[neighbour].terms.items():
                    counts[term] = counts.get(term, 0.0) + self.neighbour_weight * n
        return counts

    def _weights(
        self,
        rows_by_term: dict[str, list[int]],
        tf_by_term: dict[str, list[float]],
        lengths: npt.NDArray[np.float64],
    ) -> dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
        """Precompute each posting's BM25 contribution: a query only sums them."""
        average = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
        norm = self.k1 * (1.0 - self.b + self.b * lengths / average)
        total = len(lengths)
        postings = {}
        for term, rows in rows_by_term.items():
            row_array = np.asarray(rows, dtype=np.int64)
            tf = np.asarray(tf_by_term[term], dtype=np.float64)
            idf = math.log(1.0 + (total - len(rows) + 0.5) / (len(rows) + 0.5))
            postings[term] = (row_array, idf * tf * (self.k1 + 1.0) / (tf + norm[row_array]))
        return postings

    # ------------------------------------------------------------------ queries

    def hits(self, query: str) -> LexicalHits:
        """BM25 scores of ``query`` against every item (each query term counts once)."""
        with self._lock:
            if not self._built:
                self._build()
            terms = [term for term in dict.fromkeys(analyze(query)) if term in self._postings]
            total = np.zeros(len(self._ids), dtype=np.float64)
            for term in terms:
                rows, weights = self._postings[term]
                total[rows] += weights
            return LexicalHits(total, self._id_array, self._row_of)

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every item sharing a term with ``query``."""
        return self.hits(query).as_dict()

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs, best first (ties by id)."""
        hits = self.hits(query)
        return [(item_id, hits.get(item_id)) for item_id in hits.best(k)]

    def neighbours(self, item_id: str, radius: int) -> list[tuple[str, int]]:
        """Items within ``radius`` places of ``item_id`` in its session, with their offsets."""
        return self.neighbourhoods([item_id], radius).get(item_id, [])

    def neighbourhoods(
        self, item_ids: Iterable[str], radius: int
    ) -> dict[str, list[tuple[str, int]]]:
        """:meth:`neighbours` of many items at once (those without any are left out).

        A build asks for the neighbours of every candidate: one call takes the lock once.
        """
        offsets = [offset for offset in range(-radius, radius + 1) if offset]
        found: dict[str, list[tuple[str, int]]] = {}
        with self._lock:
            if not self._built:
                self._build()
            position, sessions = self._position, self._sessions
            for item_id in item_ids:
                place = position.get(item_id)
                if place is None:
                    continue
                members = sessions[place[0]]
                near = [
                    (members[place[1] + offset], offset)
                    for offset in offsets
                    if 0 <= place[1] + offset < len(members)
                ]
                if near:
                    found[item_id] = near
        return found

    def sources(self) -> frozenset[str]:
        """Every distinct ``source`` among the indexed items.

        Kept with the postings: every build asks for it, and a scan of a large store's
        documents per query would cost more than the BM25 scoring does.
        """
        with self._lock:
            if not self._built:
                self._build()
            return self._sources


class LexicalHits:
    """One query's BM25 scores, kept as an array over the index's rows.

    A build needs the best few hundred ids and the scores of its candidate pool; a dict of
    every matching item (thousands in a large store) would cost more than the scoring did.
    """

    def __init__(
        self,
        total: npt.NDArray[np.float64],
        ids: npt.NDArray[np.str_],
        row_of: dict[str, int],
    ) -> None:
        self._total = total
        self._ids = ids
        self._row_of = row_of
        self._hit = np.flatnonzero(total)

    def __len__(self) -> int:
        return len(self._hit)

    def get(self, item_id: str, default: float = 0.0) -> float:
        """The item's score (``default`` for an item the index does not hold)."""
        row = self._row_of.get(item_id)
        return default if row is None else float(self._total[row])

    def best(self, k: int) -> list[str]:
        """The ``k`` best-scoring matching ids, best first, ties by id."""
        rows = self._hit
        scores = self._total[rows]
        if len(rows) > k > 0:
            # Everything scoring at least the k-th best, ties at the boundary included, so the
            # id tie-break below sees every candidate for the last places.
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= kth
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((self._ids[rows], -scores))
        return [str(item_id) for item_id in self._ids[rows[order[:k]]]]

    def as_dict(self) -> dict[str, float]:
        """Every matching id with its score."""
        return {str(self._ids[row]): float(self._total[row]) for row in self._hit}

"""Gathering a tier's candidates: a bounded pool from indexes, never the whole tier.

Each source the policy asks for contributes at most ``per_source`` items: the best vector
matches, the best BM25 matches, the newest, the most important, and the session neighbours of
the best hits (so smoothing can lift the turn next to a match). The two searches and the
neighbours reach into the archive as well as the working set, MemGPT's archival search done
for the agent: an archived item comes back into a build when it matches the query as well as
what the working set offers, and only then. The newest, the most important and the pinned
items are the working set's; superseded versions never enter. Every pinned item of the tier
joins: pinned means "in whenever it fits", so none may go unread (pinned items are few by
design, and one indexed read fetches them all).
The pool is fetched in one batched read; dense scores for pool items found by other sources
are computed from their stored vectors, so every candidate is scored on every signal.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor, Future, wait
from datetime import datetime

import attrs
import numpy as np

from agent_engine.assembler.policies import (
    DENSE,
    IMPORTANT,
    LEXICAL,
    NEIGHBOUR_RADIUS,
    NEIGHBOURS,
    RECENT,
    Candidates,
    Policy,
)
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import SearchHit
from agent_engine.models import ContextItem, Vector
from agent_engine.retrieval.aliases import NO_ALIASES, Aliases
from agent_engine.retrieval.lexical import LexicalMatches, Neighbourhoods
from agent_engine.retrieval.names import APOSTROPHES, name_words
from agent_engine.tiers.base import QueryVectors, TierStore
from agent_engine.tiers.lexical import LexicalView
from agent_engine.tiers.views import View

__all__ = ["GatherLimits", "QueryVectors", "gather"]

OVERLAP_FROM = 2000
"""Items a tier needs before its vector search runs on a worker thread (handing it over and
back costs about 0.1 ms, what searching and scoring a few hundred items cost)."""


@attrs.frozen
class GatherLimits:
    """How many candidates each source may contribute, and how far neighbours reach.

    ``neighbour_seeds``: how many of each source's best hits bring in their session
    neighbours. Five recall what thirty did on the LoCoMo tuning conversations (within 0.006 at
    every budget, recall@10 unchanged) with less than half the neighbours to score and explain.
    ``per_source`` is what large budgets need: at 50 or 75 recall within 2048 and 4096 tokens
    fell (0.915 and 0.941 at 50, against 0.918 and 0.952), while within 1024 it did not move.
    ``widening_rounds``: how many times a tier whose pool ran out with budget left gathers
    again with four times ``per_source`` (each round costs about four times the first
    gather); ``min_widening_room``: the fewest unused tokens worth widening for. Set
    ``widening_rounds=0`` when a steady build time matters more than filling the last tokens.
    ``radius``: how many places before and after a hit its neighbours are taken from, as the
    default policy's smoothing reaches (``HybridScorer(radius=...)``). Four rather than two:
    on chats of short messages (LoCoMo's tuning turns split one message per sentence) recall
    rose 2.4 to 3.0 points at every budget, and on the turns as they are it held (within 512
    tokens it rose 1.1); six helped short messages more and cost long turns
    (``docs/benchmarks.md``).
    """

    per_source: int = 100
    neighbour_seeds: int = 5
    radius: int = NEIGHBOUR_RADIUS
    widening_rounds: int = 2
    min_widening_room: int = 8

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(GatherLimits):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(
                    f"{field.name} must be a non-negative integer", field=field.name, value=value
                )


def strip_names(query: str, words: Iterable[str]) -> str:
    """The query without the given words or names (and their possessive 's), for dense matching."""
    for word in sorted(set(words), key=len, reverse=True):
        bare = re.sub(rf"[{APOSTROPHES}]s$", "", word)
        pattern = rf"(?<!\w){re.escape(bare)}(?:[{APOSTROPHES}]s)?(?!\w)"
        query = re.sub(pattern, " ", query, flags=re.IGNORECASE)
    return " ".join(query.split())


def _naming(query: str, sources: Iterable[str], aliases: Aliases) -> Mapping[str, tuple[str, ...]]:
    """The sources the query names, directly or through an alias, with the words that name."""
    known = list(sources)
    naming = dict(name_words(query, known))
    for source, words in aliases.naming(query, known).items():
        naming[source] = tuple(dict.fromkeys(naming.get(source, ()) + words))
    return naming


def _words_of(naming: Mapping[str, tuple[str, ...]]) -> list[str]:
    return [word for words in naming.values() for word in words]


def gather(
    store: TierStore,
    query: str,
    policy: Policy,
    limits: GatherLimits,
    now: datetime,
    *,
    known: Mapping[str, ContextItem] | None = None,
    read_pinned: bool = True,
    query_vectors: QueryVectors | None = None,
    background: Executor | None = None,
    aliases: Aliases = NO_ALIASES,
) -> tuple[Candidates, list[ContextItem], bool]:
    """Collect the candidates of ``store`` with their signals, and its pinned items.

    The third value says whether any source was cut at its limit (so a wider gather could
    find more). ``known``: items an earlier, narrower gather already fetched; they join the
    pool without being read again, and every signal is computed over the whole pool, so a
    wider pool is scored on one scale with the narrower one. ``read_pinned``: read the tier's
    pinned items (all of them, most important first; a wider gather has them already and
    passes ``False``: the second value is then empty). ``query_vectors``: the build's
    query embeddings so far (filled in here). ``background``: where to run the vector search
    (the query embedding included) while BM25 scores in this thread; without it, both run here.
    """
    wanted = policy.sources
    if not query and wanted & {DENSE, LEXICAL}:
        # Nothing to be relevant to: fall back to what is new and what matters.
        wanted = wanted | {RECENT, IMPORTANT}
    needs_index = bool(wanted & {LEXICAL, NEIGHBOURS}) or policy.strip_sources
    index = store.lexical() if needs_index else None  # one lookup for the whole gather
    if index is not None and not len(index):  # it indexes every item of the tier: none yet
        return Candidates(tier=store.tier, query=query, items={}, now=now), [], False
    naming = _naming(query, index.sources(), aliases) if index is not None and query else {}
    names = frozenset(naming)
    lexical_work = LEXICAL in wanted and bool(query) and index is not None
    dense = None
    if DENSE in wanted:
        dense = _start_search(
            store,
            strip_names(query, _words_of(naming)) if policy.strip_sources else query,
            limits.per_source,
            query_vectors if query_vectors is not None else {},
            # Handing a small tier's search to a worker costs more than the overlap saves.
            background if lexical_work and len(index or ()) >= OVERLAP_FROM else None,
        )
    gathering = _Gathering(store, wanted, limits, known or {}, index)
    found = gathering.while_searching(
        aliases.expand(query) if lexical_work else "", dense, read_pinned
    )
    items = gathering.pool(found)
    candidates = Candidates(
        tier=store.tier,
        query=query,
        items=items,
        dense=_cosines(items, gathering.query_vector, gathering.searched),
        lexical=gathering.lexical.of(items) if gathering.lexical is not None else {},
        neighbours=gathering.links(items),
        named_sources=names,
        now=now,
    )
    return candidates, gathering.pinned, gathering.saturated


@attrs.define
class _Gathering:
    """One gather's sources as they come in: the ids they name, in the order they name them.

    The order is the pool's: BM25's best, the vector search's, the newest and the most
    important, then the session neighbours of the best hits of each search.
    """

    store: TierStore
    wanted: frozenset[str]
    limits: GatherLimits
    known: Mapping[str, ContextItem]
    index: LexicalView | None
    ids: dict[str, None] = attrs.field(factory=dict)
    lexical: LexicalMatches | None = None
    query_vector: Vector | None = None
    searched: dict[str, float] = attrs.field(factory=dict)
    pinned: list[ContextItem] = attrs.field(factory=list)
    saturated: bool = False

    @property
    def neighbours(self) -> bool:
        """Whether the policy wants session neighbours (and the scope has an index)."""
        return NEIGHBOURS in self.wanted and self.index is not None

    def while_searching(
        self,
        query: str,
        dense: Future[tuple[Vector, list[SearchHit]]] | None,
        read_pinned: bool,
    ) -> dict[str, ContextItem]:
        """Read what BM25 alone decides while the vector search is out; then take its hits.

        ``query``: the text to match lexically (empty: no lexical source). Returns the items
        read so far, by id: the vector hits (fetched with the search) and, when the search
        was still running, BM25's best and their neighbours.
        """
        limits = self.limits
        try:
            self.lexical = self.index.hits(query) if query and self.index is not None else None
            # One more than the source's share: whether more matched than it takes.
            ranked = self.lexical.best(limits.per_source + 1) if self.lexical is not None else []
            best = ranked[: limits.per_source]
            near = self._neighbours_of(best)
            early: dict[str, ContextItem] = {}
            if dense is not None and not dense.done():
                early = _fetch(self.store, [*best, *near], self.known)
            self.pinned = self.store.pinned() if read_pinned else []
        finally:
            if dense is not None:
                wait([dense])  # never leave the store searched behind the caller's back
        self.query_vector, hits = dense.result() if dense is not None else (None, [])
        found = {hit.item.id: hit.item for hit in hits}  # fetched already: not read twice
        self.searched = {hit.item.id: hit.score for hit in hits}
        listed, cut = _listed(self.store, self.wanted, limits.per_source)
        self.ids.update(dict.fromkeys([*best, *found, *listed, *near]))
        seeded = set(best[: limits.neighbour_seeds])
        seeds = [i for i in list(found)[: limits.neighbour_seeds] if i not in seeded]
        self.ids.update(dict.fromkeys(self._neighbours_of(seeds, seeded=False)))
        self.saturated = (
            len(ranked) > limits.per_source
            or (dense is not None and len(hits) == limits.per_source)
            or cut
        )
        found.update((i, item) for i, item in early.items() if i not in found)
        return found

    def _neighbours_of(self, hits: list[str], *, seeded: bool = True) -> list[str]:
        """The session neighbours of the first ``neighbour_seeds`` of ``hits``."""
        if not self.neighbours or self.index is None:
            return []
        seeds = hits[: self.limits.neighbour_seeds] if seeded else hits
        return self.index.neighbours(seeds, self.limits.radius)

    def links(self, items: Mapping[str, ContextItem]) -> Neighbourhoods:
        """Which pool items are session neighbours of which, for neighbour smoothing."""
        if not self.neighbours or self.index is None:
            return {}
        return self.index.links(items, self.limits.radius)

    def pool(self, found: dict[str, ContextItem]) -> dict[str, ContextItem]:
        """Every id named, read in one batch but for those ``found`` or known already."""
        found = {**found, **_fetch(self.store, [i for i in self.ids if i not in found], self.known)}
        # A version superseded since the index last saw it is history: never a candidate.
        items = {
            i: found[i]
            for i in self.ids
            if i in found and i not in self.known and not found[i].superseded
        }
        items.update(self.known)
        return items


def _listed(store: TierStore, wanted: frozenset[str], limit: int) -> tuple[list[str], bool]:
    """The newest and the most important items, as the policy wants; and whether either was cut."""
    listed: list[str] = []
    cut = False
    for source, order in ((RECENT, "-timestamp"), (IMPORTANT, "-importance")):
        if source in wanted:
            newest_or_best = store.query(None, limit=limit, order_by=order)
            listed.extend(item.id for item in newest_or_best)
            cut = cut or len(newest_or_best) == limit
    return listed, cut


def _fetch(
    store: TierStore, item_ids: list[str], known: Mapping[str, ContextItem]
) -> dict[str, ContextItem]:
    """The stored items of ``item_ids`` that are not ``known`` already, in one read."""
    wanted = [i for i in dict.fromkeys(item_ids) if i not in known]
    return {item.id: item for item in store.get_many(wanted)} if wanted else {}


def _start_search(
    store: TierStore, text: str, k: int, memo: QueryVectors, background: Executor | None
) -> Future[tuple[Vector, list[SearchHit]]] | None:
    """The vector search for ``text``: started on ``background``, or done here without it.

    ``None`` when there is nothing to search with (no text, or a store without embedder).
    The query is embedded once per build and embedder (``memo``).
    """
    if not text or store.query_embedder is None:
        return None
    search = functools.partial(store.search_text, text, k, vectors=memo, view=View.CURRENT)
    if background is not None:
        return background.submit(contextvars.copy_context().run, search)
    done: Future[tuple[Vector, list[SearchHit]]] = Future()
    done.set_result(search())
    return done


def _cosines(
    items: dict[str, ContextItem], query: Vector | None, searched: dict[str, float]
) -> dict[str, float]:
    """Cosine of every pool item that has a vector (one matrix product).

    ``searched``: cosines the vector search already reported (its hits' scores), which are
    not computed again; reading the stored vectors of a large store's items is most of the cost.
    """
    if query is None:
        return {}
    cosines = {i: searched[i] for i in items if i in searched}
    vectors = [
        (item.id, item.embedding)
        for item in items.values()
        if item.embedding is not None and item.id not in searched
    ]
    if not vectors:
        return cosines
    matrix = np.array([vector for _, vector in vectors], dtype=np.float32)
    # Dividing the dot products by the row norms is normalizing the rows, for a fraction of
    # the arithmetic (zero rows stay zero).
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    norms[norms == 0] = 1.0
    scores = ((matrix @ query) / norms).tolist()
    cosines.update(zip((item_id for item_id, _ in vectors), scores, strict=True))
    return cosines

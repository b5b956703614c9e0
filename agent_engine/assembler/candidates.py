"""Gathering a tier's candidates: a bounded pool from indexes, never the whole tier.

Each source the policy asks for contributes at most ``per_source`` items: the best vector
matches, the best BM25 matches, the newest, the most important, and the session neighbours of
the best hits (so smoothing can lift the turn next to a match). Every pinned item of the tier
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
    NEIGHBOURS,
    RECENT,
    Candidates,
    Policy,
)
from agent_engine.embeddings import Embedder, normalize_rows
from agent_engine.errors import ValidationError
from agent_engine.filters import Order
from agent_engine.memory.backend import SearchHit
from agent_engine.models import ContextItem, Status, Vector
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.tiers.base import TierStore

__all__ = ["GatherLimits", "QueryVectors", "gather"]

QueryVectors = dict[tuple[int, str], Vector]
"""Query embeddings of one build, by (embedder identity, text): tiers sharing an embedder
embed the query once (a model embedding costs as much as the rest of a build)."""

OVERLAP_FROM = 2000
"""Items a tier needs before its vector search runs on a worker thread (handing it over and
back costs about 0.1 ms, what searching and scoring a few hundred items cost)."""

_NAME = re.compile(r"^[^\W\d_][\w'.-]*$")


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
    """

    per_source: int = 100
    neighbour_seeds: int = 5
    radius: int = 2
    widening_rounds: int = 2
    min_widening_room: int = 8

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(GatherLimits):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(
                    f"{field.name} must be a non-negative integer", field=field.name, value=value
                )


def named_sources(query: str, sources: Iterable[str]) -> frozenset[str]:
    """Known sources whose name appears as a word in ``query`` (case-insensitive)."""
    found = set()
    folded = query.lower()
    for source in sources:
        if source.lower() not in folded:  # cheap test first: most sources are not named
            continue
        if _NAME.match(source) and re.search(rf"\b{re.escape(source)}\b", query, re.IGNORECASE):
            found.add(source)
    return frozenset(found)


def strip_names(query: str, names: frozenset[str]) -> str:
    """The query without the given names (and their possessive 's), for dense matching."""
    for name in names:
        query = re.sub(rf"\b{re.escape(name)}(?:'s)?\b", " ", query, flags=re.IGNORECASE)
    return " ".join(query.split())


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
    known = known or {}
    wanted = policy.sources
    if not query and wanted & {DENSE, LEXICAL}:
        # Nothing to be relevant to: fall back to what is new and what matters.
        wanted = wanted | {RECENT, IMPORTANT}
    needs_index = bool(wanted & {LEXICAL, NEIGHBOURS}) or policy.strip_sources
    index = store.backend.lexical_index(store.scope) if needs_index else None
    if index is not None and not len(index):  # it indexes every item of the tier: none yet
        return Candidates(tier=store.tier, query=query, items={}, now=now), [], False
    names = named_sources(query, index.sources()) if index is not None and query else frozenset()
    lexical_work = LEXICAL in wanted and bool(query) and index is not None
    dense = None
    if DENSE in wanted:
        dense_query = strip_names(query, names) if policy.strip_sources else query
        dense = _start_search(
            store,
            dense_query,
            limits.per_source,
            query_vectors if query_vectors is not None else {},
            # Handing a small tier's search to a worker costs more than the overlap saves.
            background if lexical_work and len(index or ()) >= OVERLAP_FROM else None,
        )
    try:
        lexical = index.hits(query) if lexical_work and index is not None else None
        lexical_best = lexical.best(limits.per_source) if lexical is not None else []
        # While the vector search is out, read what BM25 alone decides: the session
        # neighbours of its best hits, those items themselves, and the pinned items.
        near = []
        if NEIGHBOURS in wanted and index is not None:
            near = _neighbours(index, lexical_best[: limits.neighbour_seeds], limits.radius)
        early: dict[str, ContextItem] = {}
        if dense is not None and not dense.done():
            early = _fetch(store, [*lexical_best, *near], known)
        pinned = (
            store.query(
                {"status": Status.PINNED.value}, limit=None, order_by=Order.desc("importance")
            )
            if read_pinned
            else []
        )
    finally:
        if dense is not None:
            wait([dense])  # never leave the store searched behind the caller's back
    ids: dict[str, None] = dict.fromkeys(lexical_best)

    query_vector, hits = dense.result() if dense is not None else (None, [])
    found = {hit.item.id: hit.item for hit in hits}  # fetched already: not read twice
    searched = {hit.item.id: hit.score for hit in hits}
    ids.update(dict.fromkeys(found))
    listed, cut = _listed(store, wanted, limits.per_source)
    ids.update(dict.fromkeys(listed))
    saturated = (
        (lexical is not None and len(lexical) > limits.per_source)
        or (dense is not None and len(hits) == limits.per_source)
        or cut
    )
    ids.update(dict.fromkeys(near))
    if NEIGHBOURS in wanted and index is not None:
        seeded = set(lexical_best[: limits.neighbour_seeds])
        seeds = [i for i in list(found)[: limits.neighbour_seeds] if i not in seeded]
        ids.update(dict.fromkeys(_neighbours(index, seeds, limits.radius)))

    found.update((i, item) for i, item in early.items() if i not in found)
    found.update(_fetch(store, [i for i in ids if i not in found], known))
    items = {i: found[i] for i in ids if i in found and i not in known}
    items.update(known)
    candidates = Candidates(
        tier=store.tier,
        query=query,
        items=items,
        dense=_cosines(items, query_vector, searched),
        lexical=lexical.of(items) if lexical else {},
        neighbours=(
            index.links(items, limits.radius) if NEIGHBOURS in wanted and index is not None else {}
        ),
        named_sources=names,
        now=now,
    )
    return candidates, pinned, saturated


def _listed(store: TierStore, wanted: frozenset[str], limit: int) -> tuple[list[str], bool]:
    """The newest and the most important items, as the policy wants; and whether either was cut."""
    listed: list[str] = []
    cut = False
    for source, order in ((RECENT, Order.desc("timestamp")), (IMPORTANT, Order.desc("importance"))):
        if source in wanted:
            newest_or_best = store.query(None, limit=limit, order_by=order)
            listed.extend(item.id for item in newest_or_best)
            cut = cut or len(newest_or_best) == limit
    return listed, cut


def _neighbours(index: LexicalIndex, seeds: list[str], radius: int) -> list[str]:
    """The session neighbours of ``seeds`` within ``radius``, in the seeds' order."""
    near: dict[str, None] = {}
    for found in index.neighbourhoods(dict.fromkeys(seeds), radius).values():
        near.update(dict.fromkeys(other for other, _ in found))
    return list(near)


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

    ``None`` when there is nothing to search with (no text, or a backend without embedder).
    """
    embedder: Embedder | None = getattr(store.backend, "embedder", None)
    if not text or embedder is None:
        return None
    search = functools.partial(_search, store, embedder, text, memo, k)
    if background is not None:
        return background.submit(contextvars.copy_context().run, search)
    done: Future[tuple[Vector, list[SearchHit]]] = Future()
    done.set_result(search())
    return done


def _search(
    store: TierStore, embedder: Embedder, text: str, memo: QueryVectors, k: int
) -> tuple[Vector, list[SearchHit]]:
    """Embed ``text`` (once per build and embedder: ``memo``) and search the store with it."""
    key = (id(embedder), text)
    vector = memo.get(key)
    if vector is None:
        vector = memo[key] = normalize_rows(embedder.embed([text]))[0]
    return vector, store.search(vector, k=k)


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

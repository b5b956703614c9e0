"""What a build reads through a tier store: lexical views, pinned items, text search, accesses.

The isolation tests run on every backend: each store's answers name its own items only, even
when another scope on the same backend holds the same words, the same session name and
pinned items of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from agent_engine.embeddings import EmbedderIdentity, HashingEmbedder, Matrix
from agent_engine.errors import EmbeddingError, ValidationError
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import Status
from agent_engine.tiers.base import QueryVectors, by_backend, record_access
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore

AT = datetime(2024, 6, 1, 12, tzinfo=UTC)


def _fill(store, words, *, session="chat", pinned=()):
    """One note per word, in one session, in time order; ``pinned``: indexes to pin."""
    added = store.add_many(
        [
            store.new_item(
                "note",
                f"postgres {word} note",
                session=session,
                importance=round(0.1 * (n + 1), 1),
                status=Status.PINNED if n in pinned else Status.CONFIRMED,
            )
            for n, word in enumerate(words)
        ]
    )
    return [item.id for item in added]


@pytest.fixture
def scopes(backend, clock):
    """Two projects and a user's global memory on one backend, with look-alike items."""
    alpha = ProjectMemoryStore("alpha", backend, clock=clock)
    beta = ProjectMemoryStore("beta", backend, clock=clock)
    user = GlobalMemoryStore(backend, "alpha", clock=clock, allow_unconfirmed=True)
    ids = {
        "alpha": _fill(alpha, ["one", "two", "three", "four", "five"], pinned=(1, 3)),
        "beta": _fill(beta, ["uno", "dos", "tres"], pinned=(0,)),
        "user": _fill(user, ["eins", "zwei"], pinned=(0, 1)),
    }
    return alpha, beta, user, ids


class TestLexicalView:
    def test_hits_name_only_the_scope_items(self, scopes):
        """Matches, scores and sources come from the store's own scope alone."""
        alpha, _, _, ids = scopes
        view = alpha.lexical()
        assert len(view) == 5
        hits = view.hits("postgres note")
        assert set(hits.best(50)) == set(ids["alpha"])
        foreign = ids["beta"] + ids["user"]
        assert set(hits.of(foreign).values()) == {0.0}
        assert view.sources() == {alpha.namespace}

    def test_neighbours_stay_in_scope_and_keep_seed_order(self, scopes):
        """Session neighbours never cross into a scope that uses the same session name."""
        alpha, beta, _, ids = scopes
        a = ids["alpha"]
        view = alpha.lexical()
        assert view.neighbours([a[2]], 1) == [a[1], a[3]]
        assert view.neighbours([a[4], a[0]], 2) == [a[2], a[3], a[1]]
        assert view.neighbours(ids["beta"], 2) == []
        assert view.links([a[0], a[2], *ids["beta"]], 2) == {
            a[0]: [(a[2], 2)],
            a[2]: [(a[0], -2)],
        }
        b = ids["beta"]
        assert beta.lexical().neighbours([b[0]], 5) == [b[1], b[2]]

    def test_an_empty_scope_has_an_empty_view(self, backend, scopes):
        """A store with no items beside busy ones answers nothing."""
        del scopes
        view = ProjectMemoryStore("gamma", backend).lexical()
        assert len(view) == 0
        assert len(view.hits("postgres note")) == 0
        assert view.sources() == frozenset()

    def test_a_view_is_one_index_lookup(self):
        """Everything asked of a view is answered without looking the index up again."""
        backend = _LookupCounting(embedder=HashingEmbedder(dim=32))
        store = ProjectMemoryStore("alpha", backend)
        ids = _fill(store, ["one", "two", "three"])
        view = store.lexical()
        view.hits("postgres").best(5)
        view.neighbours(ids, 2)
        view.links(ids, 2)
        view.sources()
        assert backend.lookups == 1


class TestPinned:
    def test_pinned_items_of_the_scope_most_important_first(self, scopes):
        """Each store reads its own pinned items only, by descending importance."""
        alpha, beta, user, ids = scopes
        assert [item.id for item in alpha.pinned()] == [ids["alpha"][3], ids["alpha"][1]]
        assert [item.id for item in beta.pinned()] == [ids["beta"][0]]
        assert [item.id for item in user.pinned()] == [ids["user"][1], ids["user"][0]]
        alpha.unpin(ids["alpha"][3])
        assert [item.id for item in alpha.pinned()] == [ids["alpha"][1]]


class TestSearchText:
    def test_search_text_stays_in_scope(self, scopes):
        """The hits are the store's own, ranked as a text search ranks them."""
        alpha, _, _, ids = scopes
        vector, hits = alpha.search_text("postgres three note", k=10)
        assert {hit.item.id for hit in hits} == set(ids["alpha"])
        assert [hit.item.id for hit in hits] == [
            hit.item.id for hit in alpha.search("postgres three note", k=10)
        ]
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
        assert alpha.query_embedder == EmbedderIdentity.of(HashingEmbedder(dim=64))

    def test_stores_sharing_an_embedder_embed_a_text_once(self):
        """With one memo, a text is embedded once per embedder identity, whichever backend."""
        first, second = _Counting(HashingEmbedder(dim=32)), _Counting(HashingEmbedder(dim=32))
        other = _Counting(HashingEmbedder(dim=16))
        stores = [
            ProjectMemoryStore("alpha", InMemoryBackend(embedder=first)),
            GlobalMemoryStore(InMemoryBackend(embedder=second), "alpha"),
            ProjectMemoryStore("beta", InMemoryBackend(embedder=other)),
        ]
        memo: QueryVectors = {}
        vectors = [store.search_text("deploy logs", 3, vectors=memo)[0] for store in stores]
        assert first.calls + second.calls == 1
        assert other.calls == 1
        assert np.array_equal(vectors[0], vectors[1])
        assert len(memo) == 2
        stores[0].search_text("deploy logs", 3)  # without a memo: embedded again
        assert first.calls + second.calls == 2

    def test_a_store_without_embedder_searches_by_vector_only(self):
        """No embedder: no query embedder, and a text search is an EmbeddingError."""
        store = ProjectMemoryStore("alpha", InMemoryBackend(dim=8))
        assert store.query_embedder is None
        with pytest.raises(EmbeddingError):
            store.search_text("anything", 3, vectors={})


class TestRecordAccess:
    def test_record_access_counts_the_given_items(self, scopes):
        """Each id gets one access at the given time; the others are untouched."""
        alpha, _, _, ids = scopes
        chosen = ids["alpha"][:2]
        assert alpha.record_access(chosen, AT) == 2
        for item in alpha.list_all():
            expected = (1, AT) if item.id in chosen else (0, None)
            assert (item.access_count, item.last_accessed_at) == expected

    def test_another_scopes_ids_are_not_counted(self, scopes):
        """An id of another scope counts as missing: nothing of that scope changes."""
        alpha, beta, _, ids = scopes
        foreign = ids["beta"][:2]
        assert alpha.record_access([*foreign, ids["alpha"][0]], AT) == 1
        assert record_access({alpha: foreign}, AT) == 0
        assert all(item.access_count == 0 for item in beta.list_all())

    def test_local_ids_are_counted_in_their_own_scope(self, scopes):
        """A local id means this store's item, as it does for every other read."""
        alpha, beta, _, ids = scopes
        local = alpha.get(ids["alpha"][0]).id.rsplit("/", 1)[1]
        assert alpha.record_access([local], AT) == 1
        assert alpha.get(ids["alpha"][0]).access_count == 1
        assert all(item.access_count == 0 for item in beta.list_all())

    def test_stores_on_one_backend_share_one_write(self):
        """by_backend groups stores by backend object; record_access writes a group once."""
        shared = _TouchCounting(embedder=HashingEmbedder(dim=32))
        alone = _TouchCounting(embedder=HashingEmbedder(dim=32))
        alpha = ProjectMemoryStore("alpha", shared)
        lone = ProjectMemoryStore("beta", alone)
        user = GlobalMemoryStore(shared, "alpha", allow_unconfirmed=True)
        groups = by_backend([alpha, lone, user])
        assert groups == [[alpha, user], [lone]]
        a, u = _fill(alpha, ["one"]), _fill(user, ["eins"])
        assert record_access({alpha: a, user: u}, AT) == 2
        assert shared.touches == [a + u]
        assert record_access({}, AT) == 0

    def test_stores_on_different_backends_are_refused(self):
        """Asking one write of two backends is a ValidationError, and nothing is written."""
        first = _TouchCounting(embedder=HashingEmbedder(dim=32))
        alpha = ProjectMemoryStore("alpha", first)
        beta = ProjectMemoryStore("beta", InMemoryBackend(embedder=HashingEmbedder(dim=32)))
        with pytest.raises(ValidationError):
            record_access({alpha: _fill(alpha, ["one"]), beta: _fill(beta, ["uno"])}, AT)
        assert first.touches == []


class _Counting:
    """An embedder that counts its calls (wrapping a real one)."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner = inner
        self.calls = 0
        self.name = inner.name
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls += 1
        return self.inner.embed(texts)


class _LookupCounting(InMemoryBackend):
    """An in-memory backend that counts lexical index lookups."""

    lookups = 0

    def lexical_index(self, filters=None):
        self.lookups += 1
        return super().lexical_index(filters)


class _TouchCounting(InMemoryBackend):
    """An in-memory backend that records each touch() call."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.touches: list[list[str]] = []

    def touch(self, item_ids, at):
        ids = list(item_ids)
        self.touches.append(ids)
        return super().touch(ids, at)

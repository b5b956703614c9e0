"""FaissBackend behaviour beyond the conformance suite: search paths, upkeep, options."""

from __future__ import annotations

import sys

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import BackendUnavailableError, ValidationError
from agent_engine.memory._vector_rows import RowIndex, load_faiss
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.conformance import make_item

DIM = 32


def _corpus(n: int):
    rng = np.random.default_rng(0)
    return [
        make_item(
            i,
            embedding=rng.standard_normal(DIM).astype(np.float32),
            namespace=f"ns-{i % 3}",
            importance=0.9 if i % 97 == 0 else 0.1,
        )
        for i in range(n)
    ]


def _oracle(items, query, k, predicate):
    matrix = np.vstack([i.embedding / np.linalg.norm(i.embedding) for i in items])
    scores = matrix @ (query / np.linalg.norm(query))
    ranked = sorted(
        (pair for pair in zip(scores, items, strict=True) if predicate(pair[1])),
        key=lambda pair: (-pair[0], pair[1].id),
    )
    return [item.id for _, item in ranked[:k]]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
@pytest.mark.parametrize("walk_limit", [8, 16_384])
def test_selective_filters_are_exact(kind, walk_limit):
    """A filter matching ~1% of a namespace gives the exact top-k, walked or via the store."""
    items = _corpus(3000)
    backend = FaissBackend(dim=DIM, index=kind, exact_below=1, walk_limit=walk_limit)
    backend.add_many(items)
    query = np.random.default_rng(1).standard_normal(DIM)
    filters = {"namespace": "ns-1", "importance": {"$gt": 0.5}}
    hits = backend.search(query, k=5, filters=filters)
    want = _oracle(items, query, 5, lambda i: i.namespace == "ns-1" and i.importance > 0.5)
    assert [hit.item.id for hit in hits] == want


def test_hnsw_recall_without_filters():
    """Unscoped HNSW search agrees with exact search on nearly all of the top 10."""
    items = _corpus(3000)
    backend = FaissBackend(dim=DIM, index="hnsw", exact_below=1, ef_search=128)
    backend.add_many(items)
    rng = np.random.default_rng(2)
    overlap = 0
    for _ in range(20):
        query = rng.standard_normal(DIM)
        got = {hit.item.id for hit in backend.search(query, k=10)}
        overlap += len(got & set(_oracle(items, query, 10, lambda _: True)))
    assert overlap / 200 >= 0.9


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_dead_rows_are_compacted_and_never_returned(kind):
    """Updates and deletes leave tombstones; past a threshold the index is rebuilt smaller."""
    items = _corpus(1500)
    backend = FaissBackend(dim=DIM, index=kind, exact_below=1)
    backend.add_many(items)
    doomed = [item.id for item in items[:1400]]
    backend.delete_many(doomed)
    rows = backend._rows
    assert rows is not None
    assert rows.live == 100
    assert rows.size < 1500  # compacted once dead rows outnumbered live ones past the floor
    hits = backend.search(items[5].embedding, k=100)
    assert len(hits) == 100
    assert not {hit.item.id for hit in hits} & set(doomed)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_deleted_row_keeps_no_id_and_a_flat_row_no_vector(kind, tmp_path):
    """A delete blanks its row at once; a saved file keeps HNSW's copy of the vector only."""
    items = _corpus(40)
    backend = FaissBackend(dim=DIM, index=kind, index_path=tmp_path / "v.faiss")
    backend.add_many(items)
    row = backend._rows.row_of[items[3].id]
    backend.delete(items[3].id)
    assert backend._rows.ids[row] == ""
    assert backend._rows.namespace_of_row[row] == ""
    vector = items[3].embedding / np.linalg.norm(items[3].embedding)
    assert np.array_equal(backend._rows.vectors()[row], vector) == (kind == "hnsw")
    backend.save()
    reloaded = RowIndex.load(tmp_path / "v.faiss", kind, 48, 200)
    assert reloaded.ids[row] == ""
    assert reloaded.namespace_of_row[row] == ""
    assert len(backend.search(items[3].embedding, k=40)) == 39


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_erase_leaves_no_dead_vector_and_saves(kind, tmp_path):
    """After erase the index and its saved file hold neither the items' ids nor vectors."""
    items = _corpus(40)
    backend = FaissBackend(dim=DIM, index=kind, index_path=tmp_path / "v.faiss")
    backend.add_many(items)
    backend.save()
    assert backend.erase([items[3].id, items[4].id]) == 2
    vectors = [item.embedding / np.linalg.norm(item.embedding) for item in items[3:5]]
    for rows in (backend._rows, RowIndex.load(tmp_path / "v.faiss", kind, 48, 200)):
        assert rows.live == 38
        assert not {items[3].id, items[4].id} & set(rows.ids)
        stored = rows.vectors()
        assert not any(np.isclose(stored, vector).all(axis=1).any() for vector in vectors)
    assert len(backend.search(items[3].embedding, k=40)) == 38


def test_hnsw_erase_zeroes_dead_vectors_in_place_and_keeps_the_graph(tmp_path):
    """An HNSW erase zeroes every dead row's vector and leaves the rest of the index as it was.

    Dead rows of plain deletes and of re-embedded items are zeroed too: they may be earlier
    vectors of an erased item. The graph is not rebuilt: its neighbour lists and the live
    vectors are the same, in memory and in the saved file.
    """
    faiss = load_faiss()
    items = _corpus(200)
    backend = FaissBackend(dim=DIM, index="hnsw", index_path=tmp_path / "v.faiss")
    backend.add_many(items)
    rows = backend._rows
    backend.delete(items[7].id)
    backend.update(attrs.evolve(items[8], embedding=items[9].embedding))
    dead = [rows.row_of.get(item.id, -1) for item in items[3:5]]
    neighbours = faiss.vector_to_array(rows.index.hnsw.neighbors).copy()
    vectors = rows.vectors().copy()

    assert backend.erase([items[3].id, items[4].id]) == 2

    assert backend._rows is rows
    for index in (rows, RowIndex.load(tmp_path / "v.faiss", "hnsw", 48, 200)):
        assert index.dead == 4
        dead_rows = index.dead_rows()
        assert set(dead) < set(dead_rows.tolist())
        assert np.array_equal(faiss.vector_to_array(index.index.hnsw.neighbors), neighbours)
        assert not index.vectors()[dead_rows].any()
        live = np.flatnonzero(index.alive)
        assert np.array_equal(index.vectors()[live], vectors[live])
        assert {index.ids[r] for r in dead_rows} == {index.namespace_of_row[r] for r in dead_rows}
        assert {index.ids[r] for r in dead_rows} == {""}


def test_hnsw_search_after_erase_finds_the_remaining_items():
    """With a third of the graph's nodes erased (zeroed), HNSW search still ranks the rest well.

    Scoped searches under ``exact_below`` stay exact; unscoped ones keep the recall of a
    graph without erasures and never return an erased item.
    """
    items = _corpus(3000)
    backend = FaissBackend(dim=DIM, index="hnsw", exact_below=1, ef_search=128)
    backend.add_many(items)
    erased = {item.id for item in items[::3]}
    backend.erase(sorted(erased))
    assert backend._rows.dead == len(erased)  # not compacted: the zeroed nodes are searched
    remaining = [item for item in items if item.id not in erased]
    rng = np.random.default_rng(2)
    overlap = 0
    for _ in range(20):
        query = rng.standard_normal(DIM)
        got = [hit.item.id for hit in backend.search(query, k=10)]
        assert not set(got) & erased
        overlap += len(set(got) & set(_oracle(remaining, query, 10, lambda _: True)))
    assert overlap / 200 >= 0.9
    backend.exact_below = 20_000
    query = rng.standard_normal(DIM)
    hits = backend.search(query, k=10, filters={"namespace": "ns-1"})
    want = _oracle(remaining, query, 10, lambda i: i.namespace == "ns-1")
    assert [hit.item.id for hit in hits] == want


def test_scoped_exact_search_over_batched_namespaces():
    """Namespaces written in long batches (scored run by run) rank exactly, holes included."""
    rng = np.random.default_rng(3)
    items = [
        make_item(
            i,
            embedding=rng.standard_normal(DIM).astype(np.float32),
            namespace=f"ns-{(i // 700) % 2}",
        )
        for i in range(2800)
    ]
    backend = FaissBackend(dim=DIM, exact_below=1)
    backend.add_many(items)
    doomed = {items[n].id for n in (3, 700, 701, 1405, 2799)}  # holes split runs
    backend.delete_many(sorted(doomed))
    live = [item for item in items if item.id not in doomed]
    for seed in range(5):
        query = rng.standard_normal(DIM)
        for namespace in ("ns-0", "ns-1"):
            hits = backend.search(query, k=25, filters={"namespace": namespace})
            want = _oracle(live, query, 25, lambda i, ns=namespace: i.namespace == ns)
            assert [hit.item.id for hit in hits] == want, (seed, namespace)
            scores = [hit.score for hit in hits]
            assert scores == sorted(scores, reverse=True)


def test_namespace_moves_follow_updates():
    """An item moved to another namespace is found there, and no longer in the old one."""
    backend = FaissBackend(dim=DIM)
    items = _corpus(30)
    backend.add_many(items)
    moved = attrs.evolve(items[0], namespace="elsewhere")
    backend.update(moved)
    assert [
        h.item.id
        for h in backend.search(items[0].embedding, k=1, filters={"namespace": "elsewhere"})
    ] == [items[0].id]
    assert items[0].id not in {
        h.item.id for h in backend.search(items[0].embedding, k=30, filters={"namespace": "ns-0"})
    }


def test_default_store_keeps_items_in_memory():
    """Made without a store, the backend gets a fresh in-memory one with its embedder."""
    embedder = HashingEmbedder(dim=DIM)
    backend = FaissBackend(embedder=embedder)
    assert isinstance(backend.store, InMemoryBackend)
    assert backend.store.embedder is embedder
    backend.add(make_item(1))
    assert backend.store.get("item-00001") is not None
    assert FaissBackend(embedder=embedder).store is not backend.store


def test_store_is_the_record_of_truth():
    """Items live in the given store; the backend exposes the store's journal."""
    store = InMemoryBackend(embedder=HashingEmbedder(dim=DIM))
    backend = FaissBackend(store, embedder=HashingEmbedder(dim=DIM))
    backend.add(make_item(1))
    assert store.get("item-00001") is not None
    assert backend.audit is store.audit


@pytest.mark.parametrize(
    "options",
    [{"index": "ivf"}, {"hnsw_m": 0}, {"ef_search": True}, {"walk_limit": "many"}],
)
def test_bad_options_are_refused(options):
    """A misconfigured backend is a ValidationError naming the option."""
    with pytest.raises(ValidationError) as info:
        FaissBackend(dim=DIM, **options)
    assert info.value.field == next(iter(options))


def test_missing_faiss_says_how_to_install(monkeypatch):
    """Without faiss-cpu installed, construction fails with the install command."""
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(BackendUnavailableError, match=r"agent-engine\[faiss\]"):
        FaissBackend(dim=DIM)


def test_index_holds_the_vectors_the_store_holds():
    """A store that embeds by itself: the index ranks by the store's vectors, not none/old."""
    store = InMemoryBackend(embedder=HashingEmbedder(dim=DIM))
    backend = FaissBackend(store)
    backend.add(make_item(1, text="alpha beta gamma"))
    backend.add(make_item(2, text="delta epsilon"))
    query = store.get("item-00001")
    assert query is not None
    assert [h.item.id for h in backend.search(query.embedding, k=1)] == ["item-00001"]
    backend.update(attrs.evolve(query, text="zeta eta theta"))
    fresh = store.get("item-00001")
    assert fresh is not None
    hits = backend.search(fresh.embedding, k=1)
    assert hits[0].item.id == "item-00001"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "move", "search"]),
        st.integers(0, 59),
        st.sampled_from(["ns-a", "ns-b", "ns-c"]),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_kept_namespace_rows_and_selectors_follow_every_write(ops):
    """Rows and selectors kept between searches equal a recount from the writes, after any mix.

    Writes between searches update them in place (new rows extend the sorted rows, removals
    and moves are applied at the next search, bitmap bits flip); a mistake would let a search
    see another namespace's rows or miss its own.
    """
    rows = RowIndex("hnsw", 4, hnsw_m=8, ef_construction=16)
    rng = np.random.default_rng(1)
    for op, n, namespace in ops:
        item_id = f"item-{n}"
        if op == "add":
            rows.add([(item_id, namespace, rng.standard_normal(4).astype(np.float32))])
        elif op == "remove":
            rows.remove(item_id)
        elif op == "move" and item_id in rows.row_of:
            rows.move(item_id, namespace)
        for name in ("ns-a", "ns-b", "ns-c"):
            if op == "search" or name == namespace:
                expected = sorted(rows.ns_rows.get(name, ()))
                assert rows.namespace_rows(name).tolist() == expected
                selector = rows.namespace_selector(name)
                members = [row for row in range(rows.size) if selector.is_member(row)]
                assert members == expected


class _FlushFails(SQLAlchemyBackend):
    """A SQLite store whose post-erase flush fails, as when a reader holds its log."""

    def _flush_erased(self) -> None:
        raise BackendUnavailableError("a reader holds the write-ahead log")


class TestEraseWhoseFlushFails:
    def test_nothing_erased_stays_searchable(self, tmp_path):
        """The erase committed, then the flush failed: the error reaches the caller, and
        neither the vector index, its file nor the lexical index still holds the item."""
        embedder = HashingEmbedder(dim=32)
        store = _FlushFails(f"sqlite:///{tmp_path / 'memory.db'}", embedder=embedder)
        path = tmp_path / "vectors.faiss"
        with FaissBackend(store, embedder=embedder, index_path=path) as backend:
            items = [make_item(n, text=f"zebra number {n}") for n in range(3)]
            backend.add_many(items)
            with pytest.raises(BackendUnavailableError):
                backend.erase([items[0].id])
            assert backend.get(items[0].id) is None
            assert items[0].id not in {h.item.id for h in backend.search("zebra number 0", k=3)}
            lexical = backend.lexical_search("zebra number 0", k=3)
            assert items[0].id not in {h.item.id for h in lexical}
        saved = path.read_bytes()  # as closing left it
        assert items[1].id.encode("utf-32-le") in saved
        assert items[0].id.encode("utf-32-le") not in saved

"""Lexical indexes follow writes made through other backend objects on the same database.

Each test opens two backends on one store, as two processes would: ``reader`` searches
(through an in-process BM25 index, which SQLite saves in index files, or in the database by
PostgreSQL's full text), ``writer`` changes the scope without changing its item count, and
the reader's next lexical search must see the change.
"""

from __future__ import annotations

import random

import attrs
import pytest
import sqlalchemy as sa

from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.bm25 import LexicalIndex

SCOPE = {"namespace": "project:a", "tier": "project"}


def _item(item_id, text, namespace="project:a"):
    return ContextItem.create("note", text, id=item_id, namespace=namespace, tier=Tier.PROJECT)


READERS = {
    "default": {},
    "in-process": {"fulltext": False, "indexed": False},
    "fulltext": {"fulltext": True},
}
"""How the reader searches text: the default (an in-process BM25 index following the scope
log on PostgreSQL, the index files on SQLite), an in-process index on both, or PostgreSQL's
full text (``fulltext`` and ``indexed`` each concern one dialect, ignored by the other)."""


@pytest.fixture(params=list(READERS))
def pair(sql_url, request):
    """A reader and a writer on one store holding three items of one scope."""
    with (
        SQLAlchemyBackend(sql_url) as writer,
        SQLAlchemyBackend(sql_url, **READERS[request.param]) as reader,
    ):
        writer.add_many(
            [
                _item("alpha", "postgres migrations run in ci"),
                _item("beta", "the css build uses modules"),
                _item("gamma", "deploys happen on tuesdays"),
            ]
        )
        yield reader, writer


def _found(backend, query):
    return [hit.item.id for hit in backend.lexical_search(query, k=5, filters=SCOPE)]


def _scored(backend, query):
    hits = backend.lexical_search(query, k=50, filters=SCOPE)
    return [(hit.item.id, round(hit.score, 9)) for hit in hits]


class TestLexicalFreshness:
    def test_delete_one_add_one_is_seen(self, pair):
        """Same count, different items: the reader ranks the new item and drops the old."""
        reader, writer = pair
        assert _found(reader, "postgres") == ["alpha"]
        writer.delete("alpha")
        writer.add(_item("delta", "postgres backups run nightly"))
        assert _found(reader, "postgres") == ["delta"]

    def test_an_edited_text_is_seen(self, pair):
        """An update that changes only a text moves the reader's ranking."""
        reader, writer = pair
        assert _found(reader, "kubernetes") == []
        beta = writer.get("beta")
        writer.update(attrs.evolve(beta, text="kubernetes autoscaling notes"))
        assert _found(reader, "kubernetes") == ["beta"]
        assert _found(reader, "css") == []

    def test_a_clear_and_refill_is_seen(self, pair):
        """Clearing the scope and adding as many items again is seen."""
        reader, writer = pair
        assert _found(reader, "tuesdays") == ["gamma"]
        writer.clear(SCOPE)
        writer.add_many([_item(f"new{n}", f"fresh note {n} about fridays") for n in range(3)])
        assert _found(reader, "tuesdays") == []
        assert sorted(_found(reader, "fridays")) == ["new0", "new1", "new2"]

    def test_a_move_to_another_scope_is_seen_in_both(self, pair):
        """An item moved to another namespace leaves one index and joins the other."""
        reader, writer = pair
        other = {"namespace": "project:b", "tier": "project"}
        writer.add(_item("far", "unrelated words", namespace="project:b"))
        assert _found(reader, "postgres") == ["alpha"]
        assert reader.lexical_search("postgres", k=5, filters=other) == []
        writer.update(attrs.evolve(writer.get("alpha"), namespace="project:b"))
        writer.update(attrs.evolve(writer.get("far"), namespace="project:a"))
        assert _found(reader, "postgres") == []
        assert [h.item.id for h in reader.lexical_search("postgres", k=5, filters=other)] == [
            "alpha"
        ]

    def test_own_writes_keep_the_index_and_others_replace_it(self, pair):
        """The reader's own writes update its index in place; so do another writer's.

        Rebuilding after each write would cost every context build a scan of the scope;
        keeping it unchanged after another's would be the staleness this guards against.
        SQLite's index files follow the change log; an in-process index follows the scope
        log: either way another writer's changes are taken in place.
        """
        reader, writer = pair
        if reader.fulltext:  # the database's full-text search: nothing held in the process
            assert not isinstance(reader.lexical_index(SCOPE), LexicalIndex)
            writer.add(_item("theirs", "written by the writer"))
            assert _found(reader, "writer") == ["theirs"]
            return
        index = reader.lexical_index(SCOPE)
        reader.add(_item("own", "written by the reader"))
        reader.delete("beta")
        reader.update(attrs.evolve(reader.get("gamma"), text="edited by the reader"))
        assert reader.lexical_index(SCOPE) is index
        assert "own" in index
        assert "beta" not in index
        writer.touch(["alpha"], reader.get("alpha").timestamp)
        assert reader.lexical_index(SCOPE) is index
        writer.add(_item("theirs", "written by the writer"))
        assert reader.lexical_index(SCOPE) is index
        assert "theirs" in index
        assert "own" in index

    def test_a_caught_up_index_ranks_as_a_fresh_one(self, pair, sql_url):
        """After another writer's adds, edits, moves, deletes and clears, interleaved with the
        reader's searches, the reader ranks every query as a backend opened afresh does."""
        reader, writer = pair
        rng = random.Random(7)
        words = [
            "postgres",
            "css",
            "deploy",
            "tuesday",
            "kubernetes",
            "cache",
            "retry",
            "flaky",
            "nightly",
        ]
        queries = ["postgres deploy", "css cache", "flaky retry nightly", "kubernetes"]
        for step in range(30):
            stored = [item.id for item in writer.query(SCOPE, limit=None)]
            action = rng.choice(["add", "add", "edit", "delete", "move", "clear"])
            if action == "add" or not stored:
                text = " ".join(rng.choices(words, k=4))
                writer.add_many([_item(f"s{step}-{n}", text) for n in range(rng.randint(1, 3))])
            elif action == "edit":
                item = writer.get(rng.choice(stored))
                writer.update(attrs.evolve(item, text=" ".join(rng.choices(words, k=5))))
            elif action == "delete":
                writer.delete(rng.choice(stored))
            elif action == "move":
                writer.update(attrs.evolve(writer.get(rng.choice(stored)), namespace="project:b"))
            elif step % 10 == 0:
                writer.clear(SCOPE)
            with SQLAlchemyBackend(sql_url, fulltext=reader.fulltext, indexed=False) as fresh:
                for query in queries:
                    assert _scored(reader, query) == _scored(fresh, query), (step, action)

    def test_an_erase_by_another_writer_rebuilds_and_leaves_no_trace(self, pair):
        """An erased id is deleted from the scope log, so a follower cannot learn it from
        there: the mark the erase leaves makes it rebuild, and the item is gone from it."""
        reader, writer = pair
        assert _found(reader, "postgres") == ["alpha"]
        writer.erase(["alpha"])
        assert _found(reader, "postgres") == []
        if not reader.fulltext:
            assert "alpha" not in reader.lexical_index(SCOPE)
        with writer.engine.connect() as connection:
            logged = connection.execute(sa.text("SELECT item_id FROM ae_scope_log")).scalars()
            assert "alpha" not in set(logged)

    def test_a_faiss_backend_sees_other_writers_through_its_store(self, pair, sql_url):
        """FAISS answers lexical search from its record store, which follows the counters."""
        _, writer = pair
        with FaissBackend(SQLAlchemyBackend(sql_url)) as reader:
            assert _found(reader, "postgres") == ["alpha"]
            writer.delete("alpha")
            writer.add(_item("delta", "postgres backups run nightly"))
            assert _found(reader, "postgres") == ["delta"]

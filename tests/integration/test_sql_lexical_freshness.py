"""Lexical indexes follow writes made through other backend objects on the same database.

Each test opens two backends on one store, as two processes would: ``reader`` searches (on
SQLite it builds its BM25 index; PostgreSQL searches in the database), ``writer`` changes the
scope without changing its item count, and the reader's next lexical search must see the
change.
"""

from __future__ import annotations

import attrs
import pytest

from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.bm25 import LexicalIndex

SCOPE = {"namespace": "project:a", "tier": "project"}


def _item(item_id, text, namespace="project:a"):
    return ContextItem.create("note", text, id=item_id, namespace=namespace, tier=Tier.PROJECT)


@pytest.fixture(params=[True, False], ids=["fulltext", "in-process"])
def pair(sql_url, request):
    """A reader and a writer on one store holding three items of one scope.

    On PostgreSQL the reader searches text in the database, or (``fulltext=False``) with an
    in-process BM25 index; on SQLite the option changes nothing.
    """
    with (
        SQLAlchemyBackend(sql_url) as writer,
        SQLAlchemyBackend(sql_url, fulltext=request.param) as reader,
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
        """The reader's own writes update its index in place; another writer's are seen too.

        Rebuilding after each of its own writes would cost every context build a scan of
        the scope; keeping it unchanged after another's would be the staleness this guards
        against. SQLite's index follows the change log, so it takes another writer's changes
        in place; elsewhere the scope's counter moved, and the index is rebuilt.
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
        rebuilt = reader.lexical_index(SCOPE)
        assert (rebuilt is index) is (reader._files is not None)
        assert "theirs" in rebuilt
        assert "own" in rebuilt

    def test_a_faiss_backend_sees_other_writers_through_its_store(self, pair, sql_url):
        """FAISS answers lexical search from its record store, which follows the counters."""
        _, writer = pair
        with FaissBackend(SQLAlchemyBackend(sql_url)) as reader:
            assert _found(reader, "postgres") == ["alpha"]
            writer.delete("alpha")
            writer.add(_item("delta", "postgres backups run nightly"))
            assert _found(reader, "postgres") == ["delta"]

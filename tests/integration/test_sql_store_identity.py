"""A SQL store records which embedder made its vectors, refuses others, and re-embeds safely."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import sqlalchemy as sa

from agent_engine.embeddings import EmbedderIdentity, HashingEmbedder
from agent_engine.errors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    EmbeddingError,
    ReembedRequiredError,
)
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import ContextItem
from tests.integration.conftest import SQL_KINDS, empty_database

OLD = HashingEmbedder(dim=64)
NEW = HashingEmbedder(dim=32)
SAME_SIZE = HashingEmbedder(dim=64, bigrams=False)
TEXTS = [f"memory {n} about topic {n % 5}" for n in range(20)]


@pytest.fixture(params=SQL_KINDS)
def sql_url(request, tmp_path):
    """An empty database of each kind, the PostgreSQL server with pgvector included."""
    with empty_database(request, request.param, tmp_path) as url:
        yield url


def _fill(url, embedder=OLD):
    with SQLAlchemyBackend(url, embedder=embedder) as backend:
        backend.add_many(
            ContextItem.create("note", text, id=f"m{n:02d}", namespace="project:a")
            for n, text in enumerate(TEXTS)
        )


class _Counting:
    """An embedder that counts the texts it embeds (and may fail after some)."""

    def __init__(self, inner, fail_after=None):
        self.inner = inner
        self.embedded = 0
        self.fail_after = fail_after

    @property
    def name(self):
        return self.inner.name

    @property
    def dim(self):
        return self.inner.dim

    def embed(self, texts):
        if self.fail_after is not None and self.embedded + len(texts) > self.fail_after:
            raise EmbeddingError("model crashed")
        self.embedded += len(texts)
        return self.inner.embed(texts)


class TestIdentity:
    def test_another_dimension_is_refused_on_open(self, sql_url):
        """A store made by one embedder refuses one of another size, naming both and the fix."""
        _fill(sql_url)
        with pytest.raises(DimensionMismatchError) as raised:
            SQLAlchemyBackend(sql_url, embedder=NEW)
        message = str(raised.value)
        assert "hashing-64-bigrams (64 dimensions)" in message
        assert "hashing-32-bigrams (32 dimensions)" in message
        assert "agent-engine db reembed" in message
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.count() == len(TEXTS)
            assert backend.stored_identity() == EmbedderIdentity.of(OLD)

    def test_another_model_of_the_same_size_is_refused(self, sql_url):
        """Same dimension, other model: EmbedderMismatchError carries both identities."""
        _fill(sql_url)
        with pytest.raises(EmbedderMismatchError) as raised:
            SQLAlchemyBackend(sql_url, embedder=SAME_SIZE)
        assert raised.value.stored == EmbedderIdentity.of(OLD)
        assert raised.value.given == EmbedderIdentity.of(SAME_SIZE)

    def test_a_vectors_only_backend_takes_the_stores_size(self, sql_url):
        """Without an embedder, vectors of another size are refused on write and on search."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            with pytest.raises(DimensionMismatchError, match="hashing-64-bigrams"):
                backend.add(ContextItem("x", "note", "short", embedding=[1.0] * 32))
            with pytest.raises(DimensionMismatchError, match="hashing-64-bigrams"):
                backend.search([1.0] * 32)
            assert backend.get("x") is None
            hits = backend.search(OLD.embed([TEXTS[3]])[0], k=1)
            assert hits[0].item.id == "m03"

    def test_a_store_without_vectors_takes_any_embedder(self, sql_url):
        """Once every vector is gone, the next embedder is recorded instead."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.clear()
        with SQLAlchemyBackend(sql_url, embedder=NEW) as backend:
            backend.add(ContextItem.create("note", "fresh start", id="n"))
            assert backend.stored_identity() == EmbedderIdentity.of(NEW)
            assert backend.search("fresh start", k=1)[0].item.id == "n"

    def test_the_first_embedder_names_an_unnamed_store(self, sql_url):
        """Vectors given by a caller record a size; the first embedder to write names it."""
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(ContextItem("v", "note", "given", embedding=OLD.embed(["given"])[0]))
            assert backend.stored_identity() == EmbedderIdentity(None, 64)
        with SQLAlchemyBackend(sql_url, embedder=OLD) as backend:
            assert backend.search("given", k=1)[0].item.id == "v"
            backend.add(ContextItem.create("note", "named now", id="w"))
            assert backend.stored_identity() == EmbedderIdentity.of(OLD)
        with pytest.raises(EmbedderMismatchError):
            SQLAlchemyBackend(sql_url, embedder=SAME_SIZE)

    def test_a_reembedding_by_another_process_is_seen(self, sql_url):
        """An open backend whose store was moved to another embedder refuses to mix them."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url, embedder=OLD) as stale, SQLAlchemyBackend(sql_url) as other:
            assert stale.search(TEXTS[0], k=1)[0].item.id == "m00"
            assert other.reembed(NEW) == len(TEXTS)
            with pytest.raises(DimensionMismatchError, match="hashing-32-bigrams"):
                stale.search(TEXTS[0], k=1)
            with pytest.raises(DimensionMismatchError):
                stale.add(ContextItem.create("note", "late", id="late"))
            assert stale.get("late") is None
            assert other.search(TEXTS[0], k=1)[0].item.id == "m00"


class TestReembed:
    def test_reembed_records_the_new_embedder(self, sql_url):
        """After reembed a new backend opens with the new embedder and finds items by it."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.reembed(NEW, batch_size=6) == len(TEXTS)
        with pytest.raises(DimensionMismatchError):
            SQLAlchemyBackend(sql_url, embedder=OLD)
        with SQLAlchemyBackend(sql_url, embedder=NEW) as backend:
            assert backend.stored_identity() == EmbedderIdentity.of(NEW)
            assert backend.search(TEXTS[7], k=1)[0].item.id == "m07"

    def test_an_interrupted_reembed_refuses_search_then_resumes(self, sql_url):
        """Half-way, search and vector writes are refused; the next run embeds only the rest."""
        _fill(sql_url)
        failing = _Counting(NEW, fail_after=12)
        with SQLAlchemyBackend(sql_url) as backend, pytest.raises(EmbeddingError):
            backend.reembed(failing, batch_size=5)
        assert failing.embedded == 10
        with SQLAlchemyBackend(sql_url) as backend:
            with pytest.raises(ReembedRequiredError, match="agent-engine db reembed") as raised:
                backend.search([1.0] * 32)
            assert raised.value.target == EmbedderIdentity.of(NEW)
            with pytest.raises(ReembedRequiredError):
                backend.add(ContextItem("x", "note", "late", embedding=[1.0] * 32))
            assert backend.count() == len(TEXTS)
            assert [hit.item.id for hit in backend.lexical_search("memory 4", k=1)] == ["m04"]
            resumed = _Counting(NEW)
            assert backend.reembed(resumed, batch_size=5) == len(TEXTS) - 10
            assert resumed.embedded == len(TEXTS) - 10
        with SQLAlchemyBackend(sql_url, embedder=NEW) as backend:
            assert backend.search(TEXTS[15], k=1)[0].item.id == "m15"
            assert backend.search(TEXTS[2], k=1)[0].item.id == "m02"

    def test_another_embedder_after_an_interruption_starts_over(self, sql_url):
        """Interrupted on the way to one embedder, a run with another re-embeds everything."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url) as backend, pytest.raises(EmbeddingError):
            backend.reembed(_Counting(NEW, fail_after=12), batch_size=5)
        other = _Counting(SAME_SIZE)
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.reembed(other, batch_size=5) == len(TEXTS)
            assert backend.stored_identity() == EmbedderIdentity.of(SAME_SIZE)

    def test_a_process_killed_mid_reembed_leaves_a_resumable_store(self, sql_url):
        """A crash between batches: the store refuses search, then a new run finishes the job."""
        _fill(sql_url)
        script = textwrap.dedent(
            f"""
            import os
            from agent_engine.embeddings import HashingEmbedder
            from agent_engine.memory.sql import SQLAlchemyBackend

            def crash(done, total):
                if done >= 10:
                    os._exit(3)

            backend = SQLAlchemyBackend({sql_url!r})
            backend.reembed(HashingEmbedder(dim=32), batch_size=5, progress=crash)
            """
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        killed = subprocess.run(  # noqa: S603 - our own interpreter and script
            [sys.executable, "-c", script], capture_output=True, text=True, check=False, env=env
        )
        assert killed.returncode == 3, killed.stderr
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.stored_identity() == EmbedderIdentity.of(OLD)
            with pytest.raises(ReembedRequiredError):
                backend.search([1.0] * 64)
            resumed = _Counting(NEW)
            backend.reembed(resumed, batch_size=5)
            assert resumed.embedded == len(TEXTS) - 10
        with SQLAlchemyBackend(sql_url, embedder=NEW) as backend:
            for n in (0, 9, 10, 19):
                assert backend.search(TEXTS[n], k=1)[0].item.id == f"m{n:02d}"


class TestIdentityReads:
    def test_search_reads_the_identity_in_one_transaction(self, sql_url):
        """A recorded identity checked against the store's vectors is read in one transaction."""
        _fill(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.clear()
        with SQLAlchemyBackend(sql_url, embedder=NEW) as backend:
            transactions: list[list[str]] = []

            def statement(_conn, _cursor, text, *_):
                if transactions:  # not a connection's setup, run before any transaction
                    transactions[-1].append(text)

            sa.event.listen(backend.engine, "begin", lambda _conn: transactions.append([]))
            sa.event.listen(backend.engine, "before_cursor_execute", statement)
            assert backend.search("anything", k=1) == []
            reads = [
                statements
                for statements in transactions
                # The index files' log position names ae_store_meta too; it is not the identity.
                if any("ae_store_meta" in s and "ae_changes" not in s for s in statements)
            ]
            # The search's own read, and on SQLite the index files' (opening the vector file):
            # each reads the identity and whether vectors remain in one transaction.
            assert reads
            for identity_reads in reads:
                assert any("embedding IS NOT NULL" in statement for statement in identity_reads)

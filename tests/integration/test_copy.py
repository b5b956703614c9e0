"""copy_store on real stores: SQLite to SQLite, SQLite to PostgreSQL, in-memory to SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from agent_engine import (
    ArchiveReason,
    AuditAction,
    AuditEvent,
    ContextItem,
    CopyIncompleteError,
    DimensionMismatchError,
    EmbedderMismatchError,
    EmbeddingError,
    HashingEmbedder,
    InMemoryBackend,
    Status,
    StoreNotEmptyError,
    Tier,
    ValidationError,
)
from agent_engine.memory import (
    Access,
    Checkpoint,
    Conflict,
    CopyReport,
    Fork,
    Grant,
    copy_store,
)
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import Origin
from agent_engine.testing.databases import postgres_schema

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _fill(store) -> None:
    """Items in several namespaces and tiers and every lifecycle state, events and conflicts."""
    old = ContextItem(
        id="p-01",
        kind="fact",
        text="Deploys happen on Mondays",
        tier=Tier.PROJECT,
        namespace="project:alpha",
        timestamp=T0,
        key="deploy-day",
        valid_from=T0,
        valid_to=T0 + timedelta(days=3),
        superseded_by="p-02",
        tags=("ops",),
    )
    items = [
        old,
        ContextItem(
            id="p-02",
            kind="fact",
            text="Deploys happen on Tuesdays",
            tier=Tier.PROJECT,
            namespace="project:alpha",
            timestamp=T0 + timedelta(days=3),
            key="deploy-day",
            version=2,
            valid_from=T0 + timedelta(days=3),
            tags=("ops", "deploy"),
            merged_from=(Origin(id="dup-1", source="chat", session="s1", timestamp=T0),),
        ),
        ContextItem(
            id="p-03",
            kind="decision",
            text="Prices are stored as integer cents",
            tier=Tier.PROJECT,
            namespace="project:alpha",
            status=Status.PINNED,
            importance=0.9,
            payload={"currency": "EUR", "precision": 2},
            timestamp=T0 + timedelta(hours=1),
        ),
        ContextItem(
            id="p-04",
            kind="note",
            text="The old billing service was retired",
            tier=Tier.PROJECT,
            namespace="project:beta",
            timestamp=T0 + timedelta(hours=2),
            archived_at=T0 + timedelta(days=9),
            archived_reason=ArchiveReason.EVICTED,
        ),
        ContextItem(
            id="p-05",
            kind="note",
            text="Billing always runs in UTC",
            tier=Tier.PROJECT,
            namespace="project:beta",
            timestamp=T0 + timedelta(hours=3),
        ),
        ContextItem(
            id="p-06",
            kind="note",
            text="Billing never runs in UTC",
            tier=Tier.PROJECT,
            namespace="project:beta",
            timestamp=T0 + timedelta(hours=4),
        ),
        ContextItem(
            id="g-01",
            kind="preference",
            text="The user prefers short answers",
            tier=Tier.GLOBAL,
            namespace="global:ann",
            timestamp=T0 + timedelta(hours=5),
        ),
        ContextItem(
            id="t-01",
            kind="step",
            text="Ran the test suite: 3 failures",
            tier=Tier.TASK,
            namespace="task:alpha:ann:t1",
            source="tool",
            session="run-1",
            timestamp=T0 + timedelta(hours=6),
            access_count=4,
            last_accessed_at=T0 + timedelta(hours=7),
        ),
    ]
    store.add_many(items)
    store.conflicts.record(
        [
            Conflict(
                item_a="p-05",
                item_b="p-06",
                tier=Tier.PROJECT,
                namespace="project:beta",
                reason="always/never",
                detected_at=T0 + timedelta(hours=4),
                id="c-01",
            )
        ]
    )
    for n, (item_id, action) in enumerate(
        [("p-01", AuditAction.ADD), ("p-02", AuditAction.SUPERSEDE), ("p-04", AuditAction.ARCHIVE)]
    ):
        store.audit.append(
            AuditEvent(
                action=action,
                tier=Tier.PROJECT,
                namespace="project:alpha",
                item_ids=(item_id,),
                detail={"n": n},
                at=T0 + timedelta(minutes=n),
                id=f"e-{n:02d}",
            )
        )
    store.aliases.add("project:alpha", "Bob", ["Robert", "Bobby"])
    store.aliases.add("project:beta", "k8s", ["kubernetes"])
    store.checkpoints.save(
        Checkpoint(namespace="project:beta", tier=Tier.PROJECT, items=3, created_at=T0), "saved"
    )
    for agent in ("scout", "coder"):
        store.grants.register("project:alpha", agent)
    store.grants.grant(Grant("project:alpha", "pool:alpha:notes", "scout", Access.WRITE, "app", T0))
    # An attached fork of the task, hiding its one item, and a detached one.
    store.lineage.record(
        Fork(
            namespace="task:alpha:ann:t2", tier=Tier.TASK, parent="task:alpha:ann:t1", forked_at=T0
        )
    )
    store.lineage.hide("task:alpha:ann:t2", Tier.TASK, ["t-01"])
    store.lineage.record(
        Fork(
            namespace="task:alpha:ann:t3",
            tier=Tier.TASK,
            parent="task:alpha:ann:t1",
            forked_at=T0 + timedelta(hours=8),
            checkpoint="cp-1",
            detached=True,
        )
    )
    # Two events of one instant: the journal's order breaks the tie by id.
    store.audit.append(
        AuditEvent(
            action=AuditAction.ADD,
            tier=Tier.TASK,
            namespace="task:alpha:ann:t1",
            item_ids=("t-01",),
            at=T0 + timedelta(minutes=1),
            id="e-10",
        )
    )


def _everything(store) -> list[ContextItem]:
    return store.query(None, limit=None, order_by="+id")


def _assert_same(source, target) -> None:
    """The target holds what the source holds: whole items, vectors, events, conflicts."""
    ours, theirs = _everything(source), _everything(target)
    assert theirs == ours
    for mine, copied in zip(ours, theirs, strict=True):
        assert (mine.embedding is None) == (copied.embedding is None)
        if mine.embedding is not None:
            np.testing.assert_array_equal(copied.embedding, mine.embedding)
    assert target.audit.events(limit=None) == source.audit.events(limit=None)
    assert target.conflicts.of_items(["p-05"], include_resolved=True) == (
        source.conflicts.of_items(["p-05"], include_resolved=True)
    )
    assert target.aliases.namespaces() == source.aliases.namespaces()
    for namespace in source.aliases.namespaces():
        assert target.aliases.of_namespace(namespace) == source.aliases.of_namespace(namespace)
    assert target.checkpoints.all() == source.checkpoints.all()
    for checkpoint in source.checkpoints.all():
        assert target.checkpoints.data(checkpoint.id) == source.checkpoints.data(checkpoint.id)
    assert target.grants.agents("project:alpha") == ["coder", "scout"]
    assert target.grants.of_pool("pool:alpha:notes") == source.grants.of_pool("pool:alpha:notes")
    assert target.lineage.all() == source.lineage.all()
    assert target.lineage.hidden("task:alpha:ann:t2", Tier.TASK) == {"t-01"}


@pytest.fixture
def embedder():
    return HashingEmbedder(dim=32)


@pytest.fixture
def sqlite_source(tmp_path, embedder):
    store = SQLAlchemyBackend(f"sqlite:///{tmp_path / 'source.db'}", embedder=embedder, create=True)
    _fill(store)
    yield store
    store.close()


@pytest.fixture
def sqlite_target(tmp_path):
    store = SQLAlchemyBackend(f"sqlite:///{tmp_path / 'target.db'}", create=True)
    yield store
    store.close()


@pytest.fixture
def postgres_target():
    """An empty schema of its own on the test server (fails under CI=true if unreachable)."""
    with postgres_schema() as url:
        store = SQLAlchemyBackend(url, create=True)
        try:
            yield store
        finally:
            store.close()


class TestCopyStore:
    def test_sqlite_to_sqlite(self, sqlite_source, sqlite_target, embedder):
        """Every item in every state, its vector, the journal and the conflict arrive whole."""
        seen: list[tuple[int, int]] = []
        report = copy_store(
            sqlite_source, sqlite_target, batch_size=3, progress=lambda *a: seen.append(a)
        )
        _assert_same(sqlite_source, sqlite_target)
        assert report == CopyReport(
            items=8,
            events=4,
            conflicts=1,
            aliases=3,
            checkpoints=1,
            scopes={
                ("global:ann", Tier.GLOBAL): 1,
                ("project:alpha", Tier.PROJECT): 3,
                ("project:beta", Tier.PROJECT): 3,
                ("task:alpha:ann:t1", Tier.TASK): 1,
            },
            states={"working": 6, "archived": 1, "history": 1},
            identity=sqlite_source.stored_identity(),
            verified=True,
            agents=2,
            grants=1,
            forks=2,
        )
        assert seen == [(0, 8), (3, 8), (6, 8), (8, 8)]
        # Opened without an embedder, the target records the vectors' size, not their name.
        assert sqlite_target.stored_identity().matches(sqlite_source.stored_identity())
        query = embedder.embed(["Prices are stored as integer cents"])[0]
        assert sqlite_target.search(query, k=1)[0].item.id == "p-03"

    def test_sqlite_to_postgresql(self, sqlite_source, postgres_target):
        """The move the command exists for: SQLite into a fresh PostgreSQL schema."""
        report = copy_store(sqlite_source, postgres_target, batch_size=2)
        _assert_same(sqlite_source, postgres_target)
        assert report.items == 8
        assert report.verified

    def test_a_target_opened_with_the_embedder_records_its_name(self, sqlite_source, tmp_path):
        """The target records the embedder it was opened with; no vector is remade."""
        url = f"sqlite:///{tmp_path / 'named.db'}"
        with SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=32), create=True) as target:
            copy_store(sqlite_source, target)
            _assert_same(sqlite_source, target)
            assert target.stored_identity() == sqlite_source.stored_identity()

    def test_in_memory_to_sqlite(self, sqlite_target, embedder):
        """A store that lives in the process can be saved to a file, journal included."""
        source = InMemoryBackend(embedder=embedder)
        _fill(source)
        copy_store(source, sqlite_target)
        _assert_same(source, sqlite_target)

    def test_thousands_of_items_in_small_batches(self, tmp_path, sqlite_target):
        """Keyset paging reaches every item, events of one instant included, in bounded pages."""
        source = SQLAlchemyBackend(f"sqlite:///{tmp_path / 'big.db'}", create=True)
        try:
            source.add_many(
                ContextItem(
                    id=f"i-{n:05d}",
                    kind="note",
                    text=f"note {n}",
                    namespace=f"project:p{n % 3}",
                    embedding=np.full(4, n + 1, dtype=np.float32),
                )
                for n in range(3000)
            )
            for n in range(250):
                source.audit.append(
                    AuditEvent(
                        action=AuditAction.ADD,
                        tier=Tier.PROJECT,
                        namespace="project:p0",
                        at=T0 + timedelta(seconds=n // 100),
                        id=f"e-{n:04d}",
                    )
                )
            seen: list[tuple[int, int]] = []
            report = copy_store(
                source, sqlite_target, batch_size=128, progress=lambda *a: seen.append(a)
            )
            assert report.items == 3000
            assert report.events == 250
            assert len(seen) == 1 + -(-3000 // 128)
            assert _everything(sqlite_target) == _everything(source)
            assert sqlite_target.audit.events(limit=None) == source.audit.events(limit=None)
        finally:
            source.close()


class TestRefusals:
    def test_a_target_that_holds_items_is_refused_untouched(self, sqlite_source, sqlite_target):
        """Copying into a filled store would mix two memories: refused, nothing written."""
        sqlite_target.add(ContextItem(id="x-1", kind="note", text="already here"))
        with pytest.raises(StoreNotEmptyError, match=r"target\.db") as caught:
            copy_store(sqlite_source, sqlite_target)
        assert caught.value.count == 1
        assert [item.id for item in _everything(sqlite_target)] == ["x-1"]
        assert sqlite_target.audit.count() == 0

    def test_a_target_that_kept_a_journal_is_refused(self, sqlite_source, sqlite_target):
        """Items cleared but history kept: the two journals would mix, so it is refused too."""
        sqlite_target.audit.append(
            AuditEvent(action=AuditAction.CLEAR, tier=Tier.PROJECT, namespace="project:old")
        )
        with pytest.raises(StoreNotEmptyError, match="1 journal events"):
            copy_store(sqlite_source, sqlite_target)
        assert sqlite_target.count() == 0
        assert sqlite_target.audit.count() == 1

    def test_a_target_that_holds_aliases_is_refused(self, sqlite_source, sqlite_target):
        """No items but a project's aliases: the two sets would mix, so it is refused."""
        sqlite_target.aliases.add("project:alpha", "db", ["database"])
        with pytest.raises(StoreNotEmptyError, match="aliases of 1 namespace"):
            copy_store(sqlite_source, sqlite_target)
        assert sqlite_target.aliases.of_namespace("project:alpha") == {"db": ("database",)}

    def test_a_target_with_registered_agents_is_refused(self, sqlite_source, sqlite_target):
        """No items but a project's agents: their grants would mix, so it is refused."""
        sqlite_target.grants.register("project:alpha", "scout")
        with pytest.raises(StoreNotEmptyError, match="registered agents"):
            copy_store(sqlite_source, sqlite_target)
        assert sqlite_target.grants.agents("project:alpha") == ["scout"]

    def test_a_target_with_forks_is_refused(self, sqlite_source, sqlite_target):
        """No items but forks: the source's would find their scopes taken, so it is refused."""
        fork = Fork(namespace="task:alpha:ann:t2", tier=Tier.TASK, parent="x", forked_at=T0)
        sqlite_target.lineage.record(fork)
        with pytest.raises(StoreNotEmptyError, match="forks"):
            copy_store(sqlite_source, sqlite_target)
        assert sqlite_target.lineage.all() == [fork]

    def test_a_target_that_loses_hidden_ids_fails_verification(self, sqlite_source, sqlite_target):
        """A fork that arrives without the ids it hides is a difference, not a copy."""

        class Forgetful:
            def __init__(self, inner):
                self._inner = inner

            def __getattr__(self, name):
                return getattr(self._inner, name)

            def hide(self, namespace, tier, item_ids):
                """Hides nothing."""

        sqlite_target._lineage_store = Forgetful(sqlite_target.lineage)
        with pytest.raises(CopyIncompleteError) as caught:
            copy_store(sqlite_source, sqlite_target)
        assert "hidden ids of forks: 0 in the target, 1 in the source" in caught.value.differences

    def test_the_source_itself_is_refused(self, sqlite_source):
        """A store is never its own target."""
        with pytest.raises(ValidationError, match="onto itself"):
            copy_store(sqlite_source, sqlite_source)

    def test_a_target_with_another_embedders_vectors_is_refused(self, sqlite_source, tmp_path):
        """A target bound to another embedder of the same size is refused before any write."""
        url = f"sqlite:///{tmp_path / 'other.db'}"
        other = SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=32, bigrams=False), create=True)
        try:
            with pytest.raises(EmbedderMismatchError):
                copy_store(sqlite_source, other)
            assert other.count() == 0
            assert other.audit.count() == 0
        finally:
            other.close()

    def test_a_target_of_another_dimension_is_refused(self, sqlite_source, tmp_path):
        """A target whose embedder makes vectors of another size is refused, nothing written."""
        other = SQLAlchemyBackend(
            f"sqlite:///{tmp_path / 'wide.db'}", embedder=HashingEmbedder(dim=64), create=True
        )
        try:
            with pytest.raises(DimensionMismatchError):
                copy_store(sqlite_source, other)
            assert other.count() == 0
        finally:
            other.close()

    @pytest.mark.parametrize("size", [0, -1, True, "10"])
    def test_a_bad_batch_size_is_refused(self, sqlite_source, sqlite_target, size):
        """batch_size is a positive integer."""
        with pytest.raises(ValidationError, match="batch_size"):
            copy_store(sqlite_source, sqlite_target, batch_size=size)
        assert sqlite_target.count() == 0

    def test_a_failure_half_way_says_the_target_is_incomplete(self, sqlite_target, tmp_path):
        """An error once writing began is reported as an incomplete copy, with its cause."""

        class BrokenModel:
            """An embedding model that fails (as a model server that went away would)."""

            name = "broken"
            dim = 4

            def embed(self, texts):
                raise EmbeddingError("the model is gone")

        source = InMemoryBackend()
        source.add_many(
            [
                ContextItem(id="a", kind="note", text="with a vector", embedding=np.ones(4)),
                ContextItem(id="b", kind="note", text="without one"),
            ]
        )
        url = f"sqlite:///{tmp_path / 'broken.db'}"
        with SQLAlchemyBackend(url, embedder=BrokenModel(), create=True) as target:
            with pytest.raises(CopyIncompleteError, match="incomplete") as caught:
                copy_store(source, target, batch_size=1)
            assert isinstance(caught.value.__cause__, EmbeddingError)
            assert [item.id for item in _everything(target)] == ["a"]
        assert len(_everything(source)) == 2

    def test_a_target_that_drops_items_fails_verification(self, sqlite_source, sqlite_target):
        """Counts that differ after the copy raise, saying the target is incomplete."""

        def lose_one(done: int, total: int) -> None:
            if done == 8:
                sqlite_target.delete("t-01")

        with pytest.raises(CopyIncompleteError, match="incomplete") as caught:
            copy_store(sqlite_source, sqlite_target, progress=lose_one)
        assert "items: 7 in the target, 8 in the source" in caught.value.differences
        assert sqlite_source.count() == 8

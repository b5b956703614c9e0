"""The SQL backend's read path: reused statements, pooled connections' settings, row decoding."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from agent_engine import ContextItem, SQLAlchemyBackend
from agent_engine.filters import Order, parse_filter, parse_order
from agent_engine.memory.sql._filters import select_items

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def backend(tmp_path):
    with SQLAlchemyBackend(f"sqlite:///{tmp_path / 'memory.db'}") as store:
        store.add_many(
            ContextItem(
                id=f"{namespace}-{n}",
                kind="note",
                text=f"note {n}",
                namespace=namespace,
                tags=("a", "b") if n % 2 else ("a",),
                importance=n / 10,
                timestamp=T0 + timedelta(minutes=n),
            )
            for namespace in ("p1", "p2")
            for n in range(10)
        )
        yield store


def test_a_repeated_filter_reuses_its_statement():
    order = parse_order("+importance")
    where = parse_filter({"namespace": "p1", "kind": "note"})
    first = select_items(where, order, 5, "sqlite")
    again = select_items(parse_filter({"namespace": "p1", "kind": "note"}), order, 5, "sqlite")
    other = select_items(parse_filter({"namespace": "p2", "kind": "note"}), order, 5, "sqlite")
    assert first is again
    assert other is not first
    assert select_items(where, order, 6, "sqlite") is not first
    assert select_items(where, order, 5, "postgresql") is not first


def test_reused_statements_answer_each_query_with_its_own_values(backend):
    for _ in range(2):
        for namespace in ("p1", "p2"):
            found = backend.query(
                {"namespace": namespace}, limit=3, order_by=Order.desc("importance")
            )
            assert [item.id for item in found] == [
                f"{namespace}-9",
                f"{namespace}-8",
                f"{namespace}-7",
            ]
        assert [i.id for i in backend.query({"importance": {"$gte": 0.85}}, limit=None)] == [
            "p1-9",
            "p2-9",
        ]


def test_decoded_rows_equal_what_was_stored(backend):
    stored = {item.id: item for item in backend.list_all()}
    assert stored["p1-3"].tags == ("a", "b")
    assert stored["p1-4"].tags == ("a",)
    assert stored["p1-3"].timestamp == T0 + timedelta(minutes=3)
    assert stored["p1-3"] == ContextItem(
        id="p1-3",
        kind="note",
        text="note 3",
        namespace="p1",
        tags=("a", "b"),
        importance=0.3,
        timestamp=T0 + timedelta(minutes=3),
    )


def test_file_connections_keep_a_large_page_cache(backend):
    """Reads of a big store are served from the connection's cache, not re-read per query."""
    with backend.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA cache_size").scalar_one() == -65536
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"


def test_connections_zero_what_they_free(backend):
    """secure_delete is on whatever SQLite's compiled default (off on many builds).

    Without it a deleted or updated row's bytes stay in the file's free space, and erasing
    the item later cannot reach the copies its earlier updates left behind.
    """
    with backend.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA secure_delete").scalar_one() == 1


@pytest.mark.parametrize(
    ("field", "index"),
    [
        ("fingerprint", "ix_ae_items_fingerprint"),
        ("superseded_by", "ix_ae_items_superseded_by"),
    ],
)
def test_exact_lookups_use_their_index_once_the_store_has_grown(tmp_path, field, index):
    """Writes keep SQLite's planner statistics current: a lookup by fingerprint or by
    successor within a large namespace reads its own index, not the whole namespace.

    Without statistics SQLite prefers the (namespace, timestamp) index, which spares the
    ORDER BY's sort and scans every item of the namespace.
    """
    path = tmp_path / "memory.db"
    with SQLAlchemyBackend(f"sqlite:///{path}") as store:
        for start in range(0, 3000, 1000):
            store.add_many(
                ContextItem(id=f"n-{n}", kind="note", text=f"note {n}", namespace="p")
                for n in range(start, start + 1000)
            )
        where = parse_filter({"namespace": "p", "tier": "project", field: {"$in": ["x", "y"]}})
        statement = select_items(where, parse_order("-timestamp"), None, "sqlite")
        sql = str(statement.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with sqlite3.connect(path) as raw:
        plan = " ".join(row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}"))
    assert index in plan, plan

"""Bulk insert and a filtered query on the SQL backend, beside in-memory and raw sqlite3.

    PYTHONPATH=. python benchmarks/bench_sql.py            # 100k rows (add --rows N to change)

Measured in one run, on the same items: ``add_many`` of all rows on a SQLite file, on
PostgreSQL (skipped when the server is unreachable) and in memory, with ``sqlite3``'s
``executemany`` of the same rows (already converted) into the same tables as the floor; then
the query tiers and the assembler issue most, namespace + kind ordered by importance with a
limit of 100, repeated over random namespace/kind pairs (p50/p95). Ratios are to the floor.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend, upgrade_database
from agent_engine.memory.sql._rows import item_row, tag_rows
from agent_engine.memory.sql._schema import items as items_table
from agent_engine.models import ContextItem

NAMESPACES = 10
KINDS = 5
QUERIES = 300
PG_URL = os.environ.get("AGENT_ENGINE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def make_items(count: int) -> list[ContextItem]:
    rng = np.random.default_rng(1)
    importance = rng.random(count)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    return [
        ContextItem(
            id=f"item-{n:07d}",
            kind=f"kind-{(n // NAMESPACES) % KINDS}",
            text=f"memory number {n} about topic {n % 97}",
            namespace=f"project:{n % NAMESPACES}",
            timestamp=start + timedelta(seconds=n),
            tags=(f"t{n % 7}",),
            importance=float(importance[n]),
        )
        for n in range(count)
    ]


def raw_sqlite_floor(rows: list[dict], tags: list[dict], folder: Path) -> float:
    """``sqlite3.executemany`` of the same rows into the same schema, one transaction."""
    path = folder / "raw.db"
    upgrade_database(f"sqlite:///{path}")
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    columns = list(rows[0])
    insert = (
        f"INSERT INTO ae_items ({', '.join(columns)}) "  # noqa: S608 - fixed names
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    values = [tuple(row[c] for c in columns) for row in rows]
    tag_values = [(t["item_id"], t["tag"]) for t in tags]
    began = time.perf_counter()
    connection.execute("BEGIN")
    connection.executemany(insert, values)
    connection.executemany("INSERT INTO ae_item_tags (item_id, tag) VALUES (?, ?)", tag_values)
    connection.execute("COMMIT")
    elapsed = time.perf_counter() - began
    connection.close()
    return elapsed


def timed_insert(backend: object, items: list[ContextItem]) -> float:
    began = time.perf_counter()
    backend.add_many(items)  # type: ignore[attr-defined]
    return time.perf_counter() - began


def query_latencies(backend: object) -> tuple[float, float, float]:
    """First (cold) query, then p50 and p95 after one untimed pass over every filter.

    The warm figures are a running agent's steady state: its tiers ask the same few filters
    on every step. The first query pays for reading pages into a new connection's cache.
    """
    began = time.perf_counter()
    backend.query({"namespace": "project:0", "kind": "kind-0"}, limit=100, order_by="-importance")  # type: ignore[attr-defined]
    first = (time.perf_counter() - began) * 1e3
    for namespace in range(NAMESPACES):
        for kind in range(KINDS):
            filters = {"namespace": f"project:{namespace}", "kind": f"kind-{kind}"}
            backend.query(filters, limit=100, order_by="-importance")  # type: ignore[attr-defined]
    rng = np.random.default_rng(2)
    latencies = []
    for _ in range(QUERIES):
        filters = {
            "namespace": f"project:{rng.integers(NAMESPACES)}",
            "kind": f"kind-{rng.integers(KINDS)}",
        }
        began = time.perf_counter()
        found = backend.query(filters, limit=100, order_by="-importance")  # type: ignore[attr-defined]
        latencies.append(time.perf_counter() - began)
        assert len(found) == 100
    latencies.sort()
    p95 = latencies[int(0.95 * len(latencies))]
    return first, statistics.median(latencies) * 1e3, p95 * 1e3


def pg_schema_url() -> tuple[str, sa.Engine, str] | None:
    admin = sa.create_engine(PG_URL, connect_args={"connect_timeout": 3})
    try:
        with admin.begin() as connection:
            schema = f"ae_bench_{os.getpid()}"
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except sa.exc.OperationalError as error:
        print(f"PostgreSQL skipped: {error.orig}")
        admin.dispose()
        return None
    return f"{PG_URL}?options=-csearch_path%3D{schema}", admin, schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    items = make_items(args.rows)
    rows = [item_row(item) for item in items]
    tags = tag_rows(items)
    results: list[tuple[str, float, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        floor = raw_sqlite_floor(rows, tags, folder)
        print(f"raw sqlite3.executemany: {args.rows / floor:,.0f} rows/s")

        with SQLAlchemyBackend(f"sqlite:///{folder / 'backend.db'}") as backend:
            seconds = timed_insert(backend, items)
            with backend.engine.begin() as connection:
                connection.exec_driver_sql("ANALYZE")
            results.append(("SQLite file", seconds, *query_latencies(backend)))

        pg = pg_schema_url()
        if pg is not None:
            url, admin, schema = pg
            try:
                with SQLAlchemyBackend(url) as backend:
                    seconds = timed_insert(backend, items)
                    with backend.engine.begin() as connection:
                        connection.exec_driver_sql(f"ANALYZE {items_table.name}")
                    results.append(("PostgreSQL", seconds, *query_latencies(backend)))
            finally:
                with admin.begin() as connection:
                    connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                admin.dispose()

        with InMemoryBackend() as backend:
            seconds = timed_insert(backend, items)
            results.append(("in-memory", seconds, *query_latencies(backend)))

    print(f"\n{args.rows:,} items; query: namespace + kind, by importance, limit 100\n")
    print("| store | add_many rows/s | vs raw sqlite3 | first query ms | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| raw sqlite3.executemany (floor) | {args.rows / floor:,.0f} | 1.00 | - | - | - |")
    for name, seconds, first, p50, p95 in results:
        print(
            f"| {name} | {args.rows / seconds:,.0f} | {floor / seconds:.2f} "
            f"| {first:.2f} | {p50:.2f} | {p95:.2f} |"
        )


if __name__ == "__main__":
    main()

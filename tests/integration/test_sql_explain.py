"""At 100k rows the main queries of tiers and the assembler are served by indexes.

The queries are compiled exactly as the backend builds them, and the planner of each dialect
is asked (``EXPLAIN``) how it runs them after ``ANALYZE``. Every item has two tags: one of
three areas (a third of the store each) and one of twenty topics.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import numpy as np
import pytest

from agent_engine.filters import Order, parse_filter, parse_order
from agent_engine.memory.sql import upgrade_database
from agent_engine.memory.sql._engine import create_engine
from agent_engine.memory.sql._filters import select_items
from agent_engine.memory.sql._rows import encode_time
from agent_engine.memory.sql._schema import item_tags, items
from agent_engine.testing.databases import postgres_schema

ROWS = 100_000
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _tags(n):
    return [f"area-{n % 3}", f"topic-{n % 20}"]


def _rows():
    rng = np.random.default_rng(7)
    importance = rng.random(ROWS)
    expiring = rng.random(ROWS) < 0.05
    base = encode_time(NOW)
    for n in range(ROWS):
        yield {
            "id": f"item-{n:06d}",
            "kind": f"kind-{n % 5}",
            "text": f"item {n}",
            "tier": "project",
            "namespace": f"project:{n % 10}",
            "source": "",
            "session": "",
            "timestamp": base - 1_000_000 * n,
            "tags": json.dumps(_tags(n)),
            "importance": float(importance[n]),
            "token_cost": None,
            "payload": "{}",
            "embedding": None,
            "status": "pinned" if n % 5000 == 0 else "confirmed",
            "access_count": 0,
            "last_accessed_at": None,
            "expires_at": base + 1_000_000 * (n % 1000) if expiring[n] else None,
            "provenance": None,
            "fingerprint": f"{n:032x}",
            "key": None,
            "version": 1,
            "valid_from": None,
            "valid_to": None,
            "superseded_by": None,
            "archived_at": None,
            "archived_reason": None,
            "merged_from": "[]",
        }


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(request, tmp_path_factory):
    """One database of 100k rows per dialect, shared by the module's tests."""
    if request.param == "sqlite":
        yield from _filled(f"sqlite:///{tmp_path_factory.mktemp('explain') / 'memory.db'}")
    else:
        with postgres_schema() as url:
            yield from _filled(url)


def _filled(url):
    upgrade_database(url)
    engine = create_engine(url)
    rows = list(_rows())
    tags = [{"item_id": row["id"], "tag": tag} for n, row in enumerate(rows) for tag in _tags(n)]
    with engine.begin() as connection:
        for start in range(0, ROWS, 10_000):
            connection.execute(items.insert(), rows[start : start + 10_000])
        for start in range(0, len(tags), 10_000):
            connection.execute(item_tags.insert(), tags[start : start + 10_000])
    with engine.begin() as connection:
        connection.exec_driver_sql("ANALYZE")
    yield engine
    engine.dispose()


def _plan(engine, filters, order_by, limit):
    query = select_items(parse_filter(filters), parse_order(order_by), limit, engine.dialect.name)
    sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(prefix + sql).all()
    return "\n".join(str(row[-1]) for row in rows)


WORKING = {"archived_at": None, "valid_to": None}
"""What a tier store adds to its default reads: the working set."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("filters", "order_by", "index"),
    [
        (
            {"namespace": "project:3", "kind": "kind-2", **WORKING},
            Order.desc("importance"),
            "ix_ae_items_namespace_kind_importance",
        ),
        (
            {"namespace": "project:3", **WORKING},
            Order.desc("timestamp"),
            # Either walks the namespace by time; the first skips an archive without reading it.
            ("ix_ae_items_namespace_archived_at_timestamp", "ix_ae_items_namespace_timestamp"),
        ),
        ({"namespace": "project:3", **WORKING}, "+importance", "ix_ae_items_namespace_importance"),
        (
            {"namespace": "project:3", "status": "pinned", **WORKING},
            Order.desc("importance"),
            "ix_ae_items_namespace_status_importance",
        ),
        ({"expires_at": {"$lte": NOW}}, "+expires_at", "ix_ae_items_expires_at"),
        ({"namespace": "project:3", "key": "slot"}, "+id", "ix_ae_items_namespace_key"),
        (
            {"superseded_by": {"$in": ["a", "b"]}},
            Order.desc("timestamp"),
            "ix_ae_items_superseded_by",
        ),
    ],
    ids=[
        "namespace-kind-by-importance",
        "working-set-by-time",
        "eviction",
        "pinned-by-importance",
        "expiry-sweep",
        "slot-holder",
        "history",
    ],
)
def test_main_queries_use_their_index(engine, filters, order_by, index):
    plan = _plan(engine, filters, order_by, 100)
    assert any(name in plan for name in ((index,) if isinstance(index, str) else index)), plan
    if engine.dialect.name == "sqlite":
        assert "SCAN ae_items\n" not in plan + "\n", plan


_TOPICS = [f"topic-{n}" for n in range(6)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("filters", "reads"),
    [
        pytest.param(
            {"namespace": "project:3", "tags": {"$all": ["area-0", "topic-3"]}}, 2, id="all-short"
        ),
        pytest.param({"namespace": "project:3", "tags": {"$all": _TOPICS}}, 1, id="all-long"),
        pytest.param(
            {"namespace": "project:3", "tags": {"$all": [f"t{n}" for n in range(1000)]}},
            1,
            id="all-at-the-limit",
        ),
        pytest.param({"namespace": "project:3", "tags": {"$in": _TOPICS}}, 1, id="in-long"),
        pytest.param({"namespace": "project:3", "tags": {"$nin": _TOPICS}}, 1, id="nin-long"),
        pytest.param(
            {"namespace": "project:3", "kind": {"$in": ["kind-1", "kind-2"]}}, 0, id="kind-in"
        ),
    ],
)
def test_list_filters_read_tags_a_bounded_number_of_times(engine, filters, reads):
    """A short tag list is a primary-key probe per tag; a long one (up to the language's limit
    of 1,000) is one read of the tag table, and no list makes the planner scan every item."""
    plan = _plan(engine, filters, Order.desc("timestamp"), 100)
    if engine.dialect.name == "sqlite":
        assert "SCAN ae_items\n" not in plan + "\n", plan
        tag_reads = len(re.findall(r"^(SEARCH|SCAN) ae_item_tags\b", plan, re.MULTILINE))
    else:
        assert "Seq Scan on ae_items" not in plan, plan
        tag_reads = len(re.findall(r"\bon ae_item_tags\b", plan))
    assert tag_reads == reads, plan

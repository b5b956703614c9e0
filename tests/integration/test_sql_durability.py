"""Every public write of the SQL backend is one transaction: all of a batch or none of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from agent_engine.errors import DimensionMismatchError, DuplicateItemError
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import ContextItem

ROOT = Path(__file__).resolve().parents[2]
DIM = 8
BATCH = 10_000
BAD_AT = 5_000


def make_items(prefix, count, *, tags=("batch",)):
    rng = np.random.default_rng(len(prefix))
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return [
        ContextItem(
            id=f"{prefix}-{n:05d}", kind="note", text=f"{prefix} {n}", tags=tags, embedding=v
        )
        for n, v in enumerate(vectors)
    ]


@pytest.fixture
def prior(sql_url):
    """A backend holding 100 committed items (the state a failed batch must not touch)."""
    with SQLAlchemyBackend(sql_url, dim=DIM) as backend:
        items = make_items("prior", 100, tags=("kept",))
        backend.add_many(items)
        yield backend, items


def _assert_intact(backend, items):
    assert backend.count() == len(items)
    assert backend.count({"tags": "batch"}) == 0
    assert backend.get_many([item.id for item in items]) == items


class TestFailedBatch:
    def test_duplicate_at_item_5000_stores_nothing(self, prior):
        backend, items = prior
        batch = make_items("batch", BATCH)
        batch[BAD_AT] = items[0]
        with pytest.raises(DuplicateItemError, match=items[0].id):
            backend.add_many(batch)
        _assert_intact(backend, items)

    def test_bad_vector_at_item_5000_stores_nothing(self, prior):
        backend, items = prior
        batch = make_items("batch", BATCH)
        batch[BAD_AT] = ContextItem(id="bad", kind="note", embedding=np.ones(DIM + 1))
        with pytest.raises(DimensionMismatchError, match="bad"):
            backend.add_many(batch)
        _assert_intact(backend, items)

    def test_database_failure_after_the_rows_are_written_rolls_back(self, prior):
        """The items are inserted, then the database fails on the tags: none of it stays."""
        backend, items = prior

        def fail_on_tags(connection, cursor, statement, *args):
            if statement.startswith("INSERT INTO ae_item_tags"):
                raise RuntimeError("disk full")

        sa.event.listen(backend.engine, "after_cursor_execute", fail_on_tags)
        try:
            with pytest.raises(RuntimeError, match="disk full"):
                backend.add_many(make_items("batch", BATCH))
        finally:
            sa.event.remove(backend.engine, "after_cursor_execute", fail_on_tags)
        _assert_intact(backend, items)


KILLED_MID_BATCH = textwrap.dedent(
    """
    import os, signal, sys
    import sqlalchemy as sa
    from agent_engine.memory.sql import SQLAlchemyBackend
    from test_sql_durability import BATCH, DIM, make_items

    backend = SQLAlchemyBackend(sys.argv[1], dim=DIM)

    @sa.event.listens_for(backend.engine, "after_cursor_execute")
    def kill(connection, cursor, statement, *args):
        # Every item row is written (uncommitted) when the tags go in: die right there.
        if statement.startswith("INSERT INTO ae_item_tags"):
            os.kill(os.getpid(), signal.SIGKILL)

    backend.add_many(make_items("batch", BATCH))
    print("committed")
    """
)


def test_sigkill_mid_batch_leaves_none_of_it(prior, sql_url):
    _, items = prior
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)]),
    }
    result = subprocess.run(  # noqa: S603 - our own script
        [sys.executable, "-c", KILLED_MID_BATCH, sql_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "committed" not in result.stdout
    with SQLAlchemyBackend(sql_url, dim=DIM) as reopened:
        _assert_intact(reopened, items)
        reopened.add_many(make_items("after", 10))
        assert reopened.count() == len(items) + 10

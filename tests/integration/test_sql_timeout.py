"""No call can hold the database for long: filters stay cheap and every statement has a deadline.

The longest filters the language accepts answer well within a short statement timeout on both
dialects; a statement that does run past the timeout is cancelled with QueryTimeoutError, and
its transaction leaves nothing behind.
"""

from __future__ import annotations

import math

import pytest
import sqlalchemy as sa

from agent_engine import (
    BackendError,
    ContextItem,
    FilterTooLargeError,
    QueryTimeoutError,
    SQLAlchemyBackend,
    ValidationError,
)
from agent_engine.filters import MAX_LIST_VALUES
from agent_engine.memory.sql._engine import TIMEOUT_ENV
from agent_engine.testing.databases import postgres_schema

TAGS = [f"tag-{n:04d}" for n in range(MAX_LIST_VALUES)]


def _ids(items):
    return sorted(item.id for item in items)


class TestLongestFilters:
    def test_thousand_tag_lists_answer_within_a_short_timeout(self, sql_url):
        """$all, $in and $nin of 1,000 tags give the right items under a 2 s statement timeout.

        Compiled to an EXISTS per tag, the $all took PostgreSQL's planner minutes (and SQLite
        refused it as deeper than its expression limit); as one read of the tag table it takes
        milliseconds.
        """
        with SQLAlchemyBackend(sql_url, statement_timeout=2) as backend:
            backend.add_many(
                [
                    ContextItem(id="all", kind="k", tags=TAGS),
                    ContextItem(id="most", kind="k", tags=TAGS[:-1]),
                    ContextItem(id="few", kind="k", tags=TAGS[:10]),
                    ContextItem(id="none", kind="k"),
                ]
            )
            assert _ids(backend.query({"tags": {"$all": TAGS}})) == ["all"]
            assert backend.count({"tags": {"$all": TAGS[:-1]}}) == 2
            assert _ids(backend.query({"tags": {"$in": TAGS[500:]}})) == ["all", "most"]
            assert _ids(backend.query({"tags": {"$nin": TAGS[5:]}})) == ["none"]
            assert backend.clear({"tags": {"$all": TAGS}}) == 1
            assert backend.count() == 3

    def test_two_thousand_tags_are_refused_before_the_database(self, sql_url):
        """A list past the language's limit never reaches the database: a typed error at once."""
        with SQLAlchemyBackend(sql_url, statement_timeout=2) as backend:
            backend.add(ContextItem(id="a", kind="k", tags=["x"]))
            tags = [f"t{n}" for n in range(2000)]
            with pytest.raises(FilterTooLargeError, match="'tags'"):
                backend.clear({"tags": {"$all": tags}})
            assert backend.count() == 1


@pytest.fixture
def postgres_url():
    """An empty PostgreSQL schema."""
    with postgres_schema() as url:
        yield url


def _server_setting(backend, name):
    with backend.engine.connect() as connection:
        return connection.exec_driver_sql(f"SHOW {name}").scalar()


class TestPostgresTimeout:
    def test_every_connection_carries_the_timeout(self, postgres_url):
        """The server applies the timeout to the backend's connections, beside the URL's options."""
        with SQLAlchemyBackend(postgres_url, statement_timeout=0.25) as backend:
            assert _server_setting(backend, "statement_timeout") == "250ms"
            assert _server_setting(backend, "search_path").startswith("ae_test_")
        with SQLAlchemyBackend(postgres_url, statement_timeout=0) as backend:
            assert _server_setting(backend, "statement_timeout") == "0"

    def test_a_write_blocked_past_the_timeout_is_cancelled_whole(self, postgres_url):
        """An add whose tag rows wait on a lock past the timeout raises QueryTimeoutError, and
        its item row, already inserted in the same transaction, is rolled back with it."""
        with SQLAlchemyBackend(postgres_url, statement_timeout=0.3) as backend:
            backend.add(ContextItem(id="kept", kind="k", tags=["a"]))
            locker = sa.create_engine(postgres_url)
            try:
                with locker.begin() as connection:
                    # Should the timeout not fire, the server ends this session after 10 s, so
                    # the test fails instead of waiting forever.
                    connection.exec_driver_sql("SET idle_in_transaction_session_timeout = '10s'")
                    # Reads of the tags go on; writes to them wait for this transaction.
                    connection.exec_driver_sql("LOCK TABLE ae_item_tags IN EXCLUSIVE MODE")
                    with pytest.raises(QueryTimeoutError) as info:
                        backend.add(ContextItem(id="blocked", kind="k", tags=["b"]))
                    assert backend.count({"tags": "a"}) == 1
            finally:
                locker.dispose()
            error = info.value
            assert isinstance(error, TimeoutError)
            assert isinstance(error, BackendError)
            assert error.timeout == 0.3
            assert "0.3 s" in str(error)
            assert backend.get("blocked") is None
            assert _ids(backend.query()) == ["kept"]
            backend.add(ContextItem(id="later", kind="k", tags=["b"]))
            assert backend.count() == 2

    def test_a_slow_read_is_cancelled(self, postgres_url):
        """A statement that runs past the timeout is cancelled by the server."""
        with SQLAlchemyBackend(postgres_url, statement_timeout=0.2) as backend:
            with pytest.raises(QueryTimeoutError):
                backend._read(lambda connection: connection.exec_driver_sql("SELECT pg_sleep(5)"))
            assert backend.count() == 0


class TestSQLiteTimeout:
    """SQLite has no server to enforce a timeout: a progress handler checks the deadline.

    It looks every 10,000 virtual-machine steps, so a deadline of a microsecond stops any
    statement that takes more steps than that, deterministically, on any machine.
    """

    @pytest.fixture
    def url(self, tmp_path):
        """A SQLite file holding 3,000 items, half of them notes."""
        url = f"sqlite:///{tmp_path / 'memory.db'}"
        with SQLAlchemyBackend(url, statement_timeout=0) as backend:
            backend.add_many(
                ContextItem(id=f"i{n:05d}", kind=("note", "fact")[n % 2], tags=[f"t{n % 7}"])
                for n in range(3000)
            )
        return url

    def test_a_write_past_its_deadline_is_cancelled_whole(self, url):
        """A clear that runs past the deadline raises QueryTimeoutError and deletes nothing."""
        with SQLAlchemyBackend(url, statement_timeout=1e-6) as backend:
            with pytest.raises(QueryTimeoutError) as info:
                backend.clear({"kind": "note"})
            assert isinstance(info.value, TimeoutError)
            assert info.value.timeout == 1e-6
        with SQLAlchemyBackend(url, statement_timeout=0) as backend:
            assert backend.count() == 3000
            assert backend.count({"kind": "note"}) == 1500
            assert backend.count({"tags": "t0"}) == 429

    def test_a_read_past_its_deadline_is_cancelled(self, url):
        """A read that runs past the deadline raises QueryTimeoutError; the store stays usable."""
        with SQLAlchemyBackend(url, statement_timeout=1e-6) as backend:
            with pytest.raises(QueryTimeoutError):
                backend.query({"tags": {"$nin": ["t1", "t2"]}}, limit=None)
            assert backend.get("i00001") is not None

    def test_a_long_statement_under_its_deadline_completes(self, url):
        """The deadline is per statement: work well within it is never cut short."""
        with SQLAlchemyBackend(url, statement_timeout=30) as backend:
            outside = sum(1 for n in range(3000) if n % 7 not in {1, 2})
            assert len(backend.query({"tags": {"$nin": ["t1", "t2"]}}, limit=None)) == outside
            assert backend.clear({"kind": "note"}) == 1500


class TestSetting:
    def test_default_is_thirty_seconds(self, monkeypatch):
        """Without an argument or environment variable, statements get 30 s."""
        monkeypatch.delenv(TIMEOUT_ENV, raising=False)
        with SQLAlchemyBackend("sqlite://") as backend:
            assert backend.statement_timeout == 30.0

    def test_environment_sets_the_default(self, monkeypatch):
        """$AGENT_ENGINE_STATEMENT_TIMEOUT sets it when the caller does not; 0 means no limit."""
        monkeypatch.setenv(TIMEOUT_ENV, "7.5")
        with SQLAlchemyBackend("sqlite://") as backend:
            assert backend.statement_timeout == 7.5
        with SQLAlchemyBackend("sqlite://", statement_timeout=3) as backend:
            assert backend.statement_timeout == 3.0
        monkeypatch.setenv(TIMEOUT_ENV, "0")
        with SQLAlchemyBackend("sqlite://") as backend:
            assert backend.statement_timeout == 0.0

    @pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf"])
    def test_a_bad_environment_value_names_the_variable(self, monkeypatch, raw):
        """A value in the environment that is not a number of seconds is a ValidationError."""
        monkeypatch.setenv(TIMEOUT_ENV, raw)
        with pytest.raises(ValidationError, match=TIMEOUT_ENV) as info:
            SQLAlchemyBackend("sqlite://")
        assert info.value.field == "statement_timeout"

    @pytest.mark.parametrize("value", [-1, math.nan, math.inf, True, "30"])
    def test_a_bad_argument_is_refused(self, value):
        """statement_timeout takes a finite, non-negative number of seconds."""
        with pytest.raises(ValidationError, match="statement_timeout") as info:
            SQLAlchemyBackend("sqlite://", statement_timeout=value)
        assert info.value.field == "statement_timeout"

"""The Redis backend against the real server: sharing, expiry, atomicity and faults.

Every test works under a key prefix of its own, removed afterwards; nothing here flushes the
database, which other tests use at the same time.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import BackendUnavailableError, DuplicateItemError
from agent_engine.memory import registry
from agent_engine.memory.checkpoints import Checkpoint
from agent_engine.memory.redis import RedisBackend
from agent_engine.memory.registry import OpenOptions
from agent_engine.models import ContextItem, Tier
from agent_engine.serde import to_dict
from agent_engine.testing.databases import redis_server_url


def _item(item_id: str, namespace: str = "task:a", **fields) -> ContextItem:
    values = {"kind": "note", "text": f"text of {item_id}", "namespace": namespace}
    return ContextItem(id=item_id, **(values | fields))


@pytest.fixture
def url() -> str:
    return redis_server_url()


@pytest.fixture
def prefix(url) -> Iterator[str]:
    """A key prefix of this test's own; every key under it is removed afterwards."""
    name = f"agent_engine:test:{uuid.uuid4().hex}:"
    yield name
    with RedisBackend(url, prefix=name) as cleaner:
        cleaner.drop()


@pytest.fixture
def open_redis(url, prefix) -> Iterator:
    """``open_redis(**options)``: a backend on the test's prefix, closed afterwards."""
    opened: list[RedisBackend] = []

    def make(**options) -> RedisBackend:
        options = {"prefix": prefix, "embedder": HashingEmbedder(dim=16)} | options
        backend = RedisBackend(options.pop("url", url), **options)
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()


class TestSharing:
    def test_two_backends_on_one_prefix_share_items_journal_and_conflicts(self, open_redis):
        """What one process writes, another sees: items, audit events and conflicts."""
        from agent_engine.memory.conflicts import Conflict  # noqa: PLC0415
        from agent_engine.models import AuditEvent  # noqa: PLC0415

        first, second = open_redis(), open_redis()
        first.add_many([_item("a1"), _item("a2")])
        assert {item.id for item in second.query({"namespace": "task:a"})} == {"a1", "a2"}
        first.audit.append(AuditEvent(action="add", tier="task", namespace="task:a"))
        assert second.audit.count(namespace="task:a") == 1
        conflict = Conflict(item_a="a1", item_b="a2", tier=Tier.TASK, namespace="task:a")
        second.conflicts.record([conflict])
        assert first.conflicts.get(conflict.id) == conflict

    def test_a_conflict_across_namespaces_goes_with_either_item(self, open_redis):
        """A conflict naming an item of another namespace is found from it, and removed with it."""
        from agent_engine.memory.conflicts import Conflict  # noqa: PLC0415

        backend = open_redis()
        backend.add_many([_item("a1"), _item("a2"), _item("b1", namespace="task:b")])
        across = Conflict(item_a="a1", item_b="b1", tier=Tier.PROJECT, namespace="task:a")
        within = Conflict(item_a="a1", item_b="a2", tier=Tier.PROJECT, namespace="task:a")
        backend.conflicts.record([across, within])
        assert backend.conflicts.of_items(["b1"]) == [across]
        backend.delete("b1")
        assert backend.conflicts.get(across.id) is None
        assert backend.conflicts.of_scope("task:a", Tier.PROJECT) == [within]
        assert backend.client.hgetall(f"{backend.prefix}x:task:b") == {}

    def test_another_writer_refreshes_the_lexical_index(self, open_redis):
        """A cached BM25 index is rebuilt when another process wrote its scope."""
        reader, writer = open_redis(), open_redis()
        scope = {"namespace": "task:a", "tier": "task"}
        writer.add(_item("a1", text="apples and pears", tier=Tier.TASK))
        assert len(reader.lexical_index(scope)) == 1
        writer.add(_item("a2", text="zebra crossing", tier=Tier.TASK))
        hits = reader.lexical_search("zebra", k=1, filters=scope)
        assert [hit.item.id for hit in hits] == ["a2"]

    def test_writes_bump_scope_counters_and_touches_do_not(self, open_redis):
        """Each write moves its scopes' counters by one in its own transaction; a touch none."""
        backend = open_redis()
        backend.add_many([_item("a1"), _item("b1", namespace="task:b")])
        project = Tier.PROJECT
        assert backend._scope_versions((None, None)) == {
            ("task:a", project): 1,
            ("task:b", project): 1,
        }
        backend.touch(["a1"], datetime.now(UTC))
        backend.update(_item("a1", namespace="task:b", text="moved"))
        assert backend._scope_versions((None, None)) == {
            ("task:a", project): 2,
            ("task:b", project): 2,
        }
        assert backend.client.smembers(f"{backend.prefix}n:task:a") == set()
        assert backend.client.smembers(f"{backend.prefix}n:task:b") == {"a1", "b1"}

    def test_prefixes_keep_stores_apart(self, open_redis, url):
        """A store under another prefix sees nothing of this one, and dropping it keeps ours."""
        ours = open_redis()
        ours.add(_item("a1"))
        other = open_redis(prefix=f"agent_engine:test:{uuid.uuid4().hex}:")
        assert other.count() == 0
        other.add(_item("a1"))
        assert other.drop() > 0
        assert ours.get("a1") is not None


_WRITER = """
import sys
from agent_engine.errors import DuplicateItemError
from agent_engine.memory.redis import RedisBackend
from agent_engine.models import ContextItem

url, prefix, name = sys.argv[1:4]
def item(item_id):
    return ContextItem(id=item_id, kind="note", text=item_id, namespace="task:shared")
with RedisBackend(url, prefix=prefix) as backend:
    for batch in range(20):
        backend.add_many([item(f"{name}-{batch}-{n}") for n in range(5)])
    try:
        backend.add(item("contested"))
        print("won")
    except DuplicateItemError:
        print("lost")
"""


class TestProcesses:
    def test_executor_processes_share_one_namespace(self, url, prefix, open_redis):
        """Processes writing one namespace at once lose nothing; one of them wins a shared id.

        The scope's counter ends at the number of writes that landed: each bumped it once.
        """
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        runs = [
            subprocess.Popen(  # noqa: S603 - our own interpreter and script
                [sys.executable, "-c", _WRITER, url, prefix, name],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for name in ("one", "two", "three")
        ]
        outcomes = sorted(run.communicate(timeout=60)[0].strip() for run in runs)
        assert [run.returncode for run in runs] == [0, 0, 0]
        assert outcomes == ["lost", "lost", "won"]
        backend = open_redis()
        assert backend.count({"namespace": "task:shared"}) == 3 * 20 * 5 + 1
        assert backend._scope_versions(("task:shared", Tier.PROJECT)) == {
            ("task:shared", Tier.PROJECT): 3 * 20 + 1
        }


class TestExpiry:
    def test_an_idle_namespace_expires_and_writes_keep_it_alive(self, open_redis):
        """With ``ttl``, each write to a namespace restarts its expiry; idle, it all goes."""
        backend = open_redis(ttl=timedelta(milliseconds=600))
        backend.add(_item("a1"))
        backend.add(_item("b1", namespace="task:b"))
        time.sleep(0.35)
        backend.add(_item("a2"))  # restarts task:a's expiry, not task:b's
        time.sleep(0.35)
        assert {item.id for item in backend.query({"namespace": "task:a"})} == {"a1", "a2"}
        assert backend.query({"namespace": "task:b"}) == []
        time.sleep(0.4)
        assert backend.count() == 0
        keys = backend.client.keys(f"{backend.prefix}*")
        assert not [key for key in keys if "task:a" in key or "task:b" in key]

    def test_a_namespace_written_again_after_expiring_never_repeats_a_counter(self, open_redis):
        """Counters of an expired namespace start from the clock, not from 1, when rewritten.

        A process that cached a lexical index before the namespace expired must not take the
        new items' counter for the one it built at.
        """
        backend = open_redis(ttl=timedelta(milliseconds=250))
        scope = ("task:a", Tier.PROJECT)
        backend.add(_item("a1"))
        backend.add(_item("a2"))
        before = backend._scope_versions(scope)[scope]
        time.sleep(0.35)
        assert backend._scope_versions(scope) == {}
        assert not backend.client.keys(f"{backend.prefix}*task:a")
        backend.add(_item("a3"))
        backend.add(_item("a4"))
        assert backend._scope_versions(scope)[scope] > before

    def test_an_item_expires_at_its_own_time(self, open_redis):
        """An item whose ``expires_at`` is to come goes then; one already past is kept."""
        backend = open_redis()
        soon = datetime.now(UTC) + timedelta(milliseconds=300)
        past = datetime(2024, 1, 1, tzinfo=UTC)
        backend.add_many(
            [_item("soon", expires_at=soon), _item("past", expires_at=past), _item("never")]
        )
        ttl = backend.client.pttl(f"{backend.prefix}i:soon")
        assert 0 < ttl <= 300
        time.sleep(0.45)
        assert {item.id for item in backend.query()} == {"past", "never"}

    def test_a_namespace_refresh_never_outlives_an_items_own_expiry(self, open_redis):
        """Restarting a namespace's expiry keeps an earlier ``expires_at`` of an item in it."""
        backend = open_redis(ttl=timedelta(seconds=30))
        soon = datetime.now(UTC) + timedelta(milliseconds=300)
        backend.add(_item("soon", expires_at=soon))
        backend.add(_item("other"))
        assert 0 < backend.client.pttl(f"{backend.prefix}i:soon") <= 300
        assert backend.client.pttl(f"{backend.prefix}i:other") > 29_000


class TestEmptyStore:
    def test_whole_store_operations_on_an_empty_store_do_nothing(self, open_redis):
        """Trimming, redacting, clearing and erasing a store that holds nothing change nothing."""
        backend = open_redis()
        assert backend.audit.trim(keep_latest=0) == 0
        assert backend.audit.redact({"nope": "erased:0"}) == 0
        assert backend.clear() == 0
        assert backend.erase(["nope"]) == 0
        assert backend.client.keys(f"{backend.prefix}*") == []


class TestCheckpoints:
    STATE = '{"items": ["a1"], "text": "' + "x" * 5000 + '"}'

    def test_a_record_is_kept_apart_from_its_saved_state(self, open_redis):
        """Listing a scope's checkpoints reads records, never the states they saved."""
        backend = open_redis()
        checkpoint = Checkpoint(namespace="task:a", tier=Tier.TASK, items=1)
        backend.checkpoints.save(checkpoint, self.STATE)
        record = backend.client.hget(f"{backend.prefix}k:task:a", checkpoint.id)
        assert len(record) < 500
        assert "x" * 100 not in record
        assert backend.client.hget(f"{backend.prefix}s:task:a", checkpoint.id) == self.STATE
        assert backend.checkpoints.of_scope("task:a", Tier.TASK) == [checkpoint]
        assert backend.checkpoints.data(checkpoint.id) == self.STATE
        assert backend.checkpoints.delete(checkpoint.id)
        assert backend.client.keys(f"{backend.prefix}[ks]:*") == []

    def test_a_checkpoint_saved_in_the_earlier_layout_reads_and_goes(self, open_redis):
        """A store written when record and state shared one field still serves both."""
        backend = open_redis()
        earlier = Checkpoint(namespace="task:a", tier=Tier.TASK, items=1, label="before")
        newer = Checkpoint(namespace="task:a", tier=Tier.TASK, items=1, label="after")
        backend.client.hset(
            f"{backend.prefix}k:task:a",
            earlier.id,
            json.dumps({"record": to_dict(earlier), "data": self.STATE}),
        )
        backend.client.hset(f"{backend.prefix}checkpoints", earlier.id, "task:a")
        backend.checkpoints.save(newer, '{"items": ["b1"]}')
        assert backend.checkpoints.get(earlier.id) == earlier
        assert backend.checkpoints.data(earlier.id) == self.STATE
        assert set(backend.checkpoints.of_scope("task:a", Tier.TASK)) == {earlier, newer}
        assert set(backend.checkpoints.all()) == {earlier, newer}
        assert backend.checkpoints.drop_holding(["a1"]) == 1  # found in the earlier field
        assert backend.checkpoints.get(earlier.id) is None
        assert backend.checkpoints.of_scope("task:a", Tier.TASK) == [newer]
        assert backend.checkpoints.drop_holding(["b1"]) == 1
        assert backend.client.keys(f"{backend.prefix}[ks]:*") == []


class TestAtomicity:
    def test_a_batch_with_a_stored_id_stores_nothing(self, open_redis):
        """A duplicate in a batch leaves the store, its id sets and its counters unchanged."""
        backend = open_redis()
        backend.add(_item("a1"))
        before = backend._scope_versions((None, None))
        with pytest.raises(DuplicateItemError):
            backend.add_many([_item("a2"), _item("a1"), _item("b1", namespace="task:b")])
        assert [item.id for item in backend.query()] == ["a1"]
        assert backend.client.smembers(f"{backend.prefix}n:task:a") == {"a1"}
        assert backend._scope_versions((None, None)) == before


class _Proxy:
    """A TCP relay to the Redis server that can cut every connection, as a crash would.

    With ``cut_before`` set, a client's stream is forwarded up to that command and the
    connection is then closed: the server sees the start of a transaction and never its end.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.cut_before: bytes | None = None
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._open += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, outgoing: bool) -> None:
        try:
            while data := source.recv(65536):
                cut = self.cut_before
                if outgoing and cut is not None and cut in data:
                    sink.sendall(data[: data.index(cut)])
                    time.sleep(0.05)
                    self.stop()
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def stop(self) -> None:
        """Close the listener and every relayed connection."""
        self._running = False
        # Wakes the thread blocked in accept(); closing alone leaves the port listening.
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for end in self._open:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


@pytest.fixture
def proxy(url) -> Iterator[tuple[_Proxy, str]]:
    parts = urlsplit(url)
    relay = _Proxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield relay, urlunsplit(parts._replace(netloc=f"127.0.0.1:{relay.port}"))
    relay.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TestFaults:
    def test_nothing_listening_is_backend_unavailable(self, prefix):
        """Opening a store where no server listens raises BackendUnavailableError promptly."""
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError, match="unreachable"):
            RedisBackend(f"redis://127.0.0.1:{_free_port()}/0", prefix=prefix, socket_timeout=1)
        assert time.monotonic() - started < 10

    def test_a_server_gone_mid_task_is_an_error_not_an_answer(self, open_redis, proxy):
        """Reads and writes after the server went away raise; no read answers ``None``."""
        relay, relayed = proxy
        backend = open_redis(url=relayed, socket_timeout=2)
        backend.add_many([_item("a1"), _item("a2")])
        relay.stop()
        with pytest.raises(BackendUnavailableError):
            backend.get("a1")
        with pytest.raises(BackendUnavailableError):
            backend.query({"namespace": "task:a"})
        with pytest.raises(BackendUnavailableError):
            backend.add_many([_item("a3"), _item("a4")])
        direct = open_redis()
        assert {item.id for item in direct.query()} == {"a1", "a2"}

    def test_a_write_cut_before_exec_stores_nothing(self, open_redis, proxy):
        """A connection lost after MULTI and the queued writes, before EXEC: none of it lands."""
        relay, relayed = proxy
        backend = open_redis(url=relayed, socket_timeout=2)
        backend.add(_item("a1"))
        relay.cut_before = b"EXEC"
        with pytest.raises(BackendUnavailableError, match="went away during a write"):
            backend.write(
                add=[_item("a2"), _item("b1", namespace="task:b")],
                update=[_item("a1", text="changed")],
            )
        direct = open_redis()
        assert {item.id for item in direct.query()} == {"a1"}
        stored = direct.get("a1")
        assert stored is not None
        assert stored.text == "text of a1"
        assert direct.client.smembers(f"{direct.prefix}n:task:b") == set()

    def test_a_dropped_connection_pool_reconnects(self, open_redis):
        """Closing the client's pool between two calls costs a reconnect, not an answer."""
        backend = open_redis()
        backend.add(_item("a1"))
        backend.client.connection_pool.disconnect()
        assert backend.get("a1") is not None
        backend.add(_item("a2"))
        assert backend.count() == 2


class TestRegistry:
    def test_a_redis_url_opens_the_backend_with_its_options(self, url, prefix):
        """``redis://...?prefix=...&ttl=...`` opens a RedisBackend with that prefix and ttl."""
        entry = registry.backend_for_scheme("redis")
        separator = "&" if "?" in url else "?"
        opened = entry.open(f"{url}{separator}prefix={prefix}&ttl=60", OpenOptions())
        assert isinstance(opened, RedisBackend)
        with opened:
            assert opened.prefix == prefix
            assert opened.ttl == timedelta(seconds=60)

    def test_the_benchmark_configuration_builds_an_empty_store(self, tmp_path, url):
        """The ``redis`` configuration builds an empty store whose keys go on close."""
        store = registry.configuration("redis").build(tmp_path, HashingEmbedder(dim=16))
        assert isinstance(store, RedisBackend)
        store.add(_item("a1"))
        keys = store.client.keys(f"{store.prefix}*")
        assert keys
        store.close()
        import redis  # noqa: PLC0415

        with redis.Redis.from_url(url) as check:
            assert check.exists(*keys) == 0


class TestUnreachableServer:
    @pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip")])
    def test_ci_fails_where_a_developer_skips(self, monkeypatch, ci, outcome):
        """Without a server a Redis test fails under CI=true and is skipped elsewhere."""
        from agent_engine.testing.databases import REDIS_ENV  # noqa: PLC0415

        monkeypatch.setenv(REDIS_ENV, f"redis://127.0.0.1:{_free_port()}/0")
        monkeypatch.setenv("CI", ci)
        expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
        with pytest.raises(expected, match="Redis is unreachable"):
            redis_server_url()


class TestOptions:
    @pytest.mark.parametrize(
        ("options", "field"),
        [
            pytest.param({"ttl": timedelta(0)}, "ttl", id="zero-ttl"),
            pytest.param({"ttl": 30}, "ttl", id="ttl-not-a-timedelta"),
            pytest.param({"prefix": ""}, "prefix", id="empty-prefix"),
        ],
    )
    def test_bad_options_are_refused_before_connecting(self, options, field):
        """A bad ttl or prefix is a ValidationError naming it, before any server is asked."""
        from agent_engine.errors import ValidationError  # noqa: PLC0415

        with pytest.raises(ValidationError) as info:
            RedisBackend(f"redis://127.0.0.1:{_free_port()}/0", **options)
        assert info.value.field == field

    def test_a_bad_ttl_in_a_url_is_refused(self):
        """``?ttl=`` must be a number of seconds."""
        from agent_engine.errors import ValidationError  # noqa: PLC0415

        with pytest.raises(ValidationError, match="seconds"):
            registry.backend_for_scheme("redis").open("redis://127.0.0.1/0?ttl=soon", OpenOptions())

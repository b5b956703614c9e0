"""The audit log: every mutation journaled first, queryable, and bounded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import attrs
import pytest

from agent_engine import AuditAction, AuditLog, DuplicateItemError, ValidationError, promote
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore


def actions(backend, namespace):
    return [
        event.action for event in reversed(backend.audit.events(namespace=namespace, limit=None))
    ]


class TestJournal:
    def test_every_mutation_is_recorded(self, backend, clock):
        """add, update, pin, unpin, delete, promote, eviction and clear each leave an event."""
        task = TaskMemoryStore("t", backend, project_id="p", clock=clock)
        project = ProjectMemoryStore("p", backend, max_items=3, clock=clock)
        item = project.add_decision("d0", importance=0.1)
        project.update(attrs.evolve(item, text="d0 revised"))
        project.pin(item.id)
        project.unpin(item.id)
        project.delete(item.id)
        promote(task, project, task.add_reasoning("lesson", "s").id)
        for n in range(5):  # over 3 evicts down to the low mark, 2
            project.add_decision(f"d{n + 1}")
        project.clear()
        assert actions(backend, project.namespace) == [
            AuditAction.ADD,
            AuditAction.UPDATE,
            AuditAction.PIN,
            AuditAction.UNPIN,
            AuditAction.DELETE,
            AuditAction.PROMOTE,
            AuditAction.ADD,
            AuditAction.ADD,
            AuditAction.ADD,
            AuditAction.ARCHIVE,
            AuditAction.ADD,
            AuditAction.ADD,
            AuditAction.ARCHIVE,
            AuditAction.CLEAR,
        ]

    def test_events_carry_context(self, backend, clock):
        """An event names the tier, namespace, items and time."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        item = project.add_decision("d")
        (event,) = backend.audit.events(namespace=project.namespace)
        assert (event.tier.value, event.namespace, event.item_ids) == (
            "project",
            "project:p",
            (item.id,),
        )
        assert event.at >= item.timestamp  # the journal entry is written after the item is built

    def test_failed_mutation_is_followed_by_abort(self, backend, clock):
        """Journal-first: the intent is logged, then an abort naming it when the write fails."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        item = project.add_decision("d")
        with pytest.raises(DuplicateItemError):
            project.add(item)
        add, abort = backend.audit.events(namespace=project.namespace, limit=2)[::-1]
        assert abort.action is AuditAction.ABORT
        assert abort.detail["intent"] == add.id
        assert "DuplicateItemError" in abort.detail["error"]

    def test_query_by_time_and_namespace(self, backend, clock):
        """Events can be read per namespace and time window, newest first."""
        a = ProjectMemoryStore("a", backend, clock=clock)
        b = GlobalMemoryStore(backend, "u", allow_unconfirmed=True, clock=clock)
        a.add_decision("1")
        b.add_pattern("2")
        middle = clock()
        a.add_decision("3")
        newer = backend.audit.events(namespace="project:a", since=middle)
        assert len(newer) == 1
        assert newer[0].item_ids == (a.query({}, limit=1)[0].id,)
        assert len(backend.audit.events(until=middle)) == 2
        assert backend.audit.count(namespace="global:u") == 1


class TestRetention:
    def test_max_events(self, backend, clock):
        """Past max_events the oldest events are dropped (checked every trim_every appends)."""
        log = AuditLog(backend.audit, max_events=10, trim_every=5, clock=clock)
        project = ProjectMemoryStore("p", backend, audit=log, max_items=None, clock=clock)
        for n in range(23):
            project.add_decision(f"d{n}")
        assert backend.audit.count() <= 10 + 5
        log.trim()
        assert backend.audit.count() == 10
        newest = backend.audit.events(limit=1)[0]
        assert newest.item_ids == (project.query({}, limit=1)[0].id,)

    def test_max_age(self, backend, clock):
        """Events older than max_age go at the next trim."""
        log = AuditLog(backend.audit, max_events=None, max_age=timedelta(seconds=5), clock=clock)
        project = ProjectMemoryStore("p", backend, audit=log, clock=clock)
        for n in range(10):
            project.add_decision(f"d{n}")
        log.trim()
        assert 0 < backend.audit.count() < 10
        assert all(
            event.at >= clock.now - timedelta(seconds=5)
            for event in backend.audit.events(limit=None)
        )


class TestQueryArguments:
    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"limit": 2**64}, "limit", id="limit-past-bigint"),
            pytest.param({"limit": -1}, "limit", id="negative-limit"),
            pytest.param(
                {"since": datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))},
                "since",
                id="since-past-utc",
            ),
            pytest.param({"until": datetime(2024, 1, 1)}, "until", id="naive-until"),  # noqa: DTZ001
            pytest.param({"namespace": "p\ud800"}, "namespace", id="namespace-lone-surrogate"),
            pytest.param({"actions": ["add", "nope"]}, "actions", id="unknown-action"),
            pytest.param({"actions": 5}, "actions", id="actions-not-a-list"),
        ],
    )
    def test_bad_windows_name_the_argument(self, backend, arguments, field):
        """A journal query the store cannot run is a ValidationError naming the argument."""
        with pytest.raises(ValidationError) as info:
            backend.audit.events(**arguments)
        assert info.value.field == field

    def test_count_refuses_an_unstorable_namespace(self, backend):
        """count(namespace=...) with a lone surrogate names the namespace."""
        with pytest.raises(ValidationError) as info:
            backend.audit.count(namespace="\udfff")
        assert info.value.field == "namespace"

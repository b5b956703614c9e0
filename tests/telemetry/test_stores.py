"""A store's adds, searches, promotions and compactions are spans named as the conventions say."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.trace import StatusCode

from agent_engine import (
    AgingPolicy,
    ContextItem,
    MemoryStores,
    Task,
    Telemetry,
    ValidationError,
    promote,
)
from tests.telemetry.conftest import every_text

TASK = Task(id="t-1", project_id="p-1", user_id="u-1")


class Clock:
    """A clock that moves one second per reading, or as far as told."""

    def __init__(self):
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self):
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def stores(backend, reported, clock):
    """The three tiers on ``backend``, reporting to this test's providers."""
    return MemoryStores(
        backend, clock=clock, confirm=lambda _request: True, telemetry=reported.telemetry()
    )


def _operation(span):
    return (
        span.attributes["gen_ai.operation.name"],
        span.attributes["agent_engine.operation.name"],
        span.attributes["agent_engine.memory.tier"],
        span.attributes["gen_ai.memory.store.id"],
    )


class TestAdd:
    def test_an_add_is_an_upsert(self, stores, reported):
        """add is upsert_memory (it may merge): the store, the record and how many there were."""
        project = stores.project_store("p-1")
        item = project.add_decision("Deploys run from the main branch only.")
        span = reported.span("upsert_memory")
        assert _operation(span) == ("upsert_memory", "add", "project", project.namespace)
        assert span.attributes["gen_ai.memory.record.count"] == 1
        assert span.attributes["gen_ai.memory.record.id"] == item.id
        assert span.attributes["agent_engine.memory.merged"] == 0
        assert span.status.status_code is StatusCode.UNSET

    def test_a_merge_is_counted(self, stores, reported):
        """An add merged into a held near-duplicate says so, with the held item's id."""
        project = stores.project_store("p-1")
        held = project.add_decision("Deploys run from the main branch only.")
        reported.clear()
        again = project.add_decision("Deploys run from the main branch only.")
        span = reported.span("upsert_memory")
        assert again.id == held.id
        assert span.attributes["agent_engine.memory.merged"] == 1
        assert span.attributes["gen_ai.memory.record.id"] == held.id

    def test_a_batch_is_one_span_without_the_searches_it_runs(self, stores, reported):
        """add_many is one span; its dedup and contradiction searches are part of it."""
        project = stores.project_store("p-1")
        project.add_decision("Deploys never run on Fridays.")
        reported.clear()
        written = project.add_many(
            [
                project.new_item("decision", "Deploys always run on Fridays."),
                project.new_item("decision", "The cache is flushed nightly."),
            ]
        )
        assert project.conflicts()  # the add did search its scope for contradictions
        assert [s.name for s in reported.spans()] == ["upsert_memory"]
        span = reported.span("upsert_memory")
        assert span.attributes["gen_ai.memory.record.count"] == len(written) == 2
        assert "gen_ai.memory.record.id" not in span.attributes

    def test_a_refused_add_is_an_error_without_its_message(self, stores, reported):
        """A refused write ends its span as an error: the type, never the message."""
        task = stores.task_store(TASK)
        foreign = ContextItem(id="zebra-1", kind="note", text="hunter2", namespace="zebra")
        with pytest.raises(ValidationError, match="zebra"):
            task.add(foreign)
        span = reported.span("upsert_memory")
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "agent_engine.errors.ValidationError"
        assert span.events == ()
        assert "zebra" not in every_text(span)
        (point,) = reported.points("agent_engine.memory.operation.duration")
        assert point.attributes["error.type"] == "agent_engine.errors.ValidationError"


class TestSearch:
    def test_search_and_search_text(self, stores, reported):
        """Both searches are search_memory, with the number of records they returned."""
        project = stores.project_store("p-1")
        for text in ("The cache is flushed nightly.", "Logs are kept thirty days."):
            project.add_decision(text)
        reported.clear()
        hits = project.search("cache", k=5)
        _, more = project.search_text("logs", k=1)
        first, second = reported.spans("search_memory")
        assert _operation(first) == ("search_memory", "search", "project", project.namespace)
        assert _operation(second) == ("search_memory", "search_text", "project", project.namespace)
        assert first.attributes["gen_ai.memory.record.count"] == len(hits) == 2
        assert second.attributes["gen_ai.memory.record.count"] == len(more) == 1
        assert "gen_ai.memory.query.text" not in first.attributes


class TestPromote:
    def test_a_promotion_is_an_upsert_into_its_target(self, stores, reported):
        """promote reports as the target store's upsert_memory, naming where it came from."""
        task = stores.task_store(TASK)
        step = task.add_reasoning("The flaky test needs a fixed seed.", "s1")
        project = stores.project_store("p-1")
        reported.clear()
        result = promote(task, project, step.id, quarantine=True)
        span = reported.span("upsert_memory")
        assert _operation(span) == ("upsert_memory", "promote", "project", project.namespace)
        assert span.attributes["gen_ai.memory.record.id"] == result.item.id
        assert span.attributes["gen_ai.memory.record.count"] == 1
        assert span.attributes["agent_engine.promotion.source_tier"] == "task"
        assert span.attributes["agent_engine.promotion.quarantine"] is True
        assert span.attributes["agent_engine.promotion.duplicate"] is False
        reported.clear()
        assert promote(task, project, step.id).duplicate
        assert reported.span("upsert_memory").attributes["agent_engine.promotion.duplicate"]


class TestCompact:
    def test_a_compaction_is_an_update_of_what_it_moved(self, stores, reported, clock):
        """compact is update_memory; the records are those moved, with the plan's numbers."""
        project = stores.project_store("p-1")
        for n in range(3):
            project.add_decision(f"Temporary note {n}.", importance=0.2)
        policy = AgingPolicy(ttl={"decision": timedelta(days=1)})
        clock.now += timedelta(days=3)
        reported.clear()
        plan = project.compact(dry_run=True, policy=policy)
        done = project.compact(policy=policy)
        dry, real = reported.spans("update_memory")
        assert _operation(real) == ("update_memory", "compact", "project", project.namespace)
        assert dry.attributes["agent_engine.compaction.dry_run"] is True
        assert dry.attributes["gen_ai.memory.record.count"] == 0
        assert dry.attributes["agent_engine.compaction.planned"] == len(plan.moves) == 3
        assert real.attributes["gen_ai.memory.record.count"] == done.moved == 3
        assert real.attributes["agent_engine.compaction.expired"] == 3
        assert real.attributes["agent_engine.compaction.working"] == 3


class TestText:
    def test_no_text_by_default(self, stores, reported):
        """Adds, searches and promotions carry no item text and no query by default."""
        task = stores.task_store(TASK)
        step = task.add_reasoning("the zebra passphrase lives in the vault", "s1")
        task.search_text("zebra passphrase", k=3)
        promote(task, stores.project_store("p-1"), step.id)
        assert len(reported.spans()) == 3
        for span in reported.spans():
            assert "zebra" not in every_text(span)

    def test_text_when_turned_on(self, backend, reported, clock):
        """With record_text: the stored (redacted) text, the query, the hits and their scores."""
        stores = MemoryStores(backend, clock=clock, telemetry=reported.telemetry(record_text=True))
        task = stores.task_store(TASK)
        item = task.add_reasoning("mail ada@example.com about the zebra rollout", "s1")
        added = json.loads(reported.span("upsert_memory").attributes["gen_ai.memory.records"])
        assert added == [{"id": item.id, "content": item.text}]
        assert "ada@example.com" not in item.text  # what is recorded is what the store holds
        _, hits = task.search_text("zebra rollout", k=3)
        search = reported.span("search_memory")
        assert search.attributes["gen_ai.memory.query.text"] == "zebra rollout"
        records = json.loads(search.attributes["gen_ai.memory.records"])
        assert records == [
            {"id": hit.item.id, "content": hit.item.text, "score": hit.score} for hit in hits
        ]

    def test_exceptions_are_recorded_when_text_is_on(self, reported, backend, clock):
        """record_text also lets an error's message (which may quote an item) be recorded."""
        on = MemoryStores(backend, clock=clock, telemetry=reported.telemetry(record_text=True))
        foreign = ContextItem(id="zebra-1", kind="note", text="hunter2", namespace="zebra")
        with pytest.raises(ValidationError):
            on.task_store(TASK).add(foreign)
        (event,) = reported.span("upsert_memory").events
        assert event.name == "exception"


class TestSettings:
    def test_bad_settings_are_refused(self):
        """A Telemetry's settings, and a store's telemetry, are checked where they are given."""
        with pytest.raises(ValidationError) as caught:
            Telemetry(record_text="yes")  # type: ignore[arg-type]
        assert caught.value.field == "record_text"
        with pytest.raises(ValidationError) as caught:
            Telemetry(tracer_provider=object())  # type: ignore[arg-type]
        assert caught.value.field == "tracer_provider"
        with pytest.raises(ValidationError) as caught:
            Telemetry(meter_provider="global")  # type: ignore[arg-type]
        assert caught.value.field == "meter_provider"
        with pytest.raises(ValidationError) as caught:
            MemoryStores(telemetry=True)  # type: ignore[arg-type]
        assert caught.value.field == "telemetry"

    def test_stores_share_the_telemetry_they_are_given(self, stores, reported):
        """MemoryStores hands its telemetry to every store it opens."""
        opened = [stores.task_store(TASK), stores.project_store("p"), stores.global_store("u")]
        assert {id(store.telemetry) for store in opened} == {id(stores.telemetry)}
        assert repr(stores.telemetry).startswith("Telemetry(record_text=False, tracer_provider=")

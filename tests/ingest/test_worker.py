"""The worker stores queued events once, contains what fails, and says what became of each."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from agent_engine import BackendError, MemoryStores
from agent_engine.ingest import (
    DEFAULT_DECIDER,
    Backoff,
    Decision,
    IngestEvent,
    IngestQueue,
    IngestWorker,
    decide_safely,
)

from .conftest import FlakyEmbedder


def _turn(n: int, text: str | None = None, **extra: object) -> dict[str, object]:
    text = text or f"Caroline: I moved to Lisbon in {2000 + n}"
    return {
        "text": text,
        "source": text.split(":")[0],
        "kind": "turn",
        "project": "chat",
        "idempotency_key": f"turn-{n}",
        **extra,
    }


def _setup(backend, clock, **worker):
    queue = IngestQueue.of(backend, clock=clock)
    stores = MemoryStores(backend, clock=clock)
    return queue, stores, IngestWorker(queue, stores, **worker)


def _queued(backend) -> dict[int, str]:
    """The queue's events by number, as they wait (a worker blanks them when it finishes)."""
    with backend.engine.connect() as connection:
        return dict(connection.execute(sa.text("SELECT seq, event FROM ae_ingest_queue")).all())


def _forget_acks(backend, queued: dict[int, str]) -> None:
    """The queue as a worker killed after its write and before marking the batch done left it."""
    with backend.engine.begin() as connection:
        for seq, event in queued.items():
            connection.execute(
                sa.text(
                    "UPDATE ae_ingest_queue SET state = 'pending', outcome = NULL, event = :event,"
                    " finished_at = NULL, lease_owner = NULL, lease_until = NULL WHERE seq = :seq"
                ),
                {"event": event, "seq": seq},
            )


class TestStoring:
    def test_a_batch_is_stored_with_its_items_ids_and_times(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock, batch_size=4)
        given = queue.enqueue_many([_turn(n) for n in range(10)])
        clock.advance(5)
        report = worker.run(until_idle=True)
        assert (report.batches, report.claimed, report.stored) == (3, 10, 10)
        chat = stores.project_store("chat")
        items = chat.get_many([r.item_id for r in given])
        assert [i.text for i in items] == [
            f"Caroline: I moved to Lisbon in {2000 + n}" for n in range(10)
        ]
        # The time it happened (enqueued), not the time the worker got to it.
        assert {i.timestamp for i in items} == {clock.now.replace(second=0)}
        assert all(i.embedding is not None for i in items)
        assert queue.status().done == 10

    def test_the_decider_drops_small_talk_with_its_reason(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock)
        queue.enqueue_many([_turn(1), _turn(2, "Melanie: Thanks!"), _turn(3, "Melanie: haha")])
        report = worker.run(until_idle=True)
        assert report.stored == 1
        assert report.dropped == {"acknowledgement": 1, "chit_chat": 1}
        assert stores.project_store("chat").count() == 1
        status = queue.status()
        assert (status.done, status.dropped) == (1, 2)

    def test_without_a_decider_everything_is_stored(self, make_backend, clock):
        queue, _stores, worker = _setup(make_backend(), clock, decider=None)
        queue.enqueue_many([_turn(1), _turn(2, "Melanie: Thanks!")])
        assert worker.run(until_idle=True).stored == 2

    def test_scopes_of_one_batch_go_to_their_own_stores(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock)
        queue.enqueue_many(
            [
                _turn(1),
                {"text": "Prefers dark mode", "kind": "note", "tier": "global", "user": "ann"},
                {"text": "ran the tests", "kind": "step", "tier": "task", "task": "t1"},
                {"text": "asked for a refund", "tier": "session", "session": "s1", "user": "ann"},
            ]
        )
        assert worker.run(until_idle=True).stored == 4
        assert stores.project_store("chat").count() == 1
        assert stores.global_store("ann").count() == 1
        assert stores.task_store("t1").count() == 1
        assert stores.session_store("s1", "default", "ann").count() == 1


class TestExactlyOnce:
    def test_a_replayed_batch_is_found_stored_not_stored_again(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock)
        queue.enqueue_many([_turn(n) for n in range(6)])
        queued = _queued(backend)
        worker.run(until_idle=True)
        _forget_acks(backend, queued)
        report = IngestWorker(queue, stores).run(until_idle=True)
        assert (report.stored, report.found_stored) == (0, 6)
        assert stores.project_store("chat").count() == 6

    def test_a_replayed_merge_boosts_once(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock)
        project = stores.project_store("chat")
        held = project.add(
            project.new_item("decision", "Deploys go out on Fridays", importance=0.5)
        )
        queue.enqueue({"text": "Deploys go out on Fridays", "kind": "decision", "project": "chat"})
        queued = _queued(backend)
        assert worker.run(until_idle=True).merged == 1
        boosted = project.require(held.id)
        _forget_acks(backend, queued)
        report = IngestWorker(queue, stores).run(until_idle=True)
        assert report.merged == 1
        assert project.require(held.id) == boosted
        assert len(boosted.merged_from) == 1

    def test_two_workers_taking_turns_store_each_event_once(self, make_backend, clock):
        backend = make_backend()
        queue, stores, _ = _setup(backend, clock)
        queue.enqueue_many([_turn(n) for n in range(20)])
        a = IngestWorker(queue, stores, batch_size=3)
        b = IngestWorker(queue, stores, batch_size=3)
        while a.run_once().claimed + b.run_once().claimed:
            pass
        assert stores.project_store("chat").count() == 20
        assert queue.status().done == 20


class TestFailures:
    def test_a_failing_embedder_is_retried_with_backoff_then_stores(self, make_backend, clock):
        embedder = FlakyEmbedder()
        backend = make_backend(embedder)
        queue, stores, worker = _setup(backend, clock, backoff=Backoff(base_s=10, cap_s=10))
        queue.enqueue_many([_turn(1), _turn(2, "Caroline: boom goes the dynamite")])
        first = worker.run_once()
        # The batch failed as a whole; alone, the good event went in and the other waits.
        assert (first.stored, first.retried, first.dead) == (1, 1, 0)
        assert worker.run_once().claimed == 0  # not due yet
        embedder.failing = False
        clock.advance(11)
        assert worker.run_once().stored == 1
        assert stores.project_store("chat").count() == 2

    def test_an_event_that_keeps_failing_is_buried_with_the_reason(self, make_backend, clock):
        backend = make_backend(FlakyEmbedder())
        queue, _, worker = _setup(backend, clock, max_failures=3, backoff=Backoff(1, 1))
        queue.enqueue(_turn(1, "Caroline: boom"))
        for _ in range(3):
            worker.run_once()
            clock.advance(2)
        (letter,) = queue.dead_letters()
        assert letter.reason.startswith("failed 3 times; last: RuntimeError")
        assert "embedding service is down" in letter.reason
        assert (letter.failures, letter.origin, letter.idempotency_key) == (3, "worker", "turn-1")
        assert queue.status().pending == 0

    def test_an_event_the_store_refuses_is_buried_at_once(self, make_backend, clock):
        queue, _stores, worker = _setup(make_backend(), clock)
        # A global preference needs a confirmation, and a worker has nobody to ask.
        queue.enqueue_many(
            [
                {"text": "Always use tabs", "kind": "preference", "tier": "global"},
                {"text": "Uses a Mac", "kind": "note", "tier": "global"},
            ]
        )
        report = worker.run(until_idle=True)
        assert (report.stored, report.dead) == (1, 1)
        (letter,) = queue.dead_letters()
        assert letter.reason.startswith("refused: ConfirmationDeclined")

    def test_an_event_a_worker_keeps_dying_on_is_buried(self, make_backend, clock):
        queue, _, worker = _setup(make_backend(), clock, max_claims=2)
        queue.enqueue(_turn(1))
        for owner in ("dies-1", "dies-2"):
            queue.store.claim(owner, 1, lease_s=5, now=clock())
            clock.advance(6)
        assert worker.run_once().dead == 1
        (letter,) = queue.dead_letters()
        assert "claimed 3 times" in letter.reason
        assert letter.failures == 0  # nothing failed: no attempt got that far

    def test_a_claimed_too_often_event_already_stored_is_done_not_dead(self, make_backend, clock):
        backend = make_backend()
        queue, stores, worker = _setup(backend, clock, max_claims=2)
        queue.enqueue(_turn(1))
        queued = _queued(backend)
        worker.run(until_idle=True)
        _forget_acks(backend, queued)
        with backend.engine.begin() as connection:
            connection.execute(sa.text("UPDATE ae_ingest_queue SET claims = 5"))
        report = IngestWorker(queue, stores, max_claims=2).run(until_idle=True)
        assert (report.found_stored, report.dead) == (1, 0)

    def test_an_unreadable_row_is_buried_as_such(self, make_backend, clock):
        backend = make_backend()
        queue, _, worker = _setup(backend, clock)
        queue.enqueue(_turn(1))
        with backend.engine.begin() as connection:
            connection.execute(sa.text("UPDATE ae_ingest_queue SET event = '{broken'"))
        assert worker.run_once().dead == 1
        (letter,) = queue.dead_letters()
        assert letter.reason.startswith("not an event: not JSON")
        assert letter.failures == 0

    def test_a_failing_decider_is_contained_and_the_event_kept(self, make_backend, clock):
        class Raises:
            def decide(self, item):
                raise KeyError("no model loaded")

        class Garbage:
            def decide(self, item):
                return "drop it"

        class NoReason:
            def decide(self, item):
                return Decision(keep=False)

        for decider in (Raises(), Garbage(), NoReason()):
            backend = make_backend()
            queue, stores, worker = _setup(backend, clock, decider=decider)
            queue.enqueue(_turn(1))
            report = worker.run(until_idle=True)
            assert report.stored == 1
            assert len(report.errors) == 1
            assert stores.project_store("chat").count() == 1
            backend.close()


class TestDecideSafely:
    def test_a_working_decider_is_heard(self):
        item = IngestEvent("Nate: haha", kind="turn", source="Nate", idempotency_key="k").item()
        assert decide_safely(DEFAULT_DECIDER, item) == (Decision.dropped("chit_chat"), None)
        assert decide_safely(None, item) == (Decision.kept(), None)

    def test_a_failing_decider_keeps_the_item_and_says_why(self):
        class Raises:
            def decide(self, item):
                raise KeyError("no model")

        item = IngestEvent("Nate: haha", kind="turn", idempotency_key="k").item()
        verdict, error = decide_safely(Raises(), item)
        assert verdict.keep
        assert error == "decider raised KeyError: 'no model'"


class TestOutages:
    def test_a_run_to_idle_gives_up_after_its_failures_in_a_row(self, make_backend, clock):
        backend = make_backend()
        queue, _, worker = _setup(backend, clock, max_failures=3, backoff=Backoff(0.001, 0.001))
        queue.enqueue(_turn(1))
        backend.close()  # the database is gone
        with pytest.raises(BackendError):
            worker.run(until_idle=True)

    def test_a_running_worker_waits_out_an_outage(self, make_backend, clock, caplog):
        backend = make_backend()
        _, _, worker = _setup(backend, clock, backoff=Backoff(0.01, 0.01))
        backend.close()
        stop = threading.Event()
        timer = threading.Timer(0.3, stop.set)
        timer.start()
        try:
            assert worker.run(stop=stop, poll_s=0.01).claimed == 0
        finally:
            timer.cancel()
        assert caplog.text.count("ingest_backend_down") >= 3

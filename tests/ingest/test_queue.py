"""The queue in the store's database: enqueued once, leased, dead-lettered, redacted first."""

from __future__ import annotations

import concurrent.futures
import json
import time

import pytest
import sqlalchemy as sa

from agent_engine import AuditAction
from agent_engine.ingest import IngestQueue
from agent_engine.memory.queue import Finished, State

SECRET = "sk-proj-Zx81kQ0aTr5LmW2nB7vC9dE4fG6hJ3pQ"  # noqa: S105 - a fake, to be redacted


def _event(n: int, **extra: object) -> dict[str, object]:
    return {"text": f"fact number {n}", "kind": "note", "project": "alpha", **extra}


def _raw_rows(backend) -> str:
    """Every row of the queue's two tables, as text (what the database holds)."""
    with backend.engine.connect() as connection:
        rows = [
            *connection.execute(sa.text("SELECT * FROM ae_ingest_queue")),
            *connection.execute(sa.text("SELECT * FROM ae_ingest_dead")),
        ]
    return json.dumps([list(map(str, row)) for row in rows])


class TestEnqueue:
    def test_a_resent_key_is_queued_once(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        first = queue.enqueue(_event(1, idempotency_key="k1"))
        again = queue.enqueue_many(
            [_event(1, idempotency_key="k1"), _event(2, idempotency_key="k1")]
        )
        assert first.queued
        assert not first.duplicate
        assert [r.duplicate for r in again] == [True, True]
        assert again[0].item_id == first.item_id
        assert queue.status().pending == 1

    def test_the_same_key_in_another_scope_is_another_event(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        results = queue.enqueue_many(
            [_event(1, idempotency_key="k"), _event(1, idempotency_key="k", project="beta")]
        )
        assert [r.queued for r in results] == [True, True]
        assert results[0].item_id != results[1].item_id

    def test_malformed_events_go_to_the_dead_letters_and_the_rest_is_queued(
        self, make_backend, clock
    ):
        queue = IngestQueue.of(make_backend(), clock=clock)
        results = queue.enqueue_many([_event(1), {"txt": "typo"}, 42, _event(2, importance=7)])
        assert [r.queued for r in results] == [True, False, False, False]
        assert "txt" in (results[1].rejected or "")
        assert "importance" in (results[3].rejected or "")
        letters = queue.dead_letters()
        assert [json.loads(d.event) for d in letters[:2]] == [{"txt": "typo"}, 42]
        assert all(d.origin == "enqueue" and d.idempotency_key is None for d in letters)
        status = queue.status()
        assert (status.pending, status.dead) == (1, 3)

    def test_nothing_secret_is_persisted_and_the_redaction_is_journaled(self, make_backend, clock):
        backend = make_backend()
        queue = IngestQueue.of(backend, clock=clock)
        result = queue.enqueue(_event(1, text=f"the key is {SECRET}", payload={"env": SECRET}))
        queue.enqueue({"text": f"no kind of event {SECRET}", "colour": "red"})
        assert result.redacted == {"openai_api_key": 2}
        assert SECRET not in _raw_rows(backend)
        assert "[REDACTED:openai_api_key]" in _raw_rows(backend)
        (event,) = backend.audit.events(actions=[AuditAction.REDACT])
        assert event.item_ids == (result.item_id,)
        assert event.detail["items"][0]["found"] == {"openai_api_key": 2}
        assert SECRET not in json.dumps(event.detail)

    def test_redaction_off_queues_the_event_as_given(self, make_backend, clock):
        backend = make_backend()
        queue = IngestQueue.of(backend, clock=clock, redaction=None)
        queue.enqueue(_event(1, text=f"the key is {SECRET}"))
        assert SECRET in _raw_rows(backend)


class TestLeases:
    def test_workers_claim_different_events_oldest_first(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue_many([_event(n) for n in range(5)])
        store = queue.store
        a = store.claim("a", 3, lease_s=60, now=clock())
        b = store.claim("b", 3, lease_s=60, now=clock())
        assert [json.loads(e.event)["text"] for e in a] == [f"fact number {n}" for n in range(3)]
        assert len(b) == 2
        assert not {e.seq for e in a} & {e.seq for e in b}
        assert store.claim("c", 3, lease_s=60, now=clock()) == []
        status = queue.status()
        assert (status.pending, status.leased) == (0, 5)

    def test_a_lease_that_ran_out_passes_on_and_the_old_holder_cannot_finish(
        self, make_backend, clock
    ):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue(_event(1))
        store = queue.store
        (held,) = store.claim("dead-worker", 10, lease_s=30, now=clock())
        clock.advance(31)
        (again,) = store.claim("next-worker", 10, lease_s=30, now=clock())
        assert again.seq == held.seq
        assert again.claims == 2
        assert store.finish("dead-worker", [Finished(held.seq, State.DONE, "x")], clock()) == 0
        assert store.fail("dead-worker", [held.seq], "late", clock()) == 0
        assert store.bury("dead-worker", [(held.seq, "late")], clock()) == 0
        assert store.finish("next-worker", [Finished(held.seq, State.DONE, "ok")], clock()) == 1
        status = queue.status()
        assert (status.pending, status.leased, status.done, status.dead) == (0, 0, 1, 0)

    def test_a_failed_event_is_due_again_only_after_its_backoff(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue(_event(1))
        store = queue.store
        (row,) = store.claim("w", 1, lease_s=30, now=clock())
        clock.advance(1)
        retry_at = clock.now.replace(second=clock.now.second + 10)
        assert store.fail("w", [row.seq], "busy", retry_at) == 1
        assert store.claim("w", 1, lease_s=30, now=clock()) == []
        clock.now = retry_at
        (again,) = store.claim("w", 1, lease_s=30, now=clock())
        assert (again.failures, again.claims) == (1, 2)


class TestDeadLettersAndRetry:
    def test_buried_events_are_retried_and_malformed_input_stays(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue_many([_event(1, idempotency_key="k1"), {"no": "text"}])
        (row,) = queue.store.claim("w", 5, lease_s=30, now=clock())
        assert queue.store.bury("w", [(row.seq, "refused: it was wrong")], clock()) == 1
        letters = queue.dead_letters()
        assert [d.reason for d in letters][1] == "refused: it was wrong"
        assert letters[1].idempotency_key == "k1"
        assert letters[1].failures == 1
        revived = queue.retry()
        assert [d.idempotency_key for d in revived] == ["k1"]
        assert [d.idempotency_key for d in queue.dead_letters()] == [None]
        (again,) = queue.store.claim("w", 5, lease_s=30, now=clock())
        assert json.loads(again.event)["idempotency_key"] == "k1"
        assert (again.claims, again.failures) == (1, 0)

    def test_retry_by_number_revives_only_those(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue_many([_event(n) for n in range(3)])
        rows = queue.store.claim("w", 5, lease_s=30, now=clock())
        queue.store.bury("w", [(r.seq, "no") for r in rows], clock())
        chosen = queue.dead_letters()[1].seq
        assert [d.seq for d in queue.retry([chosen])] == [chosen]
        assert queue.status().pending == 1
        assert queue.status().dead == 2

    def test_finished_events_are_purged_after_the_retention_and_then_not_guarding(
        self, make_backend, clock
    ):
        queue = IngestQueue.of(make_backend(), clock=clock)
        queue.enqueue(_event(1, idempotency_key="k"))
        (row,) = queue.store.claim("w", 5, lease_s=30, now=clock())
        finished_at = clock()
        queue.store.finish("w", [Finished(row.seq, State.DONE, "stored:x")], finished_at)
        assert queue.enqueue(_event(1, idempotency_key="k")).duplicate
        clock.advance(3600)
        assert queue.store.purge(finished_at) == 0
        assert queue.store.purge(clock()) == 1
        assert queue.enqueue(_event(1, idempotency_key="k")).queued


LINES = [
    json.dumps(_event(1)),
    "",
    '{"text": "half a line',
    json.dumps(_event(2, idempotency_key="dup")),
    json.dumps(_event(3, idempotency_key="dup")),
    json.dumps({"kind": "note"}),
]


class TestBackfill:
    def test_dry_run_checks_every_line_and_records_nothing(self, make_backend, clock):
        backend = make_backend()
        queue = IngestQueue.of(backend, clock=clock)
        report = queue.backfill(LINES, origin="events.jsonl", dry_run=True)
        assert (report.lines, report.queued) == (6, 3)
        assert [number for number, _ in report.rejected] == [3, 6]
        assert "not JSON" in report.rejected[0][1]
        assert _raw_rows(backend) == "[]"

    def test_bad_lines_go_to_the_dead_letters_with_their_place(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        seen: list[int] = []
        report = queue.backfill(LINES, origin="events.jsonl", progress=seen.append)
        assert (report.lines, report.queued, report.duplicates) == (6, 2, 1)
        assert [d.origin for d in queue.dead_letters()] == ["events.jsonl:3", "events.jsonl:6"]
        assert queue.dead_letters()[0].event == '{"text": "half a line'
        assert seen[-1] == 6
        assert queue.status().pending == 2


class TestRedactedRejections:
    def test_a_reason_that_quotes_a_secret_is_redacted_too(self, make_backend, clock):
        backend = make_backend()
        queue = IngestQueue.of(backend, clock=clock)
        (result,) = queue.enqueue_many([_event(1, tags=SECRET)])
        assert result.rejected is not None
        assert SECRET not in result.rejected
        assert "[REDACTED:openai_api_key]" in queue.dead_letters()[0].reason
        assert SECRET not in _raw_rows(backend)


class TestBackfillSources:
    def test_two_files_of_one_name_do_not_share_keys(self, make_backend, clock):
        queue = IngestQueue.of(make_backend(), clock=clock)
        lines = [json.dumps({"text": "Hi there, I moved house", "kind": "turn"})]
        first = queue.backfill(lines, origin="chat.jsonl", source="/a/chat.jsonl")
        other = queue.backfill(lines, origin="chat.jsonl", source="/b/chat.jsonl")
        again = queue.backfill(lines, origin="chat.jsonl", source="/a/chat.jsonl")
        assert (first.queued, other.queued, again.queued, again.duplicates) == (1, 1, 0, 1)


@pytest.mark.parametrize("db_kind", ["postgresql"], indirect=True)
def test_a_late_worker_waits_out_a_claim_in_progress_and_then_holds_nothing(make_backend, clock):
    """A's lease ran out and B is claiming the row: A's write waits, then leaves B's row be."""
    backend = make_backend()
    queue = IngestQueue.of(backend, clock=clock)
    queue.enqueue(_event(1))
    (row,) = queue.store.claim("a", 1, lease_s=5, now=clock())
    engine = sa.create_engine(backend.url)
    try:
        with engine.connect() as other:
            claiming = other.begin()
            other.execute(sa.text("SELECT seq FROM ae_ingest_queue FOR UPDATE"))
            other.execute(sa.text("UPDATE ae_ingest_queue SET lease_owner = 'b'"))
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                late = pool.submit(queue.store.fail, "a", [row.seq], "late", clock())
                time.sleep(0.3)
                assert not late.done()  # waiting for B's claim to end
                claiming.commit()
                assert late.result(timeout=30) == 0
    finally:
        engine.dispose()
    with backend.engine.connect() as connection:
        owner, failures = connection.execute(
            sa.text("SELECT lease_owner, failures FROM ae_ingest_queue")
        ).one()
    assert (owner, failures) == ("b", 0)

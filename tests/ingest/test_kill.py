"""Kill the worker mid-work (SIGKILL, 100 times): nothing lost, nothing stored twice.

Each trial queues more events (a few of them re-sends of earlier keys, some small talk the
decider drops, some repeats of one decision that merge) and forks a worker process. Odd
trials kill it after a random delay: while it opens the store, mid-claim, mid-embedding,
between a batch's write and its acknowledgement, or idle. Even trials kill it the moment the
queue shows it holding a claim, so that whatever the machine's speed, many kills land while
events are in hand. A final worker then drains the queue, and the store must hold every
event's memory exactly once: stored under its own id, merged once into the decision it
repeats, or dropped by the decider, never two of any.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import random
import signal
import time

import pytest
import sqlalchemy as sa

from agent_engine import HashingEmbedder, MemoryStores
from agent_engine.ingest import IngestQueue, IngestWorker
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.tiers.dedup import MERGE_BOOST

TRIALS = {"sqlite": 100, "postgresql": 40}
PER_TRIAL = 12
KILL_WITHIN_S = 0.12
CLAIM_WAIT_S = 10.0
"""How long an even trial waits to see its worker hold a claim before it kills it anyway."""
DECISIONS = [
    "Deploys go out on Friday afternoons after the smoke tests pass",
    "The billing service keeps its own Postgres database",
    "Feature flags are removed two sprints after launch",
    "Every public endpoint needs a rate limit",
    "We pin dependencies and update them monthly",
    "Logs are JSON lines with a request id",
    "Code review needs one approval from another team",
    "Secrets live in the vault, never in the repository",
]
"""Decisions the trials repeat: each merges into its first, a dozen times at most (an item
keeps the first and last 16 of the origins merged into it, where a replay looks)."""


def _events(trial: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [
        {
            "text": f"Caroline: in {1900 + trial} I planted tree number {trial * PER_TRIAL + n}",
            "source": "Caroline",
            "kind": "turn",
            "project": "chat",
            "idempotency_key": f"t{trial}-{n}",
        }
        for n in range(PER_TRIAL - 3)
    ]
    events.append(
        {
            "text": "Melanie: Thanks!",
            "source": "Melanie",
            "kind": "turn",
            "project": "chat",
            "idempotency_key": f"t{trial}-thanks",
        }
    )
    events.append(
        {
            "text": DECISIONS[trial % len(DECISIONS)],
            "kind": "decision",
            "project": "chat",
            "importance": 0.1,
            "idempotency_key": f"t{trial}-decision",
        }
    )
    if trial:  # a client re-sending an earlier event
        events.append(dict(_events(trial - 1)[0]))
    return events


def _work(url: str, owner: str) -> None:
    """The worker process: short leases, so the next one soon takes over what it held."""
    backend = SQLAlchemyBackend(url, embedder=HashingEmbedder())
    queue = IngestQueue.of(backend)
    worker = IngestWorker(queue, MemoryStores(backend), batch_size=5, lease_s=0.05, owner=owner)
    worker.run(poll_s=0.005)


def _until_holding(backend: SQLAlchemyBackend, owner: str) -> None:
    """Return once ``owner`` holds a claim on some event (or after ``CLAIM_WAIT_S``)."""
    held = sa.text("SELECT count(*) FROM ae_ingest_queue WHERE lease_owner = :owner")
    deadline = time.monotonic() + CLAIM_WAIT_S
    while time.monotonic() < deadline:
        with backend.engine.connect() as connection:
            if connection.execute(held, {"owner": owner}).scalar_one():
                return
        time.sleep(0.001)


@pytest.mark.parametrize("db_kind", ["sqlite", "postgresql"], indirect=True)
def test_sigkill_mid_work_loses_nothing_and_stores_nothing_twice(make_backend, db_kind):
    backend = make_backend()
    url = backend.url
    queue = IngestQueue.of(backend)
    fork = multiprocessing.get_context("fork")
    rng = random.Random(20261128)
    keys: set[str] = set()
    for trial in range(TRIALS[db_kind]):
        events = _events(trial)
        queue.enqueue_many(events)
        keys.update(str(event["idempotency_key"]) for event in events)
        owner = f"trial-{trial}"
        process = fork.Process(target=_work, args=(url, owner), daemon=True)
        process.start()
        if trial % 2:
            time.sleep(rng.uniform(0, KILL_WITHIN_S))
        else:
            _until_holding(backend, owner)
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        assert process.exitcode == -signal.SIGKILL
    time.sleep(0.06)  # the last killed worker's lease runs out
    report = IngestWorker(queue, MemoryStores(backend)).run(until_idle=True)

    status = queue.status()
    assert (status.pending, status.leased, status.dead) == (0, 0, 0), status
    with backend.engine.connect() as connection:
        outcomes = dict(
            connection.execute(
                sa.text("SELECT idempotency_key, outcome FROM ae_ingest_queue")
            ).all()
        )
        claims = connection.execute(sa.text("SELECT claims FROM ae_ingest_queue")).scalars().all()
    assert set(outcomes) == keys  # every event accounted for, each once
    # The kills landed mid-work: at least every other kill of a worker seen holding a claim
    # left events to claim again (only one that acknowledged its batch first would not).
    assert sum(c > 1 for c in claims) >= TRIALS[db_kind] // 4
    stores = MemoryStores(backend)
    chat = stores.project_store("chat")
    items = chat.list_all()
    by_id = collections.Counter(item.id for item in items)
    assert max(by_id.values()) == 1
    turns = [i for i in items if i.kind == "turn"]
    expected_turns = {k for k in keys if not k.endswith(("-thanks", "-decision"))}
    assert len(turns) == len(expected_turns)
    assert all(outcomes[k].startswith("stored:") for k in expected_turns)
    assert all(outcomes[k] == "acknowledgement" for k in keys if k.endswith("-thanks"))
    assert not [i for i in items if "Thanks" in i.text]
    # Every repeat of a decision merged into its first, once each: no double boost.
    decisions = [i for i in items if i.kind == "decision"]
    assert sorted(i.text for i in decisions) == sorted(DECISIONS)
    for decision in decisions:
        repeats = (
            sum(1 for t in range(TRIALS[db_kind]) if DECISIONS[t % len(DECISIONS)] == decision.text)
            - 1
        )
        merged = [origin.id for origin in decision.merged_from]
        assert len(merged) == len(set(merged)) == repeats
        assert decision.importance == pytest.approx(min(1.0, 0.1 + MERGE_BOOST * repeats))
    assert report.dead == 0

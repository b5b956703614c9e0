"""AgentEngineStore's async side: abatch on a worker thread, in call order, cancellable.

The blocking part is the global store's own confirmation callback (a real part of the write
path): while it waits, the event loop must go on, a batch queued behind it must be
cancellable before it starts, and one cancelled while it runs must finish whole.
"""

from __future__ import annotations

import asyncio
import shutil
import threading

import pytest
from langgraph.store.base import PutOp

from agent_engine import HashingEmbedder, MemoryStores
from agent_engine.integrations.langgraph import AgentEngineStore
from tests.langgraph.conftest import EMBEDDER_DIM, run_async

PROJECT = ("project", "shop")
USER = ("global", "ada")


class TestAsyncCalls:
    @run_async
    async def test_every_async_method(self, store):
        await store.aput(("project", "shop", "facts"), "k", {"text": "red apple"})
        await store.aput(("project", "shop", "facts"), "j", {"text": "blue car"})
        assert (await store.aget(("project", "shop", "facts"), "k")).value == {"text": "red apple"}
        found = await store.asearch(("project", "shop"), query="red apple", limit=1)
        assert [item.key for item in found] == ["k"]
        assert await store.alist_namespaces() == [("project", "shop", "facts")]
        await store.adelete(("project", "shop", "facts"), "k")
        assert await store.aget(("project", "shop", "facts"), "k") is None

    @run_async
    async def test_concurrent_calls_run_in_the_order_made(self, store):
        """One worker thread: puts of one key made together leave the last one's value."""
        await asyncio.gather(*(store.aput(PROJECT, "k", {"text": f"v{n}"}) for n in range(20)))
        assert (await store.aget(PROJECT, "k")).value == {"text": "v19"}

    @run_async
    async def test_a_bad_batch_raises_to_the_awaiting_caller(self, store, backend):
        with pytest.raises(ValueError, match="names no scope"):
            await store.abatch([PutOp(PROJECT, "a", {"text": "x"}), PutOp(("nowhere",), "b", {})])
        assert backend.count() == 0


@pytest.fixture
def gate():
    """A confirmation callback that holds a global write until the test opens it."""

    class Gate:
        def __init__(self):
            self.asked = threading.Event()
            self.opened = threading.Event()
            self.threads: list[str] = []

        def __call__(self, _request) -> bool:
            self.threads.append(threading.current_thread().name)
            self.asked.set()
            return self.opened.wait(timeout=30)

    return Gate()


@pytest.fixture
def gated(backend, gate):
    """A store whose global writes (of preferences, a risky kind) wait for ``gate``."""
    adapter = AgentEngineStore(
        MemoryStores(backend, confirm=gate), fields=["text"], kind="preference", allow_global=True
    )
    yield adapter
    gate.opened.set()
    adapter.close()


async def _until(event: threading.Event) -> int:
    """Wait for ``event`` without blocking the loop; how many times the loop ran meanwhile."""
    turns = 0
    while not event.is_set():
        await asyncio.sleep(0.001)
        turns += 1
    return turns


class TestWorkerThread:
    @run_async
    async def test_a_blocked_batch_does_not_block_the_event_loop(self, gated, gate):
        running = asyncio.create_task(gated.aput(USER, "tabs", {"text": "prefers tabs"}))
        turns = await _until(gate.asked)
        assert turns > 0
        assert gate.threads[0].startswith("agent-engine-langgraph")
        assert gate.threads[0] != threading.current_thread().name
        gate.opened.set()
        await running
        assert (await gated.aget(USER, "tabs")).value == {"text": "prefers tabs"}

    @run_async
    async def test_a_cancelled_batch_finished_whole_or_never_started(self, gated, gate, backend):
        """The batch running when cancelled completes; the one queued behind it never runs."""
        running = asyncio.create_task(
            gated.abatch(
                [
                    PutOp(PROJECT, "a", {"text": "written with the preference"}),
                    PutOp(USER, "tabs", {"text": "prefers tabs"}),
                ]
            )
        )
        await _until(gate.asked)
        queued = asyncio.create_task(gated.aput(PROJECT, "b", {"text": "queued behind it"}))
        await asyncio.sleep(0.01)
        queued.cancel()
        running.cancel()
        for task in (queued, running):
            with pytest.raises(asyncio.CancelledError):
                await task
        gate.opened.set()
        # The worker runs in order: this read waits until the running batch is done.
        assert (await gated.aget(PROJECT, "a")).value == {"text": "written with the preference"}
        assert (await gated.aget(USER, "tabs")).value == {"text": "prefers tabs"}
        assert await gated.aget(PROJECT, "b") is None
        assert backend.count() == 2
        await gated.aput(PROJECT, "c", {"text": "the store goes on"})
        assert (await gated.aget(PROJECT, "c")).value == {"text": "the store goes on"}

    def test_close_stops_the_worker_and_a_later_call_starts_one(self, store):
        asyncio.run(store.aput(PROJECT, "k", {"text": "x"}))
        store.close()
        assert asyncio.run(store.aget(PROJECT, "k")).value == {"text": "x"}
        store.close()
        store.close()


def test_a_sqlite_file_keeps_the_items_for_the_next_process(sqlite_template, tmp_path):
    """Written through one store, read back through another over the same file."""
    from agent_engine.memory.sql import SQLAlchemyBackend  # noqa: PLC0415

    path = tmp_path / "memory.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    with SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=EMBEDDER_DIM)) as backend:
        first = AgentEngineStore(MemoryStores(backend), fields=["text"])
        first.put(("project", "shop", "facts"), "k", {"text": "red apple", "n": [1, 2]})
        first.put(("task", "shop", "ada", "t1"), "j", {"text": "blue car"})
        first.close()
    with SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=EMBEDDER_DIM)) as backend:
        second = AgentEngineStore(MemoryStores(backend), fields=["text"])
        assert second.get(("project", "shop", "facts"), "k").value == {
            "text": "red apple",
            "n": [1, 2],
        }
        assert second.list_namespaces() == [
            ("project", "shop", "facts"),
            ("task", "shop", "ada", "t1"),
        ]
        assert second.search((), query="red apple")[0].key == "k"

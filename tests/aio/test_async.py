"""The async twins: the sync API's packages, built off the loop, whole or not at all."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    DuplicateItemError,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Task,
    Tier,
    ValidationError,
)
from agent_engine.aio import AsyncContextAssembler, AsyncMemoryBackend
from agent_engine.aio.assembler import LOCAL_WORKERS, REMOTE_WORKERS
from agent_engine.memory.sql import SQLAlchemyBackend

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TOPICS = ["deploy", "billing", "search", "auth"]
WAIT = 10.0
"""Seconds a test waits for what must happen long before: past it, the test fails."""


def _tasks(assembler):
    tasks = []
    for n, topic in enumerate(TOPICS):
        project = assembler.project_store(f"p{n}")
        for i in range(15):
            project.add_decision(f"{topic} decision {i}: keep the {topic} retries at {i}")
        task = Task(id=f"t{n}", project_id=f"p{n}", description=f"fix the {topic} retries")
        for step in range(6):
            assembler.task_store(task).add_reasoning(f"{topic} step {step}", "work")
        tasks.append(task)
    return tasks


def test_concurrent_awaited_builds_match_the_sync_api(backend):
    """Many builds gathered at once give exactly the packages the sync assembler gives."""
    sync = ContextAssembler(backend, clock=lambda: NOW, config=AssemblerConfig(track_access=False))
    tasks = _tasks(sync)
    jobs = [
        (task, ContextRequest(budget_tokens=budget, query=f"{topic} retries"))
        for task in tasks
        for topic in TOPICS
        for budget in (90, 400)
        if topic in TOPICS[:2]
    ]
    expected = [sync.build_context(task, request).render() for task, request in jobs]

    async def main():
        async with AsyncContextAssembler(sync, workers=4) as twin:
            packages = await asyncio.gather(*(twin.build_context(*job) for job in jobs))
        return [package.render() for package in packages]

    assert asyncio.run(main()) == expected


class Gate:
    """A query builder that holds a build until the event loop opens the gate."""

    def __init__(self):
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.thread = None

    def history_turns(self, request):
        return 0

    def build_query(self, request, history):
        self.thread = threading.get_ident()
        self.entered.set()
        assert self.opened.wait(WAIT), "the loop never opened the gate: it was blocked"
        return request


def _memory():
    return MemoryStores(InMemoryBackend(embedder=HashingEmbedder(dim=32)), clock=lambda: NOW)


def test_a_build_runs_off_the_loop_which_keeps_running():
    """While a build waits, the loop runs the coroutine that lets it go on."""
    gate = Gate()
    twin = AsyncContextAssembler(_memory(), query_builder=gate, strict=True)
    task = Task(id="t", project_id="p")

    async def main():
        build = asyncio.ensure_future(
            twin.build_context(task, ContextRequest(budget_tokens=100, query="q"))
        )
        assert await asyncio.to_thread(gate.entered.wait, WAIT)
        gate.opened.set()  # only a loop that is free gets here
        package = await build
        await twin.aclose()
        return package, threading.get_ident()

    package, loop_thread = asyncio.run(main())
    assert package.task_id == "t"
    assert gate.thread not in {None, loop_thread}


class HeldConfirmation:
    """A global store's confirmation callback that holds the write until released."""

    def __init__(self):
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, _request):
        self.asked.set()
        assert self.release.wait(WAIT)
        return True


def _held_stores(confirm):
    """Stores whose global writes wait for ``confirm`` to be released."""
    return MemoryStores(
        InMemoryBackend(embedder=HashingEmbedder(dim=32)), clock=lambda: NOW, confirm=confirm
    )


def test_a_write_cancelled_while_running_ends_whole_before_the_cancel_is_heard():
    """Cancelling a running write waits for it: the caller sees CancelledError, the item is in."""
    confirm = HeldConfirmation()
    stores = _held_stores(confirm)
    twin = AsyncContextAssembler(stores)
    user = twin.global_store("ada")

    async def main():
        write = asyncio.ensure_future(user.add_preference("tabs over spaces", category="style"))
        assert await asyncio.to_thread(confirm.asked.wait, WAIT)
        write.cancel()
        await asyncio.sleep(0)
        assert not write.done()  # the write is still running: the cancel waits for it
        confirm.release.set()
        with pytest.raises(asyncio.CancelledError):
            await write
        stored = await user.list_all()
        await twin.aclose()
        return stored

    (item,) = asyncio.run(main())
    assert item.text == "tabs over spaces"


def test_a_write_cancelled_before_it_started_never_runs():
    """A call still queued behind a busy worker is dropped whole when cancelled."""
    confirm = HeldConfirmation()
    stores = _held_stores(confirm)
    twin = AsyncContextAssembler(stores, workers=1)
    user, project = twin.global_store("ada"), twin.project_store("p")

    async def main():
        busy = asyncio.ensure_future(user.add_preference("tabs over spaces", category="style"))
        assert await asyncio.to_thread(confirm.asked.wait, WAIT)
        queued = asyncio.ensure_future(project.add_decision("ship on Thursdays"))
        await asyncio.sleep(0)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        confirm.release.set()
        await busy
        stored = await project.list_all()
        await twin.aclose()
        return stored

    assert asyncio.run(main()) == []


def test_errors_come_back_typed_and_nothing_is_written():
    """A bad call raises the sync API's typed error in the awaiting coroutine."""

    async def main():
        async with AsyncContextAssembler(_memory()) as twin:
            task = twin.task_store(Task(id="t", project_id="p"))
            foreign = twin.project_store("p").new_item("note", "from another scope")
            with pytest.raises(ValidationError) as raised:
                await task.add_many([task.new_item("note", "mine"), foreign])
            return raised.value, await task.list_all()

    error, stored = asyncio.run(main())
    assert error.field == "tier"
    assert stored == []


def test_a_session_awaited_from_first_message_to_finalisation():
    """The session's twin writes, a task in it reads it, finalising reports the summary."""

    async def main():
        async with AsyncContextAssembler(_memory()) as twin:
            session = twin.session_store("s", "p")
            await session.add_message("ada", "Ship the fix before Friday.")
            task = Task(id="t", project_id="p", session_id="s")
            package = await twin.build_context(task, ContextRequest(budget_tokens=200))
            end = await twin.finish_session("s", "p")
            return package, end, await session.count()

    package, end, left = asyncio.run(main())
    assert [s.tier for s in package.selections] == [Tier.SESSION]
    assert (end.removed, end.summary, left) == (1, "- ada: Ship the fix before Friday.", 0)


def test_forks_are_awaited_and_return_async_stores():
    """A fork of a task's or a session's twin is a twin too, and reads its parent's memory."""

    async def main():
        async with AsyncContextAssembler(_memory()) as twin:
            session = twin.session_store("s", "p")
            await session.add_message("ada", "Ship the fix before Friday.")
            branch = await session.fork("s2")
            await session.add_message("ada", "Not this one.")
            task = twin.task_store(Task(id="t", project_id="p"))
            await task.add_instruction("Fix the login")
            other = await task.fork("t2")
            return (
                [i.text for i in await branch.list_all()],
                await other.count(),
                [f.parent for f in await branch.lineage()],
            )

    texts, count, parents = asyncio.run(main())
    assert texts == ["ada: Ship the fix before Friday."]
    assert count == 1
    assert parents == ["session:p:default:s"]


def test_a_closed_twin_refuses_calls():
    """After aclose, a call fails at once instead of hanging."""

    async def main():
        twin = AsyncContextAssembler(_memory())
        await twin.aclose()
        with pytest.raises(RuntimeError):
            await twin.build_context(Task(id="t"), ContextRequest(budget_tokens=10))

    asyncio.run(main())


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param({"workers": 0}, "workers", id="no-workers"),
        pytest.param({"workers": True}, "workers", id="bool-workers"),
    ],
)
def test_bad_settings_are_refused(arguments, field):
    """Settings the twin cannot run with raise a typed error naming them."""
    with pytest.raises(ValidationError) as raised:
        AsyncContextAssembler(_memory(), **arguments)
    assert raised.value.field == field


def test_settings_beside_an_assembler_are_refused():
    """Settings belong to the ContextAssembler given, and are not silently dropped."""
    with pytest.raises(ValidationError) as raised:
        AsyncContextAssembler(ContextAssembler(_memory()), strict=True)
    assert raised.value.field == "settings"


def test_a_backend_twin_reads_and_writes_what_the_sync_backend_holds(tmp_path):
    """The backend twin's calls are the backend's, awaited, and what it wrote is stored."""
    backend = SQLAlchemyBackend(
        f"sqlite:///{tmp_path / 'twin.db'}", embedder=HashingEmbedder(dim=32)
    )
    stores = MemoryStores(backend, clock=lambda: NOW)
    project = stores.project_store("p")
    item = project.new_item("note", "deploys happen on Thursdays")

    async def main():
        async with AsyncMemoryBackend(backend, workers=2) as twin:
            await twin.add(item)
            hits = await twin.search("deploys Thursdays", k=1)
            fetched = await twin.get(item.id)
            with pytest.raises(DuplicateItemError):
                await twin.add(item)  # the same id twice: the backend's own typed error
        return hits, fetched

    hits, fetched = asyncio.run(main())
    assert [hit.item.id for hit in hits] == [item.id]
    assert fetched == item
    reopened = SQLAlchemyBackend(
        f"sqlite:///{tmp_path / 'twin.db'}", embedder=HashingEmbedder(dim=32)
    )
    assert reopened.get(item.id) == item
    reopened.close()


def test_a_second_cancel_still_waits_for_the_running_write():
    """However often the caller is cancelled, it goes on only once the write has ended."""
    confirm = HeldConfirmation()
    stores = _held_stores(confirm)
    twin = AsyncContextAssembler(stores)
    user = twin.global_store("ada")

    async def main():
        write = asyncio.ensure_future(user.add_preference("tabs over spaces", category="style"))
        assert await asyncio.to_thread(confirm.asked.wait, WAIT)
        for _ in range(2):
            write.cancel()
            await asyncio.sleep(0.01)
            assert not write.done()
        confirm.release.set()
        with pytest.raises(asyncio.CancelledError):
            await write
        stored = await user.list_all()
        await twin.aclose()
        return stored

    assert [item.text for item in asyncio.run(main())] == ["tabs over spaces"]


def test_closing_runs_the_calls_already_made():
    """A call still waiting for a worker when the twin closes runs; it is not cancelled."""
    confirm = HeldConfirmation()
    stores = _held_stores(confirm)
    twin = AsyncContextAssembler(stores, workers=1)
    user, project = twin.global_store("ada"), twin.project_store("p")

    async def main():
        busy = asyncio.ensure_future(user.add_preference("tabs over spaces", category="style"))
        assert await asyncio.to_thread(confirm.asked.wait, WAIT)
        queued = asyncio.ensure_future(project.add_decision("ship on Thursdays"))
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(twin.aclose())
        await asyncio.sleep(0.01)
        confirm.release.set()
        await closing
        return await busy, await queued

    preference, decision = asyncio.run(main())
    assert decision.text.startswith("ship on Thursdays")
    assert preference.text == "tabs over spaces"


def test_the_pool_fits_the_backend(backend, backend_kind):
    """Threads overlap a server's waits; in the process one thread builds as fast."""
    remote = backend_kind in {"postgresql", "pgvector", "redis"}
    defaulted = AsyncContextAssembler(backend)
    given = AsyncContextAssembler(backend, workers=3)
    try:
        assert defaulted.offload.workers == (REMOTE_WORKERS if remote else LOCAL_WORKERS)
        assert given.offload.workers == 3
    finally:
        asyncio.run(defaulted.aclose())
        asyncio.run(given.aclose())

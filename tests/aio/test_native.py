"""The backend twin's reads on the drivers' asyncio APIs (``native=True``): the sync reads'
answers, and no thread.

The twins here get a pool whose threads are already stopped, so a read that reached for a
thread would fail: on PostgreSQL (psycopg) and Redis (``redis.asyncio``) every read passes,
while a SQLite store, whose driver has no asyncio API, shows the threads are still its way.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_engine import BackendError, HashingEmbedder, ValidationError
from agent_engine.aio import AsyncMemoryBackend
from agent_engine.aio._offload import Offload
from agent_engine.testing.conformance import make_item

NATIVE = ["postgresql", "pgvector", "redis"]
ITEMS = 30
FILTERS = [
    None,
    {"namespace": "ns-1"},
    {"tags": {"$all": ["odd", "x"]}, "importance": {"$gte": 0.3}},
    {"kind": {"$in": ["decision", "note"]}, "session": {"$ne": ""}},
    {"id": {"$in": ["item-00003", "item-00004", "missing"]}},
]
QUERIES = [
    (filters, limit, order)
    for filters in FILTERS
    for limit, order in ((None, "-timestamp"), (4, "+importance"))
]
IDS = ["item-00007", "missing", "item-00002", "item-00007"]


def _stopped_pool() -> Offload:
    pool = Offload(1)
    pool.close()
    return pool


@pytest.fixture
def seeded(open_backend, request):
    backend = open_backend(request.param, HashingEmbedder(dim=64))
    backend.add_many([make_item(n) for n in range(ITEMS)])
    return backend


async def _reads(twin):
    return (
        await twin.get("item-00005"),
        await twin.get("missing"),
        await twin.get_many(IDS),
        await twin.get_many([]),
        [await twin.query(filters, limit, order) for filters, limit, order in QUERIES],
        await twin.query(limit=0),
        await twin.list_all(),
        [await twin.count(filters) for filters in FILTERS],
    )


def _sync_reads(backend):
    return (
        backend.get("item-00005"),
        backend.get("missing"),
        backend.get_many(IDS),
        backend.get_many([]),
        [backend.query(filters, limit, order) for filters, limit, order in QUERIES],
        backend.query(limit=0),
        backend.list_all(),
        [backend.count(filters) for filters in FILTERS],
    )


@pytest.mark.parametrize("seeded", NATIVE, indirect=True)
def test_native_reads_answer_as_the_sync_reads_without_a_thread(seeded):
    twin = AsyncMemoryBackend(seeded, offload=_stopped_pool(), native=True)

    async def main():
        alone = await _reads(twin)
        together = await asyncio.gather(*(_reads(twin) for _ in range(4)))
        return alone, together

    alone, together = asyncio.run(main())
    expected = _sync_reads(seeded)
    assert alone == expected
    assert all(answer == expected for answer in together)
    assert alone[0] is not None
    assert alone[0].embedding is not None  # vectors read back too


@pytest.mark.parametrize("seeded", ["sqlite"], indirect=True)
def test_a_store_without_an_asyncio_driver_reads_on_the_threads(seeded):
    async def main():
        with pytest.raises(RuntimeError):  # no thread, no read
            await AsyncMemoryBackend(seeded, offload=_stopped_pool(), native=True).get("item-00005")
        async with AsyncMemoryBackend(seeded, workers=1, native=True) as twin:
            return await _reads(twin)

    expected = _sync_reads(seeded)
    assert asyncio.run(main()) == expected


@pytest.mark.parametrize("seeded", ["postgresql", "redis"], indirect=True)
def test_native_reads_check_their_arguments_and_the_store(seeded):
    twin = AsyncMemoryBackend(seeded, offload=_stopped_pool(), native=True)

    async def main():
        with pytest.raises(ValidationError) as bad_id:
            await twin.get(7)
        assert bad_id.value.field == "id"
        with pytest.raises(ValidationError):
            await twin.query({"colour": "red"})
        with pytest.raises(ValidationError):
            await twin.get_many("item-00001")
        with pytest.raises(ValidationError):
            await twin.count({"importance": {"$gte": "high"}})
        seeded.close()
        with pytest.raises(BackendError, match="closed"):
            await twin.get("item-00005")

    asyncio.run(main())


@pytest.mark.parametrize("seeded", ["postgresql", "redis"], indirect=True)
def test_a_twin_serves_one_running_loop_at_a_time(seeded):
    """Asyncio connections belong to one loop: each loop in turn gets its own, closed with it."""
    twin = AsyncMemoryBackend(seeded, workers=1, native=True)
    expected = seeded.query({"namespace": "ns-0"}, limit=None)
    assert asyncio.run(twin.query({"namespace": "ns-0"}, limit=None)) == expected
    assert asyncio.run(twin.query({"namespace": "ns-0"}, limit=None)) == expected

    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(twin.count()) == ITEMS
        with pytest.raises(BackendError, match="another running event loop"):
            asyncio.run(twin.count())
    finally:
        first.run_until_complete(first.shutdown_asyncgens())  # closes its connections
        first.close()
    assert asyncio.run(twin.count()) == ITEMS
    asyncio.run(twin.aclose())


def test_by_default_reads_run_on_the_threads(open_backend):
    backend = open_backend("redis", HashingEmbedder(dim=64))
    backend.add(make_item(1))
    twin = AsyncMemoryBackend(backend, offload=_stopped_pool())
    with pytest.raises(RuntimeError):
        asyncio.run(twin.get("item-00001"))

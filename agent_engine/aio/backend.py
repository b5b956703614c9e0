"""The async twin of a backend: the ``MemoryBackend`` protocol's calls, awaited.

For code that talks to a backend directly (a migration script, a custom tier) from a
coroutine. Each call runs the synchronous backend on a worker thread of an
:class:`~agent_engine.aio._offload.Offload` (the twin's own, or one shared with an
:class:`~agent_engine.aio.AsyncContextAssembler`), so the loop only awaits; what a call does,
checks and raises is the backend's.

With ``native=True`` the reads go through the driver's own asyncio API where the backend has
one (:meth:`~agent_engine.memory.backend.BaseBackend.async_reads`: psycopg on PostgreSQL,
``redis.asyncio`` on Redis), derived from those primitives with the same checks as the
synchronous reads, and take no thread. Their answers are decoded on the loop, though, so a
read of many items stalls it longer than a thread does (``agent-engine bench loop``
measures both): threads stay the default. Writes and searches always run on the threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable

from agent_engine.aio._offload import AsyncClosing, Offload, twin
from agent_engine.embeddings import Embedder
from agent_engine.errors import BackendError
from agent_engine.filters import FilterInput, OrderInput, parse_filter
from agent_engine.memory.backend import (
    DEFAULT_LIMIT,
    DEFAULT_ORDER,
    AsyncReads,
    BaseBackend,
    MemoryBackend,
    check_id,
    distinct_ids,
    selection,
)
from agent_engine.models import ContextItem

__all__ = ["AsyncMemoryBackend"]


class AsyncMemoryBackend(AsyncClosing):
    """The async twin of ``sync``, a backend; ``workers`` threads unless given an ``offload``.

    ``native=True``: reads on the driver's asyncio API where the backend has one (see the
    module). Closing the twin (``await aclose()``, ``async with``)
    closes its asyncio connections, stops its own threads and closes the backend, as
    ``backend.close()`` would; a shared ``offload`` is left to its owner.
    """

    def __init__(
        self,
        sync: MemoryBackend,
        *,
        workers: int = 4,
        offload: Offload | None = None,
        native: bool = False,
    ) -> None:
        self.sync = sync
        self._owns_offload = offload is None
        self.offload = offload if offload is not None else Offload(workers)
        self.native = native and isinstance(sync, BaseBackend)
        self._reads: AsyncReads | None = None
        self._reads_loop: asyncio.AbstractEventLoop | None = None
        self._keeper: AsyncGenerator[None, None] | None = None

    @property
    def embedder(self) -> Embedder | None:
        """The backend's embedder (no I/O)."""
        return self.sync.embedder

    async def get(self, item_id: str) -> ContextItem | None:
        """Async twin of ``MemoryBackend.get``: the item with this id, or ``None``."""
        reads = await self._native()
        if reads is None:
            return await self.offload.run(self.sync.get, item_id)
        check_id(item_id)
        return (await reads.fetch([item_id])).get(item_id)

    async def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Async twin of ``MemoryBackend.get_many``: the stored items, in the order asked."""
        reads = await self._native()
        if reads is None:
            return await self.offload.run(self.sync.get_many, item_ids)
        ids = distinct_ids(item_ids)
        if not ids:
            return []
        found = await reads.fetch(ids)
        return [found[item_id] for item_id in ids if item_id in found]

    async def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: OrderInput = DEFAULT_ORDER,
    ) -> list[ContextItem]:
        """Async twin of ``MemoryBackend.query``: matching items, ordered and limited."""
        reads = await self._native()
        if reads is None:
            return await self.offload.run(self.sync.query, filters, limit, order_by)
        selected = selection(filters, limit, order_by)
        return [] if selected is None else await reads.select(*selected)

    async def list_all(self) -> list[ContextItem]:
        """Async twin of ``MemoryBackend.list_all``: every item, newest first."""
        return await self.query(None, limit=None)

    async def count(self, filters: FilterInput = None) -> int:
        """Async twin of ``MemoryBackend.count``: how many items match."""
        reads = await self._native()
        if reads is None:
            return await self.offload.run(self.sync.count, filters)
        return await reads.count(parse_filter(filters))

    add = twin(MemoryBackend.add)
    add_many = twin(MemoryBackend.add_many)
    update = twin(MemoryBackend.update)
    update_many = twin(MemoryBackend.update_many)
    write = twin(MemoryBackend.write)
    delete = twin(MemoryBackend.delete)
    delete_many = twin(MemoryBackend.delete_many)
    erase = twin(MemoryBackend.erase)
    clear = twin(MemoryBackend.clear)
    search = twin(MemoryBackend.search)
    search_many = twin(MemoryBackend.search_many)
    lexical_search = twin(MemoryBackend.lexical_search)
    embed_query = twin(MemoryBackend.embed_query)
    touch = twin(MemoryBackend.touch)
    set_archived = twin(MemoryBackend.set_archived)
    stored_identity = twin(MemoryBackend.stored_identity)
    reembed = twin(MemoryBackend.reembed)

    async def aclose(self) -> None:
        """Close the asyncio connections and the backend, then stop the twin's own threads."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            await keeper.aclose()
        await self.offload.run(self.sync.close)
        if self._owns_offload:
            await self.offload.aclose()

    async def _native(self) -> AsyncReads | None:
        """The backend's asyncio reads for the running loop (``None``: read on the threads).

        Asyncio connections belong to the loop that opened them, so the reads are made on
        first use in a loop, and closed when that loop shuts down its async generators (as
        ``asyncio.run`` does on its way out) or when the twin closes, whichever comes first;
        a later loop gets reads of its own. Two loops running at once cannot share a twin.
        """
        if not self.native:
            return None
        loop = asyncio.get_running_loop()
        if self._reads_loop is not loop:
            if self._reads_loop is not None and not self._reads_loop.is_closed():
                raise BackendError(
                    "this async twin reads on another running event loop; "
                    "make a twin per loop (or pass native=False)",
                    backend=type(self.sync).__name__,
                )
            assert isinstance(self.sync, BaseBackend)  # noqa: S101 - native says so
            reads = self.sync.async_reads()
            keeper = None if reads is None else _closed_with_the_loop(reads)
            if keeper is not None:
                await anext(keeper)  # the loop now holds it, and closes it when it ends
            self._reads, self._reads_loop, self._keeper = reads, loop, keeper
        return self._reads


async def _closed_with_the_loop(reads: AsyncReads) -> AsyncGenerator[None, None]:
    """Holds ``reads`` open until closed, by the twin or by the loop's async-generator shutdown."""
    try:
        yield
    finally:
        await reads.aclose()

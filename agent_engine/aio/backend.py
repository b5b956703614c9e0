"""The async twin of a backend: the ``MemoryBackend`` protocol's calls, awaited.

For code that talks to a backend directly (a migration script, a custom tier) from a
coroutine. Each call runs the synchronous backend on a worker thread of an
:class:`~agent_engine.aio._offload.Offload` (the twin's own, or one shared with an
:class:`~agent_engine.aio.AsyncContextAssembler`), so the loop only awaits; what a call does,
checks and raises is the backend's.
"""

from __future__ import annotations

from agent_engine.aio._offload import AsyncClosing, Offload, twin
from agent_engine.embeddings import Embedder
from agent_engine.memory.backend import MemoryBackend

__all__ = ["AsyncMemoryBackend"]


class AsyncMemoryBackend(AsyncClosing):
    """The async twin of ``sync``, a backend; ``workers`` threads unless given an ``offload``.

    Closing the twin (``await aclose()``, ``async with``) stops its own threads and closes the
    backend, as ``backend.close()`` would; a shared ``offload`` is left to its owner.
    """

    def __init__(
        self, sync: MemoryBackend, *, workers: int = 4, offload: Offload | None = None
    ) -> None:
        self.sync = sync
        self._owns_offload = offload is None
        self.offload = offload if offload is not None else Offload(workers)

    @property
    def embedder(self) -> Embedder | None:
        """The backend's embedder (no I/O)."""
        return self.sync.embedder

    add = twin(MemoryBackend.add)
    add_many = twin(MemoryBackend.add_many)
    get = twin(MemoryBackend.get)
    get_many = twin(MemoryBackend.get_many)
    update = twin(MemoryBackend.update)
    update_many = twin(MemoryBackend.update_many)
    write = twin(MemoryBackend.write)
    delete = twin(MemoryBackend.delete)
    delete_many = twin(MemoryBackend.delete_many)
    erase = twin(MemoryBackend.erase)
    query = twin(MemoryBackend.query)
    list_all = twin(MemoryBackend.list_all)
    count = twin(MemoryBackend.count)
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
        """Close the backend on a worker thread, then stop the twin's own threads."""
        await self.offload.run(self.sync.close)
        if self._owns_offload:
            await self.offload.aclose()

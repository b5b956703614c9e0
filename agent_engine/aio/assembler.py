"""The async twin of the assembler: ``await assembler.build_context(task, request)``.

An asyncio executor that called the synchronous :class:`~agent_engine.ContextAssembler`
would block its event loop for the whole build (milliseconds to seconds at scale) and stall
every other coroutine. The twin runs builds, task endings and every tier store's I/O on a
pool of worker threads it owns (:mod:`._offload`), so the loop only awaits; builds of many
tasks run at once, as they do on threads against the synchronous assembler, and give the
same packages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from agent_engine.aio._offload import AsyncClosing, Offload, twin
from agent_engine.aio.backend import AsyncMemoryBackend
from agent_engine.aio.tiers import (
    AsyncGlobalMemoryStore,
    AsyncProjectMemoryStore,
    AsyncSessionMemoryStore,
    AsyncTaskMemoryStore,
)
from agent_engine.assembler.assembler import ContextAssembler
from agent_engine.assembler.slo import SLOStatus
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import BaseBackend
from agent_engine.models import Task, Tier

__all__ = ["LOCAL_WORKERS", "REMOTE_WORKERS", "AsyncContextAssembler", "default_workers"]

LOCAL_WORKERS: Final = 1
"""The twin's threads when every store works in the process (measured in ``bench loop``)."""
REMOTE_WORKERS: Final = 4
"""The twin's threads when a store's backend waits on a server."""


def default_workers(assembler: ContextAssembler) -> int:
    """How many threads suit ``assembler``'s backends (see :class:`AsyncContextAssembler`)."""
    remote = any(
        isinstance(backend, BaseBackend) and backend.remote
        for backend in assembler.backends.values()
    )
    return REMOTE_WORKERS if remote else LOCAL_WORKERS


R = TypeVar("R")


class AsyncContextAssembler(AsyncClosing):
    """Assembles contexts like :class:`~agent_engine.ContextAssembler`, awaited.

    ``assembler``: the synchronous assembler to run (its stores, config and policies); or
    give the arguments of one (``AsyncContextAssembler(backend, config=...)``). ``workers``:
    threads of the pool, the most calls that run at once; by default
    :data:`REMOTE_WORKERS` when a store's backend waits on a server (PostgreSQL, Redis: threads
    overlap the waits), else :data:`LOCAL_WORKERS` (on SQLite or in memory a build holds the
    GIL throughout, so one thread builds as fast and stalls the loop least). Close it
    (``await aclose()`` or ``async with``) to stop the threads; the stores' backends stay
    open, as they belong to whoever opened them.
    """

    def __init__(
        self,
        assembler: ContextAssembler | Any = None,
        /,
        *,
        workers: int | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(assembler, ContextAssembler):
            if settings:
                raise ValidationError(
                    f"settings ({', '.join(sorted(settings))}) go to the ContextAssembler "
                    "given, not beside it",
                    field="settings",
                )
            self.sync = assembler
        else:
            self.sync = ContextAssembler(assembler, **settings)
        self.offload = Offload(default_workers(self.sync) if workers is None else workers)

    @property
    def slo(self) -> SLOStatus | None:
        """The SLO guard's state (see ``ContextAssembler.slo``)."""
        return self.sync.slo

    def backend(self, tier: Tier) -> AsyncMemoryBackend:
        """The async twin of the backend ``tier`` lives on, on this twin's threads.

        Closing it closes that backend (``AsyncMemoryBackend.aclose``).
        """
        return AsyncMemoryBackend(self.sync.backends[tier], offload=self.offload)

    def task_store(self, task: Task | str) -> AsyncTaskMemoryStore:
        """The async twin of a task's memory (see ``ContextAssembler.task_store``)."""
        return AsyncTaskMemoryStore(self.sync.task_store(task), self.offload)

    def session_store(
        self, session_id: str, project_id: str = "default", user_id: str = "default"
    ) -> AsyncSessionMemoryStore:
        """The async twin of a session's memory (see ``ContextAssembler.session_store``)."""
        return AsyncSessionMemoryStore(
            self.sync.session_store(session_id, project_id, user_id), self.offload
        )

    def project_store(self, project_id: str) -> AsyncProjectMemoryStore:
        """The async twin of a project's memory."""
        return AsyncProjectMemoryStore(self.sync.project_store(project_id), self.offload)

    def global_store(self, user_id: str = "default") -> AsyncGlobalMemoryStore:
        """The async twin of a user's global memory."""
        return AsyncGlobalMemoryStore(self.sync.global_store(user_id), self.offload)

    build_context = twin(ContextAssembler.build_context)
    finish_task = twin(ContextAssembler.finish_task)
    finish_session = twin(ContextAssembler.finish_session)
    cleanup_task = twin(ContextAssembler.cleanup_task)

    async def call(self, function: Callable[[ContextAssembler], R]) -> R:
        """``function(sync_assembler)`` on a worker thread: anything the twin does not wrap."""
        return await self.offload.run(function, self.sync)

    async def aclose(self) -> None:
        """Let the calls under way finish, then stop the threads."""
        await self.offload.aclose()

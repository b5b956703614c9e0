"""Async twins of the tier stores: the same memory, awaited instead of blocking the loop.

Each twin wraps one synchronous store (``.sync``) and runs its reads and writes on the
assembler's worker threads (:mod:`._offload`). Building an item (``new_item``) does no I/O and
stays synchronous; everything that touches a backend is ``async``. What a method does, its
checks and its errors are the synchronous store's: see :mod:`agent_engine.tiers`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from agent_engine.aio._offload import Offload, twin
from agent_engine.models import ContextItem, Task, Tier
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.session import SessionMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

__all__ = [
    "AsyncGlobalMemoryStore",
    "AsyncProjectMemoryStore",
    "AsyncSessionMemoryStore",
    "AsyncTaskMemoryStore",
    "AsyncTierStore",
]

S = TypeVar("S", bound=TierStore)
R = TypeVar("R")


class AsyncTierStore(Generic[S]):
    """The async twin of a tier store (``sync``), awaited on ``offload``'s threads."""

    def __init__(self, sync: S, offload: Offload) -> None:
        self.sync = sync
        self.offload = offload

    @property
    def tier(self) -> Tier:
        """The tier the store holds."""
        return self.sync.tier

    @property
    def namespace(self) -> str:
        """The scope the store reads and writes."""
        return self.sync.namespace

    def new_item(self, kind: str, text: str, **fields: Any) -> ContextItem:
        """An item of this scope, not yet stored (``TierStore.new_item``: no I/O, not awaited)."""
        return self.sync.new_item(kind, text, **fields)

    async def call(self, function: Callable[[S], R]) -> R:
        """``function(sync_store)`` on a worker thread: any synchronous method not twinned."""
        return await self.offload.run(function, self.sync)

    add = twin(TierStore.add)
    add_many = twin(TierStore.add_many)
    add_outcomes = twin(TierStore.add_outcomes)
    get = twin(TierStore.get)
    require = twin(TierStore.require)
    get_many = twin(TierStore.get_many)
    query = twin(TierStore.query)
    count = twin(TierStore.count)
    search = twin(TierStore.search)
    search_text = twin(TierStore.search_text)
    list_all = twin(TierStore.list_all)
    timeline = twin(TierStore.timeline)
    update = twin(TierStore.update)
    delete = twin(TierStore.delete)
    delete_many = twin(TierStore.delete_many)
    forget = twin(TierStore.forget)
    clear = twin(TierStore.clear)
    archive = twin(TierStore.archive)
    restore = twin(TierStore.restore)
    compact = twin(TierStore.compact)
    supersede = twin(TierStore.supersede)
    history = twin(TierStore.history)
    pin = twin(TierStore.pin)
    unpin = twin(TierStore.unpin)
    conflicts = twin(TierStore.conflicts)
    checkpoint = twin(TierStore.checkpoint)
    checkpoints = twin(TierStore.checkpoints)
    rollback = twin(TierStore.rollback)
    lineage = twin(TierStore.lineage)
    detach = twin(TierStore.detach)
    resolve = twin(TierStore.resolve)


class AsyncTaskMemoryStore(AsyncTierStore[TaskMemoryStore]):
    """The async twin of a task's memory (``TaskMemoryStore``)."""

    add_instruction = twin(TaskMemoryStore.add_instruction)
    add_reasoning = twin(TaskMemoryStore.add_reasoning)
    add_tool_output = twin(TaskMemoryStore.add_tool_output)
    add_stage_output = twin(TaskMemoryStore.add_stage_output)
    get_stage_outputs = twin(TaskMemoryStore.get_stage_outputs)
    on_state = twin(TaskMemoryStore.on_state)
    finish = twin(TaskMemoryStore.finish)

    async def fork(
        self, task: Task | str, *, checkpoint: str | None = None
    ) -> AsyncTaskMemoryStore:
        """Async twin of ``TaskMemoryStore.fork``: the fork's async store."""
        child = await self.offload.run(self.sync.fork, task, checkpoint=checkpoint)
        return AsyncTaskMemoryStore(child, self.offload)


class AsyncSessionMemoryStore(AsyncTierStore[SessionMemoryStore]):
    """The async twin of a session's memory (``SessionMemoryStore``)."""

    add_message = twin(SessionMemoryStore.add_message)
    add_finding = twin(SessionMemoryStore.add_finding)
    finish = twin(SessionMemoryStore.finish)

    async def fork(
        self, session_id: str, *, checkpoint: str | None = None
    ) -> AsyncSessionMemoryStore:
        """Async twin of ``SessionMemoryStore.fork``: the fork's async store."""
        child = await self.offload.run(self.sync.fork, session_id, checkpoint=checkpoint)
        return AsyncSessionMemoryStore(child, self.offload)


class AsyncProjectMemoryStore(AsyncTierStore[ProjectMemoryStore]):
    """The async twin of a project's memory (``ProjectMemoryStore``)."""

    add_decision = twin(ProjectMemoryStore.add_decision)
    add_convention = twin(ProjectMemoryStore.add_convention)
    add_failure = twin(ProjectMemoryStore.add_failure)
    add_pattern = twin(ProjectMemoryStore.add_pattern)
    add_preference = twin(ProjectMemoryStore.add_preference)
    query_decisions = twin(ProjectMemoryStore.query_decisions)
    aliases = twin(ProjectMemoryStore.aliases)
    add_alias = twin(ProjectMemoryStore.add_alias)
    remove_alias = twin(ProjectMemoryStore.remove_alias)
    evict = twin(ProjectMemoryStore.evict)


class AsyncGlobalMemoryStore(AsyncTierStore[GlobalMemoryStore]):
    """The async twin of a user's global memory (``GlobalMemoryStore``).

    Its confirmation callback runs on a worker thread, as every call of the store does.
    """

    add_preference = twin(GlobalMemoryStore.add_preference)
    add_pattern = twin(GlobalMemoryStore.add_pattern)
    query_preferences = twin(GlobalMemoryStore.query_preferences)

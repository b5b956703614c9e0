"""Async twins of the public API, for executors that run on an asyncio event loop.

``AsyncContextAssembler`` builds contexts and its tier stores read and write without blocking
the loop; ``AsyncMemoryBackend`` does the same for a backend used directly. Each call runs the
synchronous core on a pool of worker threads the twin owns, and the loop awaits it; the
backend twin's reads await the driver's own asyncio API where it has one (PostgreSQL, Redis).
``docs/async.md`` says why, and what a cancelled call leaves.
"""

from agent_engine.aio.assembler import AsyncContextAssembler
from agent_engine.aio.backend import AsyncMemoryBackend
from agent_engine.aio.tiers import (
    AsyncGlobalMemoryStore,
    AsyncProjectMemoryStore,
    AsyncSessionMemoryStore,
    AsyncTaskMemoryStore,
    AsyncTierStore,
)

__all__ = [
    "AsyncContextAssembler",
    "AsyncGlobalMemoryStore",
    "AsyncMemoryBackend",
    "AsyncProjectMemoryStore",
    "AsyncSessionMemoryStore",
    "AsyncTaskMemoryStore",
    "AsyncTierStore",
]

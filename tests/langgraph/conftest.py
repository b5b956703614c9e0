"""The LangGraph adapter's tests run on real stores: in memory and in a migrated SQLite file.

``stores`` gives the tier stores over one backend of each kind (a hashing embedder, a clock
that moves one second per reading, global writes approved); ``store`` the adapter over them.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from agent_engine import HashingEmbedder, MemoryStores
from agent_engine.integrations.langgraph import AgentEngineStore
from tests.tiers.conftest import Clock

EMBEDDER_DIM = 64


@pytest.fixture(params=["memory", "sqlite"])
def backend(request, open_backend):
    """An empty backend of each kind the adapter is tested on."""
    return open_backend(request.param, HashingEmbedder(dim=EMBEDDER_DIM))


@pytest.fixture
def stores(backend):
    return MemoryStores(backend, clock=Clock(), confirm=lambda _request: True)


@pytest.fixture
def store(stores):
    """The adapter, indexing each value's ``text`` and allowed to write global memory."""
    adapter = AgentEngineStore(stores, fields=["text"], allow_global=True)
    yield adapter
    adapter.close()


def run_async(test):
    """Run an ``async def`` test in a fresh event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run

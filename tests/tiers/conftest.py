"""Tier tests run on every backend: the `backend` fixture is parametrized over them."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pytest

from agent_engine.embeddings import HashingEmbedder
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.databases import sql_delete_all

BACKENDS = ["memory", "faiss", "sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """One empty backend of each kind, shared by all the stores of a test."""
    embedder = HashingEmbedder(dim=64)
    if request.param == "memory":
        with InMemoryBackend(embedder=embedder) as backend:
            yield backend
    elif request.param == "faiss":
        with FaissBackend(embedder=embedder) as backend:
            yield backend
    elif request.param == "sqlite":
        path = tmp_path / "memory.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        with SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder) as backend:
            yield backend
    else:
        url = request.getfixturevalue("postgres_url")
        sql_delete_all(url)
        with SQLAlchemyBackend(url, embedder=embedder) as backend:
            yield backend


class Clock:
    """A clock that only moves when told to (one second per reading by default)."""

    def __init__(
        self,
        start: datetime = datetime(2024, 1, 1, tzinfo=UTC),
        step: timedelta = timedelta(seconds=1),
    ):
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@pytest.fixture
def clock():
    return Clock()

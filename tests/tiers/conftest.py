"""Tier tests run on every backend: the `backend` fixture opens each kind in turn.

The kinds are ``BACKEND_KINDS`` in ``tests/conftest.py``: a backend added there runs here too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_engine.embeddings import HashingEmbedder


@pytest.fixture
def backend(backend_kind, open_backend):
    """One empty backend of each kind, shared by all the stores of a test."""
    return open_backend(backend_kind, HashingEmbedder(dim=64))


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

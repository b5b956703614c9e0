"""The ingestion queue's tests run on both databases it lives in: a SQLite file and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from agent_engine import HashingEmbedder


class Clock:
    """A clock the test moves by hand (leases, backoff and retention read it)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FlakyEmbedder(HashingEmbedder):
    """A user's embedder that fails on texts holding ``trigger``, while ``failing`` is true."""

    def __init__(self, trigger: str = "boom") -> None:
        super().__init__()
        self.trigger = trigger
        self.failing = True
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.failing and any(self.trigger in text for text in texts):
            raise RuntimeError(f"the embedding service is down ({self.trigger})")
        return super().embed(texts)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_kind(request) -> str:
    return request.param


@pytest.fixture
def make_backend(open_backend, db_kind) -> Callable[..., object]:
    """``make_backend(embedder=None)``: an empty SQL backend of this run's kind."""

    def make(embedder=None):
        return open_backend(db_kind, embedder or HashingEmbedder())

    return make

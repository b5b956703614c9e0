"""Synthetic agent memory for cost benchmarks: sized and tagged like the real thing.

What agent memory looks like (and what this generator reproduces, deterministically from a
seed): most items are short notes and tool outputs, a minority are decisions, conventions,
failures and patterns; texts run from one line to a few paragraphs (log-normal, median about
30 words, long tail to a few hundred); tags follow a Zipf law over a vocabulary of 60 (a few
tags on many items, most tags on few), 0-3 per item; items come in sessions of 5-50 steps
over half a year; importance clusters around 0.5 with decisions and failures higher; about 1%
of the first items are pinned, at most ``MAX_PINNED`` per store (pinning is a deliberate act: a
store with a thousand pinned items would fill any budget with them). Words are drawn (Zipf
again) from a software-engineering vocabulary so BM25 and embeddings see realistic term
statistics rather than random strings.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from agent_engine.models import ContextItem, Status, Tier

__all__ = ["generate"]

_KINDS = (
    ("note", 0.35),
    ("tool_output", 0.25),
    ("decision", 0.1),
    ("convention", 0.1),
    ("failure", 0.1),
    ("pattern", 0.1),
)
_IMPORTANCE = {"decision": 0.8, "failure": 0.75, "convention": 0.7, "pattern": 0.6}
_WORD_TEXT = (
    "the a to of and in for is on that with build test deploy service api request response "
    "database query index migration schema table column user session token cache error retry "
    "timeout latency config environment docker container pod cluster node queue worker job "
    "pipeline stage step agent tool output input prompt context memory budget model embedding "
    "vector search ranking score filter namespace project task global preference convention "
    "decision failure lesson pattern fix bug flaky regression release version branch merge "
    "review commit refactor module function class method type lint format coverage benchmark "
    "profile trace log metric alert dashboard incident rollback feature flag auth password key "
    "secret permission role tenant customer billing invoice payment email notification webhook "
    "file path directory upload download stream batch parallel thread lock transaction commit "
    "sqlite postgres redis kafka faiss python typescript react css html json yaml http grpc"
)
_WORDS = tuple(_WORD_TEXT.split())
_TAGS = [f"tag-{n}" for n in range(60)]
MAX_PINNED = 10


def _zipf_choice(rng: random.Random, population: list[str], exponent: float = 1.1) -> str:
    weights = [1.0 / (rank**exponent) for rank in range(1, len(population) + 1)]
    return rng.choices(population, weights=weights, k=1)[0]


def generate(
    count: int, *, namespace: str = "project:bench", seed: int = 0, tier: Tier = Tier.PROJECT
) -> Iterator[ContextItem]:
    """Yield ``count`` deterministic items in ``namespace`` (ids ``syn-<n>``)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not security
    word_weights = [1.0 / rank for rank in range(1, len(_WORDS) + 1)]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    span = timedelta(days=180).total_seconds()
    session, left_in_session, pinned = 0, 0, 0
    for n in range(count):
        if left_in_session == 0:
            session += 1
            left_in_session = rng.randint(5, 50)
            session_start = start + timedelta(seconds=rng.uniform(0, span))
        left_in_session -= 1
        kind = rng.choices([k for k, _ in _KINDS], weights=[w for _, w in _KINDS], k=1)[0]
        length = max(3, min(400, int(rng.lognormvariate(3.4, 0.8))))
        words = rng.choices(_WORDS, weights=word_weights, k=length)
        tags = list(dict.fromkeys(_zipf_choice(rng, _TAGS) for _ in range(rng.randint(0, 3))))
        importance = min(1.0, max(0.0, rng.gauss(_IMPORTANCE.get(kind, 0.5), 0.1)))
        status = Status.CONFIRMED
        if rng.random() < 0.01 and pinned < MAX_PINNED:  # noqa: PLR2004
            status, pinned = Status.PINNED, pinned + 1
        yield ContextItem(
            id=f"syn-{n:07d}",
            kind=kind,
            text=" ".join(words).capitalize() + ".",
            tier=tier,
            namespace=namespace,
            source=rng.choice(("agent", "user", "tool:pytest", "tool:git", "planner")),
            session=f"session {session}",
            timestamp=session_start + timedelta(minutes=50 - left_in_session),
            tags=tags,
            importance=round(importance, 3),
            status=status,
            access_count=int(rng.expovariate(0.5)),
        )

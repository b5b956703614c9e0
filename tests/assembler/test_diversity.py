"""Diversity caps: one long session (or one source) cannot fill a tier while room is short."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    SelectionReason,
    Task,
    Tier,
    ValidationError,
)
from agent_engine.assembler import Diversity
from agent_engine.assembler.diversity import spread
from agent_engine.assembler.packer import Entry

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


def entry(n, session, source="ann"):
    assembler = ContextAssembler(InMemoryBackend(embedder=HashingEmbedder()))
    item = assembler.project_store("p").new_item(
        "turn", f"turn {n}", session=session, source=source
    )
    return Entry(item, Tier.PROJECT, 1.0 - n / 100, SelectionReason.RANKED)


def texts(entries):
    return [e.item.text for e in entries]


class TestSpread:
    def test_past_a_cap_a_sessions_others_wait_in_order(self):
        ranked = [entry(n, "long") for n in range(4)] + [entry(9, "other"), entry(10, "")]
        order = texts(spread(ranked, Diversity(per_session=2)))
        assert order == ["turn 0", "turn 1", "turn 9", "turn 10", "turn 2", "turn 3"]

    def test_sources_are_capped_alike_and_items_without_one_never(self):
        ranked = [entry(0, "", "bot"), entry(1, "", "bot"), entry(2, "", ""), entry(3, "", "ann")]
        assert texts(spread(ranked, Diversity(per_source=1))) == [
            "turn 0",
            "turn 2",
            "turn 3",
            "turn 1",
        ]

    def test_no_caps_change_nothing(self):
        ranked = [entry(n, "long") for n in range(3)]
        assert spread(ranked, Diversity()) == ranked

    @pytest.mark.parametrize("field", ["per_session", "per_source"])
    @pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
    def test_bad_caps_are_refused_by_name(self, field, value):
        with pytest.raises(ValidationError) as refused:
            Diversity(**{field: value})
        assert refused.value.field == field

    def test_the_assembler_takes_a_diversity_only(self):
        with pytest.raises(ValidationError) as refused:
            AssemblerConfig(diversity={"per_session": 2})
        assert refused.value.field == "diversity"


@pytest.fixture
def backend():
    """A long session about deploys, and one other session that says a little about them."""
    backend = InMemoryBackend(embedder=HashingEmbedder())
    project = ContextAssembler(backend, clock=lambda: NOW).project_store("p")
    project.add_many(
        project.new_item("turn", f"the deploy retries failed again, attempt {n}", session="s1")
        for n in range(8)
    )
    project.add(project.new_item("turn", "deploy retries need a longer timeout", session="s2"))
    project.pin(project.add_decision("deploys are frozen on Fridays").id)
    return backend


def build(backend, diversity, budget):
    config = AssemblerConfig(head=0, tail=0, track_access=False, diversity=diversity)
    assembler = ContextAssembler(backend, clock=lambda: NOW, config=config)
    return assembler.build_context(
        TASK, ContextRequest(budget_tokens=budget, query="deploy retries", tiers=["project"])
    )


def sessions(package):
    return [s.item.session for s in package.selections if s.reason is SelectionReason.RANKED]


def test_a_tight_budget_reaches_another_session(backend):
    plain = build(backend, None, 60)
    assert set(sessions(plain)) == {"s1"}
    capped = build(backend, Diversity(per_session=2), 60)
    assert "s2" in sessions(capped)
    assert sessions(capped).count("s1") <= 2
    # The pinned decision is not a session's, and is in either way.
    pinned = [s for s in capped.selections if s.reason is SelectionReason.PINNED]
    assert len(pinned) == 1


def test_room_left_over_still_takes_the_capped_candidates(backend):
    plain = build(backend, None, 2000)
    capped = build(backend, Diversity(per_session=1), 2000)
    assert {s.item.id for s in capped.selections} == {s.item.id for s in plain.selections}
    assert sessions(capped).count("s1") == 8

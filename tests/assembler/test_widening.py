"""A tier whose first pool runs out with budget left gathers again, wider, unless told not to."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    MemoryStores,
    Task,
    Tier,
    TierShares,
    ValidationError,
)

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")
NOTES = 40


def project_selections(backend, **limits):
    assembler = ContextAssembler(
        MemoryStores(backend, clock=lambda: NOW, confirm=lambda _request: True),
        config=AssemblerConfig(head=0, tail=0, limits=GatherLimits(**{"per_source": 5, **limits})),
    )
    project = assembler.project_store("p")
    if not project.count():
        for n in range(NOTES):
            project.add_convention(f"Deploy rule {n}: tag the release before the deploy", "ops")
    package = assembler.build_context(
        TASK, ContextRequest(budget_tokens=4000, query="deploy release rule")
    )
    return [s for s in package.selections if s.tier is Tier.PROJECT]


def project_scores(backend, **limits):
    return {s.item.id: s.score for s in project_selections(backend, **limits)}


def test_a_spent_pool_is_widened_until_the_budget_or_the_store_runs_out(backend):
    assert len(project_selections(backend)) == NOTES


def test_widened_scores_are_one_scoring_of_the_whole_pool(backend):
    """After widening, every score of the tier is on one scale, as if gathered wide at once.

    Widening twice from five per source ends with every note in the pool, which is what one
    gather of a hundred per source holds; the scores must be the same, newcomers included.
    """
    widened = project_scores(backend)
    at_once = project_scores(backend, per_source=100, widening_rounds=0)
    assert widened.keys() == at_once.keys()
    assert widened == pytest.approx(at_once)


def test_no_widening_keeps_to_the_first_pool(backend):
    first_pool = project_selections(backend, widening_rounds=0)
    assert 5 <= len(first_pool) < NOTES
    once = project_selections(backend, widening_rounds=1)
    assert len(first_pool) < len(once) <= NOTES


def test_widening_waits_for_enough_room(backend):
    assert len(project_selections(backend, min_widening_room=5000)) == len(
        project_selections(backend, widening_rounds=0)
    )


@pytest.mark.parametrize("field", ["widening_rounds", "min_widening_room", "per_source"])
@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_limits_must_be_non_negative_integers(field, value):
    with pytest.raises(ValidationError, match=field):
        GatherLimits(**{field: value})


def test_room_smaller_than_a_typical_candidate_is_not_widened_for(backend):
    """A wider pool would fill such room with its lowest-ranked items at several times the cost."""
    assembler = ContextAssembler(
        backend,
        clock=lambda: NOW,
        config=AssemblerConfig(head=0, tail=0, track_access=False),
    )
    project = assembler.project_store("p")
    for n in range(12):
        project.add_convention(
            f"Deploy rule {n}: tag the release before the deploy, write the changelog entry, "
            "wait for the canary to stay green for an hour and only then roll out to everyone",
            "ops",
        )
    for n in range(12):
        project.add_convention(f"Lunch is at noon on day {n}", "office")

    def build(budget, **limits):
        assembler.config = attrs.evolve(
            assembler.config, limits=GatherLimits(**{"per_source": 5, **limits})
        )
        package = assembler.build_context(
            TASK,
            ContextRequest(
                budget_tokens=budget,
                query="deploy release rule",
                shares=TierShares(task=0, project=1, global_=0),
            ),
        )
        return package.selections

    first_pool = build(4000, widening_rounds=0)
    assert first_pool
    assert all("Deploy rule" in s.item.text for s in first_pool)
    long_line = min(s.tokens for s in first_pool)
    short_line = max(s.tokens for s in build(4000, per_source=100) if "Lunch" in s.item.text)
    assert short_line < long_line // 2
    budget = sum(s.tokens for s in first_pool) + long_line // 2

    whole_store = build(budget, per_source=100)
    assert any("Lunch" in s.item.text for s in whole_store)  # room a short item could fill
    assert [s.item.id for s in build(budget)] == [s.item.id for s in first_pool]

"""A tier whose first pool runs out with budget left gathers again, wider, unless told not to."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    Task,
    Tier,
    ValidationError,
)

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")
NOTES = 40


def project_selections(backend, **limits):
    assembler = ContextAssembler(
        backend,
        clock=lambda: NOW,
        config=AssemblerConfig(head=0, tail=0, limits=GatherLimits(per_source=5, **limits)),
        confirm=lambda _request: True,
    )
    project = assembler.project_store("p")
    if not project.count():
        for n in range(NOTES):
            project.add_convention(f"Deploy rule {n}: tag the release before the deploy", "ops")
    package = assembler.build_context(
        TASK, ContextRequest(budget_tokens=4000, query="deploy release rule")
    )
    return [s for s in package.selections if s.tier is Tier.PROJECT]


def test_a_spent_pool_is_widened_until_the_budget_or_the_store_runs_out(backend):
    assert len(project_selections(backend)) == NOTES


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

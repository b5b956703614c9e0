"""HEAD/TAIL: the task timeline's first and last items come before anything from its middle."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    SelectionReason,
    Task,
    Tier,
)

TASK = Task(id="t", project_id="p", user_id="u")
STEP = "Step {:02d}: checked the deployment logs for errors"


def make(backend, clock, *, head=2, tail=3, **config):
    return ContextAssembler(
        backend,
        clock=clock,
        config=AssemblerConfig(head=head, tail=tail, track_access=False, **config),
        confirm=lambda _request: True,
    )


def steps(assembler, count, start=0):
    """``count`` task steps of equal cost (and different content), in timeline order."""
    store = assembler.task_store(TASK)
    return [store.add_reasoning(STEP.format(n), "work") for n in range(start, start + count)]


def costs(assembler, request):
    """Each item's charge in an unconstrained package, and what the first one paid on top."""
    roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=100_000, **request))
    charged = sorted(s.tokens for s in roomy.selections if s.tier is Tier.TASK)
    return charged[0], charged[-1] - charged[0]


def chosen(package, tier=Tier.TASK):
    return {s.item.id: s.reason for s in package.selections if s.tier is tier}


class TestHeadTail:
    def test_tail_is_the_latest_when_timestamps_tie(self, backend):
        """With a frozen clock the TAIL is still the timeline's last items, not its first."""
        frozen = datetime(2024, 1, 1, tzinfo=UTC)
        assembler = make(backend, lambda: frozen, head=1, tail=2)
        items = steps(assembler, 10)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=5000))
        picked = chosen(package)
        assert picked[items[0].id] is SelectionReason.HEAD
        assert picked[items[-1].id] is SelectionReason.TAIL
        assert picked[items[-2].id] is SelectionReason.TAIL
        assert list(picked.values()).count(SelectionReason.TAIL) == 2

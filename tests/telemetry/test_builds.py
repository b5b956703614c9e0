"""A context build reports one span, its stores' searches as children, and its metrics."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.trace import StatusCode

from agent_engine import (
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Task,
    ValidationError,
)
from agent_engine.aio import AsyncContextAssembler
from tests.assembler.test_degrade import BreakableBackend
from tests.telemetry.conftest import every_text

TASK = Task(id="t-otel", project_id="p-otel", user_id="u-otel", description="fix the login bug")
QUERY = "login token expiry"
PRIVATE_QUERY = "where is the zebra passphrase"
PHASES = ("plan", "gather", "score", "pack", "render", "access")


def _clock():
    now = [datetime(2024, 5, 1, tzinfo=UTC)]

    def tick():
        now[0] += timedelta(seconds=1)
        return now[0]

    return tick


def _assembler(backend, telemetry):
    """An assembler over ``backend`` whose three tiers hold a few items each."""
    stores = MemoryStores(
        backend, clock=_clock(), confirm=lambda _request: True, telemetry=telemetry
    )
    assembler = ContextAssembler(stores)
    task = assembler.task_store(TASK)
    task.add_instruction("Fix the login bug: tokens expire one minute early.")
    for step in range(6):
        task.add_reasoning(f"step {step}: the token expiry check reads the clock twice", "s1")
    project = assembler.project_store(TASK.project_id)
    project.add_decision("Session tokens are JWTs signed with the rotating key.")
    project.add_convention("Every clock read goes through the injected clock.")
    assembler.global_store(TASK.user_id).add_preference("Answer in short paragraphs.")
    return assembler


def _build(assembler, budget=120, query=QUERY):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=budget, query=query))


class TestBuildSpan:
    def test_the_build_is_one_span_over_its_stores_searches(self, backend, reported):
        """build_context is a span whose children are the search_memory spans of its tiers."""
        assembler = _assembler(backend, reported.telemetry())
        reported.clear()
        _build(assembler)
        build = reported.span("build_context")
        searches = reported.spans("search_memory")
        assert {s.attributes["agent_engine.memory.tier"] for s in searches} == {
            "task",
            "project",
            "global",
        }
        for search in searches:
            assert search.parent is not None
            assert search.parent.span_id == build.context.span_id
            assert search.context.trace_id == build.context.trace_id
            assert search.attributes["gen_ai.operation.name"] == "search_memory"
            assert search.attributes["agent_engine.operation.name"] == "search_text"
        namespaces = {s.attributes["gen_ai.memory.store.id"] for s in searches}
        assert namespaces == {
            assembler.task_store(TASK).namespace,
            assembler.project_store(TASK.project_id).namespace,
            assembler.global_store(TASK.user_id).namespace,
        }
        assert {s.name for s in reported.spans()} == {"build_context", "search_memory"}
        assert build.parent is None
        assert build.status.status_code is StatusCode.UNSET

    def test_tokens_per_tier_are_the_package_usage(self, backend, reported):
        """The span's budget, tokens and counts per tier are the package's own figures."""
        assembler = _assembler(backend, reported.telemetry())
        package = _build(assembler)
        attributes = reported.span("build_context").attributes
        assert attributes["agent_engine.context.budget_tokens"] == package.budget_tokens
        assert attributes["agent_engine.context.used_tokens"] == package.tokens_used
        assert attributes["agent_engine.context.selected"] == len(package.selections)
        assert attributes["agent_engine.context.omitted"] == len(package.omissions)
        assert attributes["agent_engine.context.omitted"] > 0  # the budget is tight
        assert attributes["agent_engine.context.policy"] == package.policy
        assert attributes["agent_engine.context.degraded"] is False
        assert attributes["agent_engine.task.id"] == TASK.id
        assert attributes["agent_engine.project.id"] == TASK.project_id
        for usage in package.usage:
            prefix = f"agent_engine.context.{usage.tier.value}"
            assert attributes[f"{prefix}.allocated_tokens"] == usage.allocated
            assert attributes[f"{prefix}.used_tokens"] == usage.used
            assert attributes[f"{prefix}.candidates"] == usage.candidates
            assert attributes[f"{prefix}.selected"] == usage.selected
        assert "agent_engine.context.failed_tiers" not in attributes

    def test_phase_timings_are_each_their_own(self, backend, reported):
        """Every phase has a time, none negative, and together they fit in the build's span."""
        assembler = _assembler(backend, reported.telemetry())
        _build(assembler)
        build = reported.span("build_context")
        seconds = {p: build.attributes[f"agent_engine.context.phase.{p}.duration"] for p in PHASES}
        assert all(value >= 0 for value in seconds.values())
        for phase in ("gather", "score", "pack", "render", "access"):
            assert seconds[phase] > 0, phase
        span_seconds = (build.end_time - build.start_time) / 1e9
        assert sum(seconds.values()) <= span_seconds
        # The stores' searches are the gathering's: it took at least as long as they did.
        searched = sum((s.end_time - s.start_time) / 1e9 for s in reported.spans("search_memory"))
        assert seconds["gather"] >= searched * 0.9

    def test_a_failed_tier_is_named(self, reported):
        """A tier whose backend failed is listed, and its search span says it failed."""
        broken = BreakableBackend()
        assembler = _assembler(broken, reported.telemetry())
        broken.search_fails = True
        reported.clear()
        package = _build(assembler)
        assert package.failures
        build = reported.span("build_context")
        assert set(build.attributes["agent_engine.context.failed_tiers"]) == {
            failure.tier.value for failure in package.failures
        }
        failed = [
            s for s in reported.spans("search_memory") if s.status.status_code is StatusCode.ERROR
        ]
        assert failed
        assert {s.attributes["error.type"] for s in failed} == {
            "agent_engine.errors.BackendUnavailableError"
        }
        assert build.status.status_code is StatusCode.UNSET  # the build itself degraded, not failed

    def test_a_refused_build_is_an_error_without_its_message(self, reported, backend):
        """A build that raises ends its span as an error naming the type, never the message."""
        assembler = _assembler(backend, reported.telemetry())
        with pytest.raises(ValidationError, match="zebra"):
            assembler.build_context(
                TASK, ContextRequest(budget_tokens=100, query=QUERY, policy="zebra-policy")
            )
        build = reported.span("build_context")
        assert build.status.status_code is StatusCode.ERROR
        assert build.attributes["error.type"] == "agent_engine.errors.ValidationError"
        assert not build.status.description
        assert "zebra" not in every_text(build)


class TestBuildText:
    def test_no_text_by_default(self, backend, reported):
        """By default no span carries an item's text or the query."""
        assembler = _assembler(backend, reported.telemetry())
        reported.clear()
        package = _build(assembler, query=PRIVATE_QUERY)
        assert package.selections
        for span in reported.spans():
            said = every_text(span)
            assert "zebra" not in said
            assert "gen_ai.memory.query.text" not in span.attributes
            assert "gen_ai.memory.records" not in span.attributes
            for selection in package.selections:
                assert selection.item.text not in said

    def test_text_when_turned_on(self, backend, reported):
        """With record_text the build records its query and its selections as memory records."""
        assembler = _assembler(backend, reported.telemetry(record_text=True))
        package = _build(assembler, query=PRIVATE_QUERY)
        build = reported.span("build_context")
        assert build.attributes["gen_ai.memory.query.text"] == package.query
        records = json.loads(build.attributes["gen_ai.memory.records"])
        assert [r["id"] for r in records] == [s.item.id for s in package.selections]
        assert [r["content"] for r in records] == [s.body for s in package.selections]
        assert [r["metadata"]["tier"] for r in records] == [
            s.tier.value for s in package.selections
        ]
        searches = reported.spans("search_memory")
        assert {s.attributes["gen_ai.memory.query.text"] for s in searches} == {package.query}


class TestBuildMetrics:
    def test_duration_budget_tokens_and_items(self, backend, reported):
        """One build: its duration, its budget share, each tier's tokens and candidates."""
        assembler = _assembler(backend, reported.telemetry())
        package = _build(assembler)
        (duration,) = reported.points("agent_engine.context.build.duration")
        assert duration.count == 1
        assert dict(duration.attributes) == {
            "agent_engine.context.policy": package.policy,
            "agent_engine.context.degraded": False,
        }
        build = reported.span("build_context")
        assert 0 < duration.sum <= (build.end_time - build.start_time) / 1e9
        (share,) = reported.points("agent_engine.context.budget.utilization")
        assert share.sum == pytest.approx(package.tokens_used / package.budget_tokens)
        tokens = {
            p.attributes["agent_engine.memory.tier"]: p.sum
            for p in reported.points("agent_engine.context.token.usage")
        }
        assert tokens == {usage.tier.value: usage.used for usage in package.usage}
        items = {
            (
                p.attributes["agent_engine.memory.tier"],
                p.attributes["agent_engine.context.outcome"],
            ): (p.value)
            for p in reported.points("agent_engine.context.items")
        }
        omitted = Counter(omission.tier for omission in package.omissions)
        for usage in package.usage:
            assert items[usage.tier.value, "selected"] == usage.selected
            assert items[usage.tier.value, "omitted"] == omitted[usage.tier]

    def test_metrics_carry_no_ids(self, backend, reported):
        """Metric attributes stay few-valued: no task, project, namespace or item id in them."""
        assembler = _assembler(backend, reported.telemetry())
        _build(assembler)
        assembler.project_store(TASK.project_id).search("clock", k=3)
        for name in reported.metric_names():
            for point in reported.points(name):
                said = json.dumps(dict(point.attributes))
                for identifier in (TASK.id, TASK.project_id, TASK.user_id):
                    assert identifier not in said, (name, said)

    def test_a_failed_build_is_measured_with_its_error(self, reported, backend):
        """A build that raises is timed, with its error type as the metric's only attribute."""
        assembler = _assembler(backend, reported.telemetry())
        with pytest.raises(ValidationError):
            assembler.build_context(TASK, ContextRequest(budget_tokens=100, policy="nope"))
        (duration,) = reported.points("agent_engine.context.build.duration")
        assert dict(duration.attributes) == {"error.type": "agent_engine.errors.ValidationError"}
        assert not reported.points("agent_engine.context.budget.utilization")


class TestBuildsUnchanged:
    def test_telemetry_on_or_off_builds_the_same_package(self, reported, open_backend):
        """Reporting changes nothing a build chooses: the packages match, off and on."""
        from agent_engine import HashingEmbedder  # noqa: PLC0415

        packages = []
        for telemetry in (None, reported.telemetry(record_text=True)):
            assembler = _assembler(open_backend("memory", HashingEmbedder(dim=64)), telemetry)
            packages.append(_build(assembler))
        off, on = packages
        assert [(s.item.text, s.tier, s.reason, s.tokens) for s in off.selections] == [
            (s.item.text, s.tier, s.reason, s.tokens) for s in on.selections
        ]
        assert [(o.tier, o.reason, o.tokens) for o in off.omissions] == [
            (o.tier, o.reason, o.tokens) for o in on.omissions
        ]
        assert off.usage == on.usage
        assert reported.spans("build_context")  # the second one did report


class TestPhases:
    def test_a_nested_phase_is_not_its_parents(self):
        """Time in a nested phase is charged to it alone; the outer phase keeps the rest."""
        from agent_engine.assembler._observe import NO_PHASES, Phases  # noqa: PLC0415

        now = [0.0]
        phases = Phases(clock=lambda: now[0])
        with phases.measure("pack"):
            now[0] += 1.0
            with phases.measure("gather"):
                now[0] += 4.0
                with phases.measure("score"):
                    now[0] += 2.0
                now[0] += 0.5
            now[0] += 1.0
            with phases.measure("gather"):
                now[0] += 3.0
        now[0] += 10.0  # outside every phase: nobody's
        assert phases.seconds == {"pack": 2.0, "gather": 7.5, "score": 2.0}
        with NO_PHASES.measure("pack"):
            now[0] += 1.0
        assert NO_PHASES.seconds == {}


class TestAsyncTwin:
    def test_an_awaited_build_is_a_child_of_the_callers_span(self, reported):
        """The twin's worker thread runs in the caller's context: spans nest across it."""
        backend = InMemoryBackend(embedder=HashingEmbedder(dim=32))
        assembler = _assembler(backend, reported.telemetry())
        tracer = reported.tracer_provider.get_tracer("executor")

        async def step():
            async with AsyncContextAssembler(assembler) as twin:
                with tracer.start_as_current_span("agent step"):
                    await twin.build_context(TASK, ContextRequest(budget_tokens=120, query=QUERY))

        reported.clear()
        asyncio.run(step())
        outer, build = reported.span("agent step"), reported.span("build_context")
        assert build.parent is not None
        assert build.parent.span_id == outer.context.span_id

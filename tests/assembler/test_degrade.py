"""Degrade, don't fail: a broken tier costs its items, not the whole context."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import attrs
import pytest
from structlog.testing import capture_logs

from agent_engine import (
    DEFAULT_COUNTER,
    AssemblerConfig,
    BackendError,
    BackendUnavailableError,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Status,
    Task,
    Tier,
    TierFailure,
)
from agent_engine.assembler import candidates

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


class BreakableBackend(InMemoryBackend):
    """An in-memory backend whose reads (or access writes) fail once it is broken."""

    def __init__(self):
        super().__init__(embedder=HashingEmbedder(dim=32))
        self.reads_fail = False
        self.search_fails = False
        self.search_threads = []
        self.touch_fails = False

    def _check(self, broken):
        if broken:
            raise BackendUnavailableError("database is locked")

    def query(self, *args, **kwargs):
        self._check(self.reads_fail)
        return super().query(*args, **kwargs)

    def get_many(self, item_ids):
        self._check(self.reads_fail)
        return super().get_many(item_ids)

    def search(self, *args, **kwargs):
        self.search_threads.append(threading.current_thread().name)
        self._check(self.reads_fail or self.search_fails)
        return super().search(*args, **kwargs)

    def lexical_index(self, filters=None):
        self._check(self.reads_fail)
        return super().lexical_index(filters)

    def touch(self, item_ids, at):
        self._check(self.touch_fails)
        return super().touch(item_ids, at)


@pytest.fixture
def backends():
    return {tier: BreakableBackend() for tier in Tier}


@pytest.fixture
def assembler(backends):
    assembler = ContextAssembler(
        MemoryStores(
            task_backend=backends[Tier.TASK],
            project_backend=backends[Tier.PROJECT],
            global_backend=backends[Tier.GLOBAL],
            clock=lambda: NOW,
        )
    )
    assembler.task_store(TASK).add_reasoning("Bisecting the slow query", "perf")
    assembler.project_store("p").add_pattern("Index foreign keys")
    assembler.global_store("u").add_pattern("Explain plans before tuning")
    return assembler


def build(assembler, **kwargs):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=500), **kwargs)


class TestTierFailure:
    def test_package_from_the_healthy_tiers(self, assembler, backends):
        """With the project backend down, task and global items still make a package."""
        backends[Tier.PROJECT].reads_fail = True
        with capture_logs() as logs:
            package = build(assembler)
        assert {s.tier for s in package.selections} == {Tier.TASK, Tier.GLOBAL}
        assert package.failures == (
            TierFailure(Tier.PROJECT, "BackendUnavailableError: database is locked"),
        )
        assert package.usage_of(Tier.PROJECT).candidates == 0
        assert "database is locked" not in package.render()
        warning = next(log for log in logs if log["event"] == "tier_failed")
        assert (warning["log_level"], warning["tier"]) == ("warning", "project")
        built = next(log for log in logs if log["event"] == "context_built")
        assert built["failures"] == ["project"]

    def test_every_tier_down_gives_an_empty_package(self, assembler, backends):
        """Even with nothing healthy, the executor gets a (empty) package and the reasons."""
        for backend in backends.values():
            backend.reads_fail = True
        package = build(assembler)
        assert package.selections == ()
        assert package.render() == ""
        assert [f.tier for f in package.failures] == [Tier.TASK, Tier.PROJECT, Tier.GLOBAL]

    def test_a_vague_request_without_its_history_is_asked_as_given(self, assembler, backends):
        """The task's last turns cannot be read: the query is the request, the package says so."""
        backends[Tier.TASK].reads_fail = True
        request = ContextRequest(budget_tokens=500, query="What about that?")
        package = assembler.build_context(TASK, request)
        assert package.query == "What about that?"
        assert [(f.tier, f.phase) for f in package.failures] == [
            (Tier.TASK, "history"),
            (Tier.TASK, "gather"),
        ]

    def test_strict_assembler_raises(self, backends):
        """An assembler built with strict=True lets the backend's error through."""
        strict = ContextAssembler(MemoryStores(project_backend=backends[Tier.PROJECT]), strict=True)
        backends[Tier.PROJECT].reads_fail = True
        with pytest.raises(BackendError, match="database is locked"):
            build(strict)

    def test_strict_per_call_raises(self, assembler, backends):
        """strict=True on one build_context call raises for that call only."""
        backends[Tier.GLOBAL].reads_fail = True
        with pytest.raises(BackendUnavailableError):
            build(assembler, strict=True)
        assert build(assembler).failures[0].tier is Tier.GLOBAL

    @pytest.mark.parametrize("overlap", [True, False])
    def test_a_failing_vector_search_degrades_its_tier(self, backends, overlap, monkeypatch):
        """The vector search may run on a worker thread: its failure is the tier's all the same."""
        monkeypatch.setattr(candidates, "OVERLAP_FROM", 0)  # these tiers are small
        config = AssemblerConfig(overlap_searches=overlap)
        assembler = ContextAssembler(
            MemoryStores(
                task_backend=backends[Tier.TASK],
                project_backend=backends[Tier.PROJECT],
                global_backend=backends[Tier.GLOBAL],
                clock=lambda: NOW,
            ),
            config=config,
        )
        assembler.project_store("p").add_pattern("Index foreign keys")
        assembler.task_store(TASK).add_reasoning("Bisecting the slow query", "perf")
        backends[Tier.PROJECT].search_fails = True
        request = ContextRequest(budget_tokens=500, query="slow query foreign keys")
        package = assembler.build_context(TASK, request)
        on_worker = backends[Tier.PROJECT].search_threads[-1] != threading.main_thread().name
        assert on_worker is overlap
        assert [f.tier for f in package.failures] == [Tier.PROJECT]
        assert {s.tier for s in package.selections} == {Tier.TASK}
        with pytest.raises(BackendUnavailableError, match="database is locked"):
            assembler.build_context(TASK, request, strict=True)

    def test_healthy_build_reports_no_failure(self, assembler):
        """Without a failing backend the package reports none."""
        assert build(assembler).failures == ()


class TestAccessTrackingFailure:
    def test_failed_access_write_keeps_the_package(self, assembler, backends):
        """If recording accesses fails, the package keeps its items and names the failure."""
        backends[Tier.PROJECT].touch_fails = True
        with capture_logs() as logs:
            package = build(assembler)
        assert len(package.selections) == 3
        assert package.failures == (
            TierFailure(Tier.PROJECT, "BackendUnavailableError: database is locked", "access"),
        )
        warning = next(log for log in logs if log["event"] == "tier_failed")
        assert (warning["tier"], warning["phase"]) == ("project", "access")
        healthy = backends[Tier.GLOBAL]
        assert all(item.access_count == 1 for item in healthy.list_all())

    def test_failed_access_write_raises_when_strict(self, assembler, backends):
        """With strict=True a failed access write raises."""
        backends[Tier.PROJECT].touch_fails = True
        with pytest.raises(BackendUnavailableError):
            build(assembler, strict=True)


class FailsOnNthRead(InMemoryBackend):
    """An in-memory backend that counts the calls a build makes and fails the ``fail_at``-th."""

    def __init__(self):
        super().__init__(embedder=HashingEmbedder(dim=32))
        self.calls = 0
        self.fail_at = None

    def _call(self):
        self.calls += 1
        if self.calls == self.fail_at:
            raise BackendUnavailableError("connection reset")

    def query(self, *args, **kwargs):
        self._call()
        return super().query(*args, **kwargs)

    def get_many(self, item_ids):
        self._call()
        return super().get_many(item_ids)

    def search(self, *args, **kwargs):
        self._call()
        return super().search(*args, **kwargs)

    def lexical_index(self, filters=None):
        self._call()
        return super().lexical_index(filters)

    def touch(self, item_ids, at):
        self._call()
        return super().touch(item_ids, at)


REQUEST = ContextRequest(budget_tokens=3000, query="deploy release rule")


@pytest.fixture
def flaky():
    """One backend for every tier, and an assembler whose project pool is widened twice."""
    backend = FailsOnNthRead()
    limits = GatherLimits(per_source=5)
    assembler = ContextAssembler(
        MemoryStores(backend, clock=lambda: NOW, confirm=lambda _: True),
        config=AssemblerConfig(limits=limits),
    )
    steps = assembler.task_store(TASK)
    for n in range(4):  # under the per-source limit: only the project pool is widened
        steps.add_reasoning(f"Step {n}: read the deploy log", "work")
    project = assembler.project_store("p")
    for n in range(40):
        project.add_convention(f"Deploy rule {n}: tag the release before the deploy", "ops")
    project.add(project.new_item("rule", "Never deploy on Fridays", status=Status.PINNED))
    assembler.global_store("u").add_pattern("Release notes before the release")
    return assembler, backend


def calls_of(assembler, backend, **config):
    """How many backend calls one build makes (with ``config`` changed for it)."""
    saved = assembler.config
    assembler.config = attrs.evolve(saved, **config)
    before = backend.calls
    assembler.build_context(TASK, REQUEST)
    assembler.config = saved
    return backend.calls - before


def assert_whole(package):
    """The package holds together: within budget, truthful figures, each candidate once."""
    assert DEFAULT_COUNTER.count(package.render()) == package.tokens_used <= REQUEST.budget_tokens
    accounted = [s.item.id for s in package.selections] + [o.item_id for o in package.omissions]
    assert len(accounted) == len(set(accounted)) == sum(u.candidates for u in package.usage)


class TestEveryRead:
    def test_a_failure_at_any_read_degrades_its_tier(self, flaky):
        """Whichever backend call of a build fails, the build returns a whole package naming it.

        That covers the first gathers, HEAD and TAIL, the pinned reads, the wider gathers of a
        spent pool and the access write: each is one of the calls counted here.
        """
        assembler, backend = flaky
        calls = calls_of(assembler, backend)
        narrow = calls_of(assembler, backend, limits=GatherLimits(per_source=5, widening_rounds=0))
        assert calls > narrow + 1  # the wider gathers and the access write are among them
        for nth in range(1, calls + 1):
            backend.fail_at = backend.calls + nth
            package = assembler.build_context(TASK, REQUEST)
            assert len(package.failures) >= 1, nth
            assert {f.error for f in package.failures} == {
                "BackendUnavailableError: connection reset"
            }, nth
            assert_whole(package)
            backend.fail_at = backend.calls + nth
            with pytest.raises(BackendUnavailableError):
                assembler.build_context(TASK, REQUEST, strict=True)

    def test_a_failed_wider_gather_keeps_the_first_pool(self, flaky):
        """A tier whose wider gather fails keeps what its first gather gave it, and says so."""
        assembler, backend = flaky
        assembler.config = attrs.evolve(assembler.config, track_access=False)
        narrow_limits = GatherLimits(per_source=5, widening_rounds=0)
        first_pool = calls_of(assembler, backend, limits=narrow_limits)
        assembler.config = attrs.evolve(assembler.config, limits=narrow_limits)
        narrow = assembler.build_context(TASK, REQUEST)
        assembler.config = attrs.evolve(assembler.config, limits=GatherLimits(per_source=5))
        backend.fail_at = backend.calls + first_pool + 1  # the first call after the first pools
        package = assembler.build_context(TASK, REQUEST)
        assert package.failures == (
            TierFailure(Tier.PROJECT, "BackendUnavailableError: connection reset", "widen"),
        )
        assert [s.item.id for s in package.selections] == [s.item.id for s in narrow.selections]
        assert_whole(package)

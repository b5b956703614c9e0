"""The SLO guard: a slow backend degrades the builds, and they recover when it speeds up."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Task,
    Tier,
)
from agent_engine.assembler import GatherLimits, SLOGuard, SLOPolicy
from agent_engine.errors import ValidationError

TASK = Task(id="t", project_id="shop", description="speed up checkout")


class SlowBackend(InMemoryBackend):
    """A store whose searches take ``delay`` seconds more: a busy database, say."""

    delay = 0.0

    def search(self, *args, **kwargs):
        time.sleep(self.delay)
        return super().search(*args, **kwargs)

    def search_many(self, *args, **kwargs):
        time.sleep(self.delay)
        return super().search_many(*args, **kwargs)


class TestGuard:
    POLICY = SLOPolicy(window=10, degrade_above_ms=50, recover_below_ms=20, min_samples=5)

    def test_too_few_samples_never_degrade(self):
        guard = SLOGuard(self.POLICY)
        for _ in range(4):
            guard.record(1.0)
        assert not guard.degraded
        assert guard.status().p95_ms is None
        guard.record(1.0)
        assert guard.degraded
        assert guard.status().p95_ms == 1000.0

    def test_between_the_thresholds_the_state_holds(self):
        """Hysteresis: 30 ms is neither slow enough to degrade nor fast enough to recover."""
        guard = SLOGuard(self.POLICY)
        for _ in range(10):
            guard.record(0.030)
        assert not guard.degraded
        for _ in range(10):
            guard.record(0.080)
        assert guard.degraded
        for _ in range(10):
            guard.record(0.030)
        assert guard.degraded
        for _ in range(10):
            guard.record(0.005)
        assert not guard.degraded
        assert guard.status().degradations == 1

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"window": 0}, "window"),
            ({"degrade_above_ms": -1}, "degrade_above_ms"),
            ({"degrade_above_ms": 100, "recover_below_ms": 200}, "recover_below_ms"),
            ({"window": 3, "min_samples": 5}, "min_samples"),
            ({"min_samples": True}, "min_samples"),
        ],
    )
    def test_bad_policies_are_refused(self, fields, field):
        with pytest.raises(ValidationError) as raised:
            SLOPolicy(**fields)
        assert raised.value.field == field


class TestAssembler:
    def _assembler(self, policy):
        backend = SlowBackend(embedder=HashingEmbedder())
        stores = MemoryStores(backend, task_backend=InMemoryBackend(embedder=HashingEmbedder()))
        project = stores.project_store("shop")
        project.add_many(
            project.new_item("note", f"checkout step {n} reads the cart and the prices")
            for n in range(200)
        )
        limits = GatherLimits(per_source=60)
        config = AssemblerConfig(limits=limits, slo=policy)
        return backend, ContextAssembler(stores, config=config)

    def _build(self, assembler):
        return assembler.build_context(TASK, ContextRequest(budget_tokens=400, query="checkout"))

    def test_a_slow_store_degrades_builds_until_it_recovers(self):
        policy = SLOPolicy(
            window=4,
            degrade_above_ms=40,
            recover_below_ms=30,
            min_samples=3,
            degraded_limits=GatherLimits(per_source=5, widening_rounds=0),
        )
        backend, assembler = self._assembler(policy)
        normal = self._build(assembler)
        assert not normal.degraded
        backend.delay = 0.06
        with capture_logs() as logs:
            slow_builds = 0
            while not assembler.slo.degraded and slow_builds < 3:
                assert not self._build(assembler).degraded
                slow_builds += 1
        # The window's p95 passes 40 ms once two of its three samples are slow.
        assert slow_builds == 2
        assert any(entry["event"] == "slo_degraded" for entry in logs)
        slow = self._build(assembler)
        assert slow.degraded
        pool = slow.usage_of(Tier.PROJECT).candidates
        assert pool < normal.usage_of(Tier.PROJECT).candidates
        backend.delay = 0.0
        with capture_logs() as logs:
            builds = [self._build(assembler) for _ in range(5)]
        assert any(entry["event"] == "slo_recovered" for entry in logs)
        assert builds[-1].degraded is False
        assert (
            builds[-1].usage_of(Tier.PROJECT).candidates == normal.usage_of(Tier.PROJECT).candidates
        )
        assert assembler.slo.degradations == 1

    def test_no_guard_by_default(self):
        backend, assembler = self._assembler(None)
        backend.delay = 0.02
        assert not self._build(assembler).degraded
        assert assembler.slo is None

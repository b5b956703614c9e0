"""The conformance suite can fail: deliberately broken backends do not pass it.

A suite that passes everything proves nothing. Each backend here breaks one rule of the
contract the way real backends do, and the suite must report the tests that catch it.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

BROKEN = textwrap.dedent(
    """
    import itertools

    import attrs

    import pytest
    from agent_engine.errors import FilterError
    from agent_engine.filters import Order
    from agent_engine.memory.backend import DEFAULT_ORDER, Written
    from agent_engine.memory.inmemory import InMemoryBackend
    from agent_engine.testing.conformance import BackendConformance


    class IgnoresLimit(InMemoryBackend):
        def _select(self, where, order, limit):
            return super()._select(where, order, None)


    class EmptyOnUnknownOperator(InMemoryBackend):
        def query(self, filters=None, limit=100, order_by=DEFAULT_ORDER):
            try:
                return super().query(filters, limit, order_by)
            except FilterError:
                return []


    class OverwritesOnAdd(InMemoryBackend):
        def _insert(self, items):
            with self._lock:
                for item in items:
                    self._items[item.id] = item
                return Written(len(items))


    class HalfWritesBatches(InMemoryBackend):
        def _insert(self, items):
            for item in items:
                super()._insert([item])
            return Written(len(items))


    class NullsFirst(InMemoryBackend):
        def _select(self, where, order, limit):
            rows = super()._select(where, order, None)
            nulls = [i for i in rows if getattr(i, order.field) is None]
            rest = [i for i in rows if getattr(i, order.field) is not None]
            return (nulls + rest)[:limit]


    class NeMissesNulls(InMemoryBackend):
        def _select(self, where, order, limit):
            rows = super()._select(where, order, limit)
            ne = [c.field for c in where.conditions if c.op.value in ("$ne", "$nin")]
            return [i for i in rows if all(getattr(i, f) is not None for f in ne)]


    class TiesFollowDirection(InMemoryBackend):
        def _select(self, where, order, limit):
            rows = super()._select(where, order, None)
            out = []
            for _, tied in itertools.groupby(rows, key=lambda i: getattr(i, order.field)):
                out.extend(sorted(tied, key=lambda i: i.id, reverse=order.descending))
            return out[:limit]


    class FlipsLegacyEarly(InMemoryBackend):
        def query(self, filters=None, limit=100, order_by=DEFAULT_ORDER):
            if isinstance(order_by, str) and not order_by.startswith(("+", "-")):
                order_by = "+" + order_by
            return super().query(filters, limit, order_by)

    class KeepsOldMinus(InMemoryBackend):
        def query(self, filters=None, limit=100, order_by=DEFAULT_ORDER):
            if isinstance(order_by, str) and order_by.startswith("-"):
                order_by = "+" + order_by[1:]
            return super().query(filters, limit, order_by)


    class SharedAliases(InMemoryBackend):
        # Keeps every namespace's aliases in one map: projects see each other's words.

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            inner = self._alias_store

            class OneMap:
                def add(self, namespace, term, expansions):
                    return inner.add("all", term, expansions)

                def remove(self, namespace, term, expansions=None):
                    return inner.remove("all", term, expansions)

                def of_namespace(self, namespace):
                    return inner.of_namespace("all")

                def namespaces(self):
                    return inner.namespaces()

            self._alias_store = OneMap()


    class AgentsOfAnyRealm(InMemoryBackend):
        # Takes an agent registered in any realm: one project's agents get another's pools.

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            inner = self._grant_store

            class AnyRealm:
                def __getattr__(self, name):
                    return getattr(inner, name)

                def grant(self, grant):
                    realms = [r for r in inner.realms() if grant.agent in inner.agents(r)]
                    return inner.grant(attrs.evolve(grant, realm=realms[0]) if realms else grant)

            self._grant_store = AnyRealm()


    class DetachedChildren(InMemoryBackend):
        # Lists a scope's detached forks as children: a rolled-back fork reads through again.

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            inner = self._lineage_store

            class AnyState:
                def __getattr__(self, name):
                    return getattr(inner, name)

                def children(self, namespace, tier):
                    inner.children(namespace, tier)
                    found = [f for f in inner.all() if f.parent == namespace and f.tier is tier]
                    return sorted(found, key=lambda f: f.namespace)

            self._lineage_store = AnyState()


    class KeepsErasedHidden(InMemoryBackend):
        # Unhides nothing: a fork's hidden ids keep the ids of erased items.

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            inner = self._lineage_store

            class NoUnhide:
                def __getattr__(self, name):
                    return getattr(inner, name)

                def unhide(self, item_ids):
                    return 0

            self._lineage_store = NoUnhide()


    class DropKeepsHidden(InMemoryBackend):
        # Drops the record but not the hidden ids: a scope forked again starts hiding them.

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            inner = self._lineage_store

            class RecordOnly:
                def __getattr__(self, name):
                    return getattr(inner, name)

                def drop(self, namespace, tier):
                    kept = inner.hidden(namespace, tier)
                    found = inner.drop(namespace, tier)
                    inner._hidden[namespace, tier] = set(kept)
                    return found

            self._lineage_store = RecordOnly()


    def _suite(backend_cls):
        class Suite(BackendConformance):
            @pytest.fixture
            def backend(self):
                yield backend_cls()
        Suite.__name__ = "Test" + backend_cls.__name__
        return Suite


    TestIgnoresLimit = _suite(IgnoresLimit)
    TestEmptyOnUnknownOperator = _suite(EmptyOnUnknownOperator)
    TestOverwritesOnAdd = _suite(OverwritesOnAdd)
    TestHalfWritesBatches = _suite(HalfWritesBatches)
    TestNullsFirst = _suite(NullsFirst)
    TestNeMissesNulls = _suite(NeMissesNulls)
    TestTiesFollowDirection = _suite(TiesFollowDirection)
    TestFlipsLegacyEarly = _suite(FlipsLegacyEarly)
    TestKeepsOldMinus = _suite(KeepsOldMinus)
    TestSharedAliases = _suite(SharedAliases)
    TestAgentsOfAnyRealm = _suite(AgentsOfAnyRealm)
    TestDetachedChildren = _suite(DetachedChildren)
    TestKeepsErasedHidden = _suite(KeepsErasedHidden)
    TestDropKeepsHidden = _suite(DropKeepsHidden)
    """
)

EXPECTED_CATCHES = {
    "TestIgnoresLimit": ["test_limit", "test_limit_applies_after_filter_and_order"],
    "TestEmptyOnUnknownOperator": ["test_bad_filters_raise"],
    "TestOverwritesOnAdd": ["test_add_existing_id_is_refused_and_keeps_original"],
    "TestHalfWritesBatches": ["test_add_many_with_stored_duplicate_stores_none"],
    "TestNullsFirst": ["test_nulls_sort_last"],
    "TestNeMissesNulls": ["test_filter_semantics"],
    "TestTiesFollowDirection": ["test_ties_break_by_id"],
    "TestFlipsLegacyEarly": ["test_bare_field_is_deprecated_and_still_descending"],
    "TestKeepsOldMinus": ["test_minus_sorts_descending"],
    "TestSharedAliases": ["test_aliases_stay_in_their_namespace"],
    "TestAgentsOfAnyRealm": ["test_grants_name_registered_agents_only"],
    "TestDetachedChildren": ["test_lineage_round_trip", "test_lineage_detach"],
    "TestKeepsErasedHidden": ["test_lineage_unhide", "test_lineage_erase_unhides"],
    "TestDropKeepsHidden": ["test_lineage_drop", "test_lineage_drop_leaves_the_others"],
}


def test_broken_backends_fail(pytester: pytest.Pytester) -> None:
    """Every broken backend fails the tests that guard the rule it breaks."""
    pytester.makepyfile(test_broken=BROKEN)
    # Only the guarding tests run: the whole suite once per broken backend (hypothesis
    # included) would cost minutes and prove nothing more about the rules they break.
    guards = sorted({test for tests in EXPECTED_CATCHES.values() for test in tests})
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "-k", " or ".join(guards)
    )
    failed = set()
    for line in result.outlines:
        if line.startswith("FAILED "):
            _, suite, test = line.split()[1].split("::")
            failed.add(f"{suite}::{test.split('[')[0]}")
    for suite, tests in EXPECTED_CATCHES.items():
        for test in tests:
            assert f"{suite}::{test}" in failed, f"{suite} was not caught by {test}"

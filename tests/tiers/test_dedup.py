"""Near-duplicate merge: an add that says again what a scope holds strengthens the held item.

Vectors are given with the items, so each pair's cosine similarity is exactly what the test
says it is, on every backend (the fixture's embedder would give the same dimension).
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

from agent_engine import (
    AuditAction,
    DuplicateItemError,
    MemoryStores,
    ValidationError,
    promote,
)
from agent_engine.memory.audit import ERASED_PREFIX
from agent_engine.models import Origin
from agent_engine.tiers.dedup import DEFAULT_MERGE, MERGE_BOOST, MergePolicy
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

DIM = 64


def vector(similarity: float, axis: int = 0) -> np.ndarray:
    """A unit vector whose cosine similarity to ``unit(axis)`` is ``similarity``."""
    out = np.zeros(DIM, dtype=np.float32)
    out[axis] = similarity
    out[(axis + 1) % DIM] = math.sqrt(max(0.0, 1 - similarity**2))
    return out


def unit(axis: int = 0) -> np.ndarray:
    return vector(1.0, axis)


@pytest.fixture
def project(backend, clock):
    return ProjectMemoryStore("shop", backend, clock=clock)


def add(store, text, embedding, kind="convention", **fields):
    return store.add_outcomes([store.new_item(kind, text, embedding=embedding, **fields)])[0]


def journal(backend, namespace, action):
    return [
        event
        for event in reversed(backend.audit.events(namespace=namespace, limit=None))
        if event.action is action
    ]


class TestMerge:
    def test_a_near_duplicate_merges_into_the_held_item(self, project, backend):
        """Boosted, one access more, the newcomer's origin kept; the caller is told."""
        held = add(project, "Releases are cut from the main branch", unit()).item
        newcomer = project.new_item(
            "convention",
            "Release builds are cut from main",
            embedding=vector(0.95),
            source="alice",
            session="s2",
        )
        (outcome,) = project.add_outcomes([newcomer])
        assert outcome.merged
        assert outcome.merged_into == held.id
        assert outcome.given.id == newcomer.id
        assert outcome.similarity == pytest.approx(0.95, abs=1e-4)
        merged = project.require(held.id)
        assert outcome.item == merged
        assert merged.text == held.text
        assert merged.importance == pytest.approx(held.importance + MERGE_BOOST)
        assert merged.access_count == held.access_count + 1
        assert merged.last_accessed_at is not None
        assert merged.merged_from == (Origin.of(newcomer),)
        assert project.get(newcomer.id) is None
        assert project.count() == 1

    def test_add_and_add_many_return_what_the_store_holds(self, project):
        held = add(project, "Use ruff for linting", unit()).item
        again = project.add(
            project.new_item("convention", "Lint with ruff", embedding=vector(0.97))
        )
        assert again.id == held.id
        listed = project.add_many(
            [
                project.new_item("convention", "We lint with ruff", embedding=vector(0.96)),
                project.new_item("convention", "Format with black", embedding=unit(5)),
            ]
        )
        assert listed[0].id == held.id
        assert listed[0].merged_from[-1].id != listed[1].id
        assert project.get(listed[1].id) == listed[1]
        assert project.require(held.id).importance == pytest.approx(min(1.0, 0.5 + 2 * MERGE_BOOST))

    def test_importance_is_capped_at_one(self, project):
        held = add(project, "Deploys need two approvals", unit(), importance=0.95).item
        add(project, "Every deploy needs two approvals", vector(0.99))
        assert project.require(held.id).importance == 1.0

    def test_below_the_threshold_both_are_stored(self, project):
        add(project, "Use the staging cluster for load tests", unit())
        outcome = add(project, "Use the staging cluster for smoke tests", vector(0.9))
        assert not outcome.merged
        assert outcome.merged_into is None
        assert outcome.similarity is None
        assert project.count() == 2

    def test_the_threshold_is_configurable(self, backend, clock):
        loose = ProjectMemoryStore("loose", backend, clock=clock, merge=MergePolicy(0.85))
        add(loose, "Use the staging cluster for load tests", unit())
        assert add(loose, "Use the staging cluster for smoke tests", vector(0.9)).merged
        off = ProjectMemoryStore("off", backend, clock=clock, merge=None)
        add(off, "Same words", unit())
        assert not add(off, "Same words", unit()).merged
        assert off.count() == 2

    def test_the_same_text_merges_without_vectors(self, project):
        """Fingerprints match first: the same text is a duplicate whatever the embedder says."""
        held = project.add_convention("Tabs are four spaces wide")
        again = project.add_outcomes([project.new_item("convention", "tabs are  four spaces wide")])
        assert again[0].merged_into == held.id
        assert again[0].similarity == 1.0

    def test_adding_a_merged_item_again_changes_nothing(self, project, backend):
        """The same add twice (a retry, a queue's replay): reported merged, boosted once."""
        held = add(project, "Releases are cut from the main branch", unit()).item
        newcomer = project.new_item(
            "convention", "Release builds come from main", embedding=vector(0.95)
        )
        boosted = project.add_outcomes([newcomer])[0].item
        merges = len(journal(backend, project.namespace, AuditAction.MERGE))
        (again,) = project.add_outcomes([newcomer])
        assert again.merged_into == held.id
        assert again.item == boosted
        assert project.require(held.id) == boosted
        assert [o.id for o in boosted.merged_from] == [newcomer.id]
        assert len(journal(backend, project.namespace, AuditAction.MERGE)) == merges

    def test_duplicates_within_one_write_merge_into_the_first(self, project, backend):
        first, second, third, other = (
            project.new_item("decision", "Cache product pages for an hour", embedding=unit()),
            project.new_item(
                "decision", "Product pages are cached for an hour", embedding=vector(0.96)
            ),
            project.new_item(
                "decision", "Cache the product pages for one hour", embedding=vector(0.94)
            ),
            project.new_item("decision", "Orders are never cached", embedding=unit(9)),
        )
        outcomes = project.add_outcomes([first, second, third, other])
        assert [o.item.id for o in outcomes] == [first.id, first.id, first.id, other.id]
        assert [o.merged for o in outcomes] == [False, True, True, False]
        stored = project.require(first.id)
        assert [origin.id for origin in stored.merged_from] == [second.id, third.id]
        assert stored.importance == pytest.approx(0.5 + 2 * MERGE_BOOST)
        assert outcomes[0].item == stored
        assert project.count() == 2
        (event,) = journal(backend, project.namespace, AuditAction.ADD)
        assert set(event.item_ids) == {first.id, other.id}

    def test_a_batch_duplicate_of_a_held_item_joins_it(self, project):
        held = add(project, "Invoices are numbered per year", unit()).item
        a = project.new_item(
            "convention", "Invoice numbers restart each year", embedding=vector(0.95)
        )
        b = project.new_item("convention", "Invoices: numbered per year", embedding=vector(0.97))
        outcomes = project.add_outcomes([a, b])
        assert [o.item.id for o in outcomes] == [held.id, held.id]
        assert [o.id for o in project.require(held.id).merged_from] == [a.id, b.id]
        assert project.count() == 1

    def test_the_merge_is_journaled_with_the_add(self, project, backend):
        held = add(project, "Logs go to stderr", unit()).item
        dup = project.new_item("convention", "Log to stderr", embedding=vector(0.93))
        new = project.new_item("convention", "Metrics go to statsd", embedding=unit(7))
        project.add_many([dup, new])
        adds = journal(backend, project.namespace, AuditAction.ADD)
        assert adds[-1].item_ids == (new.id,)
        (merge,) = journal(backend, project.namespace, AuditAction.MERGE)
        assert merge.item_ids == (held.id, dup.id)
        assert merge.detail["restored"] == []
        ((entry),) = merge.detail["merged"]
        assert (entry["id"], entry["into"]) == (dup.id, held.id)
        assert entry["similarity"] == pytest.approx(0.93, abs=1e-3)
        assert not journal(backend, project.namespace, AuditAction.ABORT)

    def test_a_merge_brings_an_archived_item_back(self, project, backend):
        held = add(project, "The nightly job rebuilds the search index", unit()).item
        project.archive(held.id)
        outcome = add(project, "Search index is rebuilt nightly", vector(0.94))
        assert outcome.merged_into == held.id
        back = project.require(held.id)
        assert not back.archived
        assert project.count() == 1
        (merge,) = journal(backend, project.namespace, AuditAction.MERGE)
        assert merge.detail["restored"] == [held.id]

    def test_only_when_everything_is_written(self, project, backend, monkeypatch):
        """A write that fails leaves the held item as it was and the newcomer unstored."""
        held = add(project, "Retry payments three times", unit()).item

        def fail(**_):
            raise RuntimeError("disk full")

        monkeypatch.setattr(backend, "write", fail)
        with pytest.raises(RuntimeError):
            add(project, "Payments are retried three times", vector(0.95))
        monkeypatch.undo()
        assert project.require(held.id) == held
        assert project.count() == 1
        (abort,) = journal(backend, project.namespace, AuditAction.ABORT)
        assert "disk full" in abort.detail["error"]


class TestNeverMerged:
    def test_other_kinds(self, project):
        add(project, "Postgres is the system of record", unit(), kind="decision")
        assert not add(project, "Postgres is the system of record", unit(), kind="fact").merged

    def test_other_scopes(self, backend, clock):
        """Isolation: what another project holds never absorbs this one's item."""
        a = ProjectMemoryStore("a", backend, clock=clock)
        b = ProjectMemoryStore("b", backend, clock=clock)
        add(a, "Use feature flags for risky changes", unit())
        outcome = add(b, "Use feature flags for risky changes", unit())
        assert not outcome.merged
        assert (a.count(), b.count()) == (1, 1)
        assert a.list_all()[0].merged_from == ()

    def test_keyed_items_either_side(self, project):
        keyed = add(project, "Editor: vim", unit(), key="editor").item
        assert not add(project, "Editor: vim.", vector(0.99)).merged
        plain = project.list_all()[0]
        assert plain.id != keyed.id
        newcomer = add(project, "Editor is vim", vector(0.995), key="pager")
        assert not newcomer.merged

    def test_a_pinned_newcomer_but_a_pinned_item_absorbs(self, project):
        held = add(project, "Never force-push to main", unit()).item
        pinned = project.new_item(
            "convention", "Do not force-push to main", embedding=vector(0.96), status="pinned"
        )
        assert not project.add_outcomes([pinned])[0].merged
        project.forget(held.id)
        assert add(project, "No force-pushing to main", vector(0.95)).merged_into == pinned.id

    def test_contradictions_are_conflicts_not_duplicates(self, project):
        held = add(project, "Use tabs for indentation in the web app", unit()).item
        outcome = add(project, "Don't use tabs for indentation in the web app", vector(0.97))
        assert not outcome.merged
        assert project.count() == 2
        (conflict,) = project.conflicts()
        assert held.id in (conflict.item_a, conflict.item_b)

    def test_restating_a_contradicted_item_is_news(self, project):
        """After "never", saying "always" again makes it the newer side, not a repeat."""
        always = "Always rebase feature branches on main before opening a pull request."
        never = "Never rebase feature branches on main before opening a pull request."
        first = add(project, always, unit()).item
        contra = add(project, never, vector(0.8)).item
        (conflict,) = project.conflicts()
        again = add(project, always, unit())
        assert not again.merged
        assert project.count() == 3
        newest = project.conflicts()[0]
        assert set(newest.item_ids) == {contra.id, again.item.id}
        assert conflict.id != newest.id
        assert first.id in conflict.item_ids
        # Resolved ("never" superseded), no conflict stands: a repeat is a repeat again.
        project.resolve(newest.id, keep=again.item.id)
        assert project.conflicts() == []
        assert add(project, always, unit()).merged_into == first.id

    def test_different_numbers(self, project):
        add(project, "CI runs on Python 3.11", unit())
        assert not add(project, "CI runs on Python 3.12", vector(0.99)).merged

    def test_different_names_days_and_places(self, project):
        """A changed value is an update, however alike the sentences embed."""
        add(project, "The billing module is deployed on Wednesday mornings", unit())
        assert not add(
            project, "The billing module is deployed on Monday mornings", vector(0.99)
        ).merged
        add(project, "Hana leads the payments team in Lisbon", unit(3))
        assert not add(project, "Hana leads the payments team in Porto", vector(0.99, 3)).merged
        # The same value repeated, in other words, is a repeat; a capital that starts a
        # sentence is no value.
        assert add(project, "Payments team in Lisbon: Hana leads it", vector(0.95, 3)).merged

    def test_an_announced_change(self, project):
        """A newcomer saying something is *now* so updates the held item; it does not repeat it."""
        add(project, "Staging deploys run nightly", unit())
        assert not add(project, "Staging deploys now run nightly", vector(0.98)).merged
        assert not add(project, "Staging deploys no longer run nightly", vector(0.97)).merged
        # Once said, the change may be said again.
        held = add(project, "Reviews now need two approvals", unit(11)).item
        assert add(project, "Reviews now need 2 approvals", vector(0.97, 11)).merged_into is None
        assert (
            add(project, "Reviews now need two approvals!", vector(0.99, 11)).merged_into == held.id
        )

    def test_history_never_absorbs(self, project):
        old = add(project, "Ship on Fridays", unit()).item
        project.supersede(
            old.id, project.new_item("convention", "Ship on Mondays", embedding=unit(20))
        )
        assert not add(project, "Ship every Friday", vector(0.97)).merged

    def test_record_kinds(self, project):
        """Turns and tool outputs record what happened: said twice, stored twice."""
        add(project, "ok, thanks!", unit(), kind="turn")
        assert not add(project, "ok, thanks!", unit(), kind="turn").merged

    def test_task_memory_keeps_its_timeline(self, backend, clock):
        task = TaskMemoryStore("t1", backend, clock=clock)
        assert task.merge is None
        task.add_reasoning("Run the test suite again", "s1")
        task.add_reasoning("Run the test suite again", "s1")
        assert task.count() == 2
        opted = TaskMemoryStore("t2", backend, clock=clock, merge=DEFAULT_MERGE)
        opted.add_reasoning("Run the test suite again", "s1")
        opted.add_reasoning("Run the test suite again", "s1")
        assert opted.count() == 1


class TestRefused:
    def test_an_id_the_scope_holds(self, project, backend):
        """Re-adding a stored item is a DuplicateItemError, journaled, not a merge."""
        held = add(project, "Pin dependencies", unit()).item
        with pytest.raises(DuplicateItemError):
            project.add(held)
        with pytest.raises(DuplicateItemError):
            project.add(attrs.evolve(held, text="Pin dependency versions"))
        assert project.require(held.id) == held
        assert not journal(backend, project.namespace, AuditAction.MERGE)
        assert len(journal(backend, project.namespace, AuditAction.ABORT)) == 2

    def test_an_id_given_twice(self, project):
        held = add(project, "Pin dependencies", unit()).item
        twice = project.new_item("convention", "Pin every dependency", embedding=vector(0.97))
        with pytest.raises(DuplicateItemError):
            project.add_many([twice, twice])
        assert project.list_all() == [held]

    @pytest.mark.parametrize("threshold", [0, -0.5, 1.01, "high", None, True])
    def test_bad_thresholds(self, threshold):
        with pytest.raises(ValidationError) as raised:
            MergePolicy(threshold)
        assert raised.value.field == "threshold"

    @pytest.mark.parametrize(("field", "value"), [("neighbours", 0), ("ignore_kinds", [5])])
    def test_bad_settings(self, field, value):
        with pytest.raises(ValidationError) as raised:
            MergePolicy(**{field: value})
        assert raised.value.field == field

    def test_a_policy_that_is_not_one(self, backend):
        with pytest.raises(ValidationError) as raised:
            ProjectMemoryStore("p", backend, merge=0.9)
        assert raised.value.field == "merge"
        with pytest.raises(ValidationError):
            MemoryStores(backend, merge="on")


class TestForgetAndPromote:
    def test_forgetting_the_item_erases_its_duplicates_ids(self, project, backend):
        held = add(project, "Backups run at 02:00 UTC", unit()).item
        dup = project.new_item(
            "convention", "Backups run at 02:00 UTC daily", embedding=vector(0.96)
        )
        project.add(dup)
        assert project.forget(held.id) == 1
        text = repr([(*e.item_ids, e.detail) for e in backend.audit.events(limit=None)])
        assert dup.id not in text
        assert held.id not in text
        assert ERASED_PREFIX in text

    def test_promoting_a_near_duplicate_reinforces_the_held_item(self, backend, clock):
        task = TaskMemoryStore("t", backend, project_id="shop", clock=clock)
        project = ProjectMemoryStore("shop", backend, clock=clock)
        held = add(project, "Refunds go through the payments service", unit(), kind="decision").item
        step = task.add(
            task.new_item("decision", "Refunds go via the payments service", embedding=vector(0.95))
        )
        result = promote(task, project, step.id, reason="settled")
        assert result.duplicate
        assert result.similarity == pytest.approx(0.95, abs=1e-4)
        assert result.item.id == held.id
        assert result.item.merged_from == (Origin.of(step),)
        assert result.item.importance == pytest.approx(held.importance + MERGE_BOOST)
        assert project.count() == 1
        # The task item's erasure reaches its trace in what it was merged into.
        task.forget(step.id)
        (origin,) = project.require(held.id).merged_from
        assert origin.id.startswith(ERASED_PREFIX)

    def test_a_merged_preference_is_confirmed_first(self, backend, clock):
        asked = []
        store = GlobalMemoryStore(
            backend, "u", confirm=lambda request: asked.append(request) or True, clock=clock
        )
        held = add(store, "Prefers dark mode", unit(), kind="preference").item
        assert add(store, "Likes dark mode", vector(0.95), kind="preference").merged_into == held.id
        assert len(asked) == 2

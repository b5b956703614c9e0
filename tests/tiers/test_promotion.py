"""Explicit promotion: provenance, duplicate boosting, direction and confirmation."""

from __future__ import annotations

import pytest

from agent_engine import ConfirmationDeclined, Tier, ValidationError, promote
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.session import SessionMemoryStore
from agent_engine.tiers.task import TaskMemoryStore


@pytest.fixture
def tiers(backend, clock):
    task = TaskMemoryStore("t", backend, project_id="p", user_id="u", clock=clock)
    project = ProjectMemoryStore("p", backend, clock=clock)
    answers: list[bool] = []
    user = GlobalMemoryStore(backend, "u", confirm=lambda _req: answers.pop(0), clock=clock)
    return task, project, user, answers


class TestPromote:
    def test_task_to_project_records_provenance(self, tiers):
        """The copy lives in the project with a new id and says where it came from."""
        task, project, _, _ = tiers
        lesson = task.add_reasoning(
            "Flaky tests came from a shared temp dir", "diagnose", importance=0.8
        )
        result = promote(task, project, lesson.id, reason="recurring cause")
        copy = result.item
        assert result.duplicate is False
        assert copy.id != lesson.id
        assert (copy.tier, copy.namespace) == (Tier.PROJECT, project.namespace)
        assert (copy.text, copy.importance) == (lesson.text, lesson.importance)
        assert copy.provenance.source_item_id == lesson.id
        assert copy.provenance.source_tier is Tier.TASK
        assert copy.provenance.source_namespace == task.namespace
        assert copy.provenance.reason == "recurring cause"
        assert project.get(copy.id) == copy
        assert project.search("shared temp dir flaky", k=1)[0].item.id == copy.id

    def test_promoting_twice_boosts_instead_of_duplicating(self, tiers):
        """Same content again: no second item; importance +0.1 (capped) and access +1."""
        task, project, _, _ = tiers
        first = task.add_reasoning("Pin the Node version", "s", importance=0.95)
        again = task.add_reasoning("pin the  node VERSION", "s")
        created = promote(task, project, first.id).item
        boosted = promote(task, project, again.id)
        assert boosted.duplicate is True
        assert boosted.item.id == created.id
        assert boosted.item.importance == 1.0
        assert boosted.item.access_count == created.access_count + 1
        assert project.count() == 1
        assert project.get(created.id).importance == 1.0

    def test_boost_accumulates(self, tiers):
        """Each duplicate promotion adds 0.1."""
        task, project, _, _ = tiers
        item = task.add_reasoning("Cache pip downloads", "s", importance=0.5)
        promote(task, project, item.id)
        promote(task, project, item.id)
        result = promote(task, project, item.id)
        assert result.item.importance == pytest.approx(0.7)
        assert result.item.access_count == 2

    @pytest.mark.parametrize(("src", "dst"), [(0, 2), (1, 0), (2, 1), (1, 1)])
    def test_only_upward_one_step(self, tiers, src, dst):
        """Promotion goes task -> project -> global only."""
        stores = tiers[:3]
        item = stores[src].new_item("note", "x")
        with pytest.raises(ValidationError):
            promote(stores[src], stores[dst], item.id)

    def test_missing_or_foreign_item(self, tiers, backend, clock):
        """Promoting an id the source does not hold is not found."""
        task, project, _, _ = tiers
        other = TaskMemoryStore("other", backend, clock=clock)
        foreign = other.add_reasoning("not yours", "s")
        with pytest.raises(LookupError):
            promote(task, project, foreign.id)

    @pytest.mark.parametrize(
        ("source", "target"),
        [
            (("task", "p", "u"), ("project", "q", "")),
            (("session", "p", "u"), ("project", "q", "")),
            (("task", "p", "u"), ("session", "q", "u")),
            (("task", "p", "u"), ("session", "p", "v")),
        ],
    )
    def test_stays_with_its_owners(self, backend, clock, source, target):
        """A task's or session's item goes into its own project and user's stores only."""

        def store(kind, project, user):
            if kind == "task":
                return TaskMemoryStore("t", backend, project_id=project, user_id=user, clock=clock)
            if kind == "session":
                return SessionMemoryStore(
                    "s", backend, project_id=project, user_id=user, clock=clock
                )
            return ProjectMemoryStore(project, backend, clock=clock)

        src, dst = store(*source), store(*target)
        item = src.add(src.new_item("note", "the staging database is read-only on Fridays"))
        before = dst.count()
        with pytest.raises(ValidationError, match="cannot promote") as raised:
            promote(src, dst, item.id)
        assert raised.value.field == "target"
        assert dst.count() == before == 0
        assert src.get(item.id) == item
        own = store(target[0], source[1], source[2])
        assert promote(src, own, item.id).item.namespace == own.namespace

    def test_into_global_is_confirmed(self, tiers):
        """Promotion into global memory asks; a refusal writes nothing."""
        _, project, user, answers = tiers
        item = project.add_pattern("Prefer composition over inheritance")
        answers.append(False)
        with pytest.raises(ConfirmationDeclined):
            promote(project, user, item.id)
        assert user.count() == 0
        answers.append(True)
        result = promote(project, user, item.id, reason="applies everywhere")
        assert user.get(result.item.id).provenance.source_tier is Tier.PROJECT

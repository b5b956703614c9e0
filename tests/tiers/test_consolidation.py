"""Task end: promotion candidates reported with why, held on request, auto-promoted by a preset."""

from __future__ import annotations

import attrs
import pytest

from agent_engine import (
    AuditAction,
    PromotionPreset,
    Status,
    Task,
    TaskState,
    Tier,
    ValidationError,
    promotion_candidates,
)
from agent_engine.tiers import Signal
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore
from agent_engine.tiers.views import View

LESSON = "The login test waits for the network to be idle, not a fixed sleep"
OTHER = "The CI runner has two cores, so the suite runs in two workers"


@pytest.fixture
def task(backend, clock):
    return TaskMemoryStore(Task(id="fix-login", project_id="p"), backend, clock=clock)


@pytest.fixture
def project(backend, clock):
    return ProjectMemoryStore("p", backend, clock=clock)


def use(store, item, times):
    """What `times` builds that chose ``item`` record."""
    for _ in range(times):
        store.record_access([item.id], store.clock())
    return store.require(item.id)


def snapshot(backend):
    """Every stored row and the journal's length: what "nothing changed" compares."""
    rows = backend.query(None, None, "+timestamp")
    return [(i.id, i.status, i.importance, i.access_count) for i in rows], len(
        backend.audit.events(limit=None)
    )


class TestPromotionCandidates:
    def test_accessed_three_times_or_more(self, task):
        """Items accessed 3+ times are candidates, best first, each saying why; others are not."""
        lesson = use(task, task.add_reasoning(LESSON, "fix"), 4)
        other = use(task, task.add_reasoning(OTHER, "fix"), 3)
        use(task, task.add_reasoning("Tried a longer sleep first", "fix"), 2)
        found = promotion_candidates(task)
        assert [c.item.id for c in found] == [lesson.id, other.id]
        assert found[0].signals == (Signal.FREQUENT_ACCESS,)
        assert found[0].why == "accessed 4 times (>= 3)"
        assert found[0].item == lesson

    def test_the_instruction_is_never_a_candidate(self, task):
        """The instruction is in every context (HEAD): its accesses say nothing."""
        use(task, task.add_instruction("Fix the flaky login test"), 5)
        assert promotion_candidates(task) == []

    def test_other_signals_are_reported_too(self, task):
        """A candidate lists every signal observed on it, scored with the balanced preset."""
        failure = task.add(
            task.new_item("failure", LESSON, importance=0.9, tags=("task",), session="run-1")
        )
        task.add(task.new_item("failure", LESSON.upper(), session="run-2"))
        failure = use(task, failure, 3)
        (found,) = promotion_candidates(task)
        assert found.item.id == failure.id
        assert set(found.signals) == {
            Signal.FREQUENT_ACCESS,
            Signal.MULTI_SESSION,
            Signal.ERROR_RESOLUTION,
            Signal.HIGH_IMPORTANCE,
        }
        assert found.score == 8.0
        assert found.qualifies

    def test_one_candidate_per_content(self, task):
        """Two items of the same content give one candidate: the more used."""
        use(task, task.add_reasoning(LESSON, "a"), 3)
        busier = use(task, task.add_reasoning(LESSON.lower(), "b"), 5)
        assert [c.item.id for c in promotion_candidates(task)] == [busier.id]

    def test_reading_writes_nothing(self, task, backend):
        """Listing candidates changes no item and journals nothing."""
        use(task, task.add_reasoning(LESSON, "fix"), 3)
        before = snapshot(backend)
        promotion_candidates(task)
        promotion_candidates(task, "aggressive")
        assert snapshot(backend) == before

    def test_other_tasks_count_for_nothing(self, task, backend, clock):
        """Another task's items, accesses and sessions never make a candidate here."""
        mine = task.add(task.new_item("reasoning", LESSON, session="run-1"))
        use(task, mine, 3)
        other = TaskMemoryStore(Task(id="other", project_id="p"), backend, clock=clock)
        use(other, other.add(other.new_item("reasoning", LESSON, session="run-2")), 9)
        use(other, other.add_reasoning(OTHER, "s"), 9)
        (found,) = promotion_candidates(task)
        assert found.item.id == mine.id
        assert found.signals == (Signal.FREQUENT_ACCESS,)


class TestFinish:
    def test_reports_and_clears_by_default(self, task, project, backend):
        """The candidates are reported, nothing moves, and task memory is cleared."""
        task.add_instruction("Fix the flaky login test")
        lesson = use(task, task.add_reasoning(LESSON, "fix"), 3)
        task.add_reasoning(OTHER, "fix")
        end = task.finish()
        assert [c.item.id for c in end.candidates] == [lesson.id]
        assert (end.removed, end.held, end.promoted, end.preset) == (3, (), (), None)
        assert task.count(view=View.ALL) == 0
        assert project.count() == 0
        assert backend.count() == 0

    @pytest.mark.parametrize("state", [TaskState.SUCCEEDED, TaskState.FAILED])
    def test_on_state_is_the_same_end(self, task, state):
        """A terminal state ends the task as finish() does, and says how many items went."""
        use(task, task.add_reasoning(LESSON, "fix"), 3)
        task.add_reasoning(OTHER, "fix")
        assert task.on_state(state) == 2
        assert task.count() == 0

    def test_hold_keeps_the_candidates_and_their_history(self, task, backend):
        """Held candidates (with their earlier versions) stay; the rest goes, in one clear."""
        lesson = task.add_reasoning(LESSON, "fix")
        lesson = use(task, task.update(attrs.evolve(lesson, text=LESSON + " first")), 3)
        task.add_reasoning(OTHER, "fix")
        end = task.finish(hold=True)
        assert end.held == (lesson.id,)
        assert end.removed == 1
        assert [i.id for i in task.list_all()] == [lesson.id]
        assert len(task.history(lesson.id)) == 2
        (event,) = backend.audit.events(namespace=task.namespace, actions=[AuditAction.CLEAR])
        assert event.detail == {"held": [lesson.id]}

    def test_a_held_candidate_forgotten_leaves_no_id_behind(self, task, backend):
        """Forgetting a held candidate erases its id from the clear event that named it."""
        lesson = use(task, task.add_reasoning(LESSON, "fix"), 3)
        task.add_reasoning(OTHER, "fix")
        task.finish(hold=True)
        task.forget(lesson.id)
        assert all(
            lesson.id not in str((event.item_ids, event.detail))
            for event in backend.audit.events(limit=None)
        )

    def test_nothing_to_hold_clears_everything(self, task):
        """Hold with no candidate is a plain clear."""
        task.add_reasoning(OTHER, "fix")
        assert task.finish(hold=True).removed == 1
        assert task.count(view=View.ALL) == 0


class TestAutoPromotion:
    def test_qualifying_items_land_quarantined_with_provenance(self, task, project, backend):
        """A preset promotes what qualifies into the project as a candidate, and says why."""
        lesson = use(task, task.add_reasoning(LESSON, "fix", importance=0.8), 3)
        end = task.finish(into=project, preset="balanced")
        (result,) = end.promoted
        copy = project.require(result.item.id)
        assert copy.status is Status.CANDIDATE
        assert copy.text == LESSON
        assert copy.provenance.source_item_id == lesson.id
        assert copy.provenance.source_tier is Tier.TASK
        assert copy.provenance.reason == (
            "auto-promoted by the balanced preset (4 points: frequent-access, high-importance)"
        )
        assert (end.preset, end.held) == ("balanced", ())
        (event,) = backend.audit.events(namespace=project.namespace, actions=[AuditAction.PROMOTE])
        assert event.detail["quarantine"] is True
        assert task.count() == 0

    def test_what_does_not_qualify_is_reported_not_promoted(self, task, project):
        """A candidate the preset filters out is reported with the filter, and not promoted."""
        short = use(task, task.add_reasoning("Use --lf", "fix"), 3)
        end = task.finish(into=project, preset="balanced", hold=True)
        (candidate,) = end.candidates
        assert candidate.filtered == "content of 8 characters, under 30"
        assert not candidate.qualifies
        assert end.promoted == ()
        assert end.held == (short.id,)
        assert project.count() == 0

    def test_a_preset_promotes_on_signals_other_than_access(self, task, project):
        """Under a preset, a never-accessed pinned item is a candidate, and lands pinned."""
        pinned = task.pin(task.add_reasoning(LESSON, "fix").id)
        end = task.finish(into=project, preset="conservative")
        (result,) = end.promoted
        assert end.candidates[0].item.id == pinned.id
        assert project.require(result.item.id).status is Status.PINNED

    def test_a_stricter_preset_promotes_less(self, task, project):
        """The same task under conservative promotes nothing that balanced would."""
        use(task, task.add_reasoning(LESSON, "fix"), 3)
        end = task.finish(into=project, preset="conservative")
        assert end.promoted == ()
        assert len(end.candidates) == 1
        assert project.count() == 0

    def test_a_recurring_lesson_reinforces_the_project_copy(self, backend, clock, project):
        """Promoted again from a later task, the content boosts its copy instead of a second."""
        first = None
        for task_id in ("t1", "t2"):
            store = TaskMemoryStore(Task(id=task_id, project_id="p"), backend, clock=clock)
            use(store, store.add_reasoning(LESSON, "fix"), 3)
            (result,) = store.finish(into=project, preset="balanced").promoted
            first = first or result.item
        assert result.duplicate
        assert project.count() == 1
        assert project.require(first.id).access_count == 1


@pytest.fixture
def targets(project, backend, clock):
    """A store of each tier, by name: where a preset might be told to promote."""
    return {
        "project": project,
        "global": GlobalMemoryStore(backend, "u", confirm=lambda _r: True, clock=clock),
        "task": TaskMemoryStore("other", backend, clock=clock),
        "another project": ProjectMemoryStore("q", backend, clock=clock),
    }


class TestBadInput:
    def _state(self, task):
        use(task, task.add_reasoning(LESSON, "fix"), 3)
        task.add_reasoning(OTHER, "fix")

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            pytest.param({"preset": "reckless", "into": "project"}, "promotion", id="unknown"),
            pytest.param({"preset": "balanced"}, "into", id="preset-without-target"),
            pytest.param({"into": "project"}, "preset", id="target-without-preset"),
            pytest.param({"preset": "balanced", "into": "global"}, "into", id="into-global"),
            pytest.param({"preset": "balanced", "into": "task"}, "into", id="into-a-task"),
            pytest.param(
                {"preset": "balanced", "into": "another project"}, "into", id="into-another-project"
            ),
        ],
    )
    def test_refused_and_nothing_changes(self, task, targets, backend, kwargs, field):
        """A bad preset or target is refused with its field named; the task is left as it was."""
        self._state(task)
        if "into" in kwargs:
            kwargs = {**kwargs, "into": targets[kwargs["into"]]}
        before = snapshot(backend)
        with pytest.raises(ValidationError) as caught:
            task.finish(**kwargs)
        assert caught.value.field == field
        assert snapshot(backend) == before

    def test_a_custom_preset_out_of_range_is_refused_before_the_end(self, task, backend):
        """A preset with a bad weight cannot even be built, so no end starts with it."""
        self._state(task)
        before = snapshot(backend)
        with pytest.raises(ValidationError):
            PromotionPreset("mine", weights={"frequent-access": -3})
        assert snapshot(backend) == before

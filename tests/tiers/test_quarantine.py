"""The confirmation step: candidates used in their window are confirmed, the rest penalised."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_engine import (
    AuditAction,
    Status,
    Task,
    ValidationError,
    confirm_candidates,
    promote,
)
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

DAY = timedelta(hours=24)


@pytest.fixture
def project(backend, clock):
    return ProjectMemoryStore("p", backend, clock=clock)


@pytest.fixture
def land(backend, clock, project):
    """Promote a text into the project as a quarantined candidate; return the copy."""
    task = TaskMemoryStore(Task(id="t", project_id="p"), backend, clock=clock)

    def landing(text, importance=0.5):
        item = task.add_reasoning(text, "s", importance=importance)
        return promote(task, project, item.id, quarantine=True).item

    return landing


def snapshot(backend):
    rows = backend.query(None, None, "+timestamp")
    return [(i.id, i.status, i.importance) for i in rows], len(backend.audit.events(limit=None))


class TestConfirmCandidates:
    def test_used_ones_confirmed_unused_ones_penalised(self, project, land, clock, backend):
        """After the window: accessed -> confirmed as is; never accessed -> importance x 0.8."""
        used, unused = land("Wait for network idle", 0.5), land("Pin the Node version", 0.5)
        clock.now += timedelta(hours=2)
        project.record_access([used.id], clock())
        clock.now += DAY
        review = confirm_candidates(project)
        assert [i.id for i in review.confirmed] == [used.id]
        assert [i.id for i in review.penalised] == [unused.id]
        assert project.require(used.id).status is Status.CONFIRMED
        assert project.require(used.id).importance == 0.5
        assert project.require(unused.id).status is Status.CONFIRMED
        assert project.require(unused.id).importance == pytest.approx(0.4)
        (event,) = backend.audit.events(namespace=project.namespace, actions=[AuditAction.CONFIRM])
        assert set(event.item_ids) == {used.id, unused.id}
        assert event.detail["confirmed"] == [used.id]
        assert event.detail["penalised"] == [unused.id]

    def test_candidates_in_their_window_wait(self, project, land, clock, backend):
        """Before its window ends a candidate is left alone, and nothing is journaled."""
        early = land("Wait for network idle")
        clock.now += DAY - timedelta(minutes=5)
        before = snapshot(backend)
        review = confirm_candidates(project)
        assert review.waiting == (project.require(early.id),)
        assert (review.confirmed, review.penalised) == ((), ())
        assert snapshot(backend) == before

    def test_no_candidate_is_penalised_twice(self, project, land, clock):
        """However often the step runs, one unused candidate loses importance once."""
        unused = land("Pin the Node version", 0.5)
        clock.now += DAY
        confirm_candidates(project)
        clock.now += 3 * DAY
        again = confirm_candidates(project)
        assert (again.confirmed, again.penalised) == ((), ())
        assert project.require(unused.id).importance == pytest.approx(0.4)

    def test_pinned_items_never_decay(self, project, land, clock):
        """A candidate pinned during its quarantine is never penalised."""
        pinned = land("Never edit the auth middleware directly", 0.9)
        project.pin(pinned.id)
        clock.now += 2 * DAY
        review = confirm_candidates(project)
        assert review == type(review)()
        assert project.require(pinned.id).importance == 0.9
        assert project.require(pinned.id).status is Status.PINNED

    def test_a_window_of_zero_reviews_everything_now(self, project, land):
        """window=0 ends every quarantine at once."""
        item = land("Pin the Node version")
        review = confirm_candidates(project, window=timedelta(0))
        assert [i.id for i in review.penalised] == [item.id]

    def test_only_its_own_scope(self, project, land, backend, clock):
        """The step reviews this project's candidates only; another project's stay candidates."""
        mine = land("Pin the Node version")
        other = ProjectMemoryStore("q", backend, clock=clock)
        theirs = other.add(other.new_item("note", "Theirs", status=Status.CANDIDATE))
        clock.now += DAY
        review = confirm_candidates(project)
        assert [i.id for i in review.penalised] == [mine.id]
        assert other.require(theirs.id).status is Status.CANDIDATE

    @pytest.mark.parametrize(
        "window",
        [
            pytest.param(timedelta(hours=-1), id="negative"),
            pytest.param(24, id="a-number"),
            pytest.param(None, id="none"),
        ],
    )
    def test_bad_window_changes_nothing(self, project, land, clock, backend, window):
        """A window that is not a duration of zero or more is refused; nothing is written."""
        land("Pin the Node version")
        clock.now += DAY
        before = snapshot(backend)
        with pytest.raises(ValidationError) as caught:
            confirm_candidates(project, window=window)
        assert caught.value.field == "window"
        assert snapshot(backend) == before

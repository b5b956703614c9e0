"""Auto-promotion on MemoryStores: off by default, opt-in by preset, never into global memory."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_engine import MemoryStores, Status, Task, ValidationError

LESSON = "The login test waits for the network to be idle, not a fixed sleep"
OTHER = "The CI runner has two cores, so the suite runs in two workers"
TASK = Task(id="fix-login", project_id="p", user_id="u")


def run(stores, task, *texts, accesses=3):
    """A task whose items were each chosen for ``accesses`` contexts."""
    memory = stores.task_store(task)
    for text in texts:
        item = memory.add_reasoning(text, "fix")
        for _ in range(accesses):
            memory.record_access([item.id], stores.clock())
    return memory


@pytest.fixture
def asked():
    return []


@pytest.fixture
def confirm(asked):
    def answer(request):
        asked.append(request.operation)
        return True

    return answer


class TestOffByDefault:
    def test_nothing_moves(self, backend, clock):
        """Without a preset, a task end reports its candidates and promotes nothing."""
        stores = MemoryStores(backend, clock=clock)
        run(stores, TASK, LESSON)
        end = stores.finish_task(TASK)
        assert len(end.candidates) == 1
        assert (end.promoted, end.preset, end.review) == ((), None, None)
        assert stores.project_store("p").count() == 0
        assert backend.count() == 0

    def test_hold_candidates(self, backend, clock):
        """hold_candidates keeps the candidates in the task's memory; the rest is cleared."""
        stores = MemoryStores(backend, clock=clock, hold_candidates=True)
        run(stores, TASK, LESSON)
        stores.task_store(TASK).add_reasoning(OTHER, "fix")
        assert stores.cleanup_task(TASK) == 1
        assert [i.text for i in stores.task_store(TASK).list_all()] == [LESSON]


class TestWithAPreset:
    def test_task_end_promotes_into_the_project_as_candidates(self, backend, clock, asked, confirm):
        """A preset promotes a task's qualifying items into its project, quarantined."""
        stores = MemoryStores(backend, clock=clock, confirm=confirm, promotion="balanced")
        run(stores, TASK, LESSON)
        end = stores.finish_task(TASK)
        (result,) = end.promoted
        assert result.item.status is Status.CANDIDATE
        assert result.item.namespace == "project:p"
        assert end.review is not None
        assert stores.task_store(TASK).count() == 0

    def test_never_into_global_memory(self, backend, clock, asked, confirm):
        """Auto-promotion never writes global memory and never asks its confirmation."""
        stores = MemoryStores(backend, clock=clock, confirm=confirm, promotion="aggressive")
        run(stores, TASK, LESSON, OTHER, accesses=9)
        stores.finish_task(TASK)
        stores.finish_task(TASK)
        assert stores.global_store("u").count() == 0
        assert asked == []

    def test_the_next_task_end_reviews_the_candidates(self, backend, clock):
        """After the window, the next task end confirms used candidates, penalises the rest."""
        stores = MemoryStores(backend, clock=clock, promotion="balanced")
        run(stores, TASK, LESSON, OTHER)
        used, unused = (r.item for r in stores.finish_task(TASK).promoted)
        project = stores.project_store("p")
        project.record_access([used.id], clock())
        clock.now += timedelta(hours=25)
        review = stores.finish_task(Task(id="next", project_id="p")).review
        assert [i.id for i in review.confirmed] == [used.id]
        assert [i.id for i in review.penalised] == [unused.id]
        assert project.require(unused.id).importance == pytest.approx(unused.importance * 0.8)

    def test_a_custom_window(self, backend, clock):
        """candidate_window sets how long quarantine lasts."""
        stores = MemoryStores(
            backend, clock=clock, promotion="balanced", candidate_window=timedelta(hours=1)
        )
        run(stores, TASK, LESSON)
        stores.finish_task(TASK)
        clock.now += timedelta(hours=2)
        review = stores.finish_task(Task(id="next", project_id="p")).review
        assert len(review.penalised) == 1


class TestBadSettings:
    @pytest.mark.parametrize(
        ("settings", "field"),
        [
            pytest.param({"promotion": "reckless"}, "promotion", id="unknown-preset"),
            pytest.param({"promotion": 3}, "promotion", id="not-a-preset"),
            pytest.param({"candidate_window": timedelta(hours=-1)}, "window", id="window"),
        ],
    )
    def test_refused_before_any_store_opens(self, backend, clock, settings, field):
        """A bad preset or window is a ValidationError naming it; nothing is written."""
        with pytest.raises(ValidationError) as caught:
            MemoryStores(backend, clock=clock, **settings)
        assert caught.value.field == field
        assert backend.count() == 0
        assert backend.audit.events(limit=None) == []

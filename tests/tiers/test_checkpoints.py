"""Checkpoints of a scope on every backend: take, list, roll back; scopes stay apart."""

from __future__ import annotations

import pytest

from agent_engine import (
    AuditAction,
    CheckpointNotFoundError,
    MemoryStores,
    Task,
    View,
    to_dict,
)

TASK = Task(id="fix-login", project_id="shop", user_id="ann")


def _state(store) -> list[dict]:
    return [to_dict(item) for item in store.query(None, limit=None, order_by="+id", view=View.ALL)]


@pytest.fixture
def stores(backend, clock):
    return MemoryStores(backend, clock=clock, confirm=lambda _request: True)


def test_a_task_rolls_back_to_its_checkpoint(stores):
    """What came after the checkpoint goes, what changed is put back, what was lost returns."""
    task = stores.task_store(TASK)
    task.add_instruction("Fix the flaky login test")
    kept = task.add_reasoning("The test sleeps 1s", "diagnose")
    lost = task.add_reasoning("CI machines are slow", "diagnose")
    checkpoint = task.checkpoint("before the fix")
    saved = _state(task)
    assert (checkpoint.label, checkpoint.items, checkpoint.namespace) == (
        "before the fix",
        3,
        task.namespace,
    )

    added = task.add_reasoning("Replace sleep with a wait", "fix")
    task.archive(kept.id)
    task.delete(lost.id)  # deleted, not erased: an erase takes the checkpoint too
    plan = task.rollback(checkpoint.id)
    assert [i.id for i in plan.add] == [lost.id]
    assert [i.id for i in plan.replace] == [kept.id]
    assert plan.forget == (added.id,)
    assert _state(task) == saved
    actions = {e.action for e in task.backend.audit.events(namespace=task.namespace, limit=5)}
    assert {AuditAction.UPDATE, AuditAction.DELETE} <= actions
    again = task.rollback(checkpoint.id)
    assert (again.add, again.replace, again.forget) == ((), (), ())


def test_checkpoints_are_listed_newest_first_in_their_scope_only(stores):
    task, project = stores.task_store(TASK), stores.project_store("shop")
    task.add_instruction("Fix the flaky login test")
    first, second = task.checkpoint("one"), task.checkpoint("two")
    project.add_decision("Prices are integer cents.")
    mine = project.checkpoint()
    assert task.checkpoints() == [second, first]
    assert project.checkpoints() == [mine]
    assert stores.task_store(Task(id="other", project_id="shop", user_id="ann")).checkpoints() == []


def test_another_scopes_checkpoint_is_not_found(stores):
    """An id from another scope is unknown here, and rolling back to it changes nothing."""
    task, project = stores.task_store(TASK), stores.project_store("shop")
    project.add_decision("Prices are integer cents.")
    theirs = project.checkpoint()
    task.add_instruction("Fix the flaky login test")
    before = _state(task)
    for checkpoint_id in (theirs.id, "no-such-checkpoint"):
        with pytest.raises(CheckpointNotFoundError) as caught:
            task.rollback(checkpoint_id)
        assert caught.value.checkpoint_id == checkpoint_id
    assert _state(task) == before


def test_forgetting_a_memory_forgets_the_checkpoints_that_hold_it(stores):
    """An erased memory must leave no text behind, in a checkpoint either."""
    project = stores.project_store("shop")
    secret = project.add_decision("The staging password is hunter2.")
    holding = project.checkpoint()
    project.forget(secret.id)
    after = project.checkpoint()
    assert project.checkpoints() == [after]
    assert holding.id not in {c.id for c in project.checkpoints()}


def test_an_ended_task_takes_its_checkpoints_along(stores):
    task = stores.task_store(TASK)
    task.add_instruction("Fix the flaky login test")
    task.checkpoint()
    stores.finish_task(TASK)
    assert task.checkpoints() == []

"""Forgetting: an erased item leaves no id in the journal, only the token that replaced it."""

from __future__ import annotations

import json

import attrs
import pytest

from agent_engine import AuditAction, AuditLog, BackendError, InMemoryBackend, promote
from agent_engine.memory.audit import InMemoryAuditStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore


def journal_text(store) -> str:
    """Every event of every namespace, as one text to search."""
    return json.dumps(
        [[event.action.value, event.item_ids, event.detail] for event in store.events(limit=None)]
    )


class TestForget:
    def test_forget_erases_and_names_the_item_by_token(self, backend, clock):
        """The item and its previous version are gone; their events name them by token only."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        item = project.add_decision("use integer cents")
        project.update(attrs.evolve(item, text="use integer cents everywhere"))
        project.pin(item.id)
        other = project.add_decision("deploy on tuesdays")

        assert project.forget(item.id) == 1

        assert project.get(item.id) is None
        assert item.id not in journal_text(backend.audit)
        events = list(reversed(backend.audit.events(namespace=project.namespace, limit=None)))
        assert [event.action for event in events] == [
            AuditAction.ADD,
            AuditAction.UPDATE,
            AuditAction.PIN,
            AuditAction.ADD,
            AuditAction.ERASE,
        ]
        token, previous = events[-1].item_ids
        assert token.startswith("erased:")
        assert previous.startswith("erased:")
        assert [event.item_ids for event in events[:3]] == [(token,), (token, previous), (token,)]
        assert project.count(view="all") == 1
        assert events[3].item_ids == (other.id,)
        assert events[-1].detail == {}

    def test_foreign_and_unknown_ids_are_skipped(self, backend, clock):
        """An id of another namespace is neither erased nor redacted: forget returns 0."""
        mine = ProjectMemoryStore("p", backend, clock=clock)
        theirs = ProjectMemoryStore("q", backend, clock=clock)
        secret = theirs.add_decision("their secret")
        assert mine.forget(secret.id, "no-such-id") == 0
        assert theirs.get(secret.id) == secret
        assert secret.id in journal_text(backend.audit)
        assert AuditAction.ERASE not in {event.action for event in backend.audit.events()}

    def test_forget_several_in_one_erase(self, backend, clock):
        """Several ids are erased by one journaled erase, each under a token of its own."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        a, b = project.add_decision("a"), project.add_decision("b")
        assert project.forget(a.id, b.id, a.id) == 2
        (erase,) = backend.audit.events(actions=[AuditAction.ERASE])
        assert len(set(erase.item_ids)) == 2
        assert a.id not in journal_text(backend.audit)
        assert b.id not in journal_text(backend.audit)

    def test_forget_without_erase_deletes(self, backend, clock):
        """erase=False is a journaled delete: the journal still names the id."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        item = project.add_decision("d")
        assert project.forget(item.id, erase=False) == 1
        (event,) = backend.audit.events(namespace=project.namespace, limit=1)
        assert (event.action, event.item_ids) == (AuditAction.DELETE, (item.id,))

    def test_promoted_copy_names_its_erased_source_by_token(self, backend, clock):
        """A copy keeps its text, but its provenance and the promote event lose the source id."""
        task = TaskMemoryStore("t", backend, project_id="p", clock=clock)
        project = ProjectMemoryStore("p", backend, clock=clock)
        source = task.add_reasoning("retry the flaky step once", "s1")
        copy = promote(task, project, source.id).item

        assert task.forget(source.id) == 1

        (erase,) = backend.audit.events(actions=[AuditAction.ERASE])
        (token,) = erase.item_ids
        kept = project.require(copy.id)
        assert kept.text == copy.text
        assert kept.provenance is not None
        assert kept.provenance.source_item_id == token
        (promoted,) = backend.audit.events(actions=[AuditAction.PROMOTE])
        assert promoted.detail["source_item_id"] == token
        assert source.id not in journal_text(backend.audit)

    def test_a_separate_journal_is_redacted_too(self, backend, clock):
        """A store journaling elsewhere (audit=...) has the id replaced there as well."""
        log = AuditLog(InMemoryAuditStore(), clock=clock)
        project = ProjectMemoryStore("p", backend, audit=log, clock=clock)
        item = project.add_decision("d")
        project.forget(item.id)
        add, erase = reversed(log.store.events(limit=None))
        assert add.item_ids == erase.item_ids
        assert item.id not in journal_text(log.store)


class _RefusesErase(InMemoryBackend):
    """A backend whose erase fails, naming the id in its message as errors do."""

    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> int:
        raise BackendError(f"cannot erase {item_ids[0]!r}")


def test_failed_erase_is_aborted_by_token(clock):
    """The abort after a failed erase names the item by its token, in its ids and its message."""
    backend = _RefusesErase()
    project = ProjectMemoryStore("p", backend, clock=clock)
    item = project.add_decision("d")
    with pytest.raises(BackendError):
        project.forget(item.id)
    erase, abort = backend.audit.events(namespace=project.namespace, limit=2)[::-1]
    (token,) = erase.item_ids
    assert (erase.action, abort.action) == (AuditAction.ERASE, AuditAction.ABORT)
    assert abort.item_ids == (token,)
    assert abort.detail == {"intent": erase.id, "error": f"BackendError: cannot erase {token!r}"}
    assert project.get(item.id) == item

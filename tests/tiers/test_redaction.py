"""Stores redact before they write: no backend, index or journal ever holds the secret."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from agent_engine import AuditAction, MemoryStores, Task, promote
from agent_engine.embeddings import HashingEmbedder
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.redaction import SENSITIVE_TAG, RedactionPolicy
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

TOKEN = "ghp_" + "Zq7Lm2Xp9Rt4Vb6Nc8Kd1Hf3Jg5Ws0Ye2Ua4Io"
EMAIL = "dana.kowalski@example.com"
SECRET_TEXT = f"deploy with {TOKEN}, questions to {EMAIL}"
MASKED = "deploy with [REDACTED:github_token], questions to [REDACTED:email]"


@pytest.fixture
def project(backend, clock):
    return ProjectMemoryStore("shop", backend, clock=clock)


def events(backend, namespace, action):
    return [e for e in backend.audit.events(namespace=namespace, limit=None) if e.action is action]


class TestWrites:
    def test_an_added_secret_never_reaches_the_backend(self, project, backend):
        stored = project.add(project.new_item("note", SECRET_TEXT))
        assert stored.text == MASKED
        assert backend.get(stored.id).text == MASKED
        assert project.lexical().hits(TOKEN).best(5) == []
        assert [h.item.id for h in backend.lexical_search("REDACTED github_token", k=5)] == [
            stored.id
        ]

    def test_the_outcome_says_what_was_redacted(self, project):
        secret, plain = project.add_outcomes(
            [project.new_item("note", SECRET_TEXT), project.new_item("note", "nothing here")]
        )
        assert secret.redacted == {"github_token": 1, "email": 1}
        assert secret.given.text == MASKED
        assert plain.redacted == {}

    def test_the_vector_is_of_the_redacted_text(self, project, backend):
        stored = project.add(project.new_item("note", SECRET_TEXT))
        held = backend.get(stored.id)
        assert held.embedding is not None
        (expected,) = backend.embedder.embed([MASKED])
        assert held.embedding.tolist() == pytest.approx(expected.tolist())

    def test_the_journal_says_what_kinds_never_what(self, project, backend):
        stored = project.add(project.new_item("note", SECRET_TEXT))
        (event,) = events(backend, project.namespace, AuditAction.REDACT)
        assert event.item_ids == (stored.id,)
        assert event.detail["items"] == [
            {
                "id": stored.id,
                "found": {"email": 1, "github_token": 1},
                "modes": {"email": "mask", "github_token": "mask"},
            }
        ]
        journal = repr(backend.audit.events(namespace=project.namespace, limit=None))
        assert TOKEN not in journal
        assert EMAIL not in journal

    def test_an_item_without_secrets_leaves_no_redact_event(self, project, backend):
        project.add(project.new_item("note", "nothing to hide"))
        assert events(backend, project.namespace, AuditAction.REDACT) == []

    def test_an_update_is_redacted(self, project, backend):
        stored = project.add(project.new_item("note", "deploy with the usual token"))
        updated = project.update(attrs.evolve(stored, text=SECRET_TEXT))
        assert updated.text == MASKED
        assert backend.get(stored.id).text == MASKED
        assert len(events(backend, project.namespace, AuditAction.REDACT)) == 1

    def test_a_replacement_is_redacted(self, project, backend):
        old = project.add(project.new_item("decision", "use the staging token"))
        new = project.supersede(old.id, project.new_item("decision", SECRET_TEXT))
        assert backend.get(new.id).text == MASKED

    def test_a_payload_is_redacted(self, project, backend):
        stored = project.add(
            project.new_item("tool_output", "ran the deploy", payload={"env": {"GH": TOKEN}})
        )
        assert backend.get(stored.id).payload == {"env": {"GH": "[REDACTED:github_token]"}}

    def test_a_promoted_copy_is_redacted_by_the_receiving_store(self, backend, clock):
        """A task store that keeps secrets (its own choice) cannot carry them into a project."""
        task = TaskMemoryStore("t1", backend, project_id="shop", clock=clock, redaction=None)
        raw = task.add(task.new_item("decision", SECRET_TEXT))
        assert raw.text == SECRET_TEXT
        project = ProjectMemoryStore("shop", backend, clock=clock)
        copy = promote(task, project, raw.id, reason="worth keeping").item
        assert backend.get(copy.id).text == MASKED
        assert len(events(backend, project.namespace, AuditAction.REDACT)) == 1


class TestPolicies:
    def test_none_stores_items_as_given(self, backend, clock):
        store = ProjectMemoryStore("shop", backend, clock=clock, redaction=None)
        stored = store.add(store.new_item("note", SECRET_TEXT))
        assert backend.get(stored.id).text == SECRET_TEXT

    def test_tag_mode_keeps_the_text_and_tags_the_item(self, backend, clock):
        store = ProjectMemoryStore(
            "crm", backend, clock=clock, redaction=RedactionPolicy(kinds={"email": "tag"})
        )
        stored = store.add(store.new_item("contact", SECRET_TEXT))
        held = backend.get(stored.id)
        assert EMAIL in held.text
        assert TOKEN not in held.text
        assert f"{SENSITIVE_TAG}email" in held.tags
        assert [i.id for i in store.query({"tags": {"$all": ["sensitive:email"]}})] == [stored.id]

    def test_the_stores_of_an_application_share_its_policy(self, backend):
        policy = RedactionPolicy(mode="drop")
        stores = MemoryStores(backend, redaction=policy)
        task = Task(id="t", project_id="p", description="d")
        assert stores.task_store(task).redaction is policy
        assert stores.project_store("p").redaction is policy
        assert stores.global_store("u").redaction is policy


def test_nothing_of_the_secret_is_in_any_file_of_an_embedded_store(tmp_path: Path):
    """The SQLite file, its journal and the index files beside it hold no byte of the secret."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    with SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=64)) as backend:
        store = ProjectMemoryStore("shop", backend)
        store.add(store.new_item("note", SECRET_TEXT, payload={"token": TOKEN}))
        assert store.lexical().hits("deploy").best(1)  # the indexes are built and saved
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        assert TOKEN.encode() not in data, path
        assert EMAIL.encode() not in data, path


def test_a_confirmation_is_asked_about_the_redacted_preference(backend, clock):
    """The callback (and whatever it logs) sees what would be stored, never the secret."""
    from agent_engine.tiers.global_ import GlobalMemoryStore  # noqa: PLC0415

    asked = []

    def confirm(request):
        asked.append(request)
        return True

    store = GlobalMemoryStore(backend, "u", confirm=confirm, clock=clock)
    held = store.add(store.new_item("preference", f"always mail {EMAIL}"))
    store.update(attrs.evolve(held, text=f"use token {TOKEN}"))
    assert len(asked) == 2
    for request in asked:
        shown = repr(request)
        assert EMAIL not in shown
        assert TOKEN not in shown
        assert "[REDACTED:" in request.message

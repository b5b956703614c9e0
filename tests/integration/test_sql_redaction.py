"""Erasing on SQL redacts provenance and journal with one UPDATE per table, whatever the count."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import sqlalchemy as sa

from agent_engine import AuditAction, promote
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

from .conftest import statements


def _updates(engine: sa.Engine) -> AbstractContextManager[list[str]]:
    """The UPDATE statements sent while the block runs (an executemany counts once)."""
    return statements(engine, lambda statement: statement.lstrip().upper().startswith("UPDATE"))


class TestEraseRedaction:
    def test_many_erased_sources_are_redacted_in_one_update_per_table(self, sql_url):
        """Five promoted sources erased at once: copies and events lose the ids, in two UPDATEs."""
        with SQLAlchemyBackend(sql_url) as backend:
            task = TaskMemoryStore("t", backend, project_id="p")
            project = ProjectMemoryStore("p", backend)
            sources = [task.add_reasoning(f"step {n} worked", f"s{n}") for n in range(5)]
            copies = [promote(task, project, source.id).item for source in sources]
            bystander = project.add_decision("mentions nothing erased")

            with _updates(backend.engine) as updates:
                assert task.forget(*(source.id for source in sources)) == len(sources)

            tables = sorted(update.split()[1] for update in updates)
            # SQLite also counts the erasure, for its index files (docs/backends.md).
            counted = ["ae_store_meta"] if backend.engine.dialect.name == "sqlite" else []
            assert tables == ["ae_audit_events", "ae_items", *counted]
            (erase,) = backend.audit.events(actions=[AuditAction.ERASE])
            tokens = set(erase.item_ids)
            assert len(tokens) == len(sources)
            kept = [project.require(copy.id) for copy in copies]
            assert {item.provenance.source_item_id for item in kept} == tokens
            assert [item.text for item in kept] == [copy.text for copy in copies]
            assert project.require(bystander.id) == bystander
            journal = json.dumps([[e.item_ids, e.detail] for e in backend.audit.events(limit=None)])
            assert not any(source.id in journal for source in sources)

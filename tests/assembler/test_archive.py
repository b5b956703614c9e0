"""Builds page the archive back in when it matches, and never select superseded versions."""

from __future__ import annotations

import attrs

from agent_engine import ContextRequest, Task, View

TASK = Task(id="t", project_id="p", user_id="u")


def chosen(package):
    return {selection.item.id: selection for selection in package.selections}


class TestArchivePaging:
    def test_an_archived_match_is_paged_in_and_says_so(self, assembler):
        """The archive is searched: a matching archived item is selected, marked as paged in."""
        project = assembler.project_store(TASK.project_id)
        match = project.add_decision("prices are stored as integer cents in the ledger")
        others = [project.add_decision(f"deploy step {n} runs the smoke tests") for n in range(5)]
        project.archive(match.id)
        package = assembler.build_context(
            TASK, ContextRequest(budget_tokens=400, query="how are prices stored in the ledger")
        )
        selections = chosen(package)
        assert selections[match.id].from_archive
        assert [s.item.id for s in package.paged_in] == [match.id]
        assert not any(selections[o.id].from_archive for o in others if o.id in selections)
        # Paging in is a read: the item stays archived, its access is counted.
        stored = project.get(match.id)
        assert stored.archived
        assert stored.access_count == 1

    def test_recency_alone_does_not_reach_the_archive(self, assembler):
        """Without a query a build offers what is new and important: the working set's."""
        project = assembler.project_store(TASK.project_id)
        old = project.add_decision("an archived decision", importance=1.0)
        project.archive(old.id)
        kept = project.add_decision("a working decision", importance=0.2)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        assert set(chosen(package)) == {kept.id}

    def test_superseded_versions_are_never_selected(self, assembler):
        """Only the current version of a memory reaches a prompt, however well the old matches."""
        project = assembler.project_store(TASK.project_id)
        item = project.add_decision("ship releases on fridays after the freeze")
        project.update(attrs.evolve(item, text="ship releases on tuesdays"))
        keyed = project.add(project.new_item("preference", "editor is vim", key="editor"))
        project.add(project.new_item("preference", "editor is emacs", key="editor"))
        package = assembler.build_context(
            TASK,
            ContextRequest(budget_tokens=400, query="ship releases on fridays; editor is vim"),
        )
        texts = {selection.item.text for selection in package.selections}
        assert texts == {"ship releases on tuesdays", "editor is emacs"}
        history = {i.id for i in project.list_all(view=View.ALL) if i.superseded}
        assert keyed.id in history
        assert not history & set(chosen(package))

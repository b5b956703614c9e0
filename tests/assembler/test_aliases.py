"""A project's aliases in a build: a term names what its expansions name, and widens BM25.

Run on every backend: the aliases are read from the backend the project's memory lives on.
"""

from __future__ import annotations

import pytest

from agent_engine import BackendError, ContextRequest, InMemoryBackend, Task, Tier
from agent_engine.assembler import ContextAssembler
from agent_engine.tiers import MemoryStores
from tests.conftest import failing_aliases

TASK = Task(id="t", project_id="p", user_id="u", description="")


def _scores(assembler, query: str) -> dict[str, float]:
    package = assembler.build_context(TASK, ContextRequest(query=query, budget_tokens=800))
    return {s.item.text: s.score for s in package.selections if s.tier is Tier.PROJECT}


def _said(project, source: str, text: str) -> None:
    project.add(project.new_item("note", text, source=source, session="s1"))


def test_an_alias_names_a_speaker(assembler):
    """Alias "Bob" names "Robert Jones" once the project says so: his line comes first."""
    project = assembler.project_store("p")
    lake, horse = "I painted a lake at sunrise.", "I painted a horse in the barn."
    _said(project, "Robert Jones", lake)
    _said(project, "Caroline", horse)
    query = "What did Bob paint?"
    before = _scores(assembler, query)
    project.add_alias("Bob", ["Robert"])
    after = _scores(assembler, query)
    assert after[lake] - after[horse] > before[lake] - before[horse]
    assert after[lake] > after[horse]
    project.remove_alias("bob")
    assert _scores(assembler, query) == before


def test_an_alias_widens_the_lexical_match(assembler):
    """A memory that only says "authentication" matches "auth" once the alias says so."""
    project = assembler.project_store("p")
    _said(project, "notes", "We moved authentication to OAuth last sprint.")
    _said(project, "notes", "The settings page has a blue theme.")
    query = "auth changes"
    before = _scores(assembler, query)
    project.add_alias("auth", ["authentication", "login"])
    after = _scores(assembler, query)
    moved = "We moved authentication to OAuth last sprint."
    assert after[moved] > before[moved]


def test_aliases_stay_in_their_project(assembler):
    """Another project's alias changes nothing here."""
    project = assembler.project_store("p")
    _said(project, "Melanie Smith", "I painted a lake at sunrise.")
    _said(project, "Caroline", "I painted a horse in the barn.")
    before = _scores(assembler, "What did Mel paint?")
    assembler.project_store("q").add_alias("Mel", ["Melanie"])
    assert _scores(assembler, "What did Mel paint?") == before
    assert assembler.project_store("q").aliases().terms == {"mel": ("Melanie",)}
    assert assembler.project_store("p").aliases().terms == {}


def test_unreadable_aliases_leave_the_query_as_written():
    """The build goes on without aliases and says so; a strict build raises."""
    backend = failing_aliases(InMemoryBackend(), "of_namespace")
    assembler = ContextAssembler(MemoryStores(backend, confirm=lambda _r: True))
    _said(assembler.project_store("p"), "notes", "We moved authentication to OAuth.")
    package = assembler.build_context(
        TASK, ContextRequest(query="authentication", budget_tokens=400)
    )
    assert [s.item.text for s in package.selections] == ["We moved authentication to OAuth."]
    assert [(f.tier, f.phase) for f in package.failures] == [(Tier.PROJECT, "aliases")]
    with pytest.raises(BackendError):
        assembler.build_context(
            TASK, ContextRequest(query="authentication", budget_tokens=400), strict=True
        )


def test_a_backend_that_keeps_no_aliases_builds_without_them():
    """A custom backend that set no alias store: builds read none and report no failure."""
    backend = InMemoryBackend()
    backend._alias_store = None
    assembler = ContextAssembler(MemoryStores(backend, confirm=lambda _r: True))
    _said(assembler.project_store("p"), "notes", "We moved authentication to OAuth.")
    package = assembler.build_context(
        TASK, ContextRequest(query="authentication", budget_tokens=400)
    )
    assert package.failures == ()
    with pytest.raises(BackendError, match="keeps no aliases"):
        assembler.project_store("p").add_alias("auth", ["authentication"])


def test_a_failed_alias_read_does_not_stop_the_project_widening():
    """Only failed item reads keep a tier from gathering wider."""
    backend = failing_aliases(InMemoryBackend(), "of_namespace")
    assembler = ContextAssembler(MemoryStores(backend, confirm=lambda _r: True))
    project = assembler.project_store("p")
    project.add_many(
        project.new_item("note", f"authentication note {n}", session="s") for n in range(400)
    )
    request = ContextRequest(query="authentication", budget_tokens=8000)
    package = assembler.build_context(TASK, request)
    assert [(f.tier, f.phase) for f in package.failures] == [(Tier.PROJECT, "aliases")]
    # The first gather brings at most 100 BM25 hits and their neighbours: more is widening.
    assert len([s for s in package.selections if s.tier is Tier.PROJECT]) > 200

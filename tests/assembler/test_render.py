"""Rendering: deterministic text, Markdown and XML, tiers in prompt order, sessions dated."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    Layout,
    MemoryStores,
    RenderFormat,
    Task,
)

START = datetime(2024, 3, 5, 14, 30, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


class Ticker:
    """A clock one minute per reading from START."""

    def __init__(self):
        self.now = START

    def __call__(self):
        self.now += timedelta(minutes=1)
        return self.now


def make(backend, format=RenderFormat.MARKDOWN):  # noqa: A002 - mirrors render(format)
    return ContextAssembler(
        MemoryStores(backend, clock=Ticker(), confirm=lambda _request: True),
        config=AssemblerConfig(layout=Layout(format=format), track_access=False),
    )


def remember(assembler):
    """A little of everything: every tier, a session, a payload-only item, XML specials."""
    user = assembler.global_store("u")
    project = assembler.project_store("p")
    task = assembler.task_store(TASK)
    user.add_preference("Answer in British English", "style")
    project.add_decision("Use <dialog> & not modals", rationale="a11y")
    project.add(project.new_item("turn", "Caroline: I went hiking", session="chat 1"))
    project.add(project.new_item("turn", "Melanie: Where?", session="chat 1"))
    project.add(project.new_item("tool_output", "", payload={"tool": "pytest", "failed": 1}))
    task.add_instruction("Fix the modal focus trap")
    task.add_reasoning("Focus escapes on Tab from the last field", "debug")


def build(assembler, budget=2000):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=budget, query="modal"))


class TestDeterminism:
    @pytest.mark.parametrize("format", list(RenderFormat))
    def test_same_package_same_text(self, backend, format):  # noqa: A002
        """Rendering a package twice gives the same text."""
        assembler = make(backend, format)
        remember(assembler)
        package = build(assembler)
        assert package.render() == package.render()
        assert package.render() == package.render(format) == package.render(format.value)

    def test_same_memory_same_text(self, backend):
        """Two builds over the same memory render identically (package ids aside)."""
        assembler = make(backend)
        remember(assembler)
        first, second = build(assembler), build(assembler)
        assert first.id != second.id
        assert first.render() == second.render()
        assert [s.item.id for s in first.selections] == [s.item.id for s in second.selections]

    def test_formats_differ(self, backend):
        """Each format renders the same selection its own way."""
        assembler = make(backend)
        remember(assembler)
        package = build(assembler)
        texts = {fmt: package.render(fmt) for fmt in RenderFormat}
        assert len(set(texts.values())) == 3
        assert texts[RenderFormat.MARKDOWN].startswith("## Global memory")
        assert texts[RenderFormat.TEXT].startswith("[Global memory]")
        assert texts[RenderFormat.XML].startswith("<global_memory>")

    def test_unknown_format_is_refused(self, backend):
        """A format that does not exist is a ValueError."""
        assembler = make(backend)
        remember(assembler)
        with pytest.raises(ValueError, match="html"):
            build(assembler).render("html")


class TestLayout:
    def test_markdown(self, backend):
        """Sections global, project, task; session groups carry their date; turns go bare."""
        assembler = make(backend)
        remember(assembler)
        expected = [
            "## Global memory",
            "- [preference] Answer in British English",
            "## Project memory",
            "- [decision] Use <dialog> & not modals (why: a11y)",
            "5 Mar 2024, chat 1:",
            "Caroline: I went hiking",
            "Melanie: Where?",
            "- [tool_output] tool: pytest; failed: 1",
            "## Task memory",
            "- [instruction] Fix the modal focus trap",
            "- [reasoning] Focus escapes on Tab from the last field",
        ]
        assert build(assembler).render() == "\n".join(expected)

    def test_text(self, backend):
        """Plain text uses bracketed section titles and plain 'date, session:' headers."""
        assembler = make(backend, RenderFormat.TEXT)
        remember(assembler)
        rendered = build(assembler).render()
        assert rendered.splitlines()[:2] == [
            "[Global memory]",
            "[preference] Answer in British English",
        ]
        assert "5 Mar 2024, chat 1:\nCaroline: I went hiking\nMelanie: Where?" in rendered

    def test_xml_parses(self, backend):
        """XML output is well-formed: tier elements, dated sessions, escaped item text."""
        assembler = make(backend, RenderFormat.XML)
        remember(assembler)
        root = ET.fromstring(f"<context>{build(assembler).render()}</context>")  # noqa: S314 - our own output
        assert [child.tag for child in root] == ["global_memory", "project_memory", "task_memory"]
        project = root.find("project_memory")
        session = project.find("session")
        assert session.attrib == {"name": "chat 1", "date": "5 Mar 2024"}
        assert [item.text for item in session] == ["Caroline: I went hiking", "Melanie: Where?"]
        decision = project.find("item[@kind='decision']")
        assert decision.text == "Use <dialog> & not modals (why: a11y)"

    def test_items_in_time_order_within_a_tier(self, backend):
        """Within a tier, items appear in the order they happened, whatever their score."""
        assembler = make(backend)
        task = assembler.task_store(TASK)
        steps = [task.add_reasoning(f"step {n} of the modal fix", "debug") for n in range(6)]
        package = build(assembler)
        assert [s.item.id for s in package.selections] == [s.id for s in steps]

    def test_empty_package_renders_empty(self, backend):
        """Nothing selected renders as the empty string in every format."""
        package = build(make(backend))
        assert [package.render(fmt) for fmt in RenderFormat] == ["", "", ""]


class TestXmlWellFormed:
    @settings(max_examples=50, deadline=None)
    @given(
        text=st.text(
            st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1
        ),
        session=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00")),
    )
    def test_any_text_gives_well_formed_xml(self, text, session):
        """Control characters (ANSI colours in a tool's output) never break the XML."""
        assembler = make(InMemoryBackend(embedder=HashingEmbedder(dim=16)), RenderFormat.XML)
        project = assembler.project_store("p")
        item = project.add(project.new_item("tool_output", text, session=session))
        package = build(assembler)
        if not package.selections:
            return
        root = ET.fromstring(f"<context>{package.render()}</context>")  # noqa: S314 - our own output
        shown = root.find(".//item")
        assert shown is not None
        assert package.selections[0].item.id == item.id

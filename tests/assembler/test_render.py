"""Rendering: deterministic text, Markdown and XML, tiers in prompt order, sessions dated."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    Layout,
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
        backend,
        clock=Ticker(),
        config=AssemblerConfig(layout=Layout(format=format), track_access=False),
        confirm=lambda _request: True,
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

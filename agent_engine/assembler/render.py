"""Turning selected items into prompt text, deterministically, in three formats.

The layout is also the cost model: the packer charges each piece (a tier section, a session
group header, an item line) when it first needs it, using the same strings this module emits,
so what is counted is what is rendered (seed 001 section 15 for the formats).

Within a tier, items are grouped by session (a header carrying the session's date is paid once
per group, which measured 3.6 tokens per item instead of 14 for a header on every line) and
ordered by time; tiers appear global, then project, then the session, then the task, so the most
recent steps sit nearest the question. That order is also from the most stable to the least: a
provider's prompt cache reuses the longest prefix that did not change since the last call, and
between two steps of a task, its own memory is what changes most. A summary of the candidates
left out for lack of room, when a build has one (:mod:`.summary`), changes with every step's
selection: its section comes after the global and project sections and before the task's, which
stays nearest the question. Headers and markers are kept lean because every token they cost is a
token of memory left out: a group header is a plain ``date, session:`` line (Markdown heading
hashes cost a WordPiece token each) and conversation turns, which carry their speaker, need no
bullet or label.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

import attrs

from agent_engine.models import ContextItem, Tier

__all__ = [
    "PROMPT_ORDER",
    "Layout",
    "Line",
    "RenderFormat",
    "prompt_order",
    "render_lines",
]

PROMPT_ORDER = (Tier.GLOBAL, Tier.PROJECT, Tier.SESSION, Tier.TASK)
TRUNCATION_MARKER = " … [truncated]"


class RenderFormat(enum.StrEnum):
    """Prompt formats: plain text, Markdown sections, or XML blocks."""

    TEXT = "text"
    MARKDOWN = "markdown"
    XML = "xml"


_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    """Text XML 1.0 can hold: characters it forbids (a terminal's colour codes) become U+FFFD."""
    return _XML_FORBIDDEN.sub("\ufffd", text)


_TITLES = {
    Tier.GLOBAL: "Global memory",
    Tier.PROJECT: "Project memory",
    Tier.SESSION: "Session memory",
    Tier.TASK: "Task memory",
}
_SUMMARY_TITLE = "Summary of memories left out"


def _date(moment: datetime) -> str:
    return f"{moment.day} {moment:%b %Y}"


@attrs.frozen
class Layout:
    """The strings of one format; every cost the packer charges comes from here."""

    format: RenderFormat = RenderFormat.MARKDOWN
    plain_kinds: frozenset[str] = frozenset({"turn", "message"})
    """Kinds shown without a ``[kind]`` label (conversation turns carry their speaker)."""

    def section(self, tier: Tier) -> tuple[str, str]:
        """Opening and closing text of a tier's section (closing may be empty)."""
        if self.format is RenderFormat.XML:
            return f"<{tier.value}_memory>", f"</{tier.value}_memory>"
        if self.format is RenderFormat.MARKDOWN:
            return f"## {_TITLES[tier]}", ""
        return f"[{_TITLES[tier]}]", ""

    def summary(self) -> tuple[str, str]:
        """Opening and closing text of the summary section (closing may be empty)."""
        if self.format is RenderFormat.XML:
            return "<left_out_summary>", "</left_out_summary>"
        if self.format is RenderFormat.MARKDOWN:
            return f"## {_SUMMARY_TITLE}", ""
        return f"[{_SUMMARY_TITLE}]", ""

    def summary_section(self, body: str) -> str:
        """The summary section around ``body`` (shown as the format shows bodies)."""
        opening, closing = self.summary()
        return "\n".join(part for part in (opening, self.shown(body), closing) if part)

    def group(self, session: str, started: datetime) -> tuple[str, str]:
        """Opening and closing text of a session group."""
        if self.format is RenderFormat.XML:
            return (
                f"<session name={quoteattr(_xml_safe(session))} date={quoteattr(_date(started))}>",
                "</session>",
            )
        return f"{_date(started)}, {session}:", ""

    @property
    def verbatim(self) -> bool:
        """Whether bodies are shown as they are (not in XML, which escapes them)."""
        return self.format is not RenderFormat.XML

    def shown(self, body: str) -> str:
        """The body as it appears inside a line (in XML: made XML-safe, then escaped)."""
        return body if self.verbatim else escape(_xml_safe(body))

    def conflict(self, number: int, *, newer: bool) -> str:
        """The marker on each side of an open conflict shown in the package, before its body.

        Names the conflict (its number in the package, shared by both sides) and says which
        side is the newer statement; in every format the same text, inside the item's line.
        """
        return f"[\u26a0 conflict {number}: {'newer' if newer else 'older'}]"

    def line(self, item: ContextItem, body: str) -> str:
        """One item's line around its (possibly truncated) body."""
        if self.format is RenderFormat.XML:
            return f"<item kind={quoteattr(_xml_safe(item.kind))}>{self.shown(body)}</item>"
        if item.kind in self.plain_kinds:
            return body
        marker = "- " if self.format is RenderFormat.MARKDOWN else ""
        return f"{marker}[{item.kind}] {body}"


@attrs.frozen
class Line:
    """An item as it will be rendered: the item, its tier, and the body actually shown."""

    item: ContextItem
    tier: Tier
    body: str


def prompt_order(lines: Sequence[Line]) -> list[tuple[Tier, list[tuple[str, list[Line]]]]]:
    """Lines arranged as rendered: tiers in prompt order, session groups by start, items by time."""
    arranged = []
    for tier in PROMPT_ORDER:
        mine = sorted(
            (line for line in lines if line.tier is tier),
            key=lambda line: (line.item.timestamp, line.item.id),
        )
        if mine:
            arranged.append((tier, _groups(mine)))
    return arranged


def render_lines(lines: Sequence[Line], layout: Layout, summary: str = "") -> str:
    """Render lines in prompt order (see :func:`prompt_order`), the summary before the task.

    ``summary``'s section comes after the global and project sections, before the task's
    (or last, when the task has none). An empty ``summary`` has no section: the render is
    the lines' alone.
    """
    blocks: list[str] = []
    for tier, groups in prompt_order(lines):
        if summary and tier is PROMPT_ORDER[-1]:
            blocks.append(layout.summary_section(summary))
            summary = ""
        opening, closing = layout.section(tier)
        blocks.append(opening)
        for session, members in groups:
            if session:
                group_open, group_close = layout.group(session, members[0].item.timestamp)
                blocks.append(group_open)
            blocks.extend(layout.line(line.item, line.body) for line in members)
            if session and group_close:
                blocks.append(group_close)
        if closing:
            blocks.append(closing)
    if summary:
        blocks.append(layout.summary_section(summary))
    return "\n".join(blocks)


def _groups(lines: list[Line]) -> list[tuple[str, list[Line]]]:
    """Session groups ordered by their first item; items without a session stand alone."""
    groups: dict[str, list[Line]] = {}
    order: list[tuple[str, list[Line]]] = []
    for line in lines:
        session = line.item.session
        if not session:
            order.append(("", [line]))
            continue
        if session not in groups:
            groups[session] = []
            order.append((session, groups[session]))
        groups[session].append(line)
    return order

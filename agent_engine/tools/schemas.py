"""The memory functions an LLM may call, as JSON Schema, in OpenAI's and Anthropic's formats.

MemGPT's core is that the model pages memory itself: it searches what was paged out, writes
what it learned, and is told when memory is under pressure. These are those functions over
this library's tiers (seed 002): ``memory_search`` (every tier, the archive included),
``memory_insert``, ``memory_promote``, ``memory_pin`` and ``memory_forget``. Each schema is
closed (``additionalProperties: false``, every property typed), and :mod:`.apply` checks a
call against the same schema before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

__all__ = [
    "INSERT_KINDS",
    "MAX_SEARCH_LIMIT",
    "SPECS",
    "ToolSpec",
    "anthropic_tools",
    "openai_tools",
    "spec",
]

INSERT_KINDS: Final = ("note", "decision", "convention", "failure", "pattern", "preference")
"""What a model may file a memory as: the kinds the tiers rank and render by name."""
MAX_SEARCH_LIMIT: Final = 20
"""The most hits one search returns: a model asking for more pays for them in its window."""
_TIERS: Final = ("task", "project", "global")


@attrs.frozen
class ToolSpec:
    """One memory function: its name, what it is for (as the model reads it), its arguments.

    ``parameters`` is a JSON Schema object; ``required`` lists the arguments without a
    default, ``defaults`` what the others take when a call leaves them out.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    defaults: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def required(self) -> tuple[str, ...]:
        """The arguments a call must give."""
        return tuple(self.parameters.get("required", ()))


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_ID = {
    "type": "string",
    "minLength": 1,
    "description": "The memory's id, as a search or insert returned it.",
}

SPECS: Final = (
    ToolSpec(
        "memory_search",
        "Search your memory, including what was paged out of your context and archived. "
        "Use it before answering from memory you do not see, and when the context says "
        "memory was paged out.",
        _object(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What to look for, in words.",
                },
                "tier": {
                    "type": "string",
                    "enum": ["all", *_TIERS],
                    "description": "task: this task's notes; project: the project's decisions, "
                    "conventions, failures and patterns; global: the user's preferences.",
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT},
            },
            ["query"],
        ),
        {"tier": "all", "limit": 5},
    ),
    ToolSpec(
        "memory_insert",
        "Write something worth remembering: a decision, a convention, a failure and its "
        "lesson, a pattern, a preference or a note. Task memory ends with the task; project "
        "memory outlives it. Do not store secrets.",
        _object(
            {
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The memory, self-contained.",
                },
                "kind": {"type": "string", "enum": list(INSERT_KINDS)},
                "tier": {"type": "string", "enum": list(_TIERS)},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
                "importance": {"type": "number", "minimum": 0, "maximum": 1},
            },
            ["text"],
        ),
        {"kind": "note", "tier": "project", "tags": [], "importance": 0.5},
    ),
    ToolSpec(
        "memory_promote",
        "Copy a memory one tier up so it outlives its tier: a task's memory into the "
        "project, a project memory into the user's global memory.",
        _object(
            {
                "id": _ID,
                "to": {"type": "string", "enum": ["project", "global"]},
                "reason": {"type": "string", "description": "Why it deserves to last."},
            },
            ["id", "to"],
        ),
        {"reason": ""},
    ),
    ToolSpec(
        "memory_pin",
        "Pin a memory (offered to every prompt first, never evicted) or unpin it.",
        _object({"id": _ID, "pinned": {"type": "boolean"}}, ["id"]),
        {"pinned": True},
    ),
    ToolSpec(
        "memory_forget",
        "Erase a memory that is wrong or must not be kept. It cannot be undone.",
        _object({"id": _ID}, ["id"]),
    ),
)
"""Every memory function, in the order tools are offered."""


def spec(name: str) -> ToolSpec | None:
    """The function called ``name``, if it is one of :data:`SPECS`."""
    return next((s for s in SPECS if s.name == name), None)


def openai_tools() -> list[dict[str, Any]]:
    """:data:`SPECS` as OpenAI's ``tools`` (function tools of Chat Completions).

    Not marked ``strict``: strict mode wants every property required and some keywords
    (``minimum``, ``maxItems``) left out; the calls are checked here instead.
    """
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in SPECS
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """:data:`SPECS` as Anthropic's Messages API ``tools``."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in SPECS
    ]

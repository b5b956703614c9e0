"""Which of a scope's items a read sees: the working set, the archive, or its history too.

An item's lifecycle (``docs/lifecycle.md``) is two facts orthogonal to its status: whether it
was archived (paged out of the working set, still searchable) and whether something superseded
it (it is history). Every tier store read takes a :class:`View`, the working set by default,
and a point in time (``as_of``) that sees the versions that held then.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from agent_engine import _validate
from agent_engine.filters import Filter, parse_filter

__all__ = ["View", "as_view", "view_filter"]


class View(enum.StrEnum):
    """Which lifecycle states a read sees."""

    WORKING = "working"
    """Neither archived nor superseded: what a store holds "now" (every read's default)."""
    ARCHIVED = "archived"
    """In the archive: paged out, not superseded."""
    CURRENT = "current"
    """The working set and the archive: everything that still holds (what searches page)."""
    ALL = "all"
    """Everything, superseded versions included."""


_DOCUMENTS: Final[Mapping[View, dict[str, object]]] = {
    View.WORKING: {"archived_at": None, "valid_to": None},
    View.ARCHIVED: {"archived_at": {"$exists": True}, "valid_to": None},
    View.CURRENT: {"valid_to": None},
    View.ALL: {},
}

_FILTERS: Final[Mapping[View, Filter]] = {
    view: parse_filter(document) for view, document in _DOCUMENTS.items()
}


def as_view(value: object) -> View:
    """``value`` as a :class:`View` (a member or its name), else a :class:`ValidationError`."""
    return _validate.member("view", View, value)


def view_filter(view: View | str) -> Filter:
    """The conditions ``view`` adds to a read (none for :attr:`View.ALL`)."""
    return _FILTERS[as_view(view)]

"""Open conflicts in a package: both sides selected, each marked, and which one is newer.

Seed 001 section 11, "conflict injection": when both items of an open conflict make it into a
context, the model must not be left to guess which holds. Each side's line carries a marker
(:meth:`~agent_engine.assembler.render.Layout.conflict`): the conflict's number in the package
and whether that side is the newer or the older statement. Markers are text like any other,
so the packer charges them as it charges lines (:class:`ConflictMarks` says what each costs),
and the package lists the conflicts it shows (:class:`MarkedConflict`).

A build reads each tier's open conflicts once, at most :data:`CONFLICTS_READ`, through the
build's fail-open reads: a tier whose conflicts cannot be read keeps its items, unmarked, and
the package names the failure (phase ``conflicts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from agent_engine.assembler.render import Layout, Line, prompt_order
from agent_engine.memory.conflicts import Conflict
from agent_engine.models import ContextItem

__all__ = ["CONFLICTS_READ", "ConflictMarks", "MarkedConflict", "newer_of"]

CONFLICTS_READ: Final = 500
"""The most open conflicts a build reads per tier, newest first: a scope holding more (nobody
resolves them) still builds in bounded time, and its oldest ones go unmarked."""


@attrs.frozen
class MarkedConflict:
    """An open conflict whose two items are both in a package, as the render marks it.

    ``number`` is the one its markers show (1, 2, ... in prompt order); ``newer`` and
    ``older`` are the two items' ids, by when each version began to hold.
    """

    conflict: Conflict
    number: int
    newer: str
    older: str


def newer_of(a: ContextItem, b: ContextItem) -> ContextItem:
    """The newer statement of two: the later ``valid_since``, then timestamp, then id."""
    return max(a, b, key=lambda item: (item.valid_since, item.timestamp, item.id))


class ConflictMarks:
    """The packer's view of a build's open conflicts: what marking a pair costs, and the marks.

    ``units(text)`` is the packer's unit count of a text. A marker is charged when the second
    item of a conflict is taken, for both sides: its own line's marker and the one the side
    taken earlier now shows. Taking an item back out (the render check) uncharges both.
    """

    def __init__(
        self, conflicts: Sequence[Conflict], layout: Layout, units: Callable[[str], int]
    ) -> None:
        self._layout = layout
        self._by_item: dict[str, list[Conflict]] = {}
        for conflict in {c.id: c for c in conflicts}.values():
            for item_id in conflict.item_ids:
                self._by_item.setdefault(item_id, []).append(conflict)
        self._units = {newer: units(layout.conflict(1, newer=newer)) for newer in (True, False)}
        self._shown: dict[str, dict[str, int]] = {}
        """The conflicts both of whose items are taken: by id, each side's marker units."""

    def __bool__(self) -> bool:
        return bool(self._by_item)

    def pending(
        self, item: ContextItem, taken: Mapping[str, ContextItem]
    ) -> list[tuple[Conflict, ContextItem, int, int]]:
        """The conflicts taking ``item`` would show: ``(conflict, other side, its units, other's)``.

        Only conflicts whose other side is ``taken`` and whose two items are at the versions
        the conflict names.
        """
        found = []
        for conflict in self._by_item.get(item.id, ()):
            other = taken.get(conflict.other(item.id))
            if other is None or conflict.id in self._shown:
                continue
            if (item.version, other.version) != (
                conflict.version_of(item.id),
                conflict.version_of(other.id),
            ):
                continue
            newer = newer_of(item, other)
            found.append(
                (
                    conflict,
                    other,
                    self._units[newer is item],
                    self._units[newer is other],
                )
            )
        return found

    def cost(self, item: ContextItem, taken: Mapping[str, ContextItem]) -> int:
        """Units the markers cost if ``item`` is taken next (its own and its partners')."""
        if not self._by_item:
            return 0
        return sum(own + other for _, _, own, other in self.pending(item, taken))

    def show(self, conflict: Conflict, units: Mapping[str, int]) -> None:
        """Record that both sides of ``conflict`` are taken, with each side's marker units."""
        self._shown[conflict.id] = dict(units)

    def hide(self, item_id: str) -> list[tuple[str, int]]:
        """Forget the shown conflicts of an item taken back out.

        Returns, for each, the other side's id and the units its marker no longer costs.
        """
        freed = []
        for conflict in self._by_item.get(item_id, ()):
            units = self._shown.pop(conflict.id, None)
            if units is not None:
                other = conflict.other(item_id)
                freed.append((other, units[other]))
        return freed

    def numbered(self, lines: Sequence[Line]) -> tuple[dict[str, str], list[MarkedConflict]]:
        """Each marked item's body with its markers, and the conflicts, numbered in prompt order.

        ``lines`` are the package's lines; a conflict's number is its order of first
        appearance in the render, and an item's markers come in the order of their numbers.
        """
        if not self._shown:
            return {}, []
        items = {line.item.id: line.item for line in lines}
        marked: list[MarkedConflict] = []
        numbers: dict[str, int] = {}
        for _, groups in prompt_order(lines):
            for _, members in groups:
                for line in members:
                    mine = sorted(
                        (c for c in self._by_item.get(line.item.id, ()) if c.id in self._shown),
                        key=lambda c: c.id,
                    )
                    for conflict in mine:
                        if conflict.id in numbers:
                            continue
                        numbers[conflict.id] = len(numbers) + 1
                        a, b = items[conflict.item_a], items[conflict.item_b]
                        newer = newer_of(a, b)
                        older = b if newer is a else a
                        marked.append(
                            MarkedConflict(conflict, numbers[conflict.id], newer.id, older.id)
                        )
        markers: dict[str, list[tuple[int, str]]] = {}
        for mark in marked:
            for item_id in (mark.newer, mark.older):
                text = self._layout.conflict(mark.number, newer=item_id == mark.newer)
                markers.setdefault(item_id, []).append((mark.number, text))
        bodies = {
            line.item.id: " ".join([*(t for _, t in sorted(markers[line.item.id])), line.body])
            for line in lines
            if line.item.id in markers
        }
        return bodies, marked

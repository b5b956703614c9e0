"""The mechanics of an item's lifecycle that tier stores share: versions, slots and history.

An update that changes what an item says keeps the previous version as a superseded copy (a
row of its own, ``valid_to`` set, ``superseded_by`` naming the item); an item declaring a
``key`` supersedes the scope's current holder of that key. History is the chain of
``superseded_by`` links, walked in both directions. Nothing here writes: the store journals
and writes what these functions compute.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Final

import attrs

from agent_engine.errors import ValidationError
from agent_engine.filters import Filter, Order, parse_filter
from agent_engine.models import ContextItem
from agent_engine.tiers.scope import SCOPE_SEPARATOR

__all__ = [
    "MAX_HISTORY",
    "ancestry",
    "content_changed",
    "history",
    "keep_lifecycle",
    "local_key",
    "previous_version",
    "superseded",
    "valid_at",
]

MAX_HISTORY: Final = 10_000
"""The most versions :func:`history` walks: a bound on a chain, not a limit any real one meets."""

_SCOPE_KINDS: Final = ("task:", "project:", "global:")


def content_changed(stored: ContextItem, new: ContextItem) -> bool:
    """Whether ``new`` says something else than ``stored`` (a new version, not a touch-up).

    Importance, status, access counts, expiry and token cost are bookkeeping: changing them
    keeps the version.
    """
    return (
        stored.fingerprint != new.fingerprint
        or stored.payload != new.payload
        or stored.kind != new.kind
        or stored.tags != new.tags
        or stored.key != new.key
        or stored.source != new.source
        or stored.session != new.session
    )


def keep_lifecycle(new: ContextItem, stored: ContextItem) -> ContextItem:
    """``new`` with ``stored``'s lifecycle fields: an update never moves an item's state.

    The archive, supersession and merges change only through the store's transitions
    (``archive``, ``restore``, ``supersede``, ...), each journaled as what it is.
    """
    return attrs.evolve(
        new,
        version=stored.version,
        valid_from=stored.valid_from,
        valid_to=stored.valid_to,
        superseded_by=stored.superseded_by,
        archived_at=stored.archived_at,
        archived_reason=stored.archived_reason,
        merged_from=stored.merged_from,
    )


def superseded(item: ContextItem, by: str, at: datetime) -> ContextItem:
    """``item`` as history: valid until ``at`` (or when it began, if later), replaced by ``by``."""
    since = item.valid_from
    return attrs.evolve(
        item, valid_to=at if since is None or at >= since else since, superseded_by=by
    )


def previous_version(stored: ContextItem, copy_id: str, at: datetime) -> ContextItem:
    """The copy of ``stored`` an update keeps: its own row, superseded by the item at ``at``.

    The copy leaves the archive if the item was there: history is neither working nor archived.
    """
    copy = attrs.evolve(stored, id=copy_id, archived_at=None, archived_reason=None)
    return superseded(copy, stored.id, at)


def local_key(key: str | None, prefix: str) -> str | None:
    """``key`` as this scope stores it; a key qualified with another scope is refused.

    Keys are slots of one scope, as ids are: ``project:a/preference:editor`` given to project
    ``a``'s store is its ``preference:editor``; given to any other scope it is a
    :class:`ValidationError`, never a slot that reaches across scopes.
    """
    if key is None or SCOPE_SEPARATOR not in key:
        return key
    scope, _, rest = key.partition(SCOPE_SEPARATOR)
    if not scope.startswith(_SCOPE_KINDS):
        return key
    if scope + SCOPE_SEPARATOR != prefix:
        raise ValidationError(
            f"key {key!r} names another scope ({scope!r}); a key is a slot of its own scope",
            field="key",
            value=key,
        )
    if not rest.strip() or rest != rest.strip():
        raise ValidationError(f"key {key!r} names no slot", field="key", value=key)
    return rest


def valid_at(
    read: Callable[[Filter, int | None, Order], list[ContextItem]],
    where: Filter,
    limit: int | None,
    order: Order,
    at: datetime,
) -> list[ContextItem]:
    """The items of ``where`` whose version held at ``at``, in ``order``, at most ``limit``.

    The store narrows to items written by ``at``; whether each was still valid then is
    checked here, widening the window until ``limit`` are found or the items run out (most
    items are never superseded, so one window usually serves).
    """
    written = where.and_(parse_filter({"timestamp": {"$lte": at}}))
    window = None if limit is None else max(4 * limit, 16)
    while True:
        rows = read(written, window, order)
        kept = [item for item in rows if item.valid_at(at)]
        if window is None or len(rows) < window or len(kept) >= (limit or 0):
            return kept[:limit]
        window *= 4


def ancestry(
    starts: Iterable[ContextItem], older: Callable[[list[str]], Iterable[ContextItem]]
) -> dict[str, ContextItem]:
    """``starts`` and everything superseded into them, directly or not, by id.

    ``older(ids)``: the items superseded by any of ``ids``. At most :data:`MAX_HISTORY`
    beyond the starts.
    """
    found = {item.id: item for item in starts}
    frontier = list(found)
    limit = len(found) + MAX_HISTORY
    while frontier and len(found) < limit:
        batch, frontier = frontier[:500], frontier[500:]
        for item in older(batch):
            if item.id not in found:
                found[item.id] = item
                frontier.append(item.id)
    return found


def history(
    start: ContextItem,
    get: Callable[[str], ContextItem | None],
    older: Callable[[list[str]], Iterable[ContextItem]],
) -> list[ContextItem]:
    """Every version of ``start``'s chain, oldest first.

    Forward along ``superseded_by`` to the newest, then back through its :func:`ancestry`.
    At most :data:`MAX_HISTORY` versions.
    """
    newest = start
    seen = {start.id}
    while newest.superseded_by is not None and len(seen) < MAX_HISTORY:
        successor = get(newest.superseded_by)
        if successor is None or successor.id in seen:
            break
        seen.add(successor.id)
        newest = successor
    found = ancestry([newest], older)
    found.setdefault(start.id, start)
    return sorted(found.values(), key=lambda item: (item.valid_since, item.version, item.id))

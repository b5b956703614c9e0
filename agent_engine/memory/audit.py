"""Where audit events are kept: beside the items, in the same backend.

Every backend exposes an ``audit`` store. Keeping the journal in the backend (a table for SQL)
means it survives exactly as long as the memory it describes and is shared by every process
that shares the memory.

Erasing an item must not leave its id in the journal either, so an audit store can *redact*:
replace ids by erasure tokens (:func:`erasure_token`) in every event that names them.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import AuditAction, AuditEvent

__all__ = ["AuditStore", "InMemoryAuditStore", "erasure_token", "redact_value"]

ERASED_PREFIX = "erased:"


@runtime_checkable
class AuditStore(Protocol):
    """**Protocol:** an append-only journal of :class:`~agent_engine.models.AuditEvent`.

    ``events`` returns newest first, filtered by namespace, time window (``since`` inclusive,
    ``until`` exclusive) and actions. ``trim`` drops the oldest events so at most
    ``keep_latest`` remain and none is older than ``older_than``; it returns how many went.
    ``redact`` replaces ids by their tokens in every event (see :func:`redact_value`) and
    returns how many events changed.
    """

    def append(self, event: AuditEvent) -> None:
        """Add one event to the journal."""
        ...

    def events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        actions: Iterable[AuditAction] | None = None,
        limit: int | None = 100,
    ) -> list[AuditEvent]:
        """Return matching events, newest first."""
        ...

    def count(self, *, namespace: str | None = None) -> int:
        """Count events (in one namespace, or all)."""
        ...

    def trim(self, *, keep_latest: int | None = None, older_than: datetime | None = None) -> int:
        """Drop the oldest events beyond ``keep_latest`` or before ``older_than``."""
        ...

    def redact(self, tokens: Mapping[str, str]) -> int:
        """Replace each id of ``tokens`` by its token in every event that names it."""
        ...


def erasure_token(item_id: str) -> str:
    """The name an erased item keeps in the journal: ``erased:`` and a salted one-way digest.

    The salt is random and thrown away, so nobody (the holder of the id included) can tell
    which id a token stands for, or confirm a guess; one token replaces the id in every event
    of the item, so the erased item's history still reads as one item's.
    """
    digest = hashlib.blake2b(
        item_id.encode("utf-8", "surrogatepass"), key=secrets.token_bytes(16), digest_size=16
    )
    return ERASED_PREFIX + digest.hexdigest()


def select_events(
    events: Iterable[AuditEvent],
    *,
    namespace: str | None,
    since: datetime | None,
    until: datetime | None,
    wanted: Collection[AuditAction] | None,
    limit: int | None,
) -> list[AuditEvent]:
    """The matching ``events``, newest first (ties by id).

    What ``events()`` returns for a journal read into the process; the arguments are checked
    already (``wanted`` from :func:`wanted_actions`).
    """
    found = [
        event
        for event in events
        if (namespace is None or event.namespace == namespace)
        and (since is None or event.at >= since)
        and (until is None or event.at < until)
        and (wanted is None or event.action in wanted)
    ]
    found.sort(key=lambda event: (event.at, event.id), reverse=True)
    return found if limit is None else found[:limit]


def redact_value(value: Any, tokens: Mapping[str, str]) -> Any:
    """``value`` (JSON data) with each id of ``tokens`` replaced by its token, keys included.

    A string equal to an id becomes its token; inside a longer string (an error message of an
    ``abort`` event) the id is replaced where it appears quoted, as Python's ``repr`` and JSON
    print it, which is how this library's messages name ids. Unquoted, a short id could be an
    ordinary word of the message.
    """
    if isinstance(value, str):
        if value in tokens:
            return tokens[value]
        for item_id, token in tokens.items():
            if item_id in value:
                for quoted, replacement in (
                    (repr(item_id), repr(token)),
                    (json.dumps(item_id, ensure_ascii=False), json.dumps(token)),
                ):
                    value = value.replace(quoted, replacement)
        return value
    if isinstance(value, list | tuple):
        return type(value)(redact_value(element, tokens) for element in value)
    if isinstance(value, dict):
        # Keys too: a detail may map ids to something (what replaced each, say).
        return {
            redact_value(key, tokens): redact_value(element, tokens)
            for key, element in value.items()
        }
    return value


def redact_event(event: AuditEvent, tokens: Mapping[str, str]) -> AuditEvent:
    """``event`` with the ids of ``tokens`` replaced (the same event when it names none)."""
    item_ids = redact_value(event.item_ids, tokens)
    detail = redact_value(event.detail, tokens)
    if item_ids == event.item_ids and detail == event.detail:
        return event
    return attrs.evolve(event, item_ids=item_ids, detail=detail)


def check_window(since: datetime | None, until: datetime | None, limit: int | None) -> None:
    """Validate the arguments of ``events`` (shared by every audit store)."""
    for name, value in (("since", since), ("until", until)):
        if value is not None:
            _validate.aware(name, value)
    if limit is not None:
        _validate.integer("limit", limit)


def check_namespace(namespace: str | None) -> None:
    """Validate the ``namespace`` of ``events`` and ``count``: ``None`` or storable text."""
    if namespace is not None:
        _validate.text("namespace", namespace)


def wanted_actions(actions: Iterable[AuditAction] | None) -> set[AuditAction] | None:
    """The actions ``events`` asks for, as members (``None``: every action)."""
    if actions is None:
        return None
    wanted: set[AuditAction] = set()
    for action in _validate.sequence("actions", actions):
        try:
            wanted.add(AuditAction(action))
        except ValueError:
            known = ", ".join(member.value for member in AuditAction)
            raise ValidationError(
                f"unknown audit action {action!r}; known: {known}", field="actions", value=action
            ) from None
    return wanted


class InMemoryAuditStore:
    """A list guarded by a lock; events are kept in append order."""

    def __init__(self) -> None:
        self._events: list[AuditEvent] = []
        self._lock = threading.Lock()

    def append(self, event: AuditEvent) -> None:
        """Add one event to the journal."""
        if not isinstance(event, AuditEvent):
            raise ValidationError(f"expected AuditEvent, got {type(event).__name__}", value=event)
        with self._lock:
            self._events.append(event)

    def events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        actions: Iterable[AuditAction] | None = None,
        limit: int | None = 100,
    ) -> list[AuditEvent]:
        """Return matching events, newest first (ties by id, newest id first)."""
        check_window(since, until, limit)
        check_namespace(namespace)
        with self._lock:
            snapshot = list(self._events)
        return select_events(
            snapshot,
            namespace=namespace,
            since=since,
            until=until,
            wanted=wanted_actions(actions),
            limit=limit,
        )

    def count(self, *, namespace: str | None = None) -> int:
        """Count events (in one namespace, or all)."""
        check_namespace(namespace)
        with self._lock:
            return sum(1 for e in self._events if namespace is None or e.namespace == namespace)

    def trim(self, *, keep_latest: int | None = None, older_than: datetime | None = None) -> int:
        """Drop the oldest events beyond ``keep_latest`` or before ``older_than``."""
        check_window(older_than, None, keep_latest)
        with self._lock:
            ordered = sorted(self._events, key=lambda event: (event.at, event.id))
            if older_than is not None:
                ordered = [event for event in ordered if event.at >= older_than]
            if keep_latest is not None:
                ordered = ordered[len(ordered) - keep_latest :] if keep_latest else []
            removed = len(self._events) - len(ordered)
            self._events = ordered
            return removed

    def redact(self, tokens: Mapping[str, str]) -> int:
        """Replace each id of ``tokens`` by its token in every event that names it."""
        if not tokens:
            return 0
        with self._lock:
            redacted = [redact_event(event, tokens) for event in self._events]
            changed = sum(
                1 for new, old in zip(redacted, self._events, strict=True) if new is not old
            )
            self._events = redacted
            return changed

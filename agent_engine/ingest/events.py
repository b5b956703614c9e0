"""What the ingestion queue carries: one memory to write, where to, and its idempotency key.

An :class:`IngestEvent` is a memory as an executor would hand it over between steps (a
conversation turn, a tool's result, a decision) plus its scope: the tier and the project,
user or task it belongs to. It is validated when it is made, field by field, with the same
rules as an item (:class:`~agent_engine.models.ContextItem`), so a malformed event is refused
at the door with the field named, not by a worker later.

The idempotency key makes delivery exactly-once. Sent twice (a client's retry, a replayed
log), an event is queued once; processed twice (a worker killed after storing a batch and
before marking it done), it is stored once, because the item's id is derived from the key
and a store never holds one id twice. A caller without a key of its own gets a fresh one per
event at enqueue, which still makes the worker's side exactly-once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Tier, new_id
from agent_engine.tiers.scope import (
    global_namespace,
    project_namespace,
    session_namespace,
    task_namespace,
)

__all__ = ["EVENT_FIELDS", "IngestEvent"]

ID_PREFIX: Final = "ingest-"
"""What the ids of items written through the queue start with (the rest is the key's hash)."""


def _tier(value: object) -> Tier:
    if isinstance(value, Tier):
        return value
    try:
        return Tier(str(value))
    except ValueError:
        names = ", ".join(tier.value for tier in Tier)
        raise ValidationError(
            f"tier must be one of {names}, got {value!r}", field="tier", value=value
        ) from None


def _time(field: str, value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(
                f"{field} is not an ISO-8601 time: {value!r}", field=field, value=value
            ) from None
    return _validate.aware(field, value)


def _project(value: object) -> str:
    return _validate.identifier("project", value)


def _user(value: object) -> str:
    return _validate.identifier("user", value)


def _task(value: object) -> str | None:
    return None if value is None else _validate.identifier("task", value)


def _idempotency_key(value: object) -> str | None:
    return None if value is None else _validate.identifier("idempotency_key", value)


def _tags(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValidationError(f"tags must be a list of strings, got {value!r}", field="tags")
    return tuple(value)


def _timestamp(value: object) -> datetime | None:
    return _time("timestamp", value)


def _expires_at(value: object) -> datetime | None:
    return _time("expires_at", value)


@attrs.frozen
class IngestEvent:
    """One memory to write through the queue: what it says, where it goes, its key.

    Scope: ``tier`` (project by default) and the ``project``, ``user`` or ``task`` it names
    (a task's memory belongs to its project and user too); a session-tier event is written to
    the memory of its ``session`` (of its project and user). The item fields are an item's
    (``kind``, ``text``, ``importance``, ``tags``, ``payload``, ``source``, ``session``,
    ``timestamp``, ``key`` for a slot, ``expires_at``). ``timestamp`` is when it happened:
    given, or the time it is enqueued, never the time a worker gets to it.
    ``idempotency_key``: the same key in the same scope is one memory however often it is
    sent (``None``: a fresh key per event).
    """

    text: str
    kind: str = "note"
    tier: Tier = attrs.field(default=Tier.PROJECT, converter=_tier)
    project: str = attrs.field(default="default", converter=_project)
    user: str = attrs.field(default="default", converter=_user)
    task: str | None = attrs.field(default=None, converter=_task)
    idempotency_key: str | None = attrs.field(default=None, converter=_idempotency_key)
    importance: float = 0.5
    tags: tuple[str, ...] = attrs.field(default=(), converter=_tags)
    payload: Mapping[str, Any] = attrs.field(factory=dict)
    source: str | None = None
    session: str = ""
    timestamp: datetime | None = attrs.field(default=None, converter=_timestamp)
    key: str | None = None
    expires_at: datetime | None = attrs.field(default=None, converter=_expires_at)
    _item: ContextItem = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.tier is Tier.TASK and self.task is None:
            raise ValidationError("a task-tier event names its task", field="task")
        if self.tier is not Tier.TASK and self.task is not None:
            raise ValidationError(
                f"task is given for a {self.tier.value}-tier event; give tier 'task'",
                field="task",
                value=self.task,
            )
        if self.tier is Tier.SESSION and not self.session:
            raise ValidationError("a session-tier event names its session", field="session")
        # Every item field checked now, by the item's own rules; the item is kept for item().
        object.__setattr__(self, "_item", self._build_item())

    @property
    def namespace(self) -> str:
        """The namespace of the store the event is written to."""
        if self.tier is Tier.PROJECT:
            return project_namespace(self.project)
        if self.tier is Tier.GLOBAL:
            return global_namespace(self.user)
        if self.tier is Tier.SESSION:
            return session_namespace(self.session, self.project, self.user)
        return task_namespace(self.task or "", self.project, self.user)

    def keyed(self, now: datetime) -> IngestEvent:
        """This event with its key and timestamp filled in (what the queue keeps)."""
        if self.idempotency_key is not None and self.timestamp is not None:
            return self
        return attrs.evolve(
            self,
            idempotency_key=self.idempotency_key or new_id(),
            timestamp=self.timestamp or now,
        )

    @property
    def item_id(self) -> str:
        """The id of the item this event becomes: derived from its scope and key."""
        if self.idempotency_key is None:
            raise ValidationError("the event has no idempotency key yet", field="idempotency_key")
        basis = f"{self.tier.value}\0{self.namespace}\0{self.idempotency_key}"
        return ID_PREFIX + hashlib.sha256(basis.encode()).hexdigest()[:32]

    def item(self) -> ContextItem:
        """The item this event becomes (its id local to its scope, as a store qualifies it)."""
        return self._item

    def _build_item(self) -> ContextItem:
        fields: dict[str, Any] = {
            "id": self.item_id if self.idempotency_key is not None else new_id(),
            "kind": self.kind,
            "text": self.text,
            "tier": self.tier,
            "namespace": self.namespace,
            "tags": self.tags,
            "importance": self.importance,
            "payload": self.payload,
            "session": self.session,
            "key": self.key,
            "expires_at": self.expires_at,
        }
        if self.source is not None:
            fields["source"] = self.source
        if self.timestamp is not None:
            fields["timestamp"] = self.timestamp
        return ContextItem(**fields)

    def to_json(self) -> str:
        """The event as the queue keeps it: a JSON object of its fields."""
        data: dict[str, Any] = {}
        for field in attrs.fields(IngestEvent):
            if not field.init:
                continue
            value = getattr(self, field.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Tier):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            data[field.name] = value
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: object) -> IngestEvent:
        """An event from a JSON object (a JSONL line, a request body); unknown fields refused."""
        if isinstance(data, IngestEvent):
            return data
        if not isinstance(data, Mapping):
            raise ValidationError(
                f"an event is a JSON object, got {type(data).__name__}", value=data
            )
        unknown = sorted(str(name) for name in data if name not in EVENT_FIELDS)
        if unknown:
            raise ValidationError(
                f"unknown event field {unknown[0]!r} (fields: {', '.join(sorted(EVENT_FIELDS))})",
                field=unknown[0],
            )
        if "text" not in data:
            raise ValidationError("an event needs its text", field="text")
        try:
            return cls(**{str(name): value for name, value in data.items()})
        except TypeError as error:  # a value of the wrong shape for a converter
            raise ValidationError(f"not an event: {error}", value=data) from None

    @classmethod
    def from_json(cls, text: str) -> IngestEvent:
        """An event from its JSON text (:meth:`to_json`, or a line of a backfill file)."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise ValidationError(f"not JSON: {error}", value=text[:200]) from None
        return cls.from_mapping(data)


EVENT_FIELDS: Final = frozenset(field.name for field in attrs.fields(IngestEvent) if field.init)
"""The fields an event's JSON object may have."""

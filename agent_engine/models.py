"""The values agent_engine stores and passes around.

Every model is a frozen, slotted attrs class: a stored item can be shared between tiers,
caches and threads without anyone changing it under another's feet. Change one with
:func:`attrs.evolve`, which re-runs validation.

Validation happens at construction so that a bad value is refused where it enters, with a
:class:`~agent_engine.errors.ValidationError` naming the field, rather than surfacing later
as a corrupt row or a confusing ranking.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine import _validate
from agent_engine._validate import MAX_COUNT, MAX_ID_LENGTH
from agent_engine.errors import ValidationError

__all__ = [
    "ArchiveReason",
    "AuditAction",
    "AuditEvent",
    "ContextItem",
    "ContextRequest",
    "MAX_COUNT",
    "MAX_ID_LENGTH",
    "MAX_ITEM_ID_LENGTH",
    "MAX_MERGED_FROM",
    "Origin",
    "Provenance",
    "SESSION_SHARE",
    "Status",
    "Task",
    "TaskState",
    "Tier",
    "TierShares",
    "bump_count",
    "fingerprint_text",
    "new_id",
    "rescoped",
    "utcnow",
    "with_archive_mark",
]

MAX_ITEM_ID_LENGTH: Final = 1024
"""An item id may be longer: a tier store qualifies each id with its escaped namespace."""
MAX_MERGED_FROM: Final = 32
"""The most merged duplicates an item remembers: the first ones and the latest are kept."""

_E = TypeVar("_E", bound=enum.StrEnum)
_T = TypeVar("_T")

Vector = npt.NDArray[np.float32]
"""A 1-D float32 embedding."""


class Tier(enum.StrEnum):
    """The memory tier an item lives in, from the narrowest scope to the widest.

    A session (``docs/sessions.md``) sits between its tasks and their project: what an
    agent's run of tasks found, kept until the session is finalised.
    """

    TASK = "task"
    SESSION = "session"
    PROJECT = "project"
    GLOBAL = "global"


class Status(enum.StrEnum):
    """How much an item is trusted: pinned items are always offered to the prompt first."""

    CANDIDATE = "candidate"
    CONFIRMED = "confirmed"
    PINNED = "pinned"


class ArchiveReason(enum.StrEnum):
    """Why an item left the working set for the archive (see ``docs/lifecycle.md``).

    Archiving is orthogonal to :class:`Status`: an archived item keeps its status, stays
    searchable and can be restored; only an explicit forget deletes.
    """

    EVICTED = "evicted"
    """The store was over its item limit and this item ranked lowest."""
    EXPIRED = "expired"
    """Its time to live (``expires_at``, or its kind's TTL) ran out."""
    DECAYED = "decayed"
    """Its importance, decayed with time since its last access, fell below the floor."""
    STALE = "stale"
    """Not accessed for long, and of low importance."""
    COMPACTED = "compacted"
    """The store was over its soft limit and compaction brought it down to its low mark."""
    MANUAL = "manual"
    """A user or agent archived it explicitly."""


class TaskState(enum.StrEnum):
    """Lifecycle of a task; task memory is cleared when a task reaches a terminal state."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the task is over (its task memory can go)."""
        return self in {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED}


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime (the only kind agent_engine stores)."""
    return datetime.now(UTC)


_WHITESPACE = re.compile(r"\s+")


def fingerprint_text(text: str) -> str:
    """Fingerprint text for deduplication: case and whitespace differences do not count."""
    normalized = _WHITESPACE.sub(" ", text).strip().casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:32]


# ----------------------------------------------------------------------------- converters
# Converters run before validators; each one raises ValidationError naming its field, so a
# bad value never produces a bare TypeError from deep inside attrs or numpy. The checks
# themselves live in ``_validate``, shared with the backends, filters and tier stores.


def _identifier(field: str, value: object, limit: int = MAX_ID_LENGTH) -> str:
    return _validate.identifier(field, value, max_length=limit)


def _string(field: str, value: object) -> str:
    return _validate.text(field, value)


def _label(field: str, value: object) -> str:
    """Text stored in an indexed column (a source, a session): at most MAX_ID_LENGTH long."""
    return _validate.text(field, value, max_length=MAX_ID_LENGTH)


def _optional_aware(field: str, value: object) -> datetime | None:
    return None if value is None else _aware(field, value)


def _aware(field: str, value: object) -> datetime:
    return _validate.aware(field, value)


def _enum(field: str, enum_type: type[_E], value: object) -> _E:
    return _validate.member(field, enum_type, value)


def _unit_interval(field: str, value: object) -> float:
    number = _validate.real(field, value)
    if not 0.0 <= number <= 1.0:
        raise ValidationError(f"{field} must be in [0, 1], got {value!r}", field=field, value=value)
    return number


def _optional_count(field: str, value: object) -> int | None:
    return None if value is None else _count(field, value)


def _count(field: str, value: object) -> int:
    return _validate.integer(field, value, maximum=MAX_COUNT)


def _tags(value: object) -> tuple[str, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(
            f"tags must be a list of strings, got {value!r}", field="tags", value=value
        )
    seen: dict[str, None] = {}
    for tag in value:
        if not isinstance(tag, str) or not tag:
            raise ValidationError(
                f"every tag must be a non-empty string, got {tag!r}", field="tags", value=value
            )
        seen.setdefault(_validate.text("tags", tag, max_length=MAX_ID_LENGTH), None)
    return tuple(seen)


def _payload(value: object) -> dict[str, Any]:
    """Copy via canonical JSON: proves the payload serializes and detaches it from the caller."""
    return _validate.json_object("payload", value)


def _metadata(value: object) -> dict[str, Any]:
    return _validate.json_object("metadata", value)


def _detail(value: object) -> dict[str, Any]:
    return _validate.json_object("detail", value)


def _embedding(value: object) -> Vector | None:
    if value is None:
        return None
    array = _validate.vector("embedding", value)
    array.flags.writeable = False
    return array


def _optional_instance(field: str, cls: type[_T], value: object) -> _T | None:
    if value is None or isinstance(value, cls):
        return value
    raise ValidationError(
        f"{field} must be a {cls.__name__} or None, got {type(value).__name__}",
        field=field,
        value=value,
    )


# Named converters: the attrs mypy plugin needs a plain function per field.


def _source_item_id(value: object) -> str:
    return _identifier("source_item_id", value)


def _source_tier(value: object) -> Tier:
    return _enum("source_tier", Tier, value)


def _source_namespace(value: object) -> str:
    return _identifier("source_namespace", value)


def _promoted_at(value: object) -> datetime:
    return _aware("promoted_at", value)


def _reason(value: object) -> str:
    return _string("reason", value)


def _id(value: object) -> str:
    return _identifier("id", value)


def _item_id(value: object) -> str:
    return _identifier("id", value, MAX_ITEM_ID_LENGTH)


def _kind(value: object) -> str:
    return _identifier("kind", value)


def _session(value: object) -> str:
    return _label("session", value)


def _agent(value: object) -> str:
    return _label("agent", value)


def _text(value: object) -> str:
    return _string("text", value)


def _tier(value: object) -> Tier:
    return _enum("tier", Tier, value)


def _namespace(value: object) -> str:
    return _identifier("namespace", value)


def _source(value: object) -> str:
    return _label("source", value)


def _timestamp(value: object) -> datetime:
    return _aware("timestamp", value)


def _importance(value: object) -> float:
    return _unit_interval("importance", value)


def _token_cost(value: object) -> int | None:
    return _optional_count("token_cost", value)


def _status(value: object) -> Status:
    return _enum("status", Status, value)


def _access_count(value: object) -> int:
    return _count("access_count", value)


def _last_accessed_at(value: object) -> datetime | None:
    return _optional_aware("last_accessed_at", value)


def _expires_at(value: object) -> datetime | None:
    return _optional_aware("expires_at", value)


def _key(value: object) -> str | None:
    return None if value is None else _identifier("key", value)


def _version(value: object) -> int:
    return _validate.integer("version", value, minimum=1, maximum=MAX_COUNT)


def _valid_from(value: object) -> datetime | None:
    return _optional_aware("valid_from", value)


def _valid_to(value: object) -> datetime | None:
    return _optional_aware("valid_to", value)


def _superseded_by(value: object) -> str | None:
    return None if value is None else _identifier("superseded_by", value, MAX_ITEM_ID_LENGTH)


def _archived_at(value: object) -> datetime | None:
    return _optional_aware("archived_at", value)


def _archived_reason(value: object) -> ArchiveReason | None:
    return None if value is None else _enum("archived_reason", ArchiveReason, value)


def _merged_from(value: object) -> tuple[Origin, ...]:
    origins = tuple(_validate.sequence("merged_from", value))
    for origin in origins:
        if not isinstance(origin, Origin):
            raise ValidationError(
                f"merged_from holds Origin values, got {type(origin).__name__}",
                field="merged_from",
                value=value,
            )
    if len(origins) > MAX_MERGED_FROM:
        # The first duplicates say where the memory began, the latest that it still recurs.
        half = MAX_MERGED_FROM // 2
        origins = origins[:half] + origins[-(MAX_MERGED_FROM - half) :]
    return origins


def _origin_id(value: object) -> str:
    return _identifier("id", value, MAX_ITEM_ID_LENGTH)


def _project_id(value: object) -> str:
    return _identifier("project_id", value)


def _user_id(value: object) -> str:
    return _identifier("user_id", value)


def _description(value: object) -> str:
    return _string("description", value)


def _state(value: object) -> TaskState:
    return _enum("state", TaskState, value)


def _share_task(value: object) -> float:
    return _share("task", value)


def _share_project(value: object) -> float:
    return _share("project", value)


def _share_global(value: object) -> float:
    return _share("global", value)


def _share_session(value: object) -> float | None:
    return None if value is None else _share("session", value)


def _session_id(value: object) -> str | None:
    return None if value is None else _identifier("session_id", value)


def _query(value: object) -> str:
    return _string("query", value)


def _provenance(value: object) -> Provenance | None:
    return _optional_instance("provenance", Provenance, value)


def _shares(value: object) -> TierShares | None:
    return _optional_instance("shares", TierShares, value)


def _profile(value: object) -> str | None:
    return None if value is None else _string("profile", value)


def _policy(value: object) -> str:
    return _identifier("policy", value)


_id_lock = threading.Lock()
_last_id_ns = 0


def new_id() -> str:
    """Return a unique id that sorts by creation time (26 hex characters).

    Nanosecond time, forced monotonic within the process, then 40 random bits: ids made in
    one process sort in the order they were made (a task's timeline keeps its order even when
    two steps share a timestamp), and ids from different processes do not collide.
    """
    global _last_id_ns  # noqa: PLW0603 - one process-wide clock is the point
    with _id_lock:
        now = max(time.time_ns(), _last_id_ns + 1)
        _last_id_ns = now
    return f"{now:016x}{secrets.token_hex(5)}"


def bump_count(count: int) -> int:
    """``count + 1``, held at the largest count every store keeps.

    Access counts only ever grow; a counter that stops at its ceiling is better than an
    access that fails on the item read most often.
    """
    return min(count + 1, MAX_COUNT)


# ----------------------------------------------------------------------------- models


@attrs.frozen
class Provenance:
    """Where a promoted item came from: the audit trail of an explicit promotion."""

    source_item_id: str = attrs.field(converter=_source_item_id)
    source_tier: Tier = attrs.field(converter=_source_tier)
    source_namespace: str = attrs.field(converter=_source_namespace)
    promoted_at: datetime = attrs.field(converter=_promoted_at)
    reason: str = attrs.field(default="", converter=_reason)


@attrs.frozen
class Origin:
    """Where a duplicate merged into an item came from: its id, source, session and time."""

    id: str = attrs.field(converter=_origin_id)
    source: str = attrs.field(default="", converter=_source)
    session: str = attrs.field(default="", converter=_session)
    timestamp: datetime = attrs.field(factory=utcnow, converter=_timestamp)

    @classmethod
    def of(cls, item: ContextItem) -> Origin:
        """The origin of ``item``."""
        return cls(id=item.id, source=item.source, session=item.session, timestamp=item.timestamp)


@attrs.frozen(eq=True)
class ContextItem:
    """One unit of memory: a reasoning step, a tool output, a decision, a preference.

    ``text`` is what retrieval ranks and what the prompt shows; ``payload`` carries structured
    fields (JSON-safe, copied on construction) that renderers include. ``namespace`` is the
    scope key the tier stores isolate on (``task:<project>:<user>:<id>``, ``project:<id>``,
    ``global:<user>``; see :mod:`agent_engine.tiers.scope`).
    ``source`` says who or what produced the item (a speaker, a tool, a stage) and ``session``
    which episode it belongs to (a conversation session, a task run): retrieval treats items
    of one session as a sequence, so an item's neighbours can lend it relevance.
    ``fingerprint`` is derived from the normalized text (or, without text, the payload) and
    is how duplicates are recognised; it is never passed in.

    The rest is the item's lifecycle (``docs/lifecycle.md``). ``key`` names a slot (say
    ``"preference:editor"``): a newer item of the same key in the same scope supersedes it.
    ``version`` counts the item's content changes; ``valid_from``/``valid_to`` bound when this
    version held (``valid_from`` ``None``: since its ``timestamp``; ``valid_to`` is set once
    something superseded it, and ``superseded_by`` names what). ``archived_at`` and
    ``archived_reason`` say the item left the working set for the archive, and why; it stays
    searchable and restorable. ``merged_from`` lists the near-duplicates merged into it.
    ``agent`` names the agent that wrote this version, where agents share memory (a pool's
    store stamps it; ``""``: not said).
    """

    id: str = attrs.field(converter=_item_id)
    kind: str = attrs.field(converter=_kind)
    text: str = attrs.field(default="", converter=_text)
    tier: Tier = attrs.field(default=Tier.PROJECT, converter=_tier)
    namespace: str = attrs.field(default="default", converter=_namespace)
    source: str = attrs.field(default="", converter=_source)
    session: str = attrs.field(default="", converter=_session)
    timestamp: datetime = attrs.field(factory=utcnow, converter=_timestamp)
    tags: tuple[str, ...] = attrs.field(default=(), converter=_tags)
    importance: float = attrs.field(default=0.5, converter=_importance)
    token_cost: int | None = attrs.field(default=None, converter=_token_cost)
    payload: dict[str, Any] = attrs.field(factory=dict, converter=_payload)
    embedding: Vector | None = attrs.field(default=None, converter=_embedding, eq=False, repr=False)
    status: Status = attrs.field(default=Status.CONFIRMED, converter=_status)
    access_count: int = attrs.field(default=0, converter=_access_count)
    last_accessed_at: datetime | None = attrs.field(default=None, converter=_last_accessed_at)
    expires_at: datetime | None = attrs.field(default=None, converter=_expires_at)
    provenance: Provenance | None = attrs.field(default=None, converter=_provenance)
    fingerprint: str = attrs.field(init=False, eq=False)
    key: str | None = attrs.field(default=None, converter=_key)
    version: int = attrs.field(default=1, converter=_version)
    valid_from: datetime | None = attrs.field(default=None, converter=_valid_from)
    valid_to: datetime | None = attrs.field(default=None, converter=_valid_to)
    superseded_by: str | None = attrs.field(default=None, converter=_superseded_by)
    archived_at: datetime | None = attrs.field(default=None, converter=_archived_at)
    archived_reason: ArchiveReason | None = attrs.field(default=None, converter=_archived_reason)
    merged_from: tuple[Origin, ...] = attrs.field(default=(), converter=_merged_from)
    agent: str = attrs.field(default="", converter=_agent)

    def __attrs_post_init__(self) -> None:
        basis = self.text if self.text.strip() else json.dumps(self.payload, sort_keys=True)
        object.__setattr__(self, "fingerprint", fingerprint_text(basis))
        if self.valid_to is not None and self.valid_from and self.valid_to < self.valid_from:
            raise ValidationError(
                f"valid_to ({self.valid_to.isoformat()}) is before valid_from "
                f"({self.valid_from.isoformat()})",
                field="valid_to",
                value=self.valid_to,
            )
        if (self.archived_at is None) != (self.archived_reason is None):
            raise ValidationError(
                "archived_at and archived_reason are set together (an archived item says why)",
                field="archived_reason",
                value=self.archived_reason,
            )

    @classmethod
    def create(cls, kind: str, text: str = "", **fields: Any) -> ContextItem:
        """Build an item with a fresh random id (the usual way to make a new memory)."""
        return cls(id=fields.pop("id", None) or new_id(), kind=kind, text=text, **fields)

    @property
    def body(self) -> str:
        """What the item shows in a prompt: its text, or its payload fields when it has none."""
        if self.text.strip():
            return self.text
        return "; ".join(f"{key}: {value}" for key, value in self.payload.items()) or self.kind

    @property
    def pinned(self) -> bool:
        """Whether the item is pinned (always offered to the prompt first, never evicted)."""
        return self.status is Status.PINNED

    def expired(self, now: datetime) -> bool:
        """Whether the item's time to live has run out at ``now``."""
        return self.expires_at is not None and self.expires_at <= now

    @property
    def valid_since(self) -> datetime:
        """When this version began to hold: ``valid_from``, or the item's ``timestamp``."""
        return self.valid_from if self.valid_from is not None else self.timestamp

    def valid_at(self, at: datetime) -> bool:
        """Whether this version held at ``at`` (written by then, and not yet superseded)."""
        return (
            self.timestamp <= at
            and self.valid_since <= at
            and (self.valid_to is None or self.valid_to > at)
        )

    @property
    def archived(self) -> bool:
        """Whether the item is in the archive (out of the working set, still searchable)."""
        return self.archived_at is not None

    @property
    def superseded(self) -> bool:
        """Whether a newer version or item replaced this one (it is history)."""
        return self.valid_to is not None

    @property
    def current(self) -> bool:
        """Whether the item is in the working set: neither archived nor superseded."""
        return self.archived_at is None and self.valid_to is None


def with_archive_mark(
    items: Iterable[ContextItem], at: datetime | None, reason: ArchiveReason | str | None
) -> list[ContextItem]:
    """``items`` archived at ``at`` for ``reason`` (both ``None``: back in the working set).

    Only the mark is checked, once: every other field is the items' own, validated when they
    were built, so each result is a field-by-field copy with two fields set rather than
    :func:`attrs.evolve`, which re-runs every converter (payload canonicalisation, vector
    checks, the fingerprint). Moving a hundred thousand items to the archive then costs their
    copies (a few microseconds each), not a second validation (some thirty).
    """
    when = _archived_at(at)
    why = _archived_reason(reason)
    if (when is None) != (why is None):
        raise ValidationError(
            "archived_at and archived_reason are set together (an archived item says why)",
            field="archived_reason",
            value=reason,
        )
    return [_marked_copy(item, when, why) for item in items]


def _copier(changed: Mapping[str, str]) -> Callable[..., ContextItem]:
    """A function copying an item slot by slot, the ``changed`` fields from its arguments.

    ``changed`` maps a field to the argument that sets it (in the order the arguments come).
    Generated from the class's fields as straight-line code, as attrs generates ``__init__``
    (and the SQL backend its row conversions): no field can be left out, and it runs twice as
    fast as a loop over the slots, which matters when a compaction marks a hundred thousand
    items or a fork reads through to its parent on every build.
    """
    namespace: dict[str, Any] = {"_new": object.__new__, "_Item": ContextItem}
    lines = [f"def copy(item, {', '.join(changed.values())}):", "    new = _new(_Item)"]
    for n, name in enumerate(attrs.fields_dict(ContextItem)):
        namespace[f"_set{n}"] = vars(ContextItem)[name].__set__
        lines.append(f"    _set{n}(new, {changed.get(name, f'item.{name}')})")
    lines.append("    return new")
    exec("\n".join(lines), namespace)  # noqa: S102 - built from the class's own fields
    copier: Callable[..., ContextItem] = namespace["copy"]
    return copier


def rescoped(
    item: ContextItem, item_id: str, namespace: str, superseded_by: str | None
) -> ContextItem:
    """``item`` under another id and namespace, its successor named as there; unchecked.

    What a fork reads through to its parent (:mod:`agent_engine.tiers.forks`): the item as
    the fork names it, copied slot by slot rather than re-validated (the ids are the store's
    own, built by its scope rules), since a build over a fork sees hundreds of them.
    """
    return _rescoped_copy(item, item_id, namespace, superseded_by)


_marked_copy = _copier({"archived_at": "when", "archived_reason": "why"})
_rescoped_copy = _copier(
    {"id": "item_id", "namespace": "namespace", "superseded_by": "superseded_by"}
)


@attrs.frozen
class Task:
    """A unit of work a pipeline executor runs; owns one task-memory namespace."""

    id: str = attrs.field(converter=_id)
    project_id: str = attrs.field(default="default", converter=_project_id)
    user_id: str = attrs.field(default="default", converter=_user_id)
    description: str = attrs.field(default="", converter=_description)
    state: TaskState = attrs.field(default=TaskState.RUNNING, converter=_state)
    metadata: dict[str, Any] = attrs.field(factory=dict, converter=_metadata)
    session_id: str | None = attrs.field(default=None, converter=_session_id)
    """The session the task runs in (of its project and user): its builds read that
    session's memory too (``docs/sessions.md``). ``None``: the task runs on its own."""


def _share(field: str, value: object) -> float:
    number = _validate.real(field, value)
    if number < 0.0 or number > 1.0:
        raise ValidationError(
            f"{field} share must be in [0, 1], got {value!r}", field=field, value=value
        )
    return number


SESSION_SHARE: Final = 0.25
"""The part of the task's and the project's shares a session takes when a split does not say:
a quarter, so 40/40/20 becomes 30/20/30/20, and a task keeps three quarters of its share."""


@attrs.frozen
class TierShares:
    """How a context budget is split between tiers; the shares sum to 1.

    ``session`` is the share of a task's session, for builds of a task that runs in one.
    ``None`` (the default) leaves it unsaid: then task, project and global sum to 1, a build
    without a session uses them as they are, and a build with one gives the session
    :data:`SESSION_SHARE` (a quarter) of the task's and the project's shares
    (:meth:`with_session`: 40/40/20 becomes 30/20/30/20). A split that names a session share
    is used as given, and a session share of 0 leaves the session out.
    """

    task: float = attrs.field(default=0.4, converter=_share_task)
    project: float = attrs.field(default=0.4, converter=_share_project)
    global_: float = attrs.field(default=0.2, converter=_share_global)
    session: float | None = attrs.field(default=None, converter=_share_session)

    def __attrs_post_init__(self) -> None:
        total = self.task + self.project + self.global_ + (self.session or 0.0)
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ValidationError(
                f"tier shares must sum to 1, got {total:g}",
                field="shares",
                value=(self.task, self.session, self.project, self.global_),
            )

    def of(self, tier: Tier) -> float:
        """The share of ``tier`` (a session whose share is unsaid has none)."""
        if tier is Tier.SESSION:
            return self.session or 0.0
        return {Tier.TASK: self.task, Tier.PROJECT: self.project, Tier.GLOBAL: self.global_}[tier]

    def with_session(self, share: float = SESSION_SHARE) -> TierShares:
        """This split with a session share: its own, or ``share`` of the task's and project's.

        Each of the task and the project gives ``share`` (a quarter) of its own share, so
        neither is ever turned off by a session: a split that gives them 10% each keeps 7.5%
        each, and one that gives them nothing gives the session nothing either.
        """
        if self.session is not None:
            return self
        if not 0.0 <= share < 1.0:
            raise ValidationError(
                f"a session's share of the task's and project's must be in [0, 1), got {share!r}",
                field="share",
                value=share,
            )
        task = round(self.task * (1 - share), 9)
        project = round(self.project * (1 - share), 9)
        session = max(0.0, round(1.0 - task - project - self.global_, 9))
        return TierShares(task, project, self.global_, session)


def _budget(value: object) -> int:
    return _validate.integer("budget_tokens", value, minimum=1)


def _tiers(value: object) -> frozenset[Tier] | None:
    if value is None:
        return None
    if isinstance(value, str | Tier):
        raise ValidationError(
            "tiers must be a collection of tiers, not one; wrap it in a list",
            field="tiers",
            value=value,
        )
    return frozenset(_enum("tiers", Tier, tier) for tier in _validate.sequence("tiers", value))


def _kinds(value: object) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ValidationError(
            "kinds must be a collection of kinds, not one; wrap it in a list",
            field="kinds",
            value=value,
        )
    return frozenset(_identifier("kinds", kind) for kind in _validate.sequence("kinds", value))


def _limit(value: object) -> int | None:
    return None if value is None else _validate.integer("limit", value, minimum=1)


def _min_score(value: object) -> float | None:
    if value is None:
        return None
    number = _validate.real("min_score", value)
    if not math.isfinite(number):
        raise ValidationError("min_score must be a finite number", field="min_score", value=value)
    return number


def _archive(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(
            f"archive must be True or False, got {type(value).__name__}",
            field="archive",
            value=value,
        )
    return value


WINDOW_FRACTION = 0.08
"""The share of a model's free context window :meth:`ContextRequest.for_window` gives memory."""
WINDOW_CAP = 5000
"""The most tokens :meth:`ContextRequest.for_window` gives memory, however large the window."""


@attrs.frozen
class ContextRequest:
    """What an executor asks for at one step: a token budget and what the step is about.

    ``shares`` overrides the assembler's tier split for this request only; ``profile`` names an
    agent profile whose split the assembler was configured with (``shares`` wins over it);
    ``policy`` names a registered scoring policy.

    What the request wants, when it says (each default is "as configured", so a plain request
    builds what it always built):

    * ``tiers``: the tiers it reads; the others are not read at all, pinned items included.
      A tier whose share is 0 is off too, and their room goes to the tiers that are on.
    * ``kinds``: the kinds of items it takes, in every tier (pinned, HEAD and TAIL included).
    * ``limit``: at most this many items, admitted in the order the fill offers them (pinned,
      the task's HEAD and TAIL, then each tier's best); the rest are left out as ``limit``.
    * ``min_score``: ranked candidates scoring below it are left out (instead of the
      assembler's ``min_score``); pinned, HEAD and TAIL items are not held to it.
    * ``archive``: whether archived items may be paged back in (the searches reach the
      archive by default).
    """

    budget_tokens: int = attrs.field(converter=_budget)
    query: str = attrs.field(default="", converter=_query)
    shares: TierShares | None = attrs.field(default=None, converter=_shares)
    policy: str = attrs.field(default="hybrid", converter=_policy)
    profile: str | None = attrs.field(default=None, converter=_profile)
    tiers: frozenset[Tier] | None = attrs.field(default=None, converter=_tiers)
    kinds: frozenset[str] | None = attrs.field(default=None, converter=_kinds)
    limit: int | None = attrs.field(default=None, converter=_limit)
    min_score: float | None = attrs.field(default=None, converter=_min_score)
    archive: bool = attrs.field(default=True, converter=_archive)

    @classmethod
    def for_window(
        cls,
        window_tokens: int,
        *,
        used_tokens: int = 0,
        fraction: float = WINDOW_FRACTION,
        cap: int | None = WINDOW_CAP,
        **fields: Any,
    ) -> ContextRequest:
        """A request whose budget is ``fraction`` of the window's free tokens, at most ``cap``.

        The free tokens are ``window_tokens - used_tokens`` (what the prompt holds already).
        The defaults (8%, at most 5,000 tokens) leave the model its window: 640 tokens of an
        8k window, 5,000 of 100k. ``fields`` are the request's others (``query``, ...). A
        window with no room left, or a fraction that leaves less than one token, raises a
        :class:`~agent_engine.errors.ValidationError`.
        """
        window = _validate.integer("window_tokens", window_tokens, minimum=1)
        used = _validate.integer("used_tokens", used_tokens, minimum=0)
        share = _validate.real("fraction", fraction)
        if not 0 < share <= 1:
            raise ValidationError("fraction must be in (0, 1]", field="fraction", value=fraction)
        most = None if cap is None else _validate.integer("cap", cap, minimum=1)
        free = window - used
        if free < 1:
            raise ValidationError(
                f"the window has no room left: {used} of its {window} tokens are used",
                field="used_tokens",
                value=used_tokens,
            )
        budget = math.floor(free * share)
        if budget < 1:
            raise ValidationError(
                f"{share:g} of the {free} free tokens is less than one token",
                field="fraction",
                value=fraction,
            )
        return cls(budget if most is None else min(budget, most), **fields)


class AuditAction(enum.StrEnum):
    """What a mutation did, as recorded in the audit log."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    PROMOTE = "promote"
    EVICT = "evict"
    CLEAR = "clear"
    PIN = "pin"
    UNPIN = "unpin"
    ERASE = "erase"
    """Items were erased; the event names each by its erasure token, never by its id."""
    ABORT = "abort"
    """The mutation announced by the event named in ``detail["intent"]`` did not happen."""
    ARCHIVE = "archive"
    """Items left the working set for the archive; ``detail["reason"]`` says why."""
    RESTORE = "restore"
    """Archived items came back to the working set."""
    SUPERSEDE = "supersede"
    """A newer item or version replaced the items named; ``detail["by"]`` lists what replaced
    each, in order."""
    MERGE = "merge"
    """A near-duplicate was merged into the item named instead of being stored."""
    CONFLICT = "conflict"
    """A likely contradiction between the two items named was recorded."""
    RESOLVE = "resolve"
    """A recorded conflict was resolved; ``detail["keep"]`` names the item kept."""
    DECAY = "decay"
    """Importance decay was applied; the items named fell below the floor."""
    COMPACT = "compact"
    """Compaction ran; ``detail`` says what moved and why."""
    CONFIRM = "confirm"
    """Quarantined candidates were confirmed (or penalised: ``detail["penalised"]``)."""
    GRANT = "grant"
    """An agent was granted access to a pool; ``detail`` names the agent, the access, who
    granted it and what it replaced."""
    REVOKE = "revoke"
    """An agent's access to a pool was revoked; ``detail`` names the agent and who revoked."""
    FORK = "fork"
    """The scope was forked. In the parent's journal ``detail["child"]`` names the fork; in the
    fork's, ``detail["parent"]`` its parent and ``detail["checkpoint"]`` what it started from."""
    REDACT = "redact"
    """Secrets or personal data were taken out of the items named before they were written;
    ``detail["items"]`` says of each what kinds were found, how many, and what was done with
    them (never what they were)."""


def _action(value: object) -> AuditAction:
    return _enum("action", AuditAction, value)


def _item_ids(value: object) -> tuple[str, ...]:
    return tuple(
        _validate.text("item_ids", item_id) for item_id in _validate.sequence("item_ids", value)
    )


def _at(value: object) -> datetime:
    return _aware("at", value)


@attrs.frozen
class AuditEvent:
    """One journal entry: written *before* the mutation it describes (journal-first).

    If the mutation then fails, an :attr:`AuditAction.ABORT` event naming this one follows,
    so the journal never claims a change that did not happen.
    """

    action: AuditAction = attrs.field(converter=_action)
    tier: Tier = attrs.field(converter=_tier)
    namespace: str = attrs.field(converter=_namespace)
    item_ids: tuple[str, ...] = attrs.field(default=(), converter=_item_ids)
    detail: dict[str, Any] = attrs.field(factory=dict, converter=_detail)
    at: datetime = attrs.field(factory=utcnow, converter=_at)
    id: str = attrs.field(factory=new_id, converter=_id)

"""LangGraph namespaces read as agent_engine scopes, and LangGraph keys as item ids.

A LangGraph store addresses an item by a namespace (a tuple of labels) and a key. The
adapter reads a namespace's first labels as one scope of agent_engine and keeps the rest as a
path inside it::

    ("project", <project id>, *path)                      a project's memory
    ("global", <user id>, *path)                          a user's global memory
    ("task", <project id>, <user id>, <task id>, *path)   a task's memory
    ("session", <project id>, <user id>, <session id>, *path)   a session's memory

A task's scope is named by its project and user as well as its id, as its namespace is
(:func:`~agent_engine.tiers.scope.task_namespace`): two users' runs of one task never share a
memory. Anything else (another first label, too few labels, an id no store takes) names no
scope, and is refused with :class:`UnmappedNamespaceError` before anything is read or
written.

Within its scope an item's id is ``lg:`` and its path and key, each percent-quoted and joined
by ``/``: an injective encoding that reads back, kept in the id (never in the payload, where
redaction could rewrite it). The same string is the item's slot (its ``key``), so a slot's
versions are supersession's business and a put is never merged into another item as a
near-duplicate (``docs/dedup.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import quote, unquote

import attrs
from langgraph.store.base import InvalidNamespaceError

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import MAX_ID_LENGTH, Task, Tier
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.scope import (
    global_namespace,
    local_id,
    parse_session_namespace,
    parse_task_namespace,
    project_namespace,
    session_namespace,
    task_namespace,
)
from agent_engine.tiers.stores import MemoryStores

__all__ = [
    "ID_PREFIX",
    "WILDCARD",
    "Address",
    "Scope",
    "UnmappedNamespaceError",
    "address",
    "check_labels",
    "decode",
    "pattern_scope",
    "scope_namespace",
]

ID_PREFIX: Final = "lg:"
"""What the local id of every item the adapter writes starts with."""
WILDCARD: Final = "*"
"""A label that matches any label, in the namespace patterns ``list_namespaces`` takes."""
_ID_LABELS: Final = {Tier.TASK: 3, Tier.SESSION: 3, Tier.PROJECT: 1, Tier.GLOBAL: 1}
"""How many labels after the tier's name name a scope of it."""
_PROJECT_PREFIX: Final = "project:"
_GLOBAL_PREFIX: Final = "global:"


class UnmappedNamespaceError(ValidationError, InvalidNamespaceError):
    """A LangGraph namespace names no scope of agent_engine, or is not a namespace at all.

    Both a :class:`~agent_engine.errors.ValidationError` (``field`` is ``"namespace"``,
    ``value`` the namespace) and LangGraph's ``InvalidNamespaceError``, so a handler written
    for either catches it. Nothing of the batch that carried it was read or written.
    """

    def __init__(self, message: str, *, namespace: tuple[object, ...]) -> None:
        super().__init__(message, field="namespace", value=namespace)
        self.namespace = namespace


@attrs.frozen
class Scope:
    """One scope of agent_engine a namespace names: a tier and the ids that name its store."""

    tier: Tier
    ids: tuple[str, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        """The namespace labels that name this scope (its tier's name, then its ids)."""
        return (self.tier.value, *self.ids)

    def store(self, stores: MemoryStores) -> TierStore:
        """This scope's store, as ``stores`` opens and keeps it."""
        if self.tier is Tier.PROJECT:
            return stores.project_store(self.ids[0])
        if self.tier is Tier.GLOBAL:
            return stores.global_store(self.ids[0])
        if self.tier is Tier.SESSION:
            project, user, session = self.ids
            return stores.session_store(session, project, user)
        project, user, task = self.ids
        return stores.task_store(Task(id=task, project_id=project, user_id=user))

    @classmethod
    def of(cls, tier: Tier, namespace: str) -> Scope | None:
        """The scope a store of ``tier`` over ``namespace`` serves (``None``: no such scope)."""
        if tier is Tier.PROJECT and namespace.startswith(_PROJECT_PREFIX):
            return cls(tier, (namespace.removeprefix(_PROJECT_PREFIX),))
        if tier is Tier.GLOBAL and namespace.startswith(_GLOBAL_PREFIX):
            return cls(tier, (namespace.removeprefix(_GLOBAL_PREFIX),))
        if tier is Tier.TASK:
            parsed = parse_task_namespace(namespace)
            return cls(tier, parsed) if parsed is not None else None
        if tier is Tier.SESSION:
            parsed = parse_session_namespace(namespace)
            return cls(tier, parsed) if parsed is not None else None
        return None


@attrs.frozen
class Address:
    """Where one LangGraph item lives: its scope, its path in the scope, its key."""

    scope: Scope
    path: tuple[str, ...]
    key: str

    @property
    def namespace(self) -> tuple[str, ...]:
        """The LangGraph namespace of the item."""
        return (*self.scope.labels, *self.path)

    @property
    def local_id(self) -> str:
        """The item's id (and slot) in its scope: ``lg:`` and its quoted path and key."""
        return ID_PREFIX + "/".join(quote(part, safe="") for part in (*self.path, self.key))


def check_labels(namespace: object) -> tuple[str, ...]:
    """``namespace`` as a tuple of labels LangGraph accepts, else :class:`UnmappedNamespaceError`.

    LangGraph's own methods check labels before a batch is made; ops handed to ``batch``
    directly are checked here, so ``("a.b",)`` can never stand for ``("a", "b")``.
    """
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise UnmappedNamespaceError(
            f"a namespace is a tuple of strings, got {type(namespace).__name__}",
            namespace=(namespace,),
        )
    labels = tuple(namespace)
    for label in labels:
        problem = None
        if not isinstance(label, str):
            problem = f"a label is a string, got {type(label).__name__}"
        elif not label:
            problem = "a label is not empty"
        elif "." in label:
            problem = "a label holds no period"
        elif "\x00" in label:
            problem = "a label holds no NUL character"
        if problem is not None:
            raise UnmappedNamespaceError(
                f"namespace {labels!r}: {problem} ({label!r})", namespace=labels
            )
    return labels


def _tier(labels: tuple[str, ...]) -> Tier:
    try:
        return Tier(labels[0])
    except ValueError:
        raise UnmappedNamespaceError(
            f"namespace {labels!r} names no scope: it starts with "
            f"{' or '.join(repr(t.value) for t in Tier)} (see docs/langgraph.md)",
            namespace=labels,
        ) from None


def _scope(tier: Tier, ids: tuple[str, ...], labels: tuple[str, ...]) -> Scope:
    """The scope ``ids`` name in ``tier``, each id checked as its store would check it."""
    try:
        if tier is Tier.PROJECT:
            project_namespace(ids[0])
        elif tier is Tier.GLOBAL:
            global_namespace(ids[0])
        elif tier is Tier.SESSION:
            session_namespace(ids[2], ids[0], ids[1])
        else:
            task_namespace(ids[2], ids[0], ids[1])
    except ValidationError as error:
        raise UnmappedNamespaceError(
            f"namespace {labels!r} names no scope: {error}", namespace=labels
        ) from error
    return Scope(tier, ids)


def address(namespace: object, key: object) -> Address:
    """Where the item ``key`` of ``namespace`` lives; refused if the namespace names no scope.

    Raises :class:`UnmappedNamespaceError` for the namespace, and
    :class:`~agent_engine.errors.ValidationError` (``field="key"``) for a key that is not
    storable text or that, with the path, makes an id longer than a scope's ids may be.
    """
    labels = check_labels(namespace)
    if not labels:
        raise UnmappedNamespaceError("the empty namespace names no scope", namespace=labels)
    tier = _tier(labels)
    count = _ID_LABELS[tier]
    if len(labels) <= count:
        raise UnmappedNamespaceError(
            f"namespace {labels!r} names no scope: {tier.value!r} is followed by {_id_names(tier)}",
            namespace=labels,
        )
    scope = _scope(tier, labels[1 : 1 + count], labels)
    if not isinstance(key, str):
        raise ValidationError(
            f"a key is a string, got {type(key).__name__}", field="key", value=key
        )
    _validate.text("key", key)
    found = Address(scope, labels[1 + count :], key)
    if len(found.local_id) > MAX_ID_LENGTH:
        raise ValidationError(
            f"the namespace's path and the key make an id of {len(found.local_id)} characters "
            f"(quoted); at most {MAX_ID_LENGTH} fit",
            field="key",
            value=key,
        )
    return found


def _id_names(tier: Tier) -> str:
    if tier is Tier.TASK:
        return "a project id, a user id and a task id"
    if tier is Tier.SESSION:
        return "a project id, a user id and a session id"
    return "a project id" if tier is Tier.PROJECT else "a user id"


def pattern_scope(pattern: tuple[str, ...]) -> tuple[tuple[Tier, ...], Scope | None]:
    """The tiers a namespace pattern (a search's prefix, a listing's) reaches, and its scope.

    The scope is ``None`` unless the pattern names one whole, without wildcards. A pattern
    whose first label is neither a tier nor a wildcard names no scope:
    :class:`UnmappedNamespaceError`, as is one naming a scope no store takes.
    """
    if not pattern or pattern[0] == WILDCARD:
        return tuple(Tier), None
    tier = _tier(pattern)
    ids = pattern[1 : 1 + _ID_LABELS[tier]]
    if len(ids) < _ID_LABELS[tier] or WILDCARD in ids:
        for label in ids:
            if label != WILDCARD:
                try:
                    _validate.identifier("id", label)
                except ValidationError as error:
                    raise UnmappedNamespaceError(
                        f"namespace {pattern!r} names no scope: {error}", namespace=pattern
                    ) from error
        return (tier,), None
    return (tier,), _scope(tier, ids, pattern)


def decode(scope: Scope, item_id: str, namespace: str) -> Address | None:
    """The address of the item ``item_id`` of ``scope`` (stored under ``namespace``).

    ``None`` for an id the adapter did not write (no ``lg:`` local id, or one that does not
    read back).
    """
    local = local_id(namespace, item_id)
    if not local.startswith(ID_PREFIX):
        return None
    parts = [unquote(part) for part in local.removeprefix(ID_PREFIX).split("/")]
    found = Address(scope, tuple(parts[:-1]), parts[-1])
    return found if found.local_id == local else None


def scope_namespace(tier: Tier | str, task: Task, *path: str) -> tuple[str, ...]:
    """The LangGraph namespace of ``task``'s scope in ``tier``, followed by ``path``.

    ``("task", project, user, task id, *path)``, ``("session", project, user, session id,
    *path)`` (the task's session: a task in none has no session scope),
    ``("project", project, *path)`` or ``("global", user, *path)``: what a graph's nodes put
    under to write into the memory the assembler builds ``task``'s context from.
    """
    chosen = _validate.member("tier", Tier, tier)
    if not isinstance(task, Task):
        raise ValidationError(
            f"task must be a Task, got {type(task).__name__}", field="task", value=task
        )
    if chosen is Tier.SESSION and task.session_id is None:
        raise ValidationError(
            f"task {task.id!r} runs in no session: it has no session scope",
            field="tier",
            value=tier,
        )
    scope = {
        Tier.TASK: (task.project_id, task.user_id, task.id),
        Tier.SESSION: (task.project_id, task.user_id, task.session_id or ""),
        Tier.PROJECT: (task.project_id,),
        Tier.GLOBAL: (task.user_id,),
    }[chosen]
    return check_labels((chosen.value, *scope, *path))

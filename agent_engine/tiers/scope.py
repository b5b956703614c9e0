"""Scope names and item ids: what keeps two callers' memories apart, whatever ids they choose.

A *scope* is one namespace of one tier. Isolation rests on two rules, both enforced here and
by :class:`~agent_engine.tiers.base.TierStore`, never left to callers:

1. **Namespaces are built injectively** from the ids that define them. A project's memory is
   ``project:<project id>``, a user's global memory ``global:<user id>``, and a task's memory
   belongs to its project and user as well as its id: ``task:<project>:<user>:<task>``, with
   ``%`` and ``:`` escaped in each part; a session's likewise,
   ``session:<project>:<user>:<session>``, and a project's shared pool
   ``pool:<project>:<pool>``. No two different (project, user, task) triples give
   one namespace, so two projects that both run a task called ``fix-login`` never share it.
2. **Item ids are unique per scope.** A store writes every item under ``<scope>/<local id>``,
   where ``<scope>`` is its namespace with ``%`` and ``/`` escaped. Everything before the first
   ``/`` names the scope, so an id written in one scope can never be an id of another: adding,
   reading, updating or deleting an id in one scope has the same outcome whatever any other
   scope holds (the alternative, refusing an id that exists elsewhere, tells the caller that
   it exists). A caller may pass the local part alone (``store.get("fix-1")``) or the whole id
   a store returned; both name the same item.

Ids written before stores qualified them stay readable in their own scope, and nowhere else.
"""

from __future__ import annotations

import re
from typing import Final

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import MAX_ID_LENGTH

__all__ = [
    "SCOPE_SEPARATOR",
    "global_namespace",
    "id_prefix",
    "local_id",
    "owner",
    "parse_pool_namespace",
    "parse_session_namespace",
    "parse_task_namespace",
    "pool_namespace",
    "project_namespace",
    "qualified",
    "scoped_id",
    "session_namespace",
    "task_namespace",
]

SCOPE_SEPARATOR: Final = "/"
"""Separates an id's scope (its escaped namespace) from its local part."""

_PROJECT_PREFIX: Final = "project:"
_GLOBAL_PREFIX: Final = "global:"
_TASK_PREFIX: Final = "task:"
_SESSION_PREFIX: Final = "session:"
_POOL_PREFIX: Final = "pool:"
_ESCAPED: Final = re.compile(r"%([0-9A-F]{2})")


def _escape(text: str, reserved: str) -> str:
    """Percent-escape ``%`` and the ``reserved`` characters: an injective, readable encoding."""
    escaped = text.replace("%", "%25")
    for char in reserved:
        escaped = escaped.replace(char, f"%{ord(char):02X}")
    return escaped


def _unescape(text: str) -> str:
    return _ESCAPED.sub(lambda match: chr(int(match.group(1), 16)), text)


def _part(field: str, value: object) -> str:
    """Check one id a scope is built from: the rules of every stored identifier.

    Its length is checked on the namespace it makes, which escaping may lengthen.
    """
    return _validate.identifier(field, value, max_length=None)


def _namespace(field: str, namespace: str) -> str:
    if len(namespace) > MAX_ID_LENGTH:
        raise ValidationError(
            f"{field} makes a namespace longer than {MAX_ID_LENGTH} characters",
            field=field,
            value=namespace,
        )
    return namespace


def project_namespace(project_id: str) -> str:
    """The namespace of a project's memory: ``project:<project id>``."""
    return _namespace("project_id", _PROJECT_PREFIX + _part("project_id", project_id))


def global_namespace(user_id: str) -> str:
    """The namespace of a user's global memory: ``global:<user id>``."""
    return _namespace("user_id", _GLOBAL_PREFIX + _part("user_id", user_id))


def _owned(prefix: str, field: str, *parts: tuple[str, str]) -> str:
    """A namespace of ``prefix`` and the ids it is built from (``(field, id)``), escaped.

    ``field`` names the scope's own id, which an over-long namespace is reported under.
    """
    checked = (_escape(_part(name, value), ":") for name, value in parts)
    return _namespace(field, prefix + ":".join(checked))


def _parse_owned(prefix: str, namespace: str, count: int) -> tuple[str, ...] | None:
    if not namespace.startswith(prefix):
        return None
    parts = namespace.removeprefix(prefix).split(":")
    return tuple(_unescape(part) for part in parts) if len(parts) == count else None


def task_namespace(task_id: str, project_id: str = "default", user_id: str = "default") -> str:
    """The namespace of a task's memory: its project, its user and its id, each escaped."""
    return _owned(
        _TASK_PREFIX,
        "task_id",
        ("project_id", project_id),
        ("user_id", user_id),
        ("task_id", task_id),
    )


def parse_task_namespace(namespace: str) -> tuple[str, str, str] | None:
    """The (project, user, task) ids a task namespace was built from, or ``None``."""
    found = _parse_owned(_TASK_PREFIX, namespace, 3)
    return None if found is None else (found[0], found[1], found[2])


def session_namespace(
    session_id: str, project_id: str = "default", user_id: str = "default"
) -> str:
    """The namespace of a session's memory: its project, its user and its id, each escaped."""
    return _owned(
        _SESSION_PREFIX,
        "session_id",
        ("project_id", project_id),
        ("user_id", user_id),
        ("session_id", session_id),
    )


def parse_session_namespace(namespace: str) -> tuple[str, str, str] | None:
    """The (project, user, session) ids a session namespace was built from, or ``None``."""
    found = _parse_owned(_SESSION_PREFIX, namespace, 3)
    return None if found is None else (found[0], found[1], found[2])


def pool_namespace(pool: str, project_id: str = "default") -> str:
    """The namespace of a project's shared pool: its project and its name, each escaped."""
    return _owned(_POOL_PREFIX, "pool", ("project_id", project_id), ("pool", pool))


def parse_pool_namespace(namespace: str) -> tuple[str, str] | None:
    """The (project, pool) a pool namespace was built from, or ``None``."""
    found = _parse_owned(_POOL_PREFIX, namespace, 2)
    return None if found is None else (found[0], found[1])


def owner(namespace: str) -> tuple[str | None, str | None]:
    """The project and the user a namespace belongs to (``None`` for what it does not name).

    A task's or a session's memory names both, a project's memory and its pools the project,
    a user's global memory the user; a namespace of no known shape names neither.
    """
    if namespace.startswith(_PROJECT_PREFIX):
        return namespace.removeprefix(_PROJECT_PREFIX), None
    if namespace.startswith(_GLOBAL_PREFIX):
        return None, namespace.removeprefix(_GLOBAL_PREFIX)
    owned = parse_task_namespace(namespace) or parse_session_namespace(namespace)
    if owned is not None:
        return owned[0], owned[1]
    pool = parse_pool_namespace(namespace)
    return (pool[0], None) if pool is not None else (None, None)


def id_prefix(namespace: str) -> str:
    """What every id written in ``namespace`` starts with."""
    return _escape(namespace, SCOPE_SEPARATOR) + SCOPE_SEPARATOR


def local_id(namespace: str, item_id: str) -> str:
    """The part of ``item_id`` its scope's store does not add: what the caller chose."""
    return item_id.removeprefix(id_prefix(namespace))


def qualified(prefix: str, item_id: str) -> str | None:
    """``item_id`` under a scope's ``prefix``; ``None`` for a local id too long to carry one."""
    if item_id.startswith(prefix):
        return item_id
    return prefix + item_id if len(item_id) <= MAX_ID_LENGTH else None


def scoped_id(namespace: str, item_id: str) -> str:
    """``item_id`` as written in ``namespace``: a local id gets the scope's prefix."""
    whole = qualified(id_prefix(namespace), item_id)
    if whole is None:
        raise ValidationError(
            f"id is longer than {MAX_ID_LENGTH} characters", field="id", value=item_id
        )
    return whole

"""Shared pools: memory several agents of a project use together, under explicit grants.

A *pool* is a named scope of a project's memory (``pool:<project>:<pool>``) that agents
share (seed 003): a scratchpad they post notes to, a cache of tool results one agent paid
for and the others reuse, a blackboard of named slots each holding its latest value. Who
may do what is explicit:

* agents are **registered** with the project (:meth:`Pools.register`), and only a registered
  agent can be granted anything (else :class:`~agent_engine.errors.UnknownAgentError`);
* each agent holds a **grant** per pool, ``read`` or ``write`` (which reads too), given and
  taken away by the application (:meth:`Pools.grant`, :meth:`Pools.revoke`), each journaled
  in the pool's audit log before it takes effect, with who did it;
* an agent works through its own view of a pool (:meth:`Pools.open`): every call checks its
  grant first, as it stands in the backend then (a revocation holds for every view, in every
  process, from its next call on; a call already past its check finishes), and raises
  :class:`~agent_engine.errors.AccessDeniedError` when the grant does not allow it, before
  anything is read or written. The error reads the same whatever the pool
  holds, or whether it exists: an agent without a grant learns nothing of a pool, not even
  that an id is in it;
* **every item records the agent that wrote it** (``ContextItem.agent``), stamped by the
  view that wrote it, whatever the item said, and every journal event a view writes names
  its agent (``detail["agent"]``): who erased or cleared what is on record too.

Pools are project memory (their items are of the project tier, in their own namespace): they
are isolated from the project's own memory and from each other as any two scopes are, they
keep their history as project memory does, age when compacted (:meth:`Pools.compact`), and
are checkpointed, exported and copied with the rest. They do not merge near-duplicates by
default: each agent's write is its own record. A context build does not page pools in: an
agent reads the pools it needs through its view and passes what it wants into its step.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from agent_engine import _validate
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry
from agent_engine.errors import AccessDeniedError, ValidationError
from agent_engine.filters import FilterInput
from agent_engine.memory.backend import MemoryBackend, SearchHit
from agent_engine.memory.checkpoints import Checkpoint
from agent_engine.memory.export import RestorePlan
from agent_engine.memory.grants import Access, Grant, check_agent
from agent_engine.models import AuditAction, AuditEvent, ContextItem, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, RedactionPolicy
from agent_engine.tiers.aging import CompactionReport
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.dedup import MergePolicy
from agent_engine.tiers.scope import pool_namespace, project_namespace
from agent_engine.tiers.views import View

__all__ = ["APPLICATION", "PoolMemoryStore", "Pools", "pool_namespace"]

APPLICATION: Final = "application"
"""Who grants and revokes when the application does it (the default ``by``)."""
_CACHE_KIND: Final = "tool_result"
_NOTE_KIND: Final = "note"


class _PoolScope(TierStore):
    """The store of one pool's items: project-tier items in the pool's namespace."""

    tier = Tier.PROJECT


@attrs.frozen
class _Settings:
    clock: Callable[[], datetime]
    conflict_detection: ConflictDetection | None
    merge: MergePolicy | None
    redaction: RedactionPolicy | None
    telemetry: Telemetry | None


class Pools:
    """A project's shared pools: its agents, their grants, and each agent's view of a pool.

    One object per project over the backend that holds the pools (project memory's, usually).
    The stores' settings (``clock``, ``conflict_detection``, ``merge``, ``redaction``,
    ``telemetry``) are those of :class:`~agent_engine.tiers.base.TierStore`, for every view.
    Near-duplicates are not merged by default (``merge=None``): two agents saying the same
    thing are two records of who said it, and a merge would keep only the first writer.
    """

    def __init__(
        self,
        backend: MemoryBackend,
        project_id: str = "default",
        *,
        clock: Callable[[], datetime] = utcnow,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = None,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        self.backend = backend
        self.project_id = project_id
        self.realm = project_namespace(project_id)
        self.clock = clock
        self._settings = _Settings(clock, conflict_detection, merge, redaction, telemetry)

    def register(self, agent: str) -> bool:
        """Make ``agent`` one of the project's agents (grants may name it); whether it is new."""
        return self.backend.grants.register(self.realm, agent)

    def agents(self) -> list[str]:
        """The project's registered agents, sorted."""
        return self.backend.grants.agents(self.realm)

    def grant(
        self, pool: str, agent: str, access: Access | str = Access.READ, *, by: str = APPLICATION
    ) -> Grant:
        """Let ``agent`` read (or read and write) ``pool``; journaled first; return the grant.

        Granting again replaces the agent's access (``detail["replaced"]`` says what it was).
        An agent the project never registered raises
        :class:`~agent_engine.errors.UnknownAgentError`, and the journal records the abort.
        """
        namespace = pool_namespace(pool, self.project_id)
        given = Grant(self.realm, namespace, agent, access, by, self.clock())
        held = self.backend.grants.access(self.realm, namespace, given.agent)
        detail = {
            "agent": given.agent,
            "access": given.access.value,
            "by": given.granted_by,
            "replaced": None if held is None else held.value,
        }
        with self._audit.journal(AuditAction.GRANT, Tier.PROJECT, namespace, (), detail):
            self.backend.grants.grant(given)
        return given

    def revoke(self, pool: str, agent: str, *, by: str = APPLICATION) -> bool:
        """Take ``agent``'s access to ``pool`` away; journaled first; whether it had any."""
        namespace = pool_namespace(pool, self.project_id)
        agent = check_agent(agent)
        by = _validate.identifier("by", by)
        if self.backend.grants.access(self.realm, namespace, agent) is None:
            return False
        detail = {"agent": agent, "by": by}
        with self._audit.journal(AuditAction.REVOKE, Tier.PROJECT, namespace, (), detail):
            return self.backend.grants.revoke(namespace, agent) is not None

    def grants(self, pool: str) -> list[Grant]:
        """The pool's grants, by agent."""
        return self.backend.grants.of_pool(pool_namespace(pool, self.project_id))

    def open(self, pool: str, agent: str) -> PoolMemoryStore:
        """``agent``'s view of ``pool``: every call checks its grant first (see the module)."""
        return PoolMemoryStore(self, pool, agent)

    def journal(self, pool: str, limit: int | None = 100) -> list[AuditEvent]:
        """The pool's journal, newest first: its writes, and the grants given and revoked."""
        namespace = pool_namespace(pool, self.project_id)
        return self.backend.audit.events(namespace=namespace, limit=limit)

    def checkpoint(self, pool: str, label: str = "") -> Checkpoint:
        """Save the pool's memory as it is now, to roll back to (its grants are not memory)."""
        return self._scope(pool).checkpoint(label)

    def checkpoints(self, pool: str) -> list[Checkpoint]:
        """The pool's checkpoints, newest first."""
        return self._scope(pool).checkpoints()

    def rollback(self, pool: str, checkpoint_id: str) -> RestorePlan:
        """Make the pool's memory what the checkpoint saved; its grants stay as they are now.

        A rollback never undoes a revocation: access rules are not memory.
        """
        return self._scope(pool).rollback(checkpoint_id)

    @property
    def _audit(self) -> AuditLog:
        return AuditLog(self.backend.audit, clock=self.clock)

    def compact(self, pool: str, *, dry_run: bool = False) -> CompactionReport:
        """Age the pool as project memory ages: expired cache entries go to the archive too."""
        return self._scope(pool).compact(dry_run=dry_run)

    def _scope(self, pool: str, agent: str | None = None) -> _PoolScope:
        """The pool's store; one an agent writes through journals its writes as the agent's."""
        settings = self._settings
        return _PoolScope(
            self.backend,
            pool_namespace(pool, self.project_id),
            audit=AuditLog(self.backend.audit, clock=settings.clock, actor=agent),
            clock=settings.clock,
            conflict_detection=settings.conflict_detection,
            merge=settings.merge,
            redaction=settings.redaction,
            telemetry=settings.telemetry,
        )


class PoolMemoryStore:
    """One agent's view of one pool: the pool's memory, as far as the agent's grant goes.

    Reads need a ``read`` or ``write`` grant, writes a ``write`` grant; the grant is read from
    the backend at every call. Every item it writes records ``agent`` as its writer. What a
    method does beyond the check is the tier store's (:class:`~agent_engine.tiers.base.TierStore`).
    """

    def __init__(self, pools: Pools, pool: str, agent: str) -> None:
        self.agent = check_agent(agent)
        self.pool = pool
        self._pools = pools
        self._store = pools._scope(pool, self.agent)  # noqa: SLF001 - the pools' own factory
        self.namespace = self._store.namespace

    def __repr__(self) -> str:
        return f"PoolMemoryStore(namespace={self.namespace!r}, agent={self.agent!r})"

    # ------------------------------------------------------------------ access

    @property
    def access(self) -> Access | None:
        """The agent's grant on the pool as it stands now (``None``: no access)."""
        return self._pools.backend.grants.access(self._pools.realm, self.namespace, self.agent)

    def _allow(self, wanted: Access) -> TierStore:
        held = self.access
        if held is None or not held.allows(wanted):
            raise AccessDeniedError(self.agent, self.pool, wanted.value)
        return self._store

    def _read(self) -> TierStore:
        return self._allow(Access.READ)

    def _write(self) -> TierStore:
        return self._allow(Access.WRITE)

    def _signed(self, item: ContextItem) -> ContextItem:
        if not isinstance(item, ContextItem):
            raise ValidationError(
                f"item must be a ContextItem, got {type(item).__name__}", field="item", value=item
            )
        return item if item.agent == self.agent else attrs.evolve(item, agent=self.agent)

    # ------------------------------------------------------------------ reads

    def get(self, item_id: str) -> ContextItem | None:
        """The item of this pool with that id, or ``None``."""
        return self._read().get(item_id)

    def query(
        self,
        filters: FilterInput = None,
        *,
        limit: int | None = 100,
        order_by: str = "-timestamp",
        view: View | str = View.WORKING,
    ) -> list[ContextItem]:
        """The pool's items matching ``filters`` (``agent`` selects a writer's)."""
        return self._read().query(filters, limit=limit, order_by=order_by, view=view)

    def list_all(self) -> list[ContextItem]:
        """The pool's working set, newest first."""
        return self._read().list_all()

    def count(self, filters: FilterInput = None) -> int:
        """How many items of the working set match ``filters``."""
        return self._read().count(filters)

    def search(self, text: str, *, k: int = 10) -> list[SearchHit]:
        """The ``k`` items closest in meaning to ``text``."""
        return self._read().search(text, k=k)

    def history(self, item_id: str) -> list[ContextItem]:
        """Every version of an item, oldest first, each with the agent that wrote it."""
        return self._read().history(item_id)

    def read(self, key: str) -> ContextItem | None:
        """The blackboard slot ``key``'s current value (``None``: never written)."""
        found = self._read().query({"key": key}, limit=1)
        return found[0] if found else None

    def cached(self, tool: str, arguments: Any) -> ContextItem | None:
        """The cached result of ``tool`` called with ``arguments``, unless it expired."""
        found = self._read().query({"key": _cache_key(tool, arguments)}, limit=1)
        if not found or found[0].expired(self._store.clock()):
            return None
        return found[0]

    # ------------------------------------------------------------------ writes

    def new_item(self, kind: str, text: str, **fields: Any) -> ContextItem:
        """An item of this pool written by this agent, not yet stored (no I/O, no check).

        Whatever ``agent`` it is given, storing it through this view records this view's.
        """
        return self._store.new_item(kind, text, **{"agent": self.agent, **fields})

    def add(self, item: ContextItem) -> ContextItem:
        """Store ``item`` in the pool, as written by this agent."""
        return self._write().add(self._signed(item))

    def add_many(self, items: Iterable[ContextItem]) -> list[ContextItem]:
        """Store ``items`` in the pool, all or none, as written by this agent."""
        store = self._write()
        return store.add_many([self._signed(item) for item in items])

    def post(self, text: str, *, kind: str = _NOTE_KIND, importance: float = 0.5) -> ContextItem:
        """Add a note to the pool (a scratchpad's entry)."""
        return self.add(self.new_item(kind, text, importance=importance, tags=("pool", kind)))

    def put(self, key: str, text: str, *, importance: float = 0.6) -> ContextItem:
        """Set the blackboard slot ``key`` to ``text``: the slot's earlier value is superseded."""
        slot = _validate.identifier("key", key)
        return self.add(
            self.new_item("slot", text, importance=importance, key=slot, tags=("pool", "slot"))
        )

    def cache(
        self, tool: str, arguments: Any, output: Any, *, ttl: timedelta | None = None
    ) -> ContextItem:
        """Keep ``tool``'s ``output`` for ``arguments``, for the pool's agents, ``ttl`` long."""
        key = _cache_key(tool, arguments)
        text = output if isinstance(output, str) else json.dumps(output, sort_keys=True)
        expires = None if ttl is None else self._store.clock() + ttl
        item = self.new_item(
            _CACHE_KIND,
            f"{tool}: {text}",
            key=key,
            tags=("pool", "tool", tool),
            payload={"tool": tool, "arguments": arguments, "output": output},
            expires_at=expires,
        )
        return self.add(item)

    def update(self, item: ContextItem) -> ContextItem:
        """Replace an item's content: a new version, written by this agent."""
        return self._write().update(self._signed(item))

    def forget(self, *item_ids: str) -> int:
        """Erase items of the pool (and their history); return how many."""
        return self._write().forget(*item_ids)

    def archive(self, *item_ids: str) -> list[ContextItem]:
        """Move items to the pool's archive."""
        return self._write().archive(*item_ids)

    def restore(self, *item_ids: str) -> list[ContextItem]:
        """Bring archived items back to the pool's working set."""
        return self._write().restore(*item_ids)

    def pin(self, item_id: str) -> ContextItem:
        """Pin an item of the pool."""
        return self._write().pin(item_id)

    def unpin(self, item_id: str) -> ContextItem:
        """Unpin an item of the pool."""
        return self._write().unpin(item_id)

    def clear(self) -> int:
        """Remove every item of the pool (its grants stay)."""
        return self._write().clear()


def _cache_key(tool: str, arguments: Any) -> str:
    """The slot of one tool call's result: the tool and a digest of its arguments."""
    name = _validate.identifier("tool", tool, max_length=100)
    copied = _validate.json_value("arguments", arguments)
    digest = hashlib.sha256(
        json.dumps(copied, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()[:32]
    return f"tool:{name}:{digest}"

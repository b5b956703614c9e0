"""Who may use a shared pool: a realm's registered agents, and each pool's grants to them.

Several agents of one project share pools of memory (a scratchpad, a tool-result cache, a
blackboard: seed 003), each agent reading or writing only the pools it was granted
(:mod:`agent_engine.tiers.pools`). What that rests on is kept here, by every backend beside
its items (tables for SQL, ``ae_agents`` and ``ae_grants``; hashes and sets for Redis), so
every process sharing the memory enforces the same grants:

* **agents**, registered per *realm* (a project's namespace): a grant names a registered
  agent, so a typo is an error rather than a grant no one holds. Agents of one realm are
  not agents of another; registration is never undone here (revoking grants is how an agent
  loses access), so a check that an agent exists cannot be overtaken by its removal;
* **grants**, per pool (the pool's namespace): each agent's :class:`Access`, who granted it
  and when. Granting again replaces an agent's access; revoking removes it.

Grants are access rules, not memory: clearing a pool's items leaves them. Journaling each
grant and revocation is the pool layer's (it writes to the pool's audit journal first).
"""

from __future__ import annotations

import enum
import threading
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from agent_engine import _validate
from agent_engine.errors import BackendError, UnknownAgentError, ValidationError

__all__ = [
    "NO_GRANT_STORE",
    "Access",
    "Grant",
    "GrantStore",
    "InMemoryGrantStore",
    "check_agent",
    "check_pool",
    "check_realm",
]


class Access(enum.StrEnum):
    """What a grant lets an agent do with a pool: read it, or read and write it."""

    READ = "read"
    WRITE = "write"

    def allows(self, wanted: Access) -> bool:
        """Whether this access covers ``wanted`` (write covers read)."""
        return self is Access.WRITE or wanted is Access.READ


def check_realm(value: object) -> str:
    """A realm (a project's namespace) to register agents in."""
    return _validate.identifier("realm", value)


def check_pool(value: object) -> str:
    """A pool's namespace."""
    return _validate.identifier("pool", value)


def check_agent(value: object) -> str:
    """An agent's id: an identifier, as every stored id is."""
    return _validate.identifier("agent", value)


def _access(value: object) -> Access:
    return _validate.member("access", Access, value)


def _granted_by(value: object) -> str:
    return _validate.identifier("granted_by", value)


def _granted_at(value: object) -> datetime:
    return _validate.aware("granted_at", value)


@attrs.frozen
class Grant:
    """One agent's access to one pool, and who gave it when.

    ``realm`` is the project (its namespace) the agent is registered in, and the pool is of.
    """

    realm: str = attrs.field(converter=check_realm)
    pool: str = attrs.field(converter=check_pool)
    agent: str = attrs.field(converter=check_agent)
    access: Access = attrs.field(converter=_access)
    granted_by: str = attrs.field(converter=_granted_by)
    granted_at: datetime = attrs.field(converter=_granted_at)


@runtime_checkable
class GrantStore(Protocol):
    """**Protocol:** a realm's agents and each pool's grants (see the module).

    ``register`` adds an agent to a realm and says whether it is new. ``grant`` stores a
    grant (replacing the agent's earlier one) after checking, atomically, that its agent is
    registered in the grant's realm: else :class:`~agent_engine.errors.UnknownAgentError` and
    nothing changes. ``revoke`` removes an agent's grant and returns it (``None``: there was
    none). ``access`` is what the agent of ``realm`` may do with the pool (``None``: nothing,
    and nothing for a grant of another realm: a grant never reaches across projects, even
    one written by hand or read from a file).
    ``of_pool`` lists a pool's grants by agent; ``agents`` a realm's agents, sorted;
    ``realms`` and ``pools`` the realms with agents and the pools with grants, sorted (what
    copying a store reads).
    """

    def register(self, realm: str, agent: str) -> bool:
        """Register ``agent`` in ``realm``; whether it is new there."""
        ...

    def agents(self, realm: str) -> list[str]:
        """The realm's agents, sorted."""
        ...

    def grant(self, grant: Grant) -> None:
        """Store ``grant`` (its agent registered in its realm), replacing an earlier one."""
        ...

    def revoke(self, pool: str, agent: str) -> Grant | None:
        """Remove the agent's grant on the pool; the grant removed, or ``None``."""
        ...

    def access(self, realm: str, pool: str, agent: str) -> Access | None:
        """What ``agent`` of ``realm`` may do with ``pool`` (``None``: nothing)."""
        ...

    def of_pool(self, pool: str) -> list[Grant]:
        """The pool's grants, by agent."""
        ...

    def realms(self) -> list[str]:
        """The realms that have agents, sorted."""
        ...

    def pools(self) -> list[str]:
        """The pools that have grants, sorted."""
        ...


def check_grant(grant: object) -> Grant:
    """``grant``'s argument, checked."""
    if not isinstance(grant, Grant):
        raise ValidationError(
            f"grant must be a Grant, got {type(grant).__name__}", field="grant", value=grant
        )
    return grant


def unknown_agent(grant: Grant) -> UnknownAgentError:
    """The error a grant to an agent its realm does not know raises."""
    return UnknownAgentError(grant.agent, realm=grant.realm)


class InMemoryGrantStore:
    """Implements :class:`GrantStore` in the process, for items that live there too."""

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._agents: dict[str, set[str]] = {}
        self._grants: dict[str, dict[str, Grant]] = {}

    def register(self, realm: str, agent: str) -> bool:
        """Register ``agent`` in ``realm``; whether it is new there."""
        realm, agent = check_realm(realm), check_agent(agent)
        with self._lock:
            known = self._agents.setdefault(realm, set())
            new = agent not in known
            known.add(agent)
            return new

    def agents(self, realm: str) -> list[str]:
        """The realm's agents, sorted."""
        realm = check_realm(realm)
        with self._lock:
            return sorted(self._agents.get(realm, ()))

    def grant(self, grant: Grant) -> None:
        """Store ``grant``, its agent registered in its realm."""
        grant = check_grant(grant)
        with self._lock:
            if grant.agent not in self._agents.get(grant.realm, ()):
                raise unknown_agent(grant)
            self._grants.setdefault(grant.pool, {})[grant.agent] = grant

    def revoke(self, pool: str, agent: str) -> Grant | None:
        """Remove the agent's grant on the pool; the grant removed, or ``None``."""
        pool, agent = check_pool(pool), check_agent(agent)
        with self._lock:
            held = self._grants.get(pool, {})
            removed = held.pop(agent, None)
            if not held:
                self._grants.pop(pool, None)
            return removed

    def access(self, realm: str, pool: str, agent: str) -> Access | None:
        """What ``agent`` of ``realm`` may do with ``pool``."""
        realm, pool, agent = check_realm(realm), check_pool(pool), check_agent(agent)
        with self._lock:
            found = self._grants.get(pool, {}).get(agent)
            return None if found is None or found.realm != realm else found.access

    def of_pool(self, pool: str) -> list[Grant]:
        """The pool's grants, by agent."""
        pool = check_pool(pool)
        with self._lock:
            held = self._grants.get(pool, {})
            return [held[agent] for agent in sorted(held)]

    def realms(self) -> list[str]:
        """The realms that have agents, sorted."""
        with self._lock:
            return sorted(realm for realm, agents in self._agents.items() if agents)

    def pools(self) -> list[str]:
        """The pools that have grants, sorted."""
        with self._lock:
            return sorted(self._grants)


class _NoGrantStore:
    """The grants of a backend that keeps none: no agents, no grants, and adding is refused."""

    def register(self, realm: str, agent: str) -> bool:
        """Refused: nothing would keep it."""
        check_realm(realm), check_agent(agent)
        raise BackendError("this backend keeps no agents or grants", backend="grants")

    def agents(self, realm: str) -> list[str]:
        """None."""
        check_realm(realm)
        return []

    def grant(self, grant: Grant) -> None:
        """Refused: nothing would keep it."""
        check_grant(grant)
        raise BackendError("this backend keeps no agents or grants", backend="grants")

    def revoke(self, pool: str, agent: str) -> Grant | None:
        """Nothing to revoke."""
        check_pool(pool), check_agent(agent)
        return None

    def access(self, realm: str, pool: str, agent: str) -> Access | None:
        """None: no grant is kept."""
        check_realm(realm), check_pool(pool), check_agent(agent)
        return None

    def of_pool(self, pool: str) -> list[Grant]:
        """None."""
        check_pool(pool)
        return []

    def realms(self) -> list[str]:
        """None."""
        return []

    def pools(self) -> list[str]:
        """None."""
        return []


NO_GRANT_STORE: GrantStore = _NoGrantStore()
"""What ``BaseBackend.grants`` gives when a backend set no grant store."""

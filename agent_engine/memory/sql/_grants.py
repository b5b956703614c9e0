"""Agents and pool grants as tables (``ae_agents``, ``ae_grants``), beside the items.

A grant is written in the transaction that checks its agent is registered: agents are never
unregistered, so the check cannot be overtaken. Both writes are upserts (``ON CONFLICT``), so
two processes registering one agent, or granting one agent, at once leave one row.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from agent_engine.memory.grants import (
    Access,
    Grant,
    check_agent,
    check_grant,
    check_pool,
    check_realm,
    unknown_agent,
)
from agent_engine.memory.sql._audit import Runner
from agent_engine.memory.sql._meta import upsert_into
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import agents, grants

__all__ = ["SQLGrantStore"]


def _grant(row: Any) -> Grant:
    return Grant(
        realm=row.realm,
        pool=row.pool,
        agent=row.agent,
        access=Access(row.access),
        granted_by=row.granted_by,
        granted_at=decode_time(row.granted_at),
    )


def _registered(connection: sa.Connection, realm: str, agent: str) -> bool:
    query = sa.select(sa.literal(1)).where(agents.c.realm == realm, agents.c.agent == agent)
    return connection.execute(query).first() is not None


class SQLGrantStore:
    """Implements :class:`~agent_engine.memory.grants.GrantStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def register(self, realm: str, agent: str) -> bool:
        """Register ``agent`` in ``realm``; whether it is new there."""
        realm, agent = check_realm(realm), check_agent(agent)

        def work(connection: sa.Connection) -> bool:
            statement = upsert_into(connection)(agents).values(realm=realm, agent=agent)
            added = statement.on_conflict_do_nothing().returning(agents.c.agent)
            return connection.execute(added).first() is not None

        return self._write(work)

    def agents(self, realm: str) -> list[str]:
        """The realm's agents, sorted."""
        realm = check_realm(realm)
        query = sa.select(agents.c.agent).where(agents.c.realm == realm).order_by(agents.c.agent)
        return list(self._read(lambda connection: connection.execute(query).scalars().all()))

    def grant(self, grant: Grant) -> None:
        """Store ``grant``, its agent registered in its realm."""
        grant = check_grant(grant)
        row = {
            "realm": grant.realm,
            "pool": grant.pool,
            "agent": grant.agent,
            "access": grant.access.value,
            "granted_by": grant.granted_by,
            "granted_at": encode_time(grant.granted_at),
        }

        def work(connection: sa.Connection) -> None:
            if not _registered(connection, grant.realm, grant.agent):
                raise unknown_agent(grant)
            statement = upsert_into(connection)(grants).values(**row)
            connection.execute(
                statement.on_conflict_do_update(
                    index_elements=[grants.c.pool, grants.c.agent],
                    set_={k: v for k, v in row.items() if k not in ("pool", "agent")},
                )
            )

        self._write(work)

    def revoke(self, pool: str, agent: str) -> Grant | None:
        """Remove the agent's grant on the pool; the grant removed, or ``None``."""
        pool, agent = check_pool(pool), check_agent(agent)
        mine = (grants.c.pool == pool, grants.c.agent == agent)

        def work(connection: sa.Connection) -> Grant | None:
            row = connection.execute(sa.select(grants).where(*mine)).first()
            if row is None:
                return None
            connection.execute(grants.delete().where(*mine))
            return _grant(row)

        return self._write(work)

    def access(self, realm: str, pool: str, agent: str) -> Access | None:
        """What ``agent`` of ``realm`` may do with ``pool``."""
        realm, pool, agent = check_realm(realm), check_pool(pool), check_agent(agent)
        query = sa.select(grants.c.access).where(
            grants.c.pool == pool, grants.c.agent == agent, grants.c.realm == realm
        )
        found = self._read(lambda connection: connection.execute(query).scalar())
        return None if found is None else Access(found)

    def of_pool(self, pool: str) -> list[Grant]:
        """The pool's grants, by agent."""
        pool = check_pool(pool)
        query = sa.select(grants).where(grants.c.pool == pool).order_by(grants.c.agent)
        rows = self._read(lambda connection: connection.execute(query).all())
        return [_grant(row) for row in rows]

    def realms(self) -> list[str]:
        """The realms that have agents, sorted."""
        query = sa.select(agents.c.realm).distinct().order_by(agents.c.realm)
        return list(self._read(lambda connection: connection.execute(query).scalars().all()))

    def pools(self) -> list[str]:
        """The pools that have grants, sorted."""
        query = sa.select(grants.c.pool).distinct().order_by(grants.c.pool)
        return list(self._read(lambda connection: connection.execute(query).scalars().all()))

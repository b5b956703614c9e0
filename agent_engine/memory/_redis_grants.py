"""Agents and pool grants in the Redis backend: a set of agents per realm, a hash per pool.

A grant is written in a transaction that watches the realm's agents and checks its agent is
there, so a grant never names an agent no one registered. Grants are access rules, not
memory: a namespace's expiry (the backend's ``ttl``) leaves them.
"""

from __future__ import annotations

from typing import Any

from agent_engine.memory._redis_layout import Finish, Keys, Pipe, Runner, decode_json, encode_json
from agent_engine.memory.grants import (
    Access,
    Grant,
    check_agent,
    check_grant,
    check_pool,
    check_realm,
    unknown_agent,
)
from agent_engine.serde import from_dict, to_dict

__all__ = ["RedisGrantStore"]


def _grant(text: str) -> Grant:
    return from_dict(Grant, decode_json(text))


class RedisGrantStore:
    """Implements :class:`~agent_engine.memory.grants.GrantStore` in the backend's Redis."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self._runner = runner
        self._keys = keys

    def register(self, realm: str, agent: str) -> bool:
        """Register ``agent`` in ``realm``; whether it is new there."""
        realm, agent = check_realm(realm), check_agent(agent)

        def plan(pipe: Pipe) -> Finish[bool]:
            pipe.multi()
            pipe.sadd(self._keys.agents(realm), agent)
            pipe.sadd(self._keys.realms, realm)
            return lambda results: bool(results[0])

        return self._runner.transact([], plan)

    def agents(self, realm: str) -> list[str]:
        """The realm's agents, sorted."""
        key = self._keys.agents(check_realm(realm))
        return sorted(self._runner.read(lambda client: client.smembers(key)))

    def grant(self, grant: Grant) -> None:
        """Store ``grant``, its agent registered in its realm."""
        grant = check_grant(grant)
        agents = self._keys.agents(grant.realm)

        def plan(pipe: Pipe) -> Finish[None]:
            if not pipe.sismember(agents, grant.agent):
                raise unknown_agent(grant)
            pipe.multi()
            pipe.hset(self._keys.grants(grant.pool), grant.agent, encode_json(to_dict(grant)))
            pipe.sadd(self._keys.granted, grant.pool)
            return lambda _: None

        self._runner.transact([agents], plan)

    def revoke(self, pool: str, agent: str) -> Grant | None:
        """Remove the agent's grant on the pool; the grant removed, or ``None``."""
        pool, agent = check_pool(pool), check_agent(agent)
        key = self._keys.grants(pool)

        def plan(pipe: Pipe) -> Finish[Grant | None]:
            held = pipe.hget(key, agent)
            if held is None:
                pipe.multi()
                return lambda _: None
            last = pipe.hlen(key) <= 1
            pipe.multi()
            pipe.hdel(key, agent)
            if last:
                pipe.srem(self._keys.granted, pool)
            return lambda _: _grant(held)

        return self._runner.transact([key], plan)

    def access(self, realm: str, pool: str, agent: str) -> Access | None:
        """What ``agent`` of ``realm`` may do with ``pool``."""
        realm, agent = check_realm(realm), check_agent(agent)
        key = self._keys.grants(check_pool(pool))
        held = self._runner.read(lambda client: client.hget(key, agent))
        found = None if held is None else _grant(held)
        return None if found is None or found.realm != realm else found.access

    def of_pool(self, pool: str) -> list[Grant]:
        """The pool's grants, by agent."""
        key = self._keys.grants(check_pool(pool))
        held: dict[str, Any] = self._runner.read(lambda client: client.hgetall(key))
        return [_grant(held[agent]) for agent in sorted(held)]

    def realms(self) -> list[str]:
        """The realms that have agents, sorted."""
        return sorted(self._runner.read(lambda client: client.smembers(self._keys.realms)))

    def pools(self) -> list[str]:
        """The pools that have grants, sorted."""
        return sorted(self._runner.read(lambda client: client.smembers(self._keys.granted)))

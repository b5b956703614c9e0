"""Forks in the Redis backend: one hash of records, a set of children and of hidden ids each.

``forks`` maps each forked scope (``<tier>:<namespace>``) to its record as JSON; each scope's
attached forks are a set (what ``children`` reads without visiting every record), and each
attached fork's hidden ids another. Every write watches the records' hash and reads the
record before it changes anything, so recording a scope twice, or hiding ids while the fork
detaches or is dropped, cannot interleave: ``EXEC`` applies all of one write or none of it.
Lineage is not memory: a namespace's expiry (the backend's ``ttl``) leaves it; an erase
unhides its ids from every attached fork (the records' hash lists them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from agent_engine.memory._redis_layout import Finish, Keys, Pipe, Runner, decode_json, encode_json
from agent_engine.memory.lineage import (
    Fork,
    check_hidden,
    check_record,
    check_scope,
    check_unhidden,
    fork_taken,
)
from agent_engine.models import Tier
from agent_engine.serde import from_dict, to_dict

__all__ = ["RedisLineageStore"]

_CHUNK = 500
"""Hidden ids added per ``SADD`` (or removed per ``SREM``): a fork may hide a large scope."""


def _fork(text: str) -> Fork:
    return from_dict(Fork, decode_json(text))


class RedisLineageStore:
    """Implements :class:`~agent_engine.memory.lineage.LineageStore` in the backend's Redis."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self._runner = runner
        self._keys = keys

    def record(self, fork: Fork) -> None:
        """Store a new fork record (as given: a detached one stays detached)."""
        fork = check_record(fork)
        records, field = self._keys.forks, self._keys.fork_field(fork.namespace, fork.tier.value)

        def plan(pipe: Pipe) -> Finish[None]:
            if pipe.hexists(records, field):
                raise fork_taken(fork)
            pipe.multi()
            pipe.hset(records, field, encode_json(to_dict(fork)))
            if not fork.detached:
                pipe.sadd(self._keys.fork_children(fork.parent, fork.tier.value), fork.namespace)
            return lambda _: None

        self._runner.transact([records], plan)

    def get(self, namespace: str, tier: Tier) -> Fork | None:
        """The scope's fork record, or ``None``."""
        namespace, tier = check_scope(namespace, tier)
        field = self._keys.fork_field(namespace, tier.value)
        text = self._runner.read(lambda client: client.hget(self._keys.forks, field))
        return None if text is None else _fork(text)

    def children(self, namespace: str, tier: Tier) -> list[Fork]:
        """The attached forks of the scope, by namespace."""
        namespace, tier = check_scope(namespace, tier)
        key = self._keys.fork_children(namespace, tier.value)

        def work(client: Any) -> list[str | None]:
            names = sorted(client.smembers(key))
            fields = [self._keys.fork_field(name, tier.value) for name in names]
            return list(client.hmget(self._keys.forks, fields)) if fields else []

        # A detach between the two reads leaves a record that says so: it is not a child.
        found = [_fork(text) for text in self._runner.read(work) if text is not None]
        return [fork for fork in found if not fork.detached]

    def all(self) -> list[Fork]:
        """Every fork record, by tier and namespace."""
        held: dict[str, str] = self._runner.read(lambda client: client.hgetall(self._keys.forks))
        return sorted(map(_fork, held.values()), key=lambda f: (f.tier.value, f.namespace))

    def detach(self, namespace: str, tier: Tier) -> bool:
        """Mark the fork detached, forgetting its hidden ids; whether it was attached."""
        namespace, tier = check_scope(namespace, tier)
        records, field = self._keys.forks, self._keys.fork_field(namespace, tier.value)

        def plan(pipe: Pipe) -> Finish[bool]:
            text = pipe.hget(records, field)
            fork = None if text is None else _fork(text)
            pipe.multi()
            if fork is None or fork.detached:
                return lambda _: False
            detached = attrs.evolve(fork, detached=True)
            pipe.hset(records, field, encode_json(to_dict(detached)))
            pipe.delete(self._keys.fork_hidden(namespace, tier.value))
            pipe.srem(self._keys.fork_children(fork.parent, tier.value), namespace)
            return lambda _: True

        return self._runner.transact([records], plan)

    def hide(self, namespace: str, tier: Tier, item_ids: Sequence[str]) -> None:
        """Add ``item_ids`` to the attached fork's hidden ids (unknown or detached: nothing)."""
        namespace, tier = check_scope(namespace, tier)
        ids = check_hidden(item_ids)
        if not ids:
            return
        records, field = self._keys.forks, self._keys.fork_field(namespace, tier.value)
        key = self._keys.fork_hidden(namespace, tier.value)

        def plan(pipe: Pipe) -> Finish[None]:
            text = pipe.hget(records, field)
            attached = text is not None and not _fork(text).detached
            pipe.multi()
            if attached:
                for start in range(0, len(ids), _CHUNK):
                    pipe.sadd(key, *ids[start : start + _CHUNK])
            return lambda _: None

        self._runner.transact([records], plan)

    def hidden(self, namespace: str, tier: Tier) -> frozenset[str]:
        """The fork's hidden ids (none if it is detached or not a fork)."""
        namespace, tier = check_scope(namespace, tier)
        key = self._keys.fork_hidden(namespace, tier.value)
        return frozenset(self._runner.read(lambda client: client.smembers(key)))

    def unhide(self, item_ids: Sequence[str]) -> int:
        """Forget ``item_ids`` wherever a fork hides them; how many entries went (one write)."""
        ids = check_unhidden(item_ids)
        if not ids:
            return 0
        records = self._keys.forks

        def plan(pipe: Pipe) -> Finish[int]:
            held: dict[str, str] = pipe.hgetall(records)
            attached = [fork for fork in map(_fork, held.values()) if not fork.detached]
            pipe.multi()
            for fork in attached:
                key = self._keys.fork_hidden(fork.namespace, fork.tier.value)
                for start in range(0, len(ids), _CHUNK):
                    pipe.srem(key, *ids[start : start + _CHUNK])
            return sum

        return self._runner.transact([records], plan)

    def drop(self, namespace: str, tier: Tier) -> bool:
        """Forget the scope's fork record and its hidden ids; whether there was one (one write)."""
        namespace, tier = check_scope(namespace, tier)
        records, field = self._keys.forks, self._keys.fork_field(namespace, tier.value)

        def plan(pipe: Pipe) -> Finish[bool]:
            text = pipe.hget(records, field)
            pipe.multi()
            if text is None:
                return lambda _: False
            pipe.hdel(records, field)
            pipe.srem(self._keys.fork_children(_fork(text).parent, tier.value), namespace)
            pipe.delete(self._keys.fork_hidden(namespace, tier.value))
            return lambda _: True

        return self._runner.transact([records], plan)

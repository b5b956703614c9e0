"""Each namespace's aliases in the Redis backend: a hash per namespace, a set of namespaces.

A write watches the namespace's hash, reads it, checks the limits and writes in one
``MULTI``/``EXEC``, run again if another process changed the hash meanwhile, so the limits
hold across processes. Aliases are user-edited words, not memory: a namespace's expiry
(the backend's ``ttl``) leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_engine.memory._redis_layout import Finish, Keys, Pipe, Runner, decode_json, encode_json
from agent_engine.memory.aliases import check_add, check_namespace, check_remove, merged, ordered

__all__ = ["RedisAliasStore"]


class RedisAliasStore:
    """Implements :class:`~agent_engine.memory.aliases.AliasStore` in the backend's Redis."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self._runner = runner
        self._keys = keys

    def add(self, namespace: str, term: str, expansions: Sequence[str]) -> tuple[str, ...]:
        """Give ``term`` these expansions too; return all of its expansions."""
        namespace, key, added = check_add(namespace, term, expansions)
        hash_key = self._keys.aliases(namespace)

        def plan(pipe: Pipe) -> Finish[tuple[str, ...]]:
            terms = pipe.hlen(hash_key)
            held = pipe.hget(hash_key, key)
            result = merged(key, [] if held is None else decode_json(held), added, terms=terms)
            pipe.multi()
            pipe.hset(hash_key, key, encode_json(list(result)))
            pipe.sadd(self._keys.aliased, namespace)
            return lambda _: result

        return self._runner.transact([hash_key], plan)

    def remove(self, namespace: str, term: str, expansions: Sequence[str] | None = None) -> int:
        """Take expansions (``None``: all) from ``term``; return how many were removed."""
        namespace, key, taken = check_remove(namespace, term, expansions)
        hash_key = self._keys.aliases(namespace)

        def plan(pipe: Pipe) -> Finish[int]:
            text = pipe.hget(hash_key, key)
            held: list[str] = [] if text is None else decode_json(text)
            kept = [] if taken is None else [e for e in held if e not in taken]
            last = not kept and pipe.hlen(hash_key) <= 1
            pipe.multi()
            if kept:
                pipe.hset(hash_key, key, encode_json(kept))
            elif held:
                pipe.hdel(hash_key, key)
                if last:
                    pipe.srem(self._keys.aliased, namespace)
            return lambda _: len(held) - len(kept)

        return self._runner.transact([hash_key], plan)

    def of_namespace(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """A namespace's terms and their expansions."""
        hash_key = self._keys.aliases(check_namespace(namespace))
        values: dict[str, Any] = self._runner.read(lambda client: client.hgetall(hash_key))
        return {term: ordered(decode_json(values[term])) for term in sorted(values)}

    def namespaces(self) -> list[str]:
        """The namespaces that hold aliases."""
        return sorted(self._runner.read(lambda client: client.smembers(self._keys.aliased)))

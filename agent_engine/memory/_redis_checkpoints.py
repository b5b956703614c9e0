"""Checkpoints in the Redis backend: two hashes per namespace, and where each id lives.

``k:<namespace>`` maps each checkpoint's id to its record (JSON) and ``s:<namespace>`` to its
saved state, apart, so that listing a scope's checkpoints reads records of a few hundred bytes
rather than every state whole (a state holds all its scope's items). ``checkpoints`` maps
every id to its namespace, so one is found by id in two reads. Like aliases, checkpoints are
not memory: a namespace's expiry (the backend's ``ttl``) leaves them.

Stores written before the split hold record and state together in ``k:`` (one JSON object
with both); they are read as they are, and go as they are deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_engine.errors import ValidationError
from agent_engine.memory._redis_layout import Finish, Keys, Pipe, Runner, decode_json, encode_json
from agent_engine.memory.checkpoints import (
    Checkpoint,
    check_checkpoint_id,
    check_save,
    check_scope,
    mentions,
    newest_first,
)
from agent_engine.models import Tier
from agent_engine.serde import from_dict, to_dict

__all__ = ["RedisCheckpointStore"]


class RedisCheckpointStore:
    """Implements :class:`~agent_engine.memory.checkpoints.CheckpointStore` in Redis."""

    def __init__(self, runner: Runner, keys: Keys) -> None:
        self._runner = runner
        self._keys = keys

    def save(self, checkpoint: Checkpoint, data: str) -> None:
        """Store a new checkpoint with its data (one transaction)."""
        checkpoint, data = check_save(checkpoint, data)
        homes, key = self._keys.checkpoint_homes, self._keys.checkpoints(checkpoint.namespace)

        def plan(pipe: Pipe) -> Finish[None]:
            if pipe.hexists(homes, checkpoint.id):
                raise ValidationError(
                    f"a checkpoint with id {checkpoint.id!r} is saved already",
                    field="id",
                    value=checkpoint.id,
                )
            pipe.multi()
            pipe.hset(key, checkpoint.id, encode_json(to_dict(checkpoint)))
            pipe.hset(self._keys.saved(checkpoint.namespace), checkpoint.id, data)
            pipe.hset(homes, checkpoint.id, checkpoint.namespace)
            return lambda _: None

        self._runner.transact([homes], plan)

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""
        checkpoint_id = check_checkpoint_id(checkpoint_id)

        def work(client: Any) -> str | None:
            home = client.hget(self._keys.checkpoint_homes, checkpoint_id)
            return (
                None if home is None else client.hget(self._keys.checkpoints(home), checkpoint_id)
            )

        text = self._runner.read(work)
        return None if text is None else _record(text)

    def data(self, checkpoint_id: str) -> str | None:
        """The saved memory of a checkpoint, or ``None``."""
        checkpoint_id = check_checkpoint_id(checkpoint_id)

        def work(client: Any) -> str | None:
            home = client.hget(self._keys.checkpoint_homes, checkpoint_id)
            if home is None:
                return None
            data = client.hget(self._keys.saved(home), checkpoint_id)
            if data is not None:
                return str(data)
            text = client.hget(self._keys.checkpoints(home), checkpoint_id)  # earlier layout
            return None if text is None else _earlier_data(text)

        return self._runner.read(work)

    def of_scope(self, namespace: str, tier: Tier) -> list[Checkpoint]:
        """One scope's checkpoints, newest first."""
        namespace, tier = check_scope(namespace, tier)
        key = self._keys.checkpoints(namespace)
        texts = self._runner.read(lambda client: client.hvals(key))
        return newest_first([c for c in map(_record, texts) if c.tier is tier])

    def all(self) -> list[Checkpoint]:
        """Every scope's checkpoints, newest first."""

        def work(client: Any) -> list[str]:
            homes = client.hgetall(self._keys.checkpoint_homes)
            texts: list[str] = []
            for namespace in sorted(set(homes.values())):
                texts += client.hvals(self._keys.checkpoints(namespace))
            return texts

        return newest_first([_record(text) for text in self._runner.read(work)])

    def delete(self, checkpoint_id: str) -> bool:
        """Forget a checkpoint; whether there was one."""
        checkpoint_id = check_checkpoint_id(checkpoint_id)
        homes = self._keys.checkpoint_homes

        def plan(pipe: Pipe) -> Finish[bool]:
            home = pipe.hget(homes, checkpoint_id)
            pipe.multi()
            if home is None:
                return lambda _: False
            pipe.hdel(self._keys.checkpoints(home), checkpoint_id)
            pipe.hdel(self._keys.saved(home), checkpoint_id)
            pipe.hdel(homes, checkpoint_id)
            return lambda _: True

        return self._runner.transact([homes], plan)

    def drop_holding(self, item_ids: Sequence[str]) -> int:
        """Delete the checkpoints naming any of ``item_ids``; how many.

        Every checkpoint's saved state is read, a namespace at a time, in the transaction that
        deletes those naming an id.
        """
        sought = mentions(item_ids)
        if not sought:
            return 0
        homes_key = self._keys.checkpoint_homes

        def plan(pipe: Pipe) -> Finish[int]:
            homes: dict[str, str] = pipe.hgetall(homes_key)
            doomed: dict[str, str] = {}
            for namespace in sorted(set(homes.values())):
                for checkpoint_id, data in self._states(pipe, namespace).items():
                    if any(m in data for m in sought):
                        doomed[checkpoint_id] = namespace
            pipe.multi()
            for checkpoint_id, namespace in doomed.items():
                pipe.hdel(self._keys.checkpoints(namespace), checkpoint_id)
                pipe.hdel(self._keys.saved(namespace), checkpoint_id)
                pipe.hdel(homes_key, checkpoint_id)
            return lambda _: len(doomed)

        return self._runner.transact([homes_key], plan)

    def _states(self, pipe: Pipe, namespace: str) -> dict[str, str]:
        """Each of a namespace's checkpoints' saved state, by id (earlier layout's too)."""
        states: dict[str, str] = dict(pipe.hgetall(self._keys.saved(namespace)))
        if len(states) < pipe.hlen(self._keys.checkpoints(namespace)):
            for checkpoint_id, text in pipe.hgetall(self._keys.checkpoints(namespace)).items():
                if checkpoint_id not in states and (data := _earlier_data(text)) is not None:
                    states[checkpoint_id] = data
        return states


def _record(text: str) -> Checkpoint:
    """A checkpoint's record from its ``k:`` field (a record, or the earlier record and state)."""
    stored = decode_json(text)
    return from_dict(Checkpoint, stored.get("record", stored))


def _earlier_data(text: str) -> str | None:
    """The saved state an earlier layout kept in the ``k:`` field, or ``None`` (a record)."""
    stored = decode_json(text)
    return str(stored["data"]) if "record" in stored else None

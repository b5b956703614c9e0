"""The Redis backend's audit journal and conflict store, kept in Redis beside the items.

Both are per namespace (a hash ``a:<namespace>`` of events, ``c:<namespace>`` of conflicts),
so a namespace's expiry takes its journal and conflicts with its items, and every process
sharing the store sees the same records. Reads load the namespace's hash (or every
namespace's, for a question about the whole store) and filter in Python: task memory is
small per namespace, which is what this backend is for.

Removing items (delete, clear, erase) removes the conflicts naming them, and an erase redacts
the journal, in the backend's own transaction: :meth:`RedisConflictStore.plan_discard` and
:meth:`RedisAuditStore.plan_redact` read and watch what they will change, and return the
writes to queue once the transaction starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from agent_engine.errors import ItemNotFoundError, ValidationError
from agent_engine.memory._redis_layout import (
    Finish,
    Keys,
    Pipe,
    Runner,
    decode_json,
    encode_json,
    now_ms,
)
from agent_engine.memory.audit import check_namespace, check_window, redact_event, wanted_actions
from agent_engine.memory.conflicts import (
    Conflict,
    check_id,
    check_item_ids,
    check_record,
    check_resolve,
    check_scope_read,
    newest_first,
)
from agent_engine.models import AuditAction, AuditEvent, Tier
from agent_engine.serde import from_dict, to_dict

__all__ = ["Queue", "RedisAuditStore", "RedisConflictStore"]

Queue = Callable[[Pipe], None]
"""Writes to queue in a transaction already started (``MULTI`` sent)."""


@attrs.define
class _Shared:
    """What both stores need: the runner, the keys, and the namespace expiry (ms or ``None``)."""

    runner: Runner
    keys: Keys
    ttl_ms: int | None

    def namespaces(self, pipe: Any) -> list[str]:
        """Every namespace written, read through ``pipe`` or the client."""
        return sorted(pipe.smembers(self.keys.namespaces))

    def expire(self, pipe: Pipe, namespace: str) -> None:
        """Queue the namespace's record hashes' expiry, when the store has one."""
        if self.ttl_ms is not None:
            at = now_ms() + self.ttl_ms
            pipe.pexpireat(self.keys.audit(namespace), at)
            pipe.pexpireat(self.keys.conflicts(namespace), at)


class RedisAuditStore:
    """Implements :class:`~agent_engine.memory.audit.AuditStore` in the backend's Redis."""

    def __init__(self, runner: Runner, keys: Keys, ttl_ms: int | None) -> None:
        self._shared = _Shared(runner, keys, ttl_ms)

    def append(self, event: AuditEvent) -> None:
        """Add one event to its namespace's journal (one transaction)."""
        if not isinstance(event, AuditEvent):
            raise ValidationError(f"expected AuditEvent, got {type(event).__name__}", value=event)
        keys = self._shared.keys

        def plan(pipe: Pipe) -> Finish[None]:
            pipe.multi()
            pipe.sadd(keys.namespaces, event.namespace)
            pipe.hset(keys.audit(event.namespace), event.id, encode_json(to_dict(event)))
            self._shared.expire(pipe, event.namespace)
            return lambda _: None

        self._shared.runner.transact([], plan)

    def _load(self, namespace: str | None) -> list[AuditEvent]:
        keys = self._shared.keys

        def work(client: Any) -> list[str]:
            names = [namespace] if namespace is not None else self._shared.namespaces(client)
            texts: list[str] = []
            for name in names:
                texts.extend(client.hvals(keys.audit(name)))
            return texts

        return [from_dict(AuditEvent, decode_json(text)) for text in self._shared.runner.read(work)]

    def events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        actions: Iterable[AuditAction] | None = None,
        limit: int | None = 100,
    ) -> list[AuditEvent]:
        """Return matching events, newest first (ties by id, newest id first)."""
        check_window(since, until, limit)
        check_namespace(namespace)
        wanted = wanted_actions(actions)
        found = [
            event
            for event in self._load(namespace)
            if (since is None or event.at >= since)
            and (until is None or event.at < until)
            and (wanted is None or event.action in wanted)
        ]
        found.sort(key=lambda event: (event.at, event.id), reverse=True)
        return found if limit is None else found[:limit]

    def count(self, *, namespace: str | None = None) -> int:
        """Count events (in one namespace, or all)."""
        check_namespace(namespace)
        keys = self._shared.keys

        def work(client: Any) -> int:
            names = [namespace] if namespace is not None else self._shared.namespaces(client)
            return sum(int(client.hlen(keys.audit(name))) for name in names)

        return self._shared.runner.read(work)

    def trim(self, *, keep_latest: int | None = None, older_than: datetime | None = None) -> int:
        """Drop the oldest events beyond ``keep_latest`` or before ``older_than``."""
        check_window(older_than, None, keep_latest)
        keys = self._shared.keys

        def plan(pipe: Pipe) -> Finish[int]:
            names = self._shared.namespaces(pipe)
            pipe.watch(*(keys.audit(name) for name in names))
            events: list[AuditEvent] = []
            for name in names:
                events.extend(
                    from_dict(AuditEvent, decode_json(text))
                    for text in pipe.hvals(keys.audit(name))
                )
            ordered = sorted(events, key=lambda event: (event.at, event.id))
            kept = ordered
            if older_than is not None:
                kept = [event for event in kept if event.at >= older_than]
            if keep_latest is not None:
                kept = kept[len(kept) - keep_latest :] if keep_latest else []
            keep = {event.id for event in kept}
            doomed = [event for event in ordered if event.id not in keep]
            pipe.multi()
            for event in doomed:
                pipe.hdel(keys.audit(event.namespace), event.id)
            return lambda _: len(doomed)

        return self._shared.runner.transact([keys.namespaces], plan)

    def redact(self, tokens: Mapping[str, str]) -> int:
        """Replace each id of ``tokens`` by its token in every event that names it."""
        if not tokens:
            return 0

        def plan(pipe: Pipe) -> Finish[int]:
            changed, queue = self.plan_redact(pipe, tokens)
            pipe.multi()
            queue(pipe)
            return lambda _: changed

        return self._shared.runner.transact([self._shared.keys.namespaces], plan)

    def plan_redact(self, pipe: Pipe, tokens: Mapping[str, str]) -> tuple[int, Queue]:
        """Watch and read the journal; return how many events change and the writes that do it."""
        keys = self._shared.keys
        names = self._shared.namespaces(pipe)
        if names:
            pipe.watch(*(keys.audit(name) for name in names))
        changed: list[AuditEvent] = []
        for name in names:
            for text in pipe.hvals(keys.audit(name)):
                event = from_dict(AuditEvent, decode_json(text))
                redacted = redact_event(event, tokens)
                if redacted is not event:
                    changed.append(redacted)

        def queue(pipe: Pipe) -> None:
            for event in changed:
                pipe.hset(keys.audit(event.namespace), event.id, encode_json(to_dict(event)))

        return len(changed), queue


class RedisConflictStore:
    """Implements :class:`~agent_engine.memory.conflicts.ConflictStore` in the backend's Redis."""

    def __init__(self, runner: Runner, keys: Keys, ttl_ms: int | None) -> None:
        self._shared = _Shared(runner, keys, ttl_ms)

    def record(self, conflicts: Sequence[Conflict]) -> None:
        """Store new conflicts, all or none, in one transaction that sees the items held."""
        batch = check_record(conflicts)
        if not batch:
            return
        keys = self._shared.keys
        named = list(dict.fromkeys(i for c in batch for i in c.item_ids))
        watch = [keys.item(i) for i in named] + [keys.conflict_namespaces]

        def plan(pipe: Pipe) -> Finish[None]:
            held = pipe.mget([keys.item(i) for i in named])
            missing = next((i for i, raw in zip(named, held, strict=True) if raw is None), None)
            if missing is not None:
                raise ItemNotFoundError(missing)
            for conflict in batch:
                if self._find(pipe, conflict.id) is not None:
                    raise ValidationError(
                        f"a conflict with id {conflict.id!r} is already recorded",
                        field="id",
                        value=conflict.id,
                    )
            pipe.multi()
            for conflict in batch:
                pipe.sadd(keys.namespaces, conflict.namespace)
                pipe.hset(keys.conflict_namespaces, conflict.id, conflict.namespace)
                pipe.hset(keys.conflicts(conflict.namespace), conflict.id, _encode(conflict))
                self._shared.expire(pipe, conflict.namespace)
            return lambda _: None

        self._shared.runner.transact(watch, plan)

    def _find(self, client: Any, conflict_id: str) -> Conflict | None:
        namespace = client.hget(self._shared.keys.conflict_namespaces, conflict_id)
        if namespace is None:
            return None
        text = client.hget(self._shared.keys.conflicts(namespace), conflict_id)
        return None if text is None else _decode(text)

    def get(self, conflict_id: str) -> Conflict | None:
        """The conflict with this id, or ``None``."""
        check_id(conflict_id)
        return self._shared.runner.read(lambda client: self._find(client, conflict_id))

    def _load(self, namespaces: list[str] | None) -> list[Conflict]:
        keys = self._shared.keys

        def work(client: Any) -> list[str]:
            names = namespaces if namespaces is not None else self._shared.namespaces(client)
            texts: list[str] = []
            for name in names:
                texts.extend(client.hvals(keys.conflicts(name)))
            return texts

        return [_decode(text) for text in self._shared.runner.read(work)]

    def of_scope(
        self,
        namespace: str,
        tier: Tier,
        *,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[Conflict]:
        """One scope's conflicts, newest first (ties by id, newest first)."""
        wanted = check_scope_read(namespace, tier, limit)
        found = [
            c
            for c in self._load([namespace])
            if c.tier is wanted and (include_resolved or not c.resolved)
        ]
        return newest_first(found)[:limit]

    def of_items(
        self, item_ids: Iterable[str], *, include_resolved: bool = False
    ) -> list[Conflict]:
        """The conflicts naming any of ``item_ids``, newest first (unresolved unless asked)."""
        ids = set(check_item_ids(item_ids))
        if not ids:
            return []
        found = [
            c
            for c in self._load(None)
            if ids.intersection(c.item_ids) and (include_resolved or not c.resolved)
        ]
        return newest_first(found)

    def resolve(self, conflict_id: str, *, kept: str, at: datetime) -> Conflict | None:
        """Mark an unresolved conflict resolved with ``kept``; ``None`` if it was not.

        A compare-and-set on the conflict's hash: of two processes resolving one conflict,
        the second sees it resolved (or its transaction is retried and then sees it).
        """
        check_resolve(conflict_id, kept, at)
        keys = self._shared.keys
        namespace = self._shared.runner.read(
            lambda client: client.hget(keys.conflict_namespaces, conflict_id)
        )
        if namespace is None:
            return None

        def plan(pipe: Pipe) -> Finish[Conflict | None]:
            text = pipe.hget(keys.conflicts(namespace), conflict_id)
            conflict = None if text is None else _decode(text)
            if conflict is None or conflict.resolved or kept not in conflict.item_ids:
                pipe.multi()
                return lambda _: None
            resolved = attrs.evolve(conflict, resolved_at=at, kept=kept)
            pipe.multi()
            pipe.hset(keys.conflicts(namespace), conflict_id, _encode(resolved))
            return lambda _: resolved

        return self._shared.runner.transact([keys.conflicts(namespace)], plan)

    def plan_discard(self, pipe: Pipe, item_ids: Iterable[str]) -> Queue:
        """Watch and read every conflict; return the writes removing those naming ``item_ids``."""
        keys = self._shared.keys
        ids = set(item_ids)
        names = self._shared.namespaces(pipe)
        if names:
            pipe.watch(*(keys.conflicts(name) for name in names))
        doomed: list[tuple[str, str]] = []
        for name in names:
            for conflict_id, text in pipe.hgetall(keys.conflicts(name)).items():
                if ids.intersection(_decode(text).item_ids):
                    doomed.append((name, conflict_id))

        def queue(pipe: Pipe) -> None:
            for name, conflict_id in doomed:
                pipe.hdel(keys.conflicts(name), conflict_id)
                pipe.hdel(keys.conflict_namespaces, conflict_id)

        return queue


def _encode(conflict: Conflict) -> str:
    return encode_json(to_dict(conflict))


def _decode(text: str) -> Conflict:
    return from_dict(Conflict, decode_json(text))

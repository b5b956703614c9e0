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
    decode_item,
    decode_json,
    encode_json,
    live_namespaces,
    queue_namespace,
)
from agent_engine.memory.audit import (
    check_namespace,
    check_window,
    redact_event,
    select_events,
    wanted_actions,
)
from agent_engine.memory.conflicts import (
    Conflict,
    check_id,
    check_item_ids,
    check_record,
    check_resolve,
    check_scope_read,
    newest_first,
)
from agent_engine.models import AuditAction, AuditEvent, ContextItem, Tier
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

    def namespaces(self, client: Any) -> list[str]:
        """Every live namespace, read through ``client`` (or a watching pipe)."""
        return live_namespaces(client, self.keys)

    def expire(self, pipe: Pipe, key: str, namespace: str) -> None:
        """Queue a namespace's record hash's expiry, and the note that the namespace lives."""
        queue_namespace(pipe, self.keys, namespace, self.ttl_ms)
        if self.ttl_ms is not None:
            pipe.pexpire(key, self.ttl_ms)


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
            pipe.hset(keys.audit(event.namespace), event.id, encode_json(to_dict(event)))
            self._shared.expire(pipe, keys.audit(event.namespace), event.namespace)
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
        loaded = self._load(namespace)
        return select_events(
            loaded,
            namespace=namespace,
            since=since,
            until=until,
            wanted=wanted_actions(actions),
            limit=limit,
        )

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
            if names:
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

        return self._shared.runner.transact([keys.meta], plan)

    def redact(self, tokens: Mapping[str, str]) -> int:
        """Replace each id of ``tokens`` by its token in every event that names it."""
        if not tokens:
            return 0

        def plan(pipe: Pipe) -> Finish[int]:
            changed, queue = self.plan_redact(pipe, tokens)
            pipe.multi()
            queue(pipe)
            return lambda _: changed

        return self._shared.runner.transact([self._shared.keys.meta], plan)

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
    """Implements :class:`~agent_engine.memory.conflicts.ConflictStore` in the backend's Redis.

    A conflict lives in its namespace's hash. One that names an item of another namespace is
    also noted in that namespace's ``x:`` hash, so the conflicts of some items are found in
    their own namespaces and those notes, never by visiting every namespace.
    """

    def __init__(self, runner: Runner, keys: Keys, ttl_ms: int | None) -> None:
        self._shared = _Shared(runner, keys, ttl_ms)

    def record(self, conflicts: Sequence[Conflict]) -> None:
        """Store new conflicts, all or none, in one transaction that sees the items held."""
        batch = check_record(conflicts)
        if not batch:
            return
        keys = self._shared.keys
        named = list(dict.fromkeys(i for c in batch for i in c.item_ids))
        watch = [keys.item(i) for i in named] + [keys.conflicts(c.namespace) for c in batch]

        def plan(pipe: Pipe) -> Finish[None]:
            held = pipe.mget([keys.item(i) for i in named])
            missing = next((i for i, raw in zip(named, held, strict=True) if raw is None), None)
            if missing is not None:
                raise ItemNotFoundError(missing)
            home = {i: decode_item(raw).namespace for i, raw in zip(named, held, strict=True)}
            for conflict in batch:
                if pipe.hexists(keys.conflicts(conflict.namespace), conflict.id):
                    raise ValidationError(
                        f"a conflict with id {conflict.id!r} is already recorded",
                        field="id",
                        value=conflict.id,
                    )
            pipe.multi()
            for conflict in batch:
                key = keys.conflicts(conflict.namespace)
                pipe.hset(key, conflict.id, _encode(conflict))
                self._shared.expire(pipe, key, conflict.namespace)
                for item_id in conflict.item_ids:
                    if home[item_id] != conflict.namespace:
                        crossing = keys.crossing(home[item_id])
                        pipe.hset(crossing, conflict.id, conflict.namespace)
                        self._shared.expire(pipe, crossing, home[item_id])
            return lambda _: None

        self._shared.runner.transact(watch, plan)

    def _home(self, client: Any, conflict_id: str) -> str | None:
        """The namespace holding a conflict, looked up in every live namespace at once."""
        keys = self._shared.keys
        names = self._shared.namespaces(client)
        with client.pipeline(transaction=False) as batch:
            for name in names:
                batch.hexists(keys.conflicts(name), conflict_id)
            found = batch.execute()
        return next((name for name, there in zip(names, found, strict=True) if there), None)

    def get(self, conflict_id: str) -> Conflict | None:
        """The conflict with this id, or ``None``."""
        check_id(conflict_id)
        keys = self._shared.keys

        def work(client: Any) -> Conflict | None:
            home = self._home(client, conflict_id)
            text = None if home is None else client.hget(keys.conflicts(home), conflict_id)
            return None if text is None else _decode(text)

        return self._shared.runner.read(work)

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
        key = self._shared.keys.conflicts(namespace)
        texts = self._shared.runner.read(lambda client: client.hvals(key))
        found = [
            c
            for c in map(_decode, texts)
            if c.tier is wanted and (include_resolved or not c.resolved)
        ]
        return newest_first(found)[:limit]

    def of_items(
        self, item_ids: Iterable[str], *, include_resolved: bool = False
    ) -> list[Conflict]:
        """The conflicts naming any of ``item_ids``, newest first (unresolved unless asked).

        Read where they can be: the items' own namespaces and the notes those keep of other
        namespaces' conflicts (an item that is not stored has none: they go with it).
        """
        ids = check_item_ids(item_ids)
        if not ids:
            return []
        keys = self._shared.keys

        def work(client: Any) -> list[Conflict]:
            held = client.mget([keys.item(i) for i in ids])
            homes = {decode_item(raw).namespace for raw in held if raw is not None}
            return list(_conflicts_in(client, keys, homes).values())

        wanted = set(ids)
        found = [
            c
            for c in self._shared.runner.read(work)
            if wanted.intersection(c.item_ids) and (include_resolved or not c.resolved)
        ]
        return newest_first(found)

    def resolve(self, conflict_id: str, *, kept: str, at: datetime) -> Conflict | None:
        """Mark an unresolved conflict resolved with ``kept``; ``None`` if it was not.

        A compare-and-set on the conflict's hash: of two processes resolving one conflict,
        the second sees it resolved (or its transaction is retried and then sees it).
        """
        check_resolve(conflict_id, kept, at)
        keys = self._shared.keys
        home = self._shared.runner.read(lambda client: self._home(client, conflict_id))
        if home is None:
            return None

        def plan(pipe: Pipe) -> Finish[Conflict | None]:
            text = pipe.hget(keys.conflicts(home), conflict_id)
            conflict = None if text is None else _decode(text)
            pipe.multi()
            if conflict is None or conflict.resolved or kept not in conflict.item_ids:
                return lambda _: None
            resolved = attrs.evolve(conflict, resolved_at=at, kept=kept)
            pipe.hset(keys.conflicts(home), conflict_id, _encode(resolved))
            return lambda _: resolved

        return self._shared.runner.transact([keys.conflicts(home)], plan)

    def plan_discard(self, pipe: Pipe, removed: Mapping[str, ContextItem]) -> Queue:
        """Watch and read the conflicts that may name ``removed``; return the writes removing them.

        Those are in the removed items' namespaces, and in the namespaces their ``x:`` notes
        name; ``pipe`` is watching, so a conflict recorded meanwhile makes the write run again.
        """
        keys = self._shared.keys
        homes = {item.namespace for item in removed.values()}
        found = _conflicts_in(pipe, keys, homes, watch=True)
        doomed = [c for c in found.values() if set(removed).intersection(c.item_ids)]

        def queue(pipe: Pipe) -> None:
            for conflict in doomed:
                pipe.hdel(keys.conflicts(conflict.namespace), conflict.id)
                for home in homes:
                    pipe.hdel(keys.crossing(home), conflict.id)

        return queue


def _conflicts_in(
    client: Any, keys: Keys, homes: set[str], *, watch: bool = False
) -> dict[str, Conflict]:
    """The conflicts of ``homes`` and of the namespaces their ``x:`` notes name, by id."""
    ordered = sorted(homes)
    if watch and ordered:
        client.watch(*(keys.crossing(home) for home in ordered))
    names = set(ordered)
    for home in ordered:
        names.update(client.hvals(keys.crossing(home)))
    found: dict[str, Conflict] = {}
    if watch and names:
        client.watch(*(keys.conflicts(name) for name in sorted(names)))
    for name in sorted(names):
        for text in client.hvals(keys.conflicts(name)):
            conflict = _decode(text)
            found[conflict.id] = conflict
    return found


def _encode(conflict: Conflict) -> str:
    return encode_json(to_dict(conflict))


def _decode(text: str) -> Conflict:
    return from_dict(Conflict, decode_json(text))

"""The Redis backend: task memory that several executor processes share.

Each item is one JSON value under its own key, each namespace a set of its item ids
(:mod:`._redis_layout` draws the whole keyspace), so a read scoped to a namespace loads that
namespace's items and no one else's. Every write is one optimistic transaction (``WATCH`` the
keys it reads, check, ``MULTI``/``EXEC``, again if another writer got there first): a batch is
stored whole or not at all, and the change counter of every scope it touches is bumped by
``HINCRBY`` inside the same ``EXEC``, so other processes' lexical indexes notice.

Filters, ordering and vector search run in this process over the namespace's items (numpy
scores the namespace's vectors in one product): right for task memory, tens to thousands of
items per task, and wrong for a project memory of a hundred thousand items, which belongs on
the SQL or FAISS backends.

``ttl`` gives a namespace an expiry, refreshed by every write to it, so an abandoned task's
memory goes by itself; an item whose ``expires_at`` is still to come when it is written also
expires then (one already past is stored as given: the aging policy decides about it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs
import numpy as np

from agent_engine._log import get_logger
from agent_engine.embeddings import Embedder, EmbedderIdentity, Matrix
from agent_engine.errors import (
    BackendUnavailableError,
    DuplicateItemError,
    ItemNotFoundError,
    ReembedRequiredError,
    ValidationError,
)
from agent_engine.filters import Filter, Op, Order
from agent_engine.memory._redis_aliases import RedisAliasStore
from agent_engine.memory._redis_checkpoints import RedisCheckpointStore
from agent_engine.memory._redis_grants import RedisGrantStore
from agent_engine.memory._redis_journal import Queue, RedisAuditStore, RedisConflictStore
from agent_engine.memory._redis_layout import (
    NAME,
    Finish,
    Keys,
    Pipe,
    Plan,
    Runner,
    adrive,
    decode_item,
    decode_json,
    drive,
    encode_item,
    encode_json,
    live_namespaces,
    live_namespaces_command,
    now_ms,
    queue_namespace,
)
from agent_engine.memory._redis_lineage import RedisLineageStore
from agent_engine.memory.backend import (
    REEMBED_COMMAND,
    AsyncReads,
    BaseBackend,
    ScopeVersions,
    Written,
    binding_identity,
    check_identity,
    check_vectors,
    mixed_sizes,
)
from agent_engine.models import (
    ArchiveReason,
    ContextItem,
    Tier,
    Vector,
    bump_count,
    with_archive_mark,
)

if TYPE_CHECKING:
    import redis

    from agent_engine.memory.registry import OpenOptions

__all__ = ["DEFAULT_PREFIX", "DEFAULT_URL", "URL_ENV", "RedisBackend", "open_url", "temporary"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
"""The server a backend made without a URL uses, unless ``$AGENT_ENGINE_REDIS`` names one."""
URL_ENV = "AGENT_ENGINE_REDIS"
"""The environment variable naming the default Redis server."""
DEFAULT_PREFIX = "agent_engine:"
"""What every key of a store starts with, unless the backend is given another prefix."""

_EMBEDDER = "embedder"
_REEMBED = "reembed"
T = TypeVar("T")

_CHUNK = 1000
"""Keys per ``MGET``."""


@attrs.frozen
class _Meta:
    identity: EmbedderIdentity | None
    reembedding: EmbedderIdentity | None
    after: str | None


class RedisBackend(BaseBackend):
    """Items in Redis under ``prefix``, shared by every process that opens the same keys.

    ``url`` defaults to ``$AGENT_ENGINE_REDIS``, else ``redis://127.0.0.1:6379/0``.
    ``prefix`` separates stores in one database. ``ttl`` is the idle lifetime of a namespace
    (its items, audit events and conflicts): each write to the namespace starts it again.
    ``temporary`` removes every key under the prefix on :meth:`close` (tests and benchmarks).
    ``embedder`` and ``dim`` are as for the other backends; the store records the embedder of
    its first vector and refuses another one, like the SQL backend.

    A server that cannot be reached, or goes away, raises
    :class:`~agent_engine.errors.BackendUnavailableError`; a write cut off before ``EXEC``
    stores nothing. Not for Redis Cluster: a transaction spans keys of several slots.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        embedder: Embedder | None = None,
        dim: int | None = None,
        prefix: str = DEFAULT_PREFIX,
        ttl: timedelta | None = None,
        temporary: bool = False,
        socket_timeout: float = 10.0,
    ) -> None:
        import redis  # noqa: PLC0415 - the driver loads with the backend, never with the package

        if not isinstance(prefix, str) or not prefix:
            raise ValidationError("prefix must be non-empty text", field="prefix", value=prefix)
        if ttl is not None and (not isinstance(ttl, timedelta) or ttl < timedelta(milliseconds=1)):
            raise ValidationError(
                "ttl must be a positive timedelta (or None)", field="ttl", value=ttl
            )
        self.url = url if url is not None else os.environ.get(URL_ENV, DEFAULT_URL)
        self.embedder = embedder
        self.dim = dim
        self.prefix = prefix
        self.ttl = ttl
        self.temporary = temporary
        self._ttl_ms = None if ttl is None else ttl // timedelta(milliseconds=1)
        self._keys = Keys(prefix)
        self._socket_timeout = socket_timeout
        self._log = get_logger(backend="redis")
        try:
            client: redis.Redis = redis.Redis.from_url(
                self.url,
                decode_responses=True,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
            )
        except ValueError as error:
            raise BackendUnavailableError(
                f"not a Redis URL: {self.url!r} ({error})", backend=NAME
            ) from error
        self._runner = Runner(client)
        # Typed twice: the base class knows the protocols, erase and removals need the plans.
        self._audit_store = self._journal = RedisAuditStore(self._runner, self._keys, self._ttl_ms)
        self._conflict_store = self._conflicts = RedisConflictStore(
            self._runner, self._keys, self._ttl_ms
        )
        self._alias_store = RedisAliasStore(self._runner, self._keys)
        self._checkpoint_store = RedisCheckpointStore(self._runner, self._keys)
        self._grant_store = RedisGrantStore(self._runner, self._keys)
        self._lineage_store = RedisLineageStore(self._runner, self._keys)
        try:
            meta = self._runner.read(self._read_meta)
            if meta.reembedding is not None:
                self._log.warning("store awaits a re-embedding", target=meta.reembedding.name)
            else:
                check_identity(
                    self._bound(self._runner.client, meta.identity, []), self._identity()
                )
        except BaseException:
            client.close()
            raise

    def __repr__(self) -> str:
        return f"RedisBackend(prefix={self.prefix!r})"

    @property
    def client(self) -> redis.Redis:
        """The Redis client (for inspection and maintenance; writes go through the API)."""
        return self._runner.client

    # ------------------------------------------------------------------ store facts

    def _read_meta(self, client: Any) -> _Meta:
        values = client.hgetall(self._keys.meta)
        identity = _identity(values.get(_EMBEDDER))
        reembed = decode_json(values[_REEMBED]) if _REEMBED in values else None
        return _Meta(
            identity,
            None if reembed is None else _identity_of(reembed["target"]),
            None if reembed is None else reembed["after"],
        )

    def _holds_vectors(self, client: Any) -> bool:
        return any(item.embedding is not None for item in self._load(client, Filter()))

    def _bound(
        self, client: Any, recorded: EmbedderIdentity | None, sizes: list[int]
    ) -> EmbedderIdentity | None:
        own = self._identity()

        def fits(identity: EmbedderIdentity) -> bool:
            agrees = own is None or identity.matches(own)
            return agrees and all(size == identity.dim for size in sizes)

        return binding_identity(recorded, lambda: self._holds_vectors(client), fits)

    def _stored_identity(self) -> EmbedderIdentity | None:
        def work(client: Any) -> EmbedderIdentity | None:
            recorded = self._read_meta(client).identity
            return binding_identity(recorded, lambda: self._holds_vectors(client))

        return self._runner.read(work)

    def _search_identity(self) -> EmbedderIdentity | None:
        """The store's identity, read on every search: another process may have moved it."""

        def work(client: Any) -> tuple[_Meta, EmbedderIdentity | None]:
            meta = self._read_meta(client)
            bound = None if meta.reembedding is not None else self._bound(client, meta.identity, [])
            return meta, bound

        meta, bound = self._runner.read(work)
        if meta.reembedding is not None:
            raise _reembed_required(meta.reembedding)
        own = self._identity()
        check_identity(bound, own)
        return bound if bound is not None else own

    def _guard_vectors(self, pipe: Pipe, batch: list[ContextItem]) -> EmbedderIdentity | None:
        """Check a write's vectors against the store's identity; return one to record, if any."""
        sizes = [item.embedding.shape[0] for item in batch if item.embedding is not None]
        if not sizes:
            return None
        meta = self._read_meta(pipe)
        if meta.reembedding is not None:
            raise _reembed_required(meta.reembedding)
        own = self._identity()
        expected = self._bound(pipe, meta.identity, sizes)
        check_identity(expected, own)
        check_vectors(batch, expected if expected is not None else own)
        new = own if own is not None else EmbedderIdentity(None, sizes[0])
        if expected is None or (expected.name is None and new.name is not None):
            return new
        return None

    # ------------------------------------------------------------------ reads

    # Each read is a plan (:data:`Plan`): the commands it sends and what it makes of their
    # replies, driven by a client (:func:`drive`, also a watching pipe) or, for the async
    # twin, by a ``redis.asyncio`` client (:func:`adrive`). One plan, either API.

    def _candidate_plan(self, where: Filter) -> Plan[list[str]]:
        """The ids ``where`` can match: its namespaces' members, its ids, or every namespace."""
        namespaces: set[str] | None = None
        ids: set[str] | None = None
        for condition in where.conditions:
            if condition.op not in (Op.EQ, Op.IN) or condition.value is None:
                continue
            values = {condition.value} if condition.op is Op.EQ else set(condition.value)
            if None in values:
                continue
            if condition.field == "namespace":
                namespaces = values if namespaces is None else namespaces & values
            elif condition.field == "id":
                ids = values if ids is None else ids & values
        if ids is not None:
            return sorted(ids)
        if namespaces is None:
            namespaces = set((yield live_namespaces_command(self._keys)))
        if not namespaces:
            return []
        return sorted((yield ("sunion", [self._keys.members(name) for name in namespaces])))

    def _get_plan(self, ids: list[str]) -> Plan[dict[str, ContextItem]]:
        found: dict[str, ContextItem] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            texts = yield ("mget", [self._keys.item(item_id) for item_id in chunk])
            for item_id, text in zip(chunk, texts, strict=True):
                if text is not None:
                    found[item_id] = decode_item(text)
        return found

    def _load_plan(self, where: Filter) -> Plan[list[ContextItem]]:
        """The stored items ``where`` matches."""
        ids = yield from self._candidate_plan(where)
        found = yield from self._get_plan(ids)
        return [item for item in found.values() if where.matches(item)]

    def _count_plan(self, where: Filter) -> Plan[int]:
        if where.conditions:
            return len((yield from self._load_plan(where)))
        # Every item: count the values still there (an item past its own expiry may linger
        # in its namespace's set until the namespace goes), decoding none.
        ids = yield from self._candidate_plan(where)
        keys = [self._keys.item(item_id) for item_id in ids]
        present = 0
        for start in range(0, len(keys), _CHUNK):
            texts = yield ("mget", keys[start : start + _CHUNK])
            present += sum(text is not None for text in texts)
        return present

    def _candidate_ids(self, client: Any, where: Filter) -> list[str]:
        return drive(self._candidate_plan(where), client)

    def _load(self, client: Any, where: Filter) -> list[ContextItem]:
        """The stored items ``where`` matches, read through ``client`` (or a watching pipe)."""
        return drive(self._load_plan(where), client)

    def _get(self, client: Any, ids: list[str]) -> dict[str, ContextItem]:
        return drive(self._get_plan(ids), client)

    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        return self._runner.read(lambda client: self._get(client, item_ids))

    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        matching = self._runner.read(lambda client: self._load(client, where))
        return order.sort(matching)[:limit]

    def _count(self, where: Filter) -> int:
        return self._runner.read(lambda client: drive(self._count_plan(where), client))

    def _scope_versions(self, key: tuple[str | None, Tier | None]) -> ScopeVersions:
        namespace, tier = key
        keys = self._keys

        def work(client: Any) -> ScopeVersions:
            if namespace is not None and tier is not None:
                value = client.hget(keys.versions(namespace), tier.value)
                return {} if value is None else {(namespace, tier): int(value)}
            names = [namespace] if namespace is not None else live_namespaces(client, keys)
            with client.pipeline(transaction=False) as batch:
                for name in names:
                    batch.hgetall(keys.versions(name))
                counters = batch.execute()
            return {
                (name, Tier(field)): int(value)
                for name, values in zip(names, counters, strict=True)
                for field, value in values.items()
                if tier is None or field == tier.value
            }

        return self._runner.read(work)

    def _scan_vectors(self, where: Filter, chunk: int) -> Iterator[tuple[list[str], Matrix]]:
        """The matching vectors of the namespaces ``where`` names, scored in this process."""
        rows = [
            item
            for item in self._select(where, Order("id", descending=False), None)
            if item.embedding is not None
        ]
        sizes = {item.embedding.shape[0] for item in rows if item.embedding is not None}
        if len(sizes) > 1:
            raise mixed_sizes(sizes)
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            yield [item.id for item in part], np.vstack([_vector(item) for item in part])

    # ------------------------------------------------------------------ writes

    def _deadline(self, item: ContextItem, now: int) -> int | None:
        """When an item's key expires (ms): its own future ``expires_at``, or the namespace's."""
        own = _own_deadline(item, now)
        spans = [d for d in (own, None if self._ttl_ms is None else now + self._ttl_ms) if d]
        return min(spans) if spans else None

    def _plan_refresh(self, pipe: Pipe, namespaces: set[str]) -> Queue:
        """Read what a namespace expiry covers; return the writes that start it again.

        Without ``ttl`` they only note that the namespaces live (for good).
        """
        keys = self._keys
        if self._ttl_ms is None:

            def note(pipe: Pipe) -> None:
                for name in sorted(namespaces):
                    queue_namespace(pipe, keys, name, None)

            return note
        members = {name: sorted(pipe.smembers(keys.members(name))) for name in namespaces}
        deadlines = {name: pipe.hgetall(keys.deadlines(name)) for name in namespaces}
        ttl = self._ttl_ms

        def queue(pipe: Pipe) -> None:
            at = now_ms() + ttl
            for name in sorted(namespaces):
                queue_namespace(pipe, keys, name, ttl)
                for key in keys.of_namespace(name):
                    pipe.pexpireat(key, at)
                own = deadlines[name]
                for item_id in members[name]:
                    mine = own.get(item_id)
                    pipe.pexpireat(keys.item(item_id), at if mine is None else min(at, int(mine)))

        return queue

    def _queue_store(self, pipe: Pipe, item: ContextItem, now: int) -> None:
        """Queue an item's value, its namespace membership and its own deadline."""
        keys = self._keys
        deadline = self._deadline(item, now)
        if deadline is None:
            pipe.set(keys.item(item.id), encode_item(item))
        else:
            pipe.set(keys.item(item.id), encode_item(item), pxat=deadline)
        pipe.sadd(keys.members(item.namespace), item.id)
        own = _own_deadline(item, now)
        if own is None:
            pipe.hdel(keys.deadlines(item.namespace), item.id)
        else:
            pipe.hset(keys.deadlines(item.namespace), item.id, own)

    def _queue_bumps(
        self, pipe: Pipe, scopes: Iterable[tuple[str, Tier]]
    ) -> Callable[[list[Any]], ScopeVersions]:
        """Queue one increment of each scope's counter; return what reads the new values.

        A counter that does not exist yet starts from the clock (in ms) when namespaces
        expire: a namespace that expired and was written again never repeats a counter value
        a process may have cached before it expired.
        """
        pairs = sorted({(namespace, tier) for namespace, tier in scopes})
        keys = self._keys
        base = 0 if self._ttl_ms is None else now_ms()
        for namespace, tier in pairs:
            pipe.hsetnx(keys.versions(namespace), tier.value, base)
        start = len(pipe)
        for namespace, tier in pairs:
            pipe.hincrby(keys.versions(namespace), tier.value, 1)
        return lambda results: {
            pair: int(value)
            for pair, value in zip(pairs, results[start : start + len(pairs)], strict=True)
        }

    def _insert(self, items: list[ContextItem]) -> Written:
        return self._insert_and_replace(items, [])

    def _replace(self, items: list[ContextItem]) -> Written:
        return self._insert_and_replace([], items)

    def _insert_and_replace(
        self, inserts: list[ContextItem], replaces: list[ContextItem]
    ) -> Written:
        """Insert and replace in one transaction: all of it is applied, or none of it."""
        batch = [*inserts, *replaces]
        keys = self._keys
        watch = [keys.item(item.id) for item in batch] + [keys.meta]

        def plan(pipe: Pipe) -> Finish[Written]:
            stored = self._get(pipe, [item.id for item in batch])
            for item in inserts:
                if item.id in stored:
                    raise DuplicateItemError(item.id)
            for item in replaces:
                if item.id not in stored:
                    raise ItemNotFoundError(item.id)
            identity = self._guard_vectors(pipe, batch)
            scopes = [(item.namespace, item.tier) for item in [*batch, *stored.values()]]
            refresh = self._plan_refresh(pipe, {namespace for namespace, _ in scopes})
            now = now_ms()
            pipe.multi()
            if identity is not None:
                pipe.hset(keys.meta, _EMBEDDER, _identity_json(identity))
            moved_to = {item.id: item.namespace for item in replaces}
            for old in stored.values():
                if moved_to[old.id] != old.namespace:
                    pipe.srem(keys.members(old.namespace), old.id)
                    pipe.hdel(keys.deadlines(old.namespace), old.id)
            for item in batch:
                self._queue_store(pipe, item, now)
            versions = self._queue_bumps(pipe, scopes)
            refresh(pipe)
            return lambda results: Written(len(batch), versions(results))

        return self._runner.transact(watch, plan)

    def _plan_removal(self, pipe: Pipe, found: dict[str, ContextItem]) -> Finish[Written]:
        """Watch and read what removing ``found`` changes; queue it (``MULTI`` is sent here)."""
        keys = self._keys
        discard = self._conflicts.plan_discard(pipe, found)
        scopes = [(item.namespace, item.tier) for item in found.values()]
        refresh = self._plan_refresh(pipe, {namespace for namespace, _ in scopes})
        pipe.multi()
        for item in found.values():
            pipe.delete(keys.item(item.id))
            pipe.srem(keys.members(item.namespace), item.id)
            pipe.hdel(keys.deadlines(item.namespace), item.id)
        discard(pipe)
        versions = self._queue_bumps(pipe, scopes)
        refresh(pipe)
        return lambda results: Written(len(found), versions(results))

    def _remove(self, item_ids: list[str]) -> Written:
        def plan(pipe: Pipe) -> Finish[Written]:
            return self._plan_removal(pipe, self._get(pipe, item_ids))

        return self._runner.transact([self._keys.item(i) for i in item_ids], plan)

    def _delete_where(self, where: Filter) -> Written:
        keys = self._keys

        def plan(pipe: Pipe) -> Finish[Written]:
            ids = self._candidate_ids(pipe, where)
            if ids:
                pipe.watch(*(keys.item(item_id) for item_id in ids))
            found = {item.id: item for item in self._get(pipe, ids).values() if where.matches(item)}
            return self._plan_removal(pipe, found)

        # The items found are watched once known; an item added meanwhile came after the
        # clear, and stays. Watching the list of namespaces instead would make every write
        # to any namespace start the clear over.
        return self._runner.transact([keys.meta], plan)

    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> Written:
        """Remove the items, their conflicts, and their ids from the journal and provenance.

        One transaction: every other item that names an erased id (what it was promoted or
        merged from) is rewritten with the token, and so is every journal event.
        """
        keys = self._keys

        def plan(pipe: Pipe) -> Finish[Written]:
            found = self._get(pipe, item_ids)
            others = [i for i in self._candidate_ids(pipe, Filter()) if i not in found]
            if others:
                pipe.watch(*(keys.item(item_id) for item_id in others))
            rewritten = [
                redacted
                for item in self._get(pipe, others).values()
                if (redacted := self._redact_provenance(item, tokens)) is not None
            ]
            _, redact = self._journal.plan_redact(pipe, tokens)
            finish = self._plan_removal(pipe, found)
            for item in rewritten:
                pipe.set(keys.item(item.id), encode_item(item), keepttl=True)
            redact(pipe)
            return finish

        watch = [keys.item(i) for i in item_ids] + [keys.meta]
        return self._runner.transact(watch, plan)

    def _rewrite(
        self, item_ids: list[str], change: Callable[[list[ContextItem]], list[ContextItem]]
    ) -> int:
        """Rewrite stored items by ``change(items)`` in one transaction, keeping their expiry.

        For writes that leave indexed text alone (access counts, archive marks, new vectors):
        no scope counter moves.
        """
        keys = self._keys

        def plan(pipe: Pipe) -> Finish[int]:
            found = list(self._get(pipe, item_ids).values())
            changed: list[ContextItem] = change(found)
            pipe.multi()
            for item in changed:
                pipe.set(keys.item(item.id), encode_item(item), keepttl=True)
            return lambda _: len(found)

        return self._runner.transact([keys.item(i) for i in item_ids], plan)

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        """Count accesses in a transaction on the items: concurrent touches all count."""
        return self._rewrite(
            item_ids,
            lambda found: [
                attrs.evolve(item, access_count=bump_count(item.access_count), last_accessed_at=at)
                for item in found
            ],
        )

    def _set_archived(
        self, item_ids: list[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        return self._rewrite(item_ids, lambda found: with_archive_mark(found, at, reason))

    # ------------------------------------------------------------------ re-embedding

    def _reembed_begin(self, target: EmbedderIdentity) -> str | None:
        keys = self._keys

        def plan(pipe: Pipe) -> Finish[str | None]:
            meta = self._read_meta(pipe)
            if meta.reembedding == target:
                pipe.multi()
                return lambda _: meta.after
            pipe.multi()
            pipe.hset(keys.meta, _REEMBED, _reembed_json(target, None))
            return lambda _: None

        return self._runner.transact([keys.meta], plan)

    def _reembed_write(self, items: list[ContextItem], target: EmbedderIdentity) -> None:
        """Write the new vectors of items still as they were read, and the progress mark."""
        keys = self._keys
        given = {item.id: item for item in items}

        def plan(pipe: Pipe) -> Finish[None]:
            _check_reembedding(self._read_meta(pipe), target)
            stored = self._get(pipe, list(given))
            pipe.multi()
            for item_id, now in stored.items():
                new = given[item_id]
                if (now.text, now.kind, now.fingerprint) == (new.text, new.kind, new.fingerprint):
                    renewed = attrs.evolve(now, embedding=new.embedding)
                    pipe.set(keys.item(item_id), encode_item(renewed), keepttl=True)
            pipe.hset(keys.meta, _REEMBED, _reembed_json(target, items[-1].id))
            return lambda _: None

        self._runner.transact([keys.meta, *(keys.item(i) for i in given)], plan)

    def _reembed_finish(self, target: EmbedderIdentity) -> None:
        keys = self._keys

        def plan(pipe: Pipe) -> Finish[str | None]:
            _check_reembedding(self._read_meta(pipe), target)
            left = next(
                (
                    item.id
                    for item in self._load(pipe, Filter())
                    if item.embedding is not None and item.embedding.shape[0] != target.dim
                ),
                None,
            )
            pipe.multi()
            if left is None:
                pipe.hset(keys.meta, _EMBEDDER, _identity_json(target))
                pipe.hdel(keys.meta, _REEMBED)
            else:
                pipe.hset(keys.meta, _REEMBED, _reembed_json(target, None))
            return lambda _: left

        left = self._runner.transact([keys.meta], plan)
        if left is not None:
            raise ReembedRequiredError(
                f"item {left!r} still holds a vector of another size after re-embedding; "
                f"run `{REEMBED_COMMAND}` again (it starts over)",
                target=target,
                backend=NAME,
            )

    # ------------------------------------------------------------------ lifetime

    def drop(self) -> int:
        """Remove every key under this store's prefix; return how many went.

        For tests and throwaway stores: it empties the store for every process using it.
        """

        def work(client: Any) -> int:
            removed = 0
            batch: list[str] = []
            for key in client.scan_iter(match=self._keys.pattern(), count=1000):
                batch.append(key)
                if len(batch) == _CHUNK:
                    removed += int(client.unlink(*batch))
                    batch = []
            if batch:
                removed += int(client.unlink(*batch))
            return removed

        return self._runner.read(work)

    def async_reads(self) -> AsyncReads:
        """Reads through ``redis.asyncio``: the same plans, awaited (a client per call)."""
        import redis.asyncio  # noqa: PLC0415 - the driver loads with the backend

        with self._runner.translating():
            client = redis.asyncio.Redis.from_url(
                self.url,
                decode_responses=True,
                socket_timeout=self._socket_timeout,
                socket_connect_timeout=self._socket_timeout,
            )
        return _AsyncReads(self, client)

    @property
    def remote(self) -> bool:
        """Every call waits on the Redis server."""
        return True

    def close(self) -> None:
        """Release the connections (dropping the keys first if ``temporary``)."""
        if self._runner.closed:
            return
        try:
            if self.temporary:
                self.drop()
        finally:
            self._runner.closed = True
            self._runner.client.close()


# ----------------------------------------------------------------------------- helpers


def _own_deadline(item: ContextItem, now: int) -> int | None:
    """An item's ``expires_at`` in ms, if still to come (one already past is kept as given)."""
    if item.expires_at is None:
        return None
    at = int(item.expires_at.timestamp() * 1000)
    return at if at > now else None


def _vector(item: ContextItem) -> Vector:
    assert item.embedding is not None  # noqa: S101 - only items with vectors are scanned
    return item.embedding


def _identity(text: str | None) -> EmbedderIdentity | None:
    return None if text is None else _identity_of(decode_json(text))


def _identity_of(data: Any) -> EmbedderIdentity | None:
    return None if data is None else EmbedderIdentity(data["name"], int(data["dim"]))


def _identity_json(identity: EmbedderIdentity) -> str:
    return encode_json({"name": identity.name, "dim": identity.dim})


def _reembed_json(target: EmbedderIdentity, after: str | None) -> str:
    return encode_json({"target": {"name": target.name, "dim": target.dim}, "after": after})


def _reembed_required(target: EmbedderIdentity) -> ReembedRequiredError:
    return ReembedRequiredError(
        f"this store is being re-embedded with {target.describe()}, or a re-embedding was "
        f"interrupted: run `{REEMBED_COMMAND}` to finish it (until then vector search and "
        "writes of vectors are refused)",
        target=target,
        backend=NAME,
    )


def _check_reembedding(meta: _Meta, target: EmbedderIdentity) -> None:
    if meta.reembedding != target:
        moved = "none" if meta.reembedding is None else meta.reembedding.name
        raise ReembedRequiredError(
            f"another re-embedding took this store over (to {moved}) while re-embedding "
            f"with {target.describe()}; run `{REEMBED_COMMAND}` again once it is done",
            target=target,
            backend=NAME,
        )


# ----------------------------------------------------------------------------- registry


class _AsyncReads:
    """:class:`~agent_engine.memory.backend.AsyncReads` of a Redis store, on ``redis.asyncio``.

    The backend's read plans, driven by an asyncio client; errors translated as the
    backend's, and a closed backend reads nothing. The client's connections belong to the
    loop that first used them (the twin keeps one reader per loop).
    """

    def __init__(self, backend: RedisBackend, client: Any) -> None:
        self._backend = backend
        self._client = client

    async def fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        return await self._read(self._backend._get_plan(item_ids))  # noqa: SLF001

    async def select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        matching = await self._read(self._backend._load_plan(where))  # noqa: SLF001
        return order.sort(matching)[:limit]

    async def count(self, where: Filter) -> int:
        return await self._read(self._backend._count_plan(where))  # noqa: SLF001

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _read(self, plan: Plan[T]) -> T:
        with self._backend._runner.translating():  # noqa: SLF001
            return await adrive(plan, self._client)


def open_url(url: str, options: OpenOptions) -> RedisBackend:
    """``redis://HOST:PORT/DB[?prefix=P&ttl=SECONDS]`` (registry opener).

    ``prefix`` and ``ttl`` are this backend's options; the rest of the URL goes to the driver.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in {"prefix", "ttl"}}
    rest = urlencode([(key, value) for key, value in query if key not in ours])
    ttl: timedelta | None = None
    if "ttl" in ours:
        try:
            ttl = timedelta(seconds=float(ours["ttl"]))
        except ValueError:
            raise ValidationError(
                f"ttl must be a number of seconds, got {ours['ttl']!r}",
                field="ttl",
                value=ours["ttl"],
            ) from None
    return RedisBackend(
        urlunsplit(parts._replace(query=rest)),
        embedder=options.embedder,
        prefix=ours.get("prefix", DEFAULT_PREFIX),
        ttl=ttl,
    )


def temporary(work: Path, embedder: Embedder) -> RedisBackend:  # noqa: ARG001 - a Factory
    """The ``redis`` configuration: an empty store under a fresh prefix, dropped on close."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    return RedisBackend(
        embedder=embedder, prefix=f"agent_engine:bench:{stamp}:{uuid.uuid4().hex}:", temporary=True
    )

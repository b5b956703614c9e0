"""Where the Redis backend keeps what, and the one way it talks to the server.

Every key starts with the backend's prefix, so several stores (and the tests) share one
database without seeing each other, and :meth:`Keys.pattern` finds all of one store's keys.
Per store:

* ``i:<id>``: one item, its :func:`~agent_engine.serde.to_dict` form as JSON (the vector in
  the base64 float32 encoding every backend's serde uses);
* ``n:<namespace>``: the set of the namespace's item ids (what a scoped read loads);
* ``d:<namespace>``: each of the namespace's items that carries an ``expires_at`` still to
  come, with that instant (milliseconds), so a refreshed namespace expiry never outlives it;
* ``a:<namespace>``: the namespace's audit events by id; ``c:<namespace>``: its conflicts
  by id; ``x:<namespace>``: the conflicts of other namespaces that name one of its items;
* ``v:<namespace>``: the change counter of each of the namespace's tiers;
* ``l:<namespace>``: the namespace's aliases, each term's expansions as a JSON list, and
  ``aliased``: the namespaces that hold any (user-edited words: no expiry takes them);
* ``k:<namespace>``: the namespace's checkpoints by id, and ``checkpoints``: each
  checkpoint's namespace (saved states, not memory: no expiry takes them either);
* ``r:<realm>``: a project's registered agents, and ``realms``: the projects with any;
  ``g:<pool>``: a pool's grants by agent, and ``granted``: the pools with any (access rules,
  not memory: no expiry takes them);
* ``forks``: every fork record as JSON, by ``<tier>:<namespace>``; ``f:<tier>:<namespace>``:
  the namespaces of a scope's attached forks; ``h:<tier>:<namespace>``: an attached fork's
  hidden item ids (lineage, not memory: no expiry takes them);
* ``namespaces``: every live namespace, scored by when it expires (an unscoped read visits
  each; writes drop the names whose time is long past);
* ``meta``: the recorded embedder and a re-embedding under way.

:class:`Runner` runs reads and optimistic transactions (``WATCH``, reads, ``MULTI``/``EXEC``,
retried when a watched key moved) and turns the driver's errors into this library's: a server
that cannot be reached is a :class:`~agent_engine.errors.BackendUnavailableError`, and since
``EXEC`` applies all of a transaction or none of it, a write cut off half-way stores nothing.
A read is written once, as a :data:`Plan` of the commands it sends: :func:`drive` runs it on a
client (or a watching pipe), :func:`adrive` on a ``redis.asyncio`` client.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from agent_engine.errors import BackendError, BackendUnavailableError
from agent_engine.models import ContextItem
from agent_engine.serde import from_dict, to_dict

if TYPE_CHECKING:
    import redis

__all__ = [
    "NAME",
    "Finish",
    "Keys",
    "Pipe",
    "Plan",
    "Runner",
    "adrive",
    "decode_item",
    "decode_json",
    "drive",
    "encode_item",
    "encode_json",
    "live_namespaces",
    "live_namespaces_command",
    "now_ms",
    "queue_namespace",
]

T = TypeVar("T")

NAME = "RedisBackend"
"""The backend name errors carry."""

Pipe = Any
"""A redis-py ``Pipeline`` in a transaction: watching (its commands run at once) or queuing.

Typed loosely on purpose: the client decodes replies to ``str``, which the driver's types
cannot express (they say ``bytes | str`` everywhere).
"""

Finish = Callable[[list[Any]], T]
"""What a transaction's plan returns: turns ``EXEC``'s results into the call's result."""

Command = tuple[Any, ...]
"""A command a read sends: the client method's name, then its arguments."""
Plan = Generator[Command, Any, T]
"""A read: yields each command it sends, receives the reply, returns what it read."""

_GRACE_MS = 60_000
"""How long after its expiry a namespace is still visited (another machine's clock may lag)."""
_ATTEMPTS = 200
"""Optimistic attempts before a write gives up (each one lost to a concurrent writer)."""


@attrs.frozen
class Keys:
    """The key names of one store, all under ``prefix``."""

    prefix: str

    def item(self, item_id: str) -> str:
        """The key of one item."""
        return f"{self.prefix}i:{item_id}"

    def members(self, namespace: str) -> str:
        """The set of a namespace's item ids."""
        return f"{self.prefix}n:{namespace}"

    def deadlines(self, namespace: str) -> str:
        """The hash of a namespace's items' own expiry instants (ms)."""
        return f"{self.prefix}d:{namespace}"

    def audit(self, namespace: str) -> str:
        """The hash of a namespace's audit events."""
        return f"{self.prefix}a:{namespace}"

    def conflicts(self, namespace: str) -> str:
        """The hash of a namespace's conflicts."""
        return f"{self.prefix}c:{namespace}"

    def crossing(self, namespace: str) -> str:
        """The hash of other namespaces' conflicts naming this one's items (id: namespace)."""
        return f"{self.prefix}x:{namespace}"

    def versions(self, namespace: str) -> str:
        """The hash of a namespace's change counters, by tier."""
        return f"{self.prefix}v:{namespace}"

    def aliases(self, namespace: str) -> str:
        """The hash of a namespace's aliases (term: JSON list of expansions)."""
        return f"{self.prefix}l:{namespace}"

    def checkpoints(self, namespace: str) -> str:
        """The hash of a namespace's checkpoint records (id: the record as JSON)."""
        return f"{self.prefix}k:{namespace}"

    def saved(self, namespace: str) -> str:
        """The hash of a namespace's checkpoints' saved states (id: the state's text)."""
        return f"{self.prefix}s:{namespace}"

    def agents(self, realm: str) -> str:
        """The set of a realm's registered agents."""
        return f"{self.prefix}r:{realm}"

    def grants(self, pool: str) -> str:
        """The hash of a pool's grants (agent: the grant as JSON)."""
        return f"{self.prefix}g:{pool}"

    def fork_field(self, namespace: str, tier: str) -> str:
        """A scope's field in the :attr:`forks` hash."""
        return f"{tier}:{namespace}"

    def fork_children(self, namespace: str, tier: str) -> str:
        """The set of the namespaces of a scope's attached forks."""
        return f"{self.prefix}f:{tier}:{namespace}"

    def fork_hidden(self, namespace: str, tier: str) -> str:
        """The set of an attached fork's hidden item ids."""
        return f"{self.prefix}h:{tier}:{namespace}"

    @property
    def forks(self) -> str:
        """The hash of every fork record (``<tier>:<namespace>``: the record as JSON)."""
        return f"{self.prefix}forks"

    @property
    def realms(self) -> str:
        """The set of realms that have agents."""
        return f"{self.prefix}realms"

    @property
    def granted(self) -> str:
        """The set of pools that have grants."""
        return f"{self.prefix}granted"

    @property
    def checkpoint_homes(self) -> str:
        """The hash of every checkpoint's namespace, by id."""
        return f"{self.prefix}checkpoints"

    @property
    def aliased(self) -> str:
        """The set of namespaces that hold aliases."""
        return f"{self.prefix}aliased"

    @property
    def namespaces(self) -> str:
        """The sorted set of live namespaces, scored by their expiry (ms; ``inf``: none)."""
        return f"{self.prefix}namespaces"

    @property
    def meta(self) -> str:
        """The hash of store facts: its embedder, a re-embedding under way.

        Also what a transaction that learns its keys as it reads watches first: a pipe reads
        at once only while it watches something, and this key rarely changes.
        """
        return f"{self.prefix}meta"

    def of_namespace(self, namespace: str) -> list[str]:
        """The keys a namespace's expiry covers (besides its items)."""
        return [
            self.members(namespace),
            self.deadlines(namespace),
            self.audit(namespace),
            self.conflicts(namespace),
            self.crossing(namespace),
            self.versions(namespace),
        ]

    def pattern(self) -> str:
        """A ``SCAN`` pattern matching every key of this store (glob characters escaped)."""
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self.prefix)
        return f"{escaped}*"


def live_namespaces(client: Any, keys: Keys) -> list[str]:
    """The namespaces whose keys may still exist (a minute's grace for clocks that differ)."""
    name, *arguments = live_namespaces_command(keys)
    return sorted(getattr(client, name)(*arguments))


def live_namespaces_command(keys: Keys) -> Command:
    """The command whose reply is :func:`live_namespaces` (unsorted), for a :data:`Plan`."""
    return ("zrangebyscore", keys.namespaces, now_ms() - _GRACE_MS, "+inf")


def drive(plan: Plan[T], client: Any) -> T:
    """Run ``plan`` on a redis-py client or pipe: each command sent as it is yielded."""
    try:
        name, *arguments = next(plan)
        while True:
            name, *arguments = plan.send(getattr(client, name)(*arguments))
    except StopIteration as done:
        result: T = done.value
        return result


async def adrive(plan: Plan[T], client: Any) -> T:
    """Run ``plan`` on a ``redis.asyncio`` client: each command's reply awaited."""
    try:
        name, *arguments = next(plan)
        while True:
            name, *arguments = plan.send(await getattr(client, name)(*arguments))
    except StopIteration as done:
        result: T = done.value
        return result


def queue_namespace(pipe: Any, keys: Keys, namespace: str, ttl_ms: int | None) -> None:
    """Queue the note that ``namespace`` lives until ``ttl_ms`` from now (or for good).

    The score only grows (``GT``): what else of the namespace was written lives as long as its
    own expiry says. Names whose expiry is long past are dropped on the way, so the set holds
    the live namespaces, however many tasks came and went.
    """
    at = now_ms()
    score = float("inf") if ttl_ms is None else float(at + ttl_ms)
    pipe.zadd(keys.namespaces, {namespace: score}, gt=True)
    pipe.zremrangebyscore(keys.namespaces, "-inf", at - _GRACE_MS)


def encode_json(value: Any) -> str:
    """JSON as stored: compact, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode_json(text: str) -> Any:
    """The value of :func:`encode_json` text."""
    return json.loads(text)


def encode_item(item: ContextItem) -> str:
    """An item as stored: its serde dict as JSON (vector included)."""
    return encode_json(to_dict(item))


def decode_item(text: str) -> ContextItem:
    """The item of :func:`encode_item` text."""
    return from_dict(ContextItem, decode_json(text))


def now_ms() -> int:
    """This machine's clock in milliseconds since the epoch (what ``PEXPIREAT`` takes)."""
    return time.time_ns() // 1_000_000


class Runner:
    """Runs reads and optimistic transactions on one client, translating its errors."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.closed = False

    @contextlib.contextmanager
    def translating(self) -> Iterator[None]:
        """Turn the driver's errors into this library's (ours pass through)."""
        import redis.exceptions as errors  # noqa: PLC0415 - the driver loads with the backend

        if self.closed:
            raise BackendError(f"this {NAME} is closed", backend=NAME)
        try:
            yield
        except (errors.ConnectionError, errors.TimeoutError, errors.BusyLoadingError) as error:
            raise BackendUnavailableError(f"Redis is unreachable: {error}", backend=NAME) from error
        except errors.RedisError as error:
            raise BackendError(f"Redis error: {error}", backend=NAME) from error

    def read(self, work: Callable[[Any], T]) -> T:
        """``work(client)``, its driver errors translated."""
        with self.translating():
            return work(self.client)

    def transact(self, watch: list[str], plan: Callable[[Pipe], Finish[T]]) -> T:
        """Run one optimistic transaction, again while a watched key moves under it.

        ``plan(pipe)`` runs with ``watch`` watched: it reads through ``pipe`` (immediate
        commands; it may watch more keys before reading them), raises to abandon the write,
        then calls ``pipe.multi()``, queues the writes and returns what turns ``EXEC``'s
        results into the result. A concurrent write to a watched key makes ``EXEC`` apply
        nothing, and the whole plan runs again on what is stored then.
        """
        import redis.exceptions as errors  # noqa: PLC0415 - the driver loads with the backend

        with self.translating():
            for attempt in range(_ATTEMPTS):
                pipeline: Pipe = self.client.pipeline(transaction=True)
                with pipeline as pipe:
                    try:
                        if watch:
                            pipe.watch(*watch)
                        finish = plan(pipe)
                        return finish(pipe.execute())
                    except errors.WatchError as error:
                        # The driver reports a connection lost while watching as a WatchError
                        # raised while handling it: the server is gone, not a key moved. Its
                        # EXEC may or may not have run, so running the plan again would guess.
                        lost = error.__context__
                        if isinstance(lost, errors.ConnectionError | errors.TimeoutError):
                            raise BackendUnavailableError(
                                f"Redis went away during a write: {lost}", backend=NAME
                            ) from lost
                        # Lost to another writer; back off a little so the winners move on.
                        time.sleep(random.uniform(0, 0.001 * min(attempt, 20)))  # noqa: S311
            raise BackendError(
                f"a write lost to concurrent writers {_ATTEMPTS} times in a row", backend=NAME
            )

"""The backend conformance suite: one set of tests every ``MemoryBackend`` must pass unchanged.

Subclass :class:`BackendConformance` in a test module and override the ``backend`` fixture so
it yields an empty backend, built with the suite's ``embedder`` fixture, and cleans up
afterwards::

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def backend(self, embedder):
            with MyBackend(..., embedder=embedder) as backend:
                yield backend

Each test's docstring says what behaviour it checks and, where useful, what to look at when
it fails. The in-memory backend is the reference; the property tests compare every backend
with an independent brute-force oracle written here.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_engine.embeddings import Embedder, EmbedderIdentity, HashingEmbedder, Matrix
from agent_engine.errors import (
    DimensionMismatchError,
    DuplicateItemError,
    EmbeddingError,
    FilterError,
    FilterTooLargeError,
    ItemNotFoundError,
    UnknownAgentError,
    ValidationError,
)
from agent_engine.filters import MAX_LIST_VALUES, MAX_VALUES, Filter, Order, parse_filter
from agent_engine.memory.audit import erasure_token
from agent_engine.memory.backend import MemoryBackend, embedding_text
from agent_engine.memory.checkpoints import Checkpoint
from agent_engine.memory.conflicts import Conflict, ConflictType
from agent_engine.memory.grants import Access, Grant
from agent_engine.memory.lineage import Fork
from agent_engine.models import (
    MAX_COUNT,
    MAX_ITEM_ID_LENGTH,
    ArchiveReason,
    AuditAction,
    AuditEvent,
    ContextItem,
    Origin,
    Provenance,
    Status,
    Tier,
)

__all__ = ["BackendConformance", "make_item"]

T0 = datetime(2024, 1, 1, tzinfo=UTC)
EMBED_DIM = 64


def make_item(n: int, **fields: Any) -> ContextItem:
    """Build a distinct, fully populated item numbered ``n`` (fields may be overridden)."""
    defaults: dict[str, Any] = {
        "id": f"item-{n:05d}",
        "kind": ("decision", "convention", "note")[n % 3],
        "text": f"memory number {n}",
        "tier": Tier.PROJECT,
        "namespace": f"ns-{n % 2}",
        "source": f"test/{n % 4}",
        "session": f"s{n % 5}" if n % 4 else "",
        "timestamp": T0 + timedelta(minutes=n),
        "tags": ("even",) if n % 2 == 0 else ("odd", "x"),
        "importance": round((n % 10) / 10, 1),
        "token_cost": n % 7 if n % 5 else None,
        "payload": {"n": n, "nested": {"list": [n, str(n)]}},
        "status": Status.PINNED if n % 11 == 0 else Status.CONFIRMED,
        "access_count": n % 3,
        "last_accessed_at": T0 + timedelta(hours=n) if n % 2 else None,
        "expires_at": T0 + timedelta(days=n) if n % 3 == 0 else None,
        # The lifecycle: slots, versions and history, the archive, merged duplicates.
        "key": f"slot-{n % 3}" if n % 4 == 1 else None,
        "version": n % 3 + 1,
        "valid_from": T0 + timedelta(minutes=n, seconds=30) if n % 5 == 2 else None,
        "valid_to": T0 + timedelta(days=1, minutes=n) if n % 6 == 5 else None,
        "superseded_by": f"item-{n + 1:05d}" if n % 6 == 5 else None,
        "archived_at": T0 + timedelta(hours=2, minutes=n) if n % 7 == 3 else None,
        "archived_reason": ArchiveReason.EVICTED if n % 7 == 3 else None,
        "merged_from": (
            (Origin(f"dup-{n}", source="test/dup", session="s9", timestamp=T0),)
            if n % 8 == 2
            else ()
        ),
        "agent": f"agent-{n % 3}" if n % 3 else "",
    }
    defaults.update(fields)
    return ContextItem(**defaults)


def _same(got: ContextItem | None, expected: ContextItem | None) -> bool:
    """Equality, including the vector when ``expected`` brings one (attrs equality skips it).

    An expected item without a vector matches whatever vector the backend's embedder gave.
    """
    if got is None or expected is None:
        return got is expected
    if got != expected:
        return False
    if expected.embedding is None:
        return True
    return got.embedding is not None and bool(np.array_equal(got.embedding, expected.embedding))


def _ids(items: list[ContextItem]) -> list[str]:
    return [item.id for item in items]


class BackendConformance:
    """Tests every :class:`~agent_engine.memory.backend.MemoryBackend` must pass."""

    @pytest.fixture
    def embedder(self) -> Embedder:
        """The embedder backends under test are built with (small and deterministic)."""
        return HashingEmbedder(dim=EMBED_DIM)

    @pytest.fixture
    def backend(self, embedder: Embedder) -> Iterator[MemoryBackend]:
        """Yield an empty backend built with ``embedder``; subclasses must override this."""
        raise NotImplementedError("override the `backend` fixture in your conformance subclass")

    @pytest.fixture
    def filled(self, backend: MemoryBackend) -> MemoryBackend:
        """The backend holding items 0..29 (see :func:`make_item`)."""
        backend.add_many([make_item(n) for n in range(30)])
        return backend

    # ------------------------------------------------------------------ hygiene

    def test_starts_empty(self, backend: MemoryBackend) -> None:
        """A fresh backend holds nothing (if this fails, the fixture leaks state between tests)."""
        assert backend.count() == 0
        assert backend.list_all() == []

    def test_satisfies_protocol(self, backend: MemoryBackend) -> None:
        """The backend structurally implements MemoryBackend."""
        assert isinstance(backend, MemoryBackend)

    # ------------------------------------------------------------------ create / read

    def test_add_then_get_round_trips_every_field(self, backend: MemoryBackend) -> None:
        """What goes in comes back equal, field for field (check the row conversion if not)."""
        item = make_item(3, embedding=np.linspace(-1.0, 1.0, EMBED_DIM), provenance=None)
        backend.add(item)
        got = backend.get(item.id)
        assert _same(got, item)
        assert got is not None
        assert got.fingerprint == item.fingerprint

    def test_datetimes_come_back_aware_utc(self, backend: MemoryBackend) -> None:
        """A timestamp given in another zone comes back as the same instant in UTC."""
        zone = timezone(timedelta(hours=5, minutes=30))
        item = make_item(1, timestamp=datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=zone))
        backend.add(item)
        got = backend.get(item.id)
        assert got is not None
        assert got.timestamp == item.timestamp
        assert got.timestamp.tzinfo == UTC
        assert got.timestamp.microsecond == 123456

    def test_unicode_and_large_payloads(self, backend: MemoryBackend) -> None:
        """Non-ASCII text and a payload of several megabytes survive unchanged."""
        text = "naïve café ✓ 日本語 🚀 \u200b العربية"
        big = {"blob": "x" * 3_000_000, "emoji": "🚀" * 1000, "nul": "a\x00b", "deep": [[[1]]]}
        item = make_item(1, text=text, payload=big, tags=("ünï", "标签"))
        backend.add(item)
        assert _same(backend.get(item.id), item)
        assert _ids(backend.query({"tags": "标签"})) == [item.id]

    def test_get_missing_returns_none(self, backend: MemoryBackend) -> None:
        """An unknown id is not an error for get."""
        assert backend.get("nope") is None

    def test_get_many_keeps_order_and_skips_unknown(self, filled: MemoryBackend) -> None:
        """get_many answers in the order asked and leaves out ids that are not stored."""
        got = filled.get_many(["item-00005", "missing", "item-00001", "item-00005"])
        assert _ids(got) == ["item-00005", "item-00001"]
        assert filled.get_many([]) == []

    def test_add_many_stores_all(self, backend: MemoryBackend) -> None:
        """add_many stores every item of the batch."""
        backend.add_many(make_item(n) for n in range(50))
        assert backend.count() == 50
        assert {item.id for item in backend.list_all()} == {make_item(n).id for n in range(50)}

    def test_add_many_empty_is_noop(self, backend: MemoryBackend) -> None:
        """An empty batch stores nothing and raises nothing."""
        backend.add_many([])
        assert backend.count() == 0

    # ------------------------------------------------------------------ duplicates

    def test_add_existing_id_is_refused_and_keeps_original(self, backend: MemoryBackend) -> None:
        """Add never overwrites: DuplicateItemError, and the stored item is unchanged."""
        original = make_item(1)
        backend.add(original)
        with pytest.raises(DuplicateItemError) as info:
            backend.add(attrs.evolve(original, text="changed"))
        assert info.value.item_id == original.id
        assert _same(backend.get(original.id), original)

    def test_add_many_with_stored_duplicate_stores_none(self, backend: MemoryBackend) -> None:
        """A batch containing one stored id is refused as a whole."""
        backend.add(make_item(5))
        with pytest.raises(DuplicateItemError):
            backend.add_many([make_item(n) for n in range(10)])
        assert backend.count() == 1

    def test_add_many_with_duplicate_within_batch_stores_none(self, backend: MemoryBackend) -> None:
        """An id that appears twice in one batch is refused before anything is written."""
        batch = [make_item(1), make_item(2), make_item(1, text="again")]
        with pytest.raises(DuplicateItemError):
            backend.add_many(batch)
        assert backend.count() == 0

    # ------------------------------------------------------------------ update / delete

    def test_update_replaces_item(self, filled: MemoryBackend) -> None:
        """Update replaces the whole item, and queries see the new values."""
        changed = attrs.evolve(make_item(4), text="rewritten", importance=1.0, tags=("new",))
        filled.update(changed)
        assert _same(filled.get(changed.id), changed)
        assert _ids(filled.query({"tags": "new"})) == [changed.id]
        assert filled.count() == 30

    def test_update_missing_raises(self, backend: MemoryBackend) -> None:
        """Update of an unknown id raises ItemNotFoundError and creates nothing."""
        with pytest.raises(ItemNotFoundError):
            backend.update(make_item(1))
        assert backend.count() == 0

    def test_update_many_with_one_missing_changes_none(self, filled: MemoryBackend) -> None:
        """A batch update with one unknown id leaves every stored item as it was."""
        batch = [attrs.evolve(make_item(n), text="changed") for n in (1, 2)] + [make_item(99)]
        with pytest.raises(ItemNotFoundError):
            filled.update_many(batch)
        assert _same(filled.get("item-00001"), make_item(1))
        assert _same(filled.get("item-00002"), make_item(2))
        assert filled.get("item-00099") is None

    def test_write_adds_and_updates_together(self, filled: MemoryBackend) -> None:
        """write() stores new items and replaces stored ones in one call."""
        history = attrs.evolve(make_item(5), id="item-00005-v1", valid_to=T0 + timedelta(days=9))
        current = attrs.evolve(make_item(5), text="the new version", version=2)
        filled.write(add=[history], update=[current])
        assert _same(filled.get(history.id), history)
        assert _same(filled.get(current.id), current)
        assert filled.count() == 31

    @pytest.mark.parametrize(
        "broken",
        [
            pytest.param({"add": [make_item(40)], "update": [make_item(99)]}, id="unknown-update"),
            pytest.param(
                {"add": [make_item(40), make_item(3)], "update": [make_item(4)]},
                id="stored-add",
            ),
        ],
    )
    def test_write_is_all_or_nothing(
        self, filled: MemoryBackend, broken: dict[str, list[ContextItem]]
    ) -> None:
        """A write whose add or update cannot happen stores and changes nothing."""
        updates = [attrs.evolve(item, text="changed") for item in broken["update"]]
        with pytest.raises((ItemNotFoundError, DuplicateItemError)):
            filled.write(add=broken["add"], update=updates)
        assert filled.get("item-00040") is None
        assert _same(filled.get("item-00004"), make_item(4))
        assert filled.count() == 30

    def test_write_refuses_an_id_both_added_and_updated(self, filled: MemoryBackend) -> None:
        with pytest.raises(ValidationError, match="both added and updated"):
            filled.write(add=[make_item(40)], update=[make_item(40)])
        assert filled.get("item-00040") is None

    def test_update_many_rejects_repeated_id(self, filled: MemoryBackend) -> None:
        """The same id twice in one update batch is ambiguous and refused."""
        batch = [attrs.evolve(make_item(1), text="a"), attrs.evolve(make_item(1), text="b")]
        with pytest.raises(ValidationError):
            filled.update_many(batch)
        assert _same(filled.get("item-00001"), make_item(1))

    def test_delete_reports_whether_it_removed(self, filled: MemoryBackend) -> None:
        """Delete returns True once, then False; deleting a missing id is a no-op."""
        assert filled.delete("item-00003") is True
        assert filled.delete("item-00003") is False
        assert filled.get("item-00003") is None
        assert filled.count() == 29

    def test_delete_many_counts_existing(self, filled: MemoryBackend) -> None:
        """delete_many removes in one call and counts only ids that existed."""
        removed = filled.delete_many(["item-00001", "item-00002", "missing", "item-00001"])
        assert removed == 2
        assert filled.count() == 28

    def test_clear_all_and_filtered(self, filled: MemoryBackend) -> None:
        """Clear with a filter removes just the matches; without one, everything."""
        odd = filled.count({"tags": "odd"})
        assert filled.clear({"tags": "odd"}) == odd
        assert filled.count() == 30 - odd
        assert filled.count({"tags": "odd"}) == 0
        assert filled.clear() == 30 - odd
        assert filled.count() == 0

    def test_deleted_id_can_be_added_again(self, filled: MemoryBackend) -> None:
        """Once deleted, an id is free again."""
        filled.delete("item-00007")
        filled.add(make_item(7, text="reborn"))
        got = filled.get("item-00007")
        assert got is not None
        assert got.text == "reborn"

    # ------------------------------------------------------------------ ordering and limits

    def test_default_order_is_newest_first(self, filled: MemoryBackend) -> None:
        """query() with no order_by returns newest first, limited to 100, and never warns."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = filled.query()
        assert _ids(got) == [make_item(n).id for n in reversed(range(30))]

    def test_plus_sorts_ascending(self, filled: MemoryBackend) -> None:
        """``"+field"`` sorts ascending (oldest first) without a warning.

        If this fails, check that the backend hands ``order_by`` to ``parse_order`` unchanged.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = filled.query(order_by="+timestamp")
        assert _ids(got) == [make_item(n).id for n in range(30)]

    @pytest.mark.parametrize(
        ("order", "oldest_first"),
        [
            pytest.param(Order.asc("timestamp"), True, id="asc"),
            pytest.param(Order.desc("timestamp"), False, id="desc"),
        ],
    )
    def test_order_value_says_the_direction(
        self, filled: MemoryBackend, order: Order, oldest_first: bool
    ) -> None:
        """An ``Order`` given as ``order_by`` sorts the way it names, without a warning."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = filled.query(order_by=order)
        oldest = [make_item(n).id for n in range(30)]
        assert _ids(got) == (oldest if oldest_first else oldest[::-1])

    def test_bare_field_is_deprecated_and_still_descending(self, filled: MemoryBackend) -> None:
        """A bare ``"field"`` still sorts descending, with a DeprecationWarning that it will flip.

        If this fails, check that ``query`` reads ``order_by`` through ``parse_order``.
        """
        with pytest.warns(DeprecationWarning, match=r"will sort ascending") as record:
            got = filled.query(order_by="timestamp")
        assert len(record) == 1
        assert _ids(got) == [make_item(n).id for n in reversed(range(30))]

    def test_minus_sorts_descending(self, filled: MemoryBackend) -> None:
        """``"-field"`` sorts descending (newest first) without a warning, as in SQL and ORMs."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = filled.query(order_by="-timestamp")
        assert _ids(got) == [make_item(n).id for n in reversed(range(30))]

    def test_ties_break_by_id(self, filled: MemoryBackend) -> None:
        """Equal sort keys come back in id order (ascending) in both directions."""
        items = [make_item(n) for n in range(30)]
        expected_desc = sorted(items, key=lambda i: (-i.importance, i.id))
        expected_asc = sorted(items, key=lambda i: (i.importance, i.id))
        assert _ids(filled.query(order_by=Order.desc("importance"))) == _ids(expected_desc)
        assert _ids(filled.query(order_by="+importance")) == _ids(expected_asc)
        assert _ids(filled.query(order_by=Order.asc("importance"))) == _ids(expected_asc)

    @pytest.mark.parametrize(
        "order",
        [
            pytest.param(Order.asc("token_cost"), id="+token_cost"),
            pytest.param(Order.desc("token_cost"), id="token_cost-desc"),
            pytest.param(Order.asc("expires_at"), id="+expires_at"),
            pytest.param(Order.desc("expires_at"), id="expires_at-desc"),
        ],
    )
    def test_nulls_sort_last(self, filled: MemoryBackend, order: Order) -> None:
        """Items without a value come after every item with one, in either direction."""
        got = filled.query(order_by=order, limit=None)
        values = [getattr(item, order.field) for item in got]
        first_null = values.index(None)
        assert all(value is None for value in values[first_null:])
        present = values[:first_null]
        assert present == sorted(present, reverse=order.descending)

    def test_limit(self, filled: MemoryBackend) -> None:
        """Limit caps the result; 0 gives nothing; None gives everything."""
        assert _ids(filled.query(limit=3)) == [make_item(n).id for n in (29, 28, 27)]
        assert filled.query(limit=0) == []
        assert len(filled.query(limit=None)) == 30
        assert len(filled.query({"namespace": "ns-0"}, limit=5, order_by="+timestamp")) == 5

    def test_limit_applies_after_filter_and_order(self, filled: MemoryBackend) -> None:
        """The limit picks the first matches in order, not the first rows stored."""
        got = filled.query({"kind": "note"}, limit=2, order_by=Order.desc("importance"))
        notes = [make_item(n) for n in range(30) if n % 3 == 2]
        assert _ids(got) == _ids(sorted(notes, key=lambda i: (-i.importance, i.id))[:2])

    @pytest.mark.parametrize("limit", [-1, 1.5, "10", True])
    def test_bad_limit_is_refused(self, filled: MemoryBackend, limit: Any) -> None:
        """A negative or non-integer limit is a ValidationError, not a silent default."""
        with pytest.raises(ValidationError):
            filled.query(limit=limit)

    @pytest.mark.parametrize(
        "order_by",
        [
            "nonsense",
            "",
            "+",
            "-",
            "--timestamp",
            "++timestamp",
            "+-timestamp",
            "-+timestamp",
            " timestamp",
            "+tags",
            "tags",
            "-payload",
            None,
            3,
            ("timestamp", True),
        ],
    )
    def test_bad_order_by_is_refused(self, filled: MemoryBackend, order_by: Any) -> None:
        """An unknown, unorderable or malformed order_by is a FilterError naming it, not a warning.

        If this fails with a DeprecationWarning, the spelling was taken for a legacy one before
        its field was checked.
        """
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(FilterError) as info:
                filled.query(order_by=order_by)
        assert isinstance(info.value, ValidationError)
        assert info.value.field == "order_by"

    def test_large_result_is_complete(self, backend: MemoryBackend) -> None:
        """A few thousand items come back complete and in order with limit=None."""
        backend.add_many(make_item(n) for n in range(3000))
        got = backend.query(limit=None, order_by="+timestamp")
        assert _ids(got) == [make_item(n).id for n in range(3000)]

    # ------------------------------------------------------------------ filters

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            pytest.param({"kind": "note"}, lambda i: i.kind == "note", id="exact"),
            pytest.param({"session": ""}, lambda i: i.session == "", id="empty-string"),
            pytest.param(
                {"session": {"$in": ["s1", "s2"]}},
                lambda i: i.session in {"s1", "s2"},
                id="session-in",
            ),
            pytest.param({"kind": {"$eq": "note"}}, lambda i: i.kind == "note", id="eq"),
            pytest.param({"kind": {"$ne": "note"}}, lambda i: i.kind != "note", id="ne"),
            pytest.param(
                {"kind": {"$in": ["note", "decision"]}},
                lambda i: i.kind in {"note", "decision"},
                id="in",
            ),
            pytest.param({"kind": {"$nin": ["note"]}}, lambda i: i.kind != "note", id="nin"),
            pytest.param({"kind": {"$in": []}}, lambda _: False, id="in-empty"),
            pytest.param({"kind": {"$nin": []}}, lambda _: True, id="nin-empty"),
            pytest.param({"importance": {"$gt": 0.5}}, lambda i: i.importance > 0.5, id="gt"),
            pytest.param({"importance": {"$gte": 0.5}}, lambda i: i.importance >= 0.5, id="gte"),
            pytest.param({"importance": {"$lt": 0.5}}, lambda i: i.importance < 0.5, id="lt"),
            pytest.param({"importance": {"$lte": 0.5}}, lambda i: i.importance <= 0.5, id="lte"),
            pytest.param(
                {"importance": {"$gt": 0.2, "$lt": 0.6}},
                lambda i: 0.2 < i.importance < 0.6,
                id="range",
            ),
            pytest.param({"access_count": 2}, lambda i: i.access_count == 2, id="int-exact"),
            pytest.param(
                {"access_count": {"$in": [0, 2]}}, lambda i: i.access_count in {0, 2}, id="int-in"
            ),
            pytest.param({"importance": 1}, lambda i: i.importance == 1.0, id="int-vs-float"),
            pytest.param(
                {"importance": {"$in": [0, 0.5, 2]}},
                lambda i: i.importance in {0, 0.5},
                id="in-ints-and-floats",
            ),
            pytest.param(
                {"token_cost": {"$in": [3, 0.5, 4.0]}},
                lambda i: i.token_cost in {3, 4},
                id="int-field-in-floats",
            ),
            pytest.param(
                {"access_count": {"$in": [2**70, 2]}},
                lambda i: i.access_count == 2,
                id="in-beyond-64-bits",
            ),
            pytest.param(
                {"access_count": {"$nin": [-(2**70)]}}, lambda _: True, id="nin-beyond-64-bits"
            ),
            pytest.param(
                {"archived_at": None, "valid_to": None},
                lambda i: i.archived_at is None and i.valid_to is None,
                id="working-set",
            ),
            pytest.param(
                {"archived_at": {"$exists": True}, "valid_to": None},
                lambda i: i.archived_at is not None and i.valid_to is None,
                id="archive",
            ),
            pytest.param(
                {"archived_reason": "evicted"},
                lambda i: i.archived_reason == "evicted",
                id="archived-reason",
            ),
            pytest.param({"key": "slot-1"}, lambda i: i.key == "slot-1", id="key"),
            pytest.param({"key": {"$ne": "slot-1"}}, lambda i: i.key != "slot-1", id="key-ne"),
            pytest.param({"version": {"$gte": 2}}, lambda i: i.version >= 2, id="version"),
            pytest.param(
                {"superseded_by": {"$in": ["item-00006", "item-00012"]}},
                lambda i: i.superseded_by in {"item-00006", "item-00012"},
                id="superseded-by",
            ),
            pytest.param(
                {"valid_from": {"$lte": T0 + timedelta(minutes=20)}},
                lambda i: i.valid_from is not None and i.valid_from <= T0 + timedelta(minutes=20),
                id="valid-from",
            ),
            pytest.param(
                {"timestamp": {"$gte": T0 + timedelta(minutes=10)}},
                lambda i: i.timestamp >= T0 + timedelta(minutes=10),
                id="datetime-gte",
            ),
            pytest.param(
                {
                    "timestamp": {
                        "$lt": datetime(2024, 1, 1, 5, 10, tzinfo=timezone(timedelta(hours=5)))
                    }
                },
                lambda i: i.timestamp < T0 + timedelta(minutes=10),
                id="datetime-other-zone",
            ),
            pytest.param({"tier": "project"}, lambda i: i.tier is Tier.PROJECT, id="enum-string"),
            pytest.param({"status": Status.PINNED}, lambda i: i.pinned, id="enum-member"),
            pytest.param(
                {"status": {"$in": ["pinned", "candidate"]}}, lambda i: i.pinned, id="enum-in"
            ),
            pytest.param({"token_cost": None}, lambda i: i.token_cost is None, id="null-exact"),
            pytest.param(
                {"token_cost": {"$ne": None}}, lambda i: i.token_cost is not None, id="null-ne"
            ),
            pytest.param(
                {"token_cost": {"$exists": True}},
                lambda i: i.token_cost is not None,
                id="exists-true",
            ),
            pytest.param(
                {"token_cost": {"$exists": False}},
                lambda i: i.token_cost is None,
                id="exists-false",
            ),
            pytest.param(
                {"token_cost": {"$ne": 3}}, lambda i: i.token_cost != 3, id="ne-includes-null"
            ),
            pytest.param(
                {"token_cost": {"$nin": [1, 2]}},
                lambda i: i.token_cost not in {1, 2},
                id="nin-includes-null",
            ),
            pytest.param(
                {"token_cost": {"$gt": 2}},
                lambda i: i.token_cost is not None and i.token_cost > 2,
                id="gt-excludes-null",
            ),
            pytest.param(
                {"expires_at": {"$lte": T0 + timedelta(days=9)}},
                lambda i: i.expires_at is not None and i.expires_at <= T0 + timedelta(days=9),
                id="nullable-datetime",
            ),
            pytest.param({"tags": "odd"}, lambda i: "odd" in i.tags, id="tags-contains"),
            pytest.param(
                {"tags": ["even", "missing"]},
                lambda i: "even" in i.tags,
                id="tags-any-of-list",
            ),
            pytest.param(
                {"tags": {"$in": ["x", "even"]}},
                lambda i: bool({"x", "even"} & set(i.tags)),
                id="tags-in",
            ),
            pytest.param(
                {"tags": {"$all": ["odd", "x"]}},
                lambda i: {"odd", "x"} <= set(i.tags),
                id="tags-all",
            ),
            pytest.param({"tags": {"$all": ["odd", "even"]}}, lambda _: False, id="tags-all-none"),
            pytest.param({"tags": {"$nin": ["x"]}}, lambda i: "x" not in i.tags, id="tags-nin"),
            pytest.param({"tags": {"$ne": "odd"}}, lambda i: "odd" not in i.tags, id="tags-ne"),
            pytest.param({"tags": {"$eq": "x"}}, lambda i: "x" in i.tags, id="tags-eq"),
            pytest.param({"tags": {"$exists": True}}, lambda i: bool(i.tags), id="tags-exists"),
            pytest.param(
                {"kind": "note", "namespace": "ns-0", "importance": {"$gte": 0.2}},
                lambda i: i.kind == "note" and i.namespace == "ns-0" and i.importance >= 0.2,
                id="conjunction",
            ),
            pytest.param({}, lambda _: True, id="empty"),
        ],
    )
    def test_filter_semantics(
        self,
        filled: MemoryBackend,
        filters: dict[str, Any],
        expected: Callable[[ContextItem], bool],
    ) -> None:
        """Each operator selects what docs/filters.md says it does, and count agrees."""
        filled.add(make_item(30, tags=()))
        universe = [make_item(n) for n in range(30)] + [make_item(30, tags=())]
        want = sorted(i.id for i in universe if expected(i))
        got = filled.query(filters, limit=None, order_by="+timestamp")
        assert sorted(_ids(got)) == want
        assert filled.count(filters) == len(want)

    @pytest.mark.parametrize(
        "filters",
        [
            pytest.param({"nosuchfield": 1}, id="unknown-field"),
            pytest.param({"payload": {"n": 1}}, id="payload-not-filterable"),
            pytest.param({"kind": {"$regex": "n.*"}}, id="unknown-operator"),
            pytest.param({"kind": {"eq": "note"}}, id="operator-without-dollar"),
            pytest.param({"kind": {}}, id="empty-operator-doc"),
            pytest.param({"kind": 3}, id="wrong-type-string"),
            pytest.param({"importance": "high"}, id="wrong-type-number"),
            pytest.param({"importance": True}, id="bool-is-not-a-number"),
            pytest.param({"importance": float("nan")}, id="nan"),
            pytest.param({"importance": {"$in": 0.5}}, id="in-needs-list"),
            pytest.param({"importance": {"$in": [0.5, "x"]}}, id="in-wrong-member"),
            pytest.param({"kind": ["a", "b"]}, id="list-on-scalar-field"),
            pytest.param({"kind": {"$gt": "a"}}, id="string-comparison"),
            pytest.param({"tier": "planet"}, id="bad-enum"),
            pytest.param({"timestamp": {"$gt": datetime(2024, 1, 1)}}, id="naive-datetime"),  # noqa: DTZ001
            pytest.param({"timestamp": {"$gt": "2024-01-01"}}, id="string-for-datetime"),
            pytest.param({"importance": None}, id="null-on-non-nullable"),
            pytest.param({"token_cost": {"$gt": None}}, id="null-comparison"),
            pytest.param({"kind": {"$all": ["a"]}}, id="all-on-scalar"),
            pytest.param({"tags": {"$gt": "a"}}, id="comparison-on-tags"),
            pytest.param({"tags": 3}, id="tag-not-string"),
            pytest.param({"tags": {"$all": "odd"}}, id="all-needs-list"),
            pytest.param({"token_cost": {"$exists": "yes"}}, id="exists-needs-bool"),
        ],
    )
    def test_bad_filters_raise(self, filled: MemoryBackend, filters: dict[str, Any]) -> None:
        """Malformed filters raise FilterError from query, count and clear, and delete nothing."""
        with pytest.raises(FilterError):
            filled.query(filters)
        with pytest.raises(FilterError):
            filled.count(filters)
        with pytest.raises(FilterError):
            filled.clear(filters)
        assert filled.count() == 30

    def test_filters_must_be_a_mapping(self, filled: MemoryBackend) -> None:
        """A filter that is not a dict is refused, not treated as empty."""
        with pytest.raises(FilterError):
            filled.query(["kind", "note"])  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "filters",
        [
            pytest.param(
                {"tags": {"$all": [f"t{n}" for n in range(MAX_LIST_VALUES + 1)]}}, id="tag-list"
            ),
            pytest.param(
                {"kind": {"$in": [f"k{n}" for n in range(MAX_LIST_VALUES + 1)]}}, id="value-list"
            ),
            pytest.param(
                {
                    field: {"$nin": [f"v{n}" for n in range(MAX_LIST_VALUES)]}
                    for field in ("id", "kind", "source", "session", "namespace", "fingerprint")
                },
                id="values-in-all",
            ),
        ],
    )
    def test_filters_past_the_size_limits_are_refused(
        self, filled: MemoryBackend, filters: dict[str, Any]
    ) -> None:
        """A filter past the limits of docs/filters.md is refused before the store is touched.

        Every method that takes a filter raises FilterTooLargeError, and nothing is deleted.
        """
        calls: list[Callable[[], object]] = [
            lambda: filled.query(filters),
            lambda: filled.count(filters),
            lambda: filled.clear(filters),
            lambda: filled.search("memory", filters=filters),
            lambda: filled.lexical_search("memory", filters=filters),
        ]
        for call in calls:
            with pytest.raises(FilterTooLargeError) as info:
                call()
            assert info.value.limit in {MAX_LIST_VALUES, MAX_VALUES}
            assert info.value.size > info.value.limit
        assert filled.count() == 30

    def test_filters_at_the_size_limits_match_the_oracle(self, filled: MemoryBackend) -> None:
        """The longest lists the language accepts give the oracle's answer, and promptly.

        If this fails or hangs on a SQL store, check that a list compiles to one parameter or
        one read of the tag table rather than to a clause per value (a chain of a thousand
        ``EXISTS`` exceeds SQLite's expression depth and takes PostgreSQL's planner hours).
        """
        many = [f"tag-{n:04d}" for n in range(MAX_LIST_VALUES)]
        extra = [make_item(30, tags=many), make_item(31, tags=[*many[:-1], "odd"])]
        filled.add_many(extra)
        universe = [make_item(n) for n in range(30)] + extra
        cases: list[dict[str, Any]] = [
            {"tags": {"$all": many}},
            {"tags": {"$all": [*many[1:], "odd"]}},
            {"tags": {"$in": [*many[2:], "even", "none"]}},
            {"tags": {"$nin": [*many[1:], "x"]}},
            {"kind": {"$in": [*(f"k{n}" for n in range(MAX_LIST_VALUES - 1)), "note"]}},
            {"id": {"$nin": [make_item(n).id for n in range(1, MAX_LIST_VALUES + 1)]}},
        ]
        for filters in cases:
            want = sorted(item.id for item in universe if _oracle_match(item, filters))
            assert sorted(_ids(filled.query(filters, limit=None))) == want, list(filters)
            assert filled.count(filters) == len(want)

    def test_tag_lists_of_every_length_match_the_oracle(self, backend: MemoryBackend) -> None:
        """Tag lists of one to eight tags, alone, mixed and joined, give the oracle's answer.

        SQL stores compile short and long lists apart, and pool the tags that several
        conditions (or filters joined with ``Filter.and_``) require or forbid.
        """
        pool = [f"t{n}" for n in range(8)]  # items carry t0..t5 only
        items = [
            make_item(n, tags=tuple(tag for bit, tag in enumerate(pool[:6]) if n >> bit & 1))
            for n in range(64)
        ]
        backend.add_many(items)
        documents: list[dict[str, Any]] = [
            {"tags": {op: pool[:size]}} for size in range(1, 9) for op in ("$all", "$in", "$nin")
        ]
        documents += [
            {"tags": {"$all": pool[:5], "$ne": "t5"}},
            {"tags": {"$eq": "t0", "$all": pool[1:5], "$nin": ["t5"], "$in": ["t5", "t4"]}},
            {"tags": {"$ne": "t0", "$nin": pool[1:6], "$exists": False}},
        ]
        for document in documents:
            want = sorted(item.id for item in items if _oracle_match(item, document))
            assert sorted(_ids(backend.query(document, limit=None))) == want, document
        parts: list[dict[str, Any]] = [
            {"tags": "t0"},
            {"tags": {"$all": pool[1:4]}},
            {"tags": {"$all": pool[2:5]}},
            {"tags": {"$ne": "t5"}},
            {"tags": {"$nin": pool[6:]}},
        ]
        joined = Filter()
        for part in parts:
            joined = joined.and_(parse_filter(part))
        want = sorted(i.id for i in items if all(_oracle_match(i, part) for part in parts))
        assert sorted(_ids(backend.query(joined, limit=None))) == want
        assert backend.count(joined) == len(want)

    # ------------------------------------------------------------------ bad input

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param(lambda: [make_item(1), {"id": "x", "kind": "k"}], id="dict-in-batch"),
            pytest.param(lambda: [make_item(1), None], id="none-in-batch"),
            pytest.param(lambda: make_item(1), id="single-item-not-list"),
        ],
    )
    def test_add_many_rejects_non_items(
        self, filled: MemoryBackend, bad: Callable[[], Any]
    ) -> None:
        """Anything that is not a ContextItem is a ValidationError and nothing is stored."""
        with pytest.raises(ValidationError):
            filled.add_many(bad())
        assert filled.count() == 30
        assert _same(filled.get("item-00001"), make_item(1))

    @pytest.mark.parametrize("bad_id", [None, 5, b"item-00001"])
    def test_bad_ids_are_refused(self, filled: MemoryBackend, bad_id: Any) -> None:
        """Ids must be strings for get, delete and their batch forms."""
        with pytest.raises(ValidationError):
            filled.get(bad_id)
        with pytest.raises(ValidationError):
            filled.delete(bad_id)
        with pytest.raises(ValidationError):
            filled.delete_many([bad_id])
        with pytest.raises(ValidationError):
            filled.get_many("item-00001")
        assert filled.count() == 30

    def test_inputs_are_not_mutated(self, backend: MemoryBackend) -> None:
        """add_many and query leave the caller's list and filter dict as they were."""
        batch = [make_item(n) for n in range(5)]
        snapshot = list(batch)
        backend.add_many(batch)
        assert batch == snapshot
        filters = {"kind": {"$in": ["note", "decision"]}, "tags": ["even"]}
        before = repr(filters)
        backend.query(filters)
        backend.count(filters)
        assert repr(filters) == before

    def test_generator_batches_are_accepted(self, backend: MemoryBackend) -> None:
        """add_many and get_many take any iterable, including generators."""
        backend.add_many(make_item(n) for n in range(3))
        assert len(backend.get_many(make_item(n).id for n in range(3))) == 3

    # ------------------------------------------------------------------ concurrency

    def test_concurrent_adds_and_deletes(self, backend: MemoryBackend) -> None:
        """Threads adding and deleting disjoint items lose and duplicate nothing."""
        threads_n, per_thread = 8, 60
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                base = worker * 1000
                for chunk in range(0, per_thread, 10):
                    backend.add_many(make_item(base + n) for n in range(chunk, chunk + 10))
                for n in range(0, per_thread, 3):
                    assert backend.delete(make_item(base + n).id)
            except BaseException as exc:  # noqa: BLE001 - reported to the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        expected = {
            make_item(w * 1000 + n).id for w in range(threads_n) for n in range(per_thread) if n % 3
        }
        got = _ids(backend.list_all())
        assert len(got) == len(set(got))
        assert set(got) == expected
        assert backend.count() == len(expected)

    def test_concurrent_add_of_same_id_has_one_winner(self, backend: MemoryBackend) -> None:
        """Threads racing to add one id: one succeeds, the rest get DuplicateItemError."""
        outcomes: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(6)

        def race(n: int) -> None:
            barrier.wait()
            try:
                backend.add(make_item(1, text=f"writer {n}"))
                result = "ok"
            except DuplicateItemError:
                result = "dup"
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=race, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["dup"] * 5 + ["ok"]
        assert backend.count() == 1

    # ------------------------------------------------------------------ search

    @pytest.fixture
    def corpus(self, backend: MemoryBackend) -> MemoryBackend:
        """Items about distinct topics in two namespaces, embedded by the backend."""
        topics = [
            "postgres database migrations with alembic",
            "sqlite file locking and busy timeouts",
            "react component styling with css modules",
            "kubernetes pod autoscaling on cpu load",
            "unit tests with pytest fixtures and parametrize",
            "vector search with faiss flat and hnsw indexes",
        ]
        items = [
            make_item(n, text=f"{topic} note {n}", namespace=f"ns-{n % 2}")
            for n, topic in enumerate(topics * 4)
        ]
        for item in items:
            assert item.embedding is None
        backend.add_many(items)
        return backend

    def test_added_items_are_embedded(self, corpus: MemoryBackend, embedder: Embedder) -> None:
        """Items added without a vector get the embedder's vector for their text."""
        item = corpus.get("item-00001")
        assert item is not None
        assert item.embedding is not None
        assert item.embedding.shape == (embedder.dim,)
        expected = embedder.embed([item.text])[0]
        assert np.allclose(item.embedding, expected, atol=1e-6)

    def test_given_vectors_are_kept(self, backend: MemoryBackend) -> None:
        """An item that brings a vector of the right size is stored with that vector."""
        vector = np.linspace(0.0, 1.0, EMBED_DIM, dtype=np.float32)
        backend.add(make_item(1, embedding=vector))
        got = backend.get("item-00001")
        assert got is not None
        assert got.embedding is not None
        assert np.array_equal(got.embedding, vector)

    def test_wrong_dimension_is_refused(self, filled: MemoryBackend, embedder: Embedder) -> None:
        """A vector of another size is a DimensionMismatchError, and nothing of the batch lands.

        The message names both sizes and the embedder of the store's vectors.
        """
        batch = [make_item(100), make_item(101, embedding=[1.0, 2.0, 3.0])]
        with pytest.raises(DimensionMismatchError, match="3-dimensional") as raised:
            filled.add_many(batch)
        assert embedder.name in str(raised.value)
        assert f"{embedder.dim} dimensions" in str(raised.value)
        assert filled.get("item-00100") is None
        with pytest.raises(DimensionMismatchError):
            filled.update(make_item(1, embedding=[1.0, 2.0]))
        with pytest.raises(DimensionMismatchError):
            filled.search([1.0, 2.0])
        assert filled.count() == 30

    def test_text_search_ranks_the_matching_topic_first(self, corpus: MemoryBackend) -> None:
        """The best hit for a topic's wording is an item on that topic, scores descending."""
        hits = corpus.search("faiss hnsw vector search indexes", k=4)
        assert len(hits) == 4
        assert all("faiss" in hit.item.text for hit in hits)
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(-1.0001 <= score <= 1.0001 for score in scores)

    def test_search_matches_brute_force(self, corpus: MemoryBackend, embedder: Embedder) -> None:
        """Scores are exact cosine similarities and the ranking equals a brute-force one."""
        query = "database locking and migrations"
        everything = corpus.list_all()
        vectors = embedder.embed([item.text for item in everything])
        scores = vectors @ embedder.embed([query])[0]
        expected = sorted(
            zip(scores, (i.id for i in everything), strict=True), key=lambda p: (-p[0], p[1])
        )
        hits = corpus.search(query, k=7)
        assert [hit.item.id for hit in hits] == [item_id for _, item_id in expected[:7]]
        assert np.allclose([hit.score for hit in hits], [s for s, _ in expected[:7]], atol=1e-5)

    def test_filters_apply_before_top_k(self, corpus: MemoryBackend) -> None:
        """A scoped search returns only matching items, and k of them when k exist."""
        hits = corpus.search("faiss vector search", k=5, filters={"namespace": "ns-1"})
        assert len(hits) == 5
        assert {hit.item.namespace for hit in hits} == {"ns-1"}
        few = corpus.search("faiss", k=10, filters={"namespace": "ns-0", "kind": "note"})
        assert {hit.item.namespace for hit in few} == {"ns-0"}
        assert len(few) == corpus.count({"namespace": "ns-0", "kind": "note"})

    def test_selective_filter_still_finds_k(self, backend: MemoryBackend) -> None:
        """When the best matches all sit outside the filter, search still returns k matches."""
        backend.add_many(
            make_item(n, text="alpha beta gamma", namespace="crowd") for n in range(200)
        )
        backend.add_many(
            make_item(n, text=f"unrelated words {n}", namespace="rare") for n in range(200, 205)
        )
        hits = backend.search("alpha beta gamma", k=3, filters={"namespace": "rare"})
        assert len(hits) == 3
        assert {hit.item.namespace for hit in hits} == {"rare"}

    def test_vector_query(self, corpus: MemoryBackend) -> None:
        """A vector query finds the item whose vector it is, with score ~1."""
        target = corpus.get("item-00004")
        assert target is not None
        assert target.embedding is not None
        hits = corpus.search(target.embedding * 3.0, k=1)
        assert hits[0].item.id == target.id
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    def test_delete_and_update_show_in_search_at_once(self, corpus: MemoryBackend) -> None:
        """A deleted item is never returned; an item whose text changed ranks by its new text."""
        best = corpus.search("kubernetes pod autoscaling", k=1)[0].item
        corpus.delete(best.id)
        assert best.id not in {h.item.id for h in corpus.search("kubernetes pod autoscaling", k=30)}
        other = corpus.get("item-00000")
        assert other is not None
        corpus.update(attrs.evolve(other, text="quantum chromodynamics lattice gluons"))
        hits = corpus.search("quantum chromodynamics lattice gluons", k=1)
        assert hits[0].item.id == "item-00000"
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    @pytest.mark.parametrize(
        "filters", [None, {"namespace": "ns-1"}, {"namespace": "ns-0", "kind": "note"}]
    )
    def test_search_many_answers_as_search_does(
        self, corpus: MemoryBackend, filters: dict[str, Any] | None
    ) -> None:
        """Each answer of ``search_many`` is what ``search`` gives for that query, in order.

        If this fails, the batched path ranks, filters or ties differently from one search.
        """
        target = corpus.get("item-00004")
        assert target is not None
        assert target.embedding is not None
        queries: list[Any] = [
            "database locking and migrations",
            target.embedding,
            "faiss vector search",
            "database locking and migrations",
        ]
        answers = corpus.search_many(queries, k=6, filters=filters)
        assert len(answers) == len(queries)
        for query, hits in zip(queries, answers, strict=True):
            alone = corpus.search(query, k=6, filters=filters)
            assert [h.item.id for h in hits] == [h.item.id for h in alone]
            assert np.allclose([h.score for h in hits], [h.score for h in alone], atol=1e-5)

    def test_search_many_on_an_empty_store(self, backend: MemoryBackend) -> None:
        """Nothing stored: each query is answered with nothing."""
        assert backend.search_many(["anything", "else"], k=3) == [[], []]

    def test_search_many_edge_cases(self, corpus: MemoryBackend) -> None:
        """No query, no answer; bad input is refused as ``search`` refuses it."""
        assert corpus.search_many([], k=3) == []
        assert corpus.search_many(["x"], k=3, filters={"namespace": "nowhere"}) == [[]]
        with pytest.raises(ValidationError):
            corpus.search_many(["x"], k=0)
        with pytest.raises(ValidationError):
            corpus.search_many("not a list of queries", k=3)
        with pytest.raises(DimensionMismatchError):
            corpus.search_many(["x", [1.0, 2.0]], k=3)

    def test_backend_reports_its_embedder(self, backend: MemoryBackend, embedder: Embedder) -> None:
        """``embedder`` is the embedder the backend was built with (what embeds text queries).

        If this fails, the backend keeps its embedder under another name: callers that embed
        a query once for several stores key it by this embedder's identity.
        """
        assert backend.embedder is not None
        assert EmbedderIdentity.of(backend.embedder) == EmbedderIdentity.of(embedder)

    def test_embed_query_is_what_text_search_searches_with(
        self, corpus: MemoryBackend, embedder: Embedder
    ) -> None:
        """``embed_query`` gives the unit-length embedding, and searching with it is a text search.

        If this fails, ``search`` embeds a text query some other way than ``embed_query``
        does (the one place a backend embeds queries), and a caller that embeds once and
        searches several stores with the vector ranks differently from a text search.
        """
        query = "database locking and migrations"
        vector = corpus.embed_query(query)
        assert vector.shape == (embedder.dim,)
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
        expected = embedder.embed([query])[0]
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
        by_text = corpus.search(query, k=7, filters={"namespace": "ns-1"})
        by_vector = corpus.search(vector, k=7, filters={"namespace": "ns-1"})
        assert [h.item.id for h in by_vector] == [h.item.id for h in by_text]
        assert np.allclose([h.score for h in by_vector], [h.score for h in by_text], atol=1e-6)

    @pytest.mark.parametrize("query", [None, 3, "nul\x00inside", "\ud800"])
    def test_embed_query_refuses_what_is_not_text(self, backend: MemoryBackend, query: Any) -> None:
        """A query that is not storable text is a ValidationError naming ``query``."""
        with pytest.raises(ValidationError) as raised:
            backend.embed_query(query)
        assert raised.value.field == "query"

    def test_search_on_empty_and_no_match(self, backend: MemoryBackend) -> None:
        """Nothing stored, or nothing matching, gives an empty list."""
        assert backend.search("anything", k=3) == []
        backend.add(make_item(1))
        assert backend.search("anything", k=3, filters={"namespace": "nowhere"}) == []

    @pytest.mark.parametrize("k", [0, -1, 2.5, True])
    def test_bad_k_is_refused(self, corpus: MemoryBackend, k: Any) -> None:
        """The number of results must be a positive integer."""
        with pytest.raises(ValidationError):
            corpus.search("x", k=k)

    def test_bad_search_filter_is_refused(self, corpus: MemoryBackend) -> None:
        """Search speaks the same filter language, with the same errors."""
        with pytest.raises(FilterError):
            corpus.search("x", filters={"nope": 1})

    # ------------------------------------------------------------------ embedder identity

    def test_stored_identity_names_the_embedder(
        self, backend: MemoryBackend, embedder: Embedder
    ) -> None:
        """No vector stored, no identity; then the embedder's name and dimension."""
        assert backend.stored_identity() is None
        backend.add_many([make_item(1), make_item(2)])
        assert backend.stored_identity() == EmbedderIdentity.of(embedder)

    def test_reembed_replaces_every_vector(self, filled: MemoryBackend) -> None:
        """Re-embedding gives every item the new embedder's vector, in batches, then uses it.

        Afterwards the store reports the new identity, text search ranks by the new vectors
        and a vector of the old size is refused.
        """
        new = HashingEmbedder(dim=EMBED_DIM // 2, bigrams=False)
        calls: list[tuple[int, int]] = []
        done = filled.reembed(new, batch_size=7, progress=lambda *step: calls.append(step))
        assert done == 30
        assert calls == [(0, 30), (7, 30), (14, 30), (21, 30), (28, 30), (30, 30)]
        assert filled.stored_identity() == EmbedderIdentity.of(new)
        items = filled.list_all()
        expected = new.embed([embedding_text(item) for item in items])
        for item, vector in zip(items, expected, strict=True):
            assert item.embedding is not None
            assert np.allclose(item.embedding, vector, atol=1e-6)
        query = new.embed(["memory number 3"])[0]
        scores = {item.id: float(row @ query) for item, row in zip(items, expected, strict=True)}
        hits = filled.search("memory number 3", k=5)
        best = sorted(scores.values(), reverse=True)[:5]
        # Scores, not ids: many items tie here, and an approximate index may pick other ties.
        assert np.allclose([hit.score for hit in hits], best, atol=1e-5)
        assert all(hit.score == pytest.approx(scores[hit.item.id], abs=1e-5) for hit in hits)
        with pytest.raises(DimensionMismatchError):
            filled.add(make_item(100, embedding=np.ones(EMBED_DIM)))
        filled.add(make_item(101))
        added = filled.get("item-00101")
        assert added is not None
        assert added.embedding is not None
        assert added.embedding.shape == (new.dim,)

    def test_reembed_after_a_failed_one_completes(self, filled: MemoryBackend) -> None:
        """An embedder failing half-way raises; reembed again and the store is whole and new.

        (If this fails on a persistent store, check that a batch's vectors and the progress
        mark are written together, and that a new run finishes what the last one left.)
        """
        new = HashingEmbedder(dim=EMBED_DIM // 2, bigrams=False)
        with pytest.raises(EmbeddingError):
            filled.reembed(_FailsAfter(new, texts=12), batch_size=5)
        assert filled.count() == 30
        assert filled.reembed(new, batch_size=5) > 0
        assert filled.stored_identity() == EmbedderIdentity.of(new)
        for item in filled.list_all():
            assert item.embedding is not None
            assert np.allclose(item.embedding, new.embed([embedding_text(item)])[0], atol=1e-6)
        assert len(filled.search("memory number", k=5)) == 5

    @pytest.mark.parametrize("batch_size", [0, -1, 1.5, True])
    def test_reembed_refuses_bad_arguments(self, filled: MemoryBackend, batch_size: Any) -> None:
        """A batch size that is not a positive integer, or a non-embedder, changes nothing."""
        before = filled.get("item-00001")
        with pytest.raises(ValidationError):
            filled.reembed(HashingEmbedder(dim=8), batch_size=batch_size)
        with pytest.raises(ValidationError):
            filled.reembed("hashing")  # type: ignore[arg-type]
        assert _same(filled.get("item-00001"), before)
        assert len(filled.search("memory number", k=3)) == 3

    # ------------------------------------------------------------------ lexical search

    def test_lexical_search_ranks_by_bm25(self, corpus: MemoryBackend) -> None:
        """Items sharing the query's rare terms rank first; scores descend; k is respected."""
        hits = corpus.lexical_search("kubernetes autoscaling", k=3)
        assert len(hits) == 3
        assert all("kubernetes" in hit.item.text for hit in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert corpus.lexical_search("zzz-no-such-term", k=3) == []

    def test_lexical_search_respects_scope_and_filters(self, corpus: MemoryBackend) -> None:
        """Scope and extra conditions apply before the cut, as in vector search."""
        hits = corpus.lexical_search(
            "sqlite postgres migrations", k=4, filters={"namespace": "ns-1"}
        )
        assert len(hits) == 4
        assert {h.item.namespace for h in hits} == {"ns-1"}
        assert all("sqlite" in h.item.text for h in hits)
        narrow = corpus.lexical_search(
            "postgres migrations", k=2, filters={"namespace": "ns-0", "importance": {"$gte": 0.5}}
        )
        assert all(h.item.importance >= 0.5 and h.item.namespace == "ns-0" for h in narrow)

    def test_lexical_search_reads_letters_without_their_diacritics(
        self, corpus: MemoryBackend
    ) -> None:
        """A query finds its words with or without diacritics, in any case ("Zurich", "ZÜRICH")."""
        scope = {"namespace": "ns-0"}
        corpus.add(make_item(500, text="the office in Zürich", namespace="ns-0", session=""))
        corpus.add(make_item(501, text="José moved to Zurich", namespace="ns-0", session=""))
        for query in ("zurich", "ZÜRICH", "Zürich"):
            found = {h.item.id for h in corpus.lexical_search(query, k=5, filters=scope)}
            assert found == {"item-00500", "item-00501"}, query
        assert [h.item.id for h in corpus.lexical_search("jose", k=5, filters=scope)] == [
            "item-00501"
        ]

    def test_lexical_index_follows_writes(self, corpus: MemoryBackend) -> None:
        """Adds, updates, deletes and clears through the backend show in lexical search at once."""
        assert corpus.lexical_search("zebra", k=1, filters={"namespace": "ns-0"}) == []
        corpus.add(make_item(500, text="a zebra crossing", namespace="ns-0"))
        assert [
            h.item.id for h in corpus.lexical_search("zebra", k=1, filters={"namespace": "ns-0"})
        ] == ["item-00500"]
        moved = corpus.get("item-00500")
        assert moved is not None
        corpus.update(attrs.evolve(moved, namespace="ns-1"))
        assert corpus.lexical_search("zebra", k=1, filters={"namespace": "ns-0"}) == []
        assert len(corpus.lexical_search("zebra", k=1, filters={"namespace": "ns-1"})) == 1
        corpus.delete("item-00500")
        assert corpus.lexical_search("zebra", k=1, filters={"namespace": "ns-1"}) == []
        corpus.clear({"namespace": "ns-1"})
        assert corpus.lexical_search("sqlite", k=5, filters={"namespace": "ns-1"}) == []
        assert len(corpus.lexical_search("postgres", k=5, filters={"namespace": "ns-0"})) > 0

    def test_lexical_index_leaves_out_superseded_versions(self, corpus: MemoryBackend) -> None:
        """History is not searched lexically: superseding an item drops it; archiving does not."""
        scope = {"namespace": "ns-0"}
        # Outside sessions: a session neighbour would share their terms.
        corpus.add(make_item(500, text="a zebra crossing", namespace="ns-0", session=""))
        corpus.add(make_item(502, text="a zebra herd", namespace="ns-0", session=""))
        old = corpus.get("item-00500")
        herd = corpus.get("item-00502")
        assert old is not None
        assert herd is not None
        corpus.update(attrs.evolve(old, valid_to=T0 + timedelta(days=2), superseded_by=herd.id))
        corpus.update(
            attrs.evolve(herd, archived_at=T0 + timedelta(days=2), archived_reason="compacted")
        )
        found = [h.item.id for h in corpus.lexical_search("zebra", k=5, filters=scope)]
        assert found == ["item-00502"]
        index = corpus.lexical_index({"namespace": "ns-0", "tier": "project"})
        assert index.hits("zebra").best(5) == ["item-00502"]

    def test_lexical_index_knows_sessions(self, backend: MemoryBackend) -> None:
        """Neighbours are the adjacent items of the same session, in time order."""
        backend.add_many(
            make_item(n, session="talk" if n < 5 else "", namespace="ns-0") for n in range(7)
        )
        index = backend.lexical_index({"namespace": "ns-0"})
        assert index.neighbourhoods(["item-00002", "item-00000", "item-00006", "nope"], 2) == {
            "item-00002": [
                ("item-00000", -2),
                ("item-00001", -1),
                ("item-00003", 1),
                ("item-00004", 2),
            ],
            "item-00000": [("item-00001", 1), ("item-00002", 2)],
        }
        assert index.neighbourhoods(["item-00002"], 1) == {
            "item-00002": [("item-00001", -1), ("item-00003", 1)]
        }
        assert index.links(["item-00000", "item-00002", "item-00003", "item-00006"], 2) == {
            "item-00000": [("item-00002", 2)],
            "item-00002": [("item-00000", -2), ("item-00003", 1)],
            "item-00003": [("item-00002", -1)],
        }
        with pytest.raises(ValidationError):
            backend.lexical_index({"kind": "note"})

    def test_lexical_index_answers_for_its_scope_alone(self, corpus: MemoryBackend) -> None:
        """A scope's index: its size, its sources, and matches ranked by score, all in scope.

        Checks the :class:`~agent_engine.retrieval.lexical.LexicalScope` contract: ``best``
        agrees with ``of`` (descending scores, ties by id), ``of`` gives 0.0 for items that
        did not match (another scope's included), and ``lexical_search`` ranks alike. If
        this fails for a backend with its own full-text search, compare its scope filter
        with the ``namespace``/``tier`` equalities it was given.
        """
        scope = {"namespace": "ns-0", "tier": Tier.PROJECT.value}
        index = corpus.lexical_index(scope)
        mine = corpus.query(scope, limit=None)
        assert len(index) == len(mine) == 12
        assert index.sources() == frozenset(item.source for item in mine)
        terms = {"postgres", "alembic", "pytest"}
        hits = index.hits(" ".join(sorted(terms)))
        best = hits.best(len(hits) + 5)
        assert len(best) == len(hits)
        assert {item.id for item in mine if terms & set(item.text.split())} <= set(best)
        assert {item.namespace for item in corpus.get_many(best)} == {"ns-0"}
        scores = hits.of([*best, "item-00001", "no-such-item"])
        assert scores["item-00001"] == scores["no-such-item"] == 0.0
        ranked = sorted(best, key=lambda item_id: (-scores[item_id], item_id))
        assert best == ranked
        assert all(scores[item_id] > 0 for item_id in best)
        assert hits.best(2) == best[:2]
        assert len(set(scores.values())) > 2  # two terms beat one: the ranking is tested
        found = corpus.lexical_search("postgres alembic pytest", k=5, filters=scope)
        assert [hit.item.id for hit in found] == best[:5]
        assert np.allclose([hit.score for hit in found], [scores[i] for i in best[:5]])
        assert len(index.hits("")) == 0
        assert len(index.hits("zzz-no-such-term")) == 0
        assert len(corpus.lexical_index({"namespace": "nowhere"})) == 0

    # ------------------------------------------------------------------ erase

    def test_erase_removes_items_from_every_read(self, corpus: MemoryBackend) -> None:
        """Erased items are gone from get, query, search and lexical search; unknown ids count 0.

        If this fails while ``delete`` passes, the backend's ``_erase`` does not remove what
        ``_remove`` removes.
        """
        best = corpus.search("kubernetes pod autoscaling", k=1)[0].item
        assert corpus.erase([best.id, "no-such-item", best.id]) == 1
        assert corpus.get(best.id) is None
        assert best.id not in _ids(corpus.query(None, limit=None))
        assert best.id not in {h.item.id for h in corpus.search("kubernetes pod autoscaling", 30)}
        scope = {"namespace": best.namespace}
        assert best.id not in {h.item.id for h in corpus.lexical_search("kubernetes", 30, scope)}
        assert corpus.erase(["no-such-item"]) == 0
        assert corpus.erase([]) == 0

    def test_erase_replaces_the_id_in_the_journal(self, filled: MemoryBackend) -> None:
        """Every event naming an erased id names its token instead, in item ids and in messages.

        Events naming other items are left as they were.
        """
        doomed, kept = "item-00003", "item-00004"
        ns = "project:p"
        filled.audit.append(
            AuditEvent(action="add", tier="project", namespace=ns, item_ids=[doomed, kept])
        )
        filled.audit.append(
            AuditEvent(
                action="abort",
                tier="project",
                namespace=ns,
                item_ids=[doomed],
                detail={"error": f"DuplicateItemError: an item with id {doomed!r} exists"},
            )
        )
        filled.audit.append(AuditEvent(action="pin", tier="project", namespace=ns, item_ids=[kept]))
        token = erasure_token(doomed)
        assert filled.erase([doomed], tokens={doomed: token}) == 1
        events = list(reversed(filled.audit.events(namespace=ns, limit=None)))
        assert [event.item_ids for event in events] == [(token, kept), (token,), (kept,)]
        assert events[1].detail == {
            "error": f"DuplicateItemError: an item with id {token!r} exists"
        }

    def test_erase_replaces_the_id_in_provenance(self, filled: MemoryBackend) -> None:
        """An item promoted from an erased one names the erased item by its token."""
        source = filled.get("item-00002")
        assert source is not None
        copy = make_item(
            900,
            provenance=Provenance(source.id, Tier.TASK, "task:t", T0, reason="kept"),
        )
        filled.add(copy)
        token = erasure_token(source.id)
        filled.erase([source.id], tokens={source.id: token})
        stored = filled.get(copy.id)
        assert stored is not None
        assert stored.provenance is not None
        assert stored.provenance.source_item_id == token
        assert attrs.evolve(stored, provenance=copy.provenance) == copy

    def test_erase_replaces_the_id_in_merged_origins(self, filled: MemoryBackend) -> None:
        """An item that absorbed duplicates names an erased one by its token, and only it."""
        kept = Origin("dup-kept", source="user", session="s1", timestamp=T0)
        doomed = Origin("dup-doomed", source="user", session="s2", timestamp=T0)
        holder = make_item(901, merged_from=(kept, doomed))
        filled.add(holder)
        token = erasure_token(doomed.id)
        filled.erase([doomed.id], tokens={doomed.id: token})
        stored = filled.get(holder.id)
        assert stored is not None
        assert stored.merged_from == (kept, attrs.evolve(doomed, id=token))
        assert attrs.evolve(stored, merged_from=holder.merged_from) == holder

    def test_erase_without_tokens_makes_them(self, filled: MemoryBackend) -> None:
        """Without tokens, each erased id is replaced by a fresh erasure token."""
        ns = "project:p"
        filled.audit.append(
            AuditEvent(action="add", tier="project", namespace=ns, item_ids=["item-00001"])
        )
        filled.erase(["item-00001"])
        (event,) = filled.audit.events(namespace=ns)
        assert event.action is AuditAction.ADD
        (token,) = event.item_ids
        assert token.startswith("erased:")
        assert token != erasure_token("item-00001")

    @pytest.mark.parametrize("token", ["item-00002", "", 7])
    def test_erase_refuses_tokens_it_did_not_make(self, filled: MemoryBackend, token: Any) -> None:
        """A token must come from erasure_token(): an id cannot be rewritten into another id."""
        with pytest.raises(ValidationError):
            filled.erase(["item-00001"], tokens={"item-00001": token})
        assert filled.get("item-00001") is not None

    # ------------------------------------------------------------------ access tracking

    def test_touch_counts_accesses(self, filled: MemoryBackend) -> None:
        """Touching bumps access_count and sets last_accessed_at for existing ids, in one call."""
        at = T0 + timedelta(days=400)
        before = filled.get("item-00004")
        assert before is not None
        assert filled.touch(["item-00004", "item-00005", "missing", "item-00004"], at) == 2
        after = filled.get("item-00004")
        assert after is not None
        assert after.access_count == before.access_count + 1
        assert after.last_accessed_at == at
        assert (
            attrs.evolve(
                after, access_count=before.access_count, last_accessed_at=before.last_accessed_at
            )
            == before
        )

    def test_touch_holds_the_count_at_its_ceiling(self, backend: MemoryBackend) -> None:
        """An access count at the largest storable count stays there instead of failing.

        If this fails with a database error, the backend's own increment overflows its
        column; use :func:`~agent_engine.models.bump_count`'s ceiling in the statement.
        """
        backend.add(make_item(1, access_count=MAX_COUNT))
        assert backend.touch(["item-00001"], T0) == 1
        touched = backend.get("item-00001")
        assert touched is not None
        assert (touched.access_count, touched.last_accessed_at) == (MAX_COUNT, T0)

    def test_touch_refuses_an_instant_utc_cannot_hold(self, filled: MemoryBackend) -> None:
        """An access time whose UTC instant is past ``datetime.max`` is refused, not stored."""
        late = datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))
        before = filled.get("item-00004")
        with pytest.raises(ValidationError) as info:
            filled.touch(["item-00004"], late)
        assert info.value.field == "at"
        assert _same(filled.get("item-00004"), before)

    def test_concurrent_touches_are_not_lost(self, filled: MemoryBackend) -> None:
        """Accesses counted from several threads at once all arrive."""
        start = filled.get("item-00003")
        assert start is not None

        def bump() -> None:
            for _ in range(10):
                filled.touch(["item-00003"], T0)

        threads = [threading.Thread(target=bump) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        end = filled.get("item-00003")
        assert end is not None
        assert end.access_count == start.access_count + 40

    # ------------------------------------------------------------------ archive marks

    def test_set_archived_marks_and_lifts(self, filled: MemoryBackend) -> None:
        """set_archived sets the mark of existing ids and nothing else; None and None lift it.

        If the item differs in another field afterwards, the backend rewrote more than the
        two archive columns (or rebuilt the item from a stale copy).
        """
        at = T0 + timedelta(days=10)
        before = filled.get_many(["item-00004", "item-00005"])
        assert not any(item.archived for item in before)
        in_archive = filled.count({"archived_at": {"$exists": True}})
        asked = ["item-00004", "item-00005", "missing", "item-00004"]
        assert filled.set_archived(asked, at, ArchiveReason.DECAYED) == 2
        after = filled.get_many(["item-00004", "item-00005"])
        for old, new in zip(before, after, strict=True):
            assert (new.archived_at, new.archived_reason) == (at, ArchiveReason.DECAYED)
            assert _same(attrs.evolve(new, archived_at=None, archived_reason=None), old)
        assert filled.count({"archived_reason": "decayed"}) == 2  # the fixture's are evicted
        assert filled.set_archived(["item-00004"], None, None) == 1
        assert _same(filled.get("item-00004"), before[0])
        assert filled.count({"archived_at": {"$exists": True}}) == in_archive + 1

    def test_archived_items_stay_searchable(self, filled: MemoryBackend) -> None:
        """An archived item is still found by vector search, and filters see its mark."""
        item = filled.get("item-00007")
        assert item is not None
        assert item.embedding is not None
        filled.set_archived([item.id], T0, ArchiveReason.STALE)
        hits = filled.search(item.embedding, k=1, filters={"archived_reason": "stale"})
        assert [hit.item.id for hit in hits] == [item.id]
        assert hits[0].item.archived_reason is ArchiveReason.STALE

    @pytest.mark.parametrize(
        ("at", "reason", "field"),
        [
            pytest.param(datetime(2024, 1, 1), ArchiveReason.DECAYED, "at", id="naive-time"),  # noqa: DTZ001
            pytest.param(T0, None, "reason", id="time-without-reason"),
            pytest.param(None, ArchiveReason.DECAYED, "at", id="reason-without-time"),
            pytest.param(T0, "sleepy", "reason", id="unknown-reason"),
        ],
    )
    def test_set_archived_refuses_a_bad_mark(
        self, filled: MemoryBackend, at: Any, reason: Any, field: str
    ) -> None:
        """A mark that is not an aware time with a known reason (or None and None) is refused."""
        before = filled.get("item-00004")
        with pytest.raises(ValidationError) as info:
            filled.set_archived(["item-00004"], at, reason)
        assert info.value.field == field
        assert _same(filled.get("item-00004"), before)

    # ------------------------------------------------------------------ conflicts

    @staticmethod
    def _conflict(a: int, b: int, minutes: int = 0, **fields: Any) -> Conflict:
        """A conflict between items ``a`` and ``b`` of ``filled`` (same namespace parity)."""
        values: dict[str, Any] = {
            "item_a": f"item-{a:05d}",
            "item_b": f"item-{b:05d}",
            "tier": Tier.PROJECT,
            "namespace": f"ns-{a % 2}",
            "detected_at": T0 + timedelta(minutes=minutes),
            "reason": "always/never",
        }
        return Conflict(**(values | fields))

    def test_conflicts_round_trip(self, filled: MemoryBackend) -> None:
        """A recorded conflict comes back equal by id, and listed in its scope.

        If this fails, check the conflict row conversion (times, versions, the type).
        """
        conflict = self._conflict(2, 4, version_b=3, type=ConflictType.AMBIGUOUS)
        filled.conflicts.record([conflict])
        assert filled.conflicts.get(conflict.id) == conflict
        assert filled.conflicts.get("no-such-conflict") is None
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT) == [conflict]

    def test_conflicts_of_a_scope_newest_first(self, filled: MemoryBackend) -> None:
        """A scope lists its own conflicts only, newest first, unresolved unless asked."""
        older = self._conflict(2, 4, minutes=1)
        newer = self._conflict(6, 8, minutes=2)
        other_namespace = self._conflict(1, 3, minutes=3)
        other_tier = self._conflict(10, 12, minutes=4, tier=Tier.GLOBAL)
        filled.conflicts.record([older, newer, other_namespace, other_tier])
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT) == [newer, older]
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT, limit=1) == [newer]
        assert filled.conflicts.of_scope("ns-1", Tier.PROJECT) == [other_namespace]
        assert filled.conflicts.of_scope("ns-0", Tier.GLOBAL) == [other_tier]
        assert filled.conflicts.of_scope("ns-9", Tier.PROJECT) == []
        at = T0 + timedelta(days=1)
        resolved = filled.conflicts.resolve(older.id, kept="item-00004", at=at)
        assert resolved == attrs.evolve(older, resolved_at=at, kept="item-00004")
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT) == [newer]
        everything = filled.conflicts.of_scope("ns-0", Tier.PROJECT, include_resolved=True)
        assert everything == [newer, resolved]

    def test_conflicts_of_items(self, filled: MemoryBackend) -> None:
        """Conflicts naming any of some items, on either side, newest first."""
        older = self._conflict(2, 4, minutes=1)
        newer = self._conflict(4, 6, minutes=2)
        elsewhere = self._conflict(1, 3, minutes=3)
        filled.conflicts.record([older, newer, elsewhere])
        assert filled.conflicts.of_items(["item-00004"]) == [newer, older]
        assert filled.conflicts.of_items(["item-00002", "item-00003"]) == [elsewhere, older]
        assert filled.conflicts.of_items(["item-00006", "item-00006"]) == [newer]
        assert filled.conflicts.of_items(["item-00099"]) == []
        assert filled.conflicts.of_items([]) == []
        at = T0 + timedelta(days=1)
        resolved = filled.conflicts.resolve(older.id, kept="item-00002", at=at)
        assert filled.conflicts.of_items(["item-00002"]) == []
        assert filled.conflicts.of_items(["item-00002"], include_resolved=True) == [resolved]

    def test_conflicts_resolve_once(self, filled: MemoryBackend) -> None:
        """Resolving is a compare-and-set: resolving twice, or keeping neither, changes nothing.

        If a second resolve returns the conflict, two writers could both resolve it.
        """
        conflict = self._conflict(2, 4)
        filled.conflicts.record([conflict])
        at = T0 + timedelta(days=1)
        assert filled.conflicts.resolve(conflict.id, kept="item-00006", at=at) is None
        assert filled.conflicts.get(conflict.id) == conflict
        first = filled.conflicts.resolve(conflict.id, kept="item-00002", at=at)
        assert first is not None
        assert first.kept == "item-00002"
        later = at + timedelta(days=1)
        assert filled.conflicts.resolve(conflict.id, kept="item-00004", at=later) is None
        assert filled.conflicts.get(conflict.id) == first
        assert filled.conflicts.resolve("no-such-conflict", kept="item-00002", at=at) is None

    def test_conflicts_name_stored_items(self, filled: MemoryBackend) -> None:
        """A conflict naming an item the backend does not hold is refused, with the batch."""
        good = self._conflict(2, 4)
        bad = Conflict(item_a="item-00002", item_b="missing", tier=Tier.PROJECT, namespace="ns-0")
        with pytest.raises(ItemNotFoundError) as info:
            filled.conflicts.record([good, bad])
        assert info.value.item_id == "missing"
        assert filled.conflicts.get(good.id) is None
        with pytest.raises(ValidationError):
            filled.conflicts.record([good, good])
        with pytest.raises(ValidationError):
            filled.conflicts.record(["not a conflict"])  # type: ignore[list-item]
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT) == []

    @pytest.mark.parametrize("how", ["delete", "clear", "erase"])
    def test_conflicts_go_with_their_items(self, filled: MemoryBackend, how: str) -> None:
        """Deleting, clearing or erasing an item removes every conflict naming it, and no other.

        If this fails for ``erase`` only, the backend's ``_erase`` bypasses what ``_remove``
        does; for SQL, check that the conflict table's foreign keys cascade.
        """
        doomed = self._conflict(2, 4)
        also = self._conflict(6, 2, minutes=1)
        kept = self._conflict(6, 8, minutes=2)
        filled.conflicts.record([doomed, also, kept])
        if how == "delete":
            filled.delete("item-00002")
        elif how == "clear":
            filled.clear({"id": "item-00002"})
        else:
            filled.erase(["item-00002"])
        assert filled.conflicts.get(doomed.id) is None
        assert filled.conflicts.get(also.id) is None
        assert filled.conflicts.of_scope("ns-0", Tier.PROJECT, include_resolved=True) == [kept]

    # ------------------------------------------------------------------ aliases

    def test_aliases_round_trip(self, backend: MemoryBackend) -> None:
        """A term's expansions come back sorted; its case and accents are one term.

        If this fails, check that the term is stored by its key (``term_key``) and the
        expansions as written, spaces collapsed.
        """
        store = backend.aliases
        assert store.add("ns-0", "Mel", ["Melanie  Smith", "mel s."]) == ("mel s.", "Melanie Smith")
        assert store.add("ns-0", "MÉL", ["Mellie", "Melanie Smith"]) == (
            "mel s.",
            "Melanie Smith",
            "Mellie",
        )
        store.add("ns-0", "k8s", ["kubernetes"])
        assert store.of_namespace("ns-0") == {
            "k8s": ("kubernetes",),
            "mel": ("mel s.", "Melanie Smith", "Mellie"),
        }
        assert store.of_namespace("ns-9") == {}
        assert store.namespaces() == ["ns-0"]

    def test_aliases_stay_in_their_namespace(self, backend: MemoryBackend) -> None:
        """One namespace's aliases never show in, or change, another's."""
        store = backend.aliases
        store.add("ns-0", "auth", ["authentication"])
        store.add("ns-1", "auth", ["authorization"])
        assert store.of_namespace("ns-0") == {"auth": ("authentication",)}
        assert store.of_namespace("ns-1") == {"auth": ("authorization",)}
        assert store.remove("ns-1", "auth") == 1
        assert store.of_namespace("ns-0") == {"auth": ("authentication",)}
        assert store.namespaces() == ["ns-0"]

    def test_aliases_remove(self, backend: MemoryBackend) -> None:
        """Removing takes the given expansions (all, with none given) and says how many."""
        store = backend.aliases
        store.add("ns-0", "db", ["database", "postgres", "sqlite"])
        store.add("ns-0", "api", ["interface"])
        assert store.remove("ns-0", "DB", ["postgres", "mysql"]) == 1
        assert store.of_namespace("ns-0")["db"] == ("database", "sqlite")
        assert store.remove("ns-0", "db") == 2
        assert store.remove("ns-0", "db") == 0
        assert store.remove("ns-0", "nothing", ["x"]) == 0
        assert store.of_namespace("ns-0") == {"api": ("interface",)}
        assert store.remove("ns-0", "api", ["interface"]) == 1
        assert store.of_namespace("ns-0") == {}
        assert store.namespaces() == []

    def test_aliases_outlive_the_items(self, filled: MemoryBackend) -> None:
        """Aliases are the user's words, not memory: clearing a namespace's items keeps them."""
        filled.aliases.add("ns-0", "Mel", ["Melanie"])
        filled.clear({"namespace": "ns-0"})
        filled.erase(["item-00001"])
        assert filled.aliases.of_namespace("ns-0") == {"mel": ("Melanie",)}

    def test_aliases_limits(self, backend: MemoryBackend) -> None:
        """An add past a limit is refused whole: nothing of it is stored."""
        from agent_engine.memory.aliases import MAX_EXPANSIONS, MAX_TERMS  # noqa: PLC0415

        store = backend.aliases
        many = [f"word{n}" for n in range(MAX_EXPANSIONS)]
        store.add("ns-0", "t", many[:-1])
        with pytest.raises(ValidationError) as info:
            store.add("ns-0", "t", [*many[-1:], "one more"])
        assert info.value.field == "expansions"
        assert len(store.of_namespace("ns-0")["t"]) == MAX_EXPANSIONS - 1
        for n in range(1, MAX_TERMS):
            store.add("ns-1", f"term{n}", ["x"])
        store.add("ns-1", "t", ["y"])
        with pytest.raises(ValidationError) as info:
            store.add("ns-1", "another", ["z"])
        assert info.value.field == "term"
        store.add("ns-1", "t", ["z"])  # a term already held may still grow
        assert len(store.of_namespace("ns-1")) == MAX_TERMS

    @pytest.mark.parametrize(
        ("namespace", "term", "expansions", "field"),
        [
            pytest.param("ns-0", 7, ["x"], "term", id="term-not-text"),
            pytest.param("ns-0", " ... ", ["x"], "term", id="term-without-a-word"),
            pytest.param("ns-0", "t" * 201, ["x"], "term", id="term-too-long"),
            pytest.param("ns-0", "db", "database", "expansions", id="one-string"),
            pytest.param("ns-0", "db", [], "expansions", id="no-expansion"),
            pytest.param("ns-0", "db", ["DB"], "expansions", id="the-term-itself"),
            pytest.param("ns-0", "db", ["--"], "expansions", id="expansion-without-a-word"),
            pytest.param("ns-0", "db", [None], "expansions", id="expansion-not-text"),
            pytest.param("", "db", ["database"], "namespace", id="empty-namespace"),
            pytest.param(None, "db", ["database"], "namespace", id="no-namespace"),
        ],
    )
    def test_aliases_refuse_bad_input(
        self, backend: MemoryBackend, namespace: Any, term: Any, expansions: Any, field: str
    ) -> None:
        """Bad arguments raise a ValidationError naming the field, and change nothing."""
        backend.aliases.add("ns-0", "db", ["database"])
        with pytest.raises(ValidationError) as info:
            backend.aliases.add(namespace, term, expansions)
        assert info.value.field == field
        assert backend.aliases.of_namespace("ns-0") == {"db": ("database",)}

    # ------------------------------------------------------------------ checkpoints

    def test_checkpoints_round_trip(self, backend: MemoryBackend) -> None:
        """A saved checkpoint comes back by id with its data, and listed in its scope.

        If this fails, check the record's conversion (times, the tier) and that the data is
        stored whole (it is export text: long, and any characters).
        """
        data = '{"format":"agent_engine.export"}\n' + "é" * 5000
        older = Checkpoint(namespace="ns-0", tier=Tier.TASK, label="before", items=3, created_at=T0)
        newer = Checkpoint(namespace="ns-0", tier=Tier.TASK, created_at=T0 + timedelta(hours=1))
        backend.checkpoints.save(older, data)
        backend.checkpoints.save(newer, "x")
        assert backend.checkpoints.get(older.id) == older
        assert backend.checkpoints.data(older.id) == data
        assert backend.checkpoints.get("no-such-checkpoint") is None
        assert backend.checkpoints.data("no-such-checkpoint") is None
        assert backend.checkpoints.of_scope("ns-0", Tier.TASK) == [newer, older]
        assert backend.checkpoints.all() == [newer, older]
        assert backend.checkpoints.delete(older.id) is True
        assert backend.checkpoints.delete(older.id) is False
        assert backend.checkpoints.of_scope("ns-0", Tier.TASK) == [newer]

    def test_checkpoints_stay_in_their_scope(self, backend: MemoryBackend) -> None:
        """A scope lists its own checkpoints only: not another namespace's, not another tier's."""
        mine = Checkpoint(namespace="ns-0", tier=Tier.TASK, created_at=T0)
        other_namespace = Checkpoint(namespace="ns-1", tier=Tier.TASK, created_at=T0)
        other_tier = Checkpoint(namespace="ns-0", tier=Tier.PROJECT, created_at=T0)
        for checkpoint in (mine, other_namespace, other_tier):
            backend.checkpoints.save(checkpoint, "x")
        assert backend.checkpoints.of_scope("ns-0", Tier.TASK) == [mine]
        assert backend.checkpoints.of_scope("ns-1", Tier.TASK) == [other_namespace]
        assert backend.checkpoints.of_scope("ns-0", Tier.PROJECT) == [other_tier]
        assert backend.checkpoints.of_scope("ns-9", Tier.TASK) == []
        assert {c.id for c in backend.checkpoints.all()} == {
            mine.id,
            other_namespace.id,
            other_tier.id,
        }

    def test_checkpoints_outlive_the_items(self, filled: MemoryBackend) -> None:
        """A checkpoint is a saved state, not memory: clearing the items leaves it."""
        checkpoint = Checkpoint(namespace="ns-0", tier=Tier.PROJECT, items=15)
        filled.checkpoints.save(checkpoint, "saved")
        filled.clear()
        assert filled.checkpoints.get(checkpoint.id) == checkpoint
        assert filled.checkpoints.data(checkpoint.id) == "saved"

    def test_checkpoints_go_when_a_memory_they_hold_is_erased(self, filled: MemoryBackend) -> None:
        """An erased memory leaves no text behind: the checkpoints naming it are deleted too.

        If this fails, check that ``erase`` calls the checkpoint store's ``drop_holding``.
        """
        holding = Checkpoint(namespace="ns-0", tier=Tier.PROJECT)
        other = Checkpoint(namespace="ns-0", tier=Tier.PROJECT)
        filled.checkpoints.save(holding, '{"data":{"id":"item-00002","text":"memory number 2"}}')
        filled.checkpoints.save(other, '{"data":{"id":"item-00020","text":"memory number 20"}}')
        other_case = Checkpoint(namespace="ns-0", tier=Tier.PROJECT)
        filled.checkpoints.save(other_case, '{"data":{"id":"ITEM-00002"}}')
        assert filled.checkpoints.drop_holding([]) == 0
        many = [f"gone-{n}" for n in range(1100)]  # more ids than one statement may name
        filled.erase([*many, "item-00002"])
        assert filled.checkpoints.get(holding.id) is None
        assert filled.checkpoints.get(other.id) == other
        assert filled.checkpoints.get(other_case.id) == other_case  # ids compare exactly

    def test_checkpoints_refuse_bad_input(self, backend: MemoryBackend) -> None:
        """A second save of an id, a non-checkpoint, non-text data, a bad id: refused, unchanged."""
        checkpoint = Checkpoint(namespace="ns-0", tier=Tier.TASK)
        backend.checkpoints.save(checkpoint, "first")
        store: Any = backend.checkpoints  # the wrong types below are the point
        attempts: list[tuple[Callable[[], object], str]] = [
            (lambda: store.save(checkpoint, "again"), "id"),
            (lambda: store.save("nope", "x"), "checkpoint"),
            (lambda: store.save(Checkpoint(namespace="n", tier=Tier.TASK), 7), "data"),
            (lambda: store.get(""), "checkpoint_id"),
            (lambda: store.of_scope("ns-0", "nowhere"), "tier"),
        ]
        for bad, field in attempts:
            with pytest.raises(ValidationError) as info:
                bad()
            assert info.value.field == field
        assert backend.checkpoints.data(checkpoint.id) == "first"
        assert backend.checkpoints.of_scope("ns-0", Tier.TASK) == [checkpoint]
        assert backend.checkpoints.of_scope("n", Tier.TASK) == []

    # ------------------------------------------------------------------ grants

    def test_grants_round_trip(self, backend: MemoryBackend) -> None:
        """Agents register once per realm; a grant comes back whole; granting again replaces.

        If this fails, check that ``register`` says whether the agent is new and that a grant
        is stored per (pool, agent), its time to the millisecond.
        """
        store = backend.grants
        assert store.register("realm-0", "scout") is True
        assert store.register("realm-0", "scout") is False
        assert store.register("realm-0", "coder") is True
        assert store.agents("realm-0") == ["coder", "scout"]
        first = Grant("realm-0", "pool-0", "scout", Access.READ, "app", T0)
        store.grant(first)
        store.grant(Grant("realm-0", "pool-0", "coder", Access.WRITE, "app", T0))
        assert store.access("realm-0", "pool-0", "scout") is Access.READ
        assert store.of_pool("pool-0")[1] == first
        later = Grant("realm-0", "pool-0", "scout", Access.WRITE, "lead", T0 + timedelta(minutes=1))
        store.grant(later)
        assert [g.agent for g in store.of_pool("pool-0")] == ["coder", "scout"]
        assert store.of_pool("pool-0")[1] == later
        assert (store.realms(), store.pools()) == (["realm-0"], ["pool-0"])

    def test_grants_name_registered_agents_only(self, backend: MemoryBackend) -> None:
        """A grant to an agent the realm never registered is refused, whatever other realms hold.

        If this fails, check that the grant and the check that its agent is registered in
        *that* realm happen in one transaction.
        """
        store = backend.grants
        store.register("realm-1", "scout")
        with pytest.raises(UnknownAgentError) as info:
            store.grant(Grant("realm-0", "pool-0", "scout", Access.READ, "app", T0))
        assert (info.value.field, info.value.value) == ("agent", "scout")
        assert store.of_pool("pool-0") == []
        assert store.access("realm-0", "pool-0", "scout") is None
        assert store.pools() == []

    def test_grants_revoke(self, backend: MemoryBackend) -> None:
        """Revoking returns the grant removed, touches no other pool or agent, and is idempotent."""
        store = backend.grants
        store.register("realm-0", "scout")
        store.register("realm-0", "coder")
        for pool in ("pool-0", "pool-1"):
            store.grant(Grant("realm-0", pool, "scout", Access.WRITE, "app", T0))
        store.grant(Grant("realm-0", "pool-0", "coder", Access.READ, "app", T0))
        removed = store.revoke("pool-0", "scout")
        assert removed is not None
        assert removed.access is Access.WRITE
        assert store.revoke("pool-0", "scout") is None
        assert store.access("realm-0", "pool-0", "scout") is None
        assert store.access("realm-0", "pool-1", "scout") is Access.WRITE
        assert store.access("realm-0", "pool-0", "coder") is Access.READ
        assert store.revoke("pool-0", "coder") is not None
        assert store.pools() == ["pool-1"]
        assert store.agents("realm-0") == ["coder", "scout"]

    def test_grants_outlive_the_items(self, filled: MemoryBackend) -> None:
        """Grants are access rules, not memory: clearing every item keeps them."""
        filled.grants.register("realm-0", "scout")
        filled.grants.grant(Grant("realm-0", "ns-0", "scout", Access.READ, "app", T0))
        filled.clear()
        assert filled.grants.access("realm-0", "ns-0", "scout") is Access.READ

    def test_grants_never_reach_across_realms(self, backend: MemoryBackend) -> None:
        """A grant answers for its own realm only, whatever pool it names.

        If this fails, check that ``access`` compares the grant's realm with the one asked
        about: a grant written by hand (or read from a file) naming another project's pool
        must give an agent of this project nothing there.
        """
        store = backend.grants
        store.register("realm-0", "eve")
        store.grant(Grant("realm-0", "pool-of-realm-1", "eve", Access.WRITE, "app", T0))
        assert store.access("realm-1", "pool-of-realm-1", "eve") is None
        assert store.access("realm-0", "pool-of-realm-1", "eve") is Access.WRITE

    def test_grants_refuse_bad_input(self, backend: MemoryBackend) -> None:
        """Bad ids, a non-grant, an unknown access: refused by field, nothing stored."""
        store: Any = backend.grants  # the wrong types below are the point
        attempts: list[tuple[Callable[[], object], str]] = [
            (lambda: store.register("", "scout"), "realm"),
            (lambda: store.register("realm-0", " scout"), "agent"),
            (lambda: store.grant("scout"), "grant"),
            (lambda: Grant("realm-0", "pool-0", "scout", "admin", "app", T0), "access"),
            (lambda: store.access("realm-0", "", "scout"), "pool"),
        ]
        for bad, field in attempts:
            with pytest.raises(ValidationError) as info:
                bad()
            assert info.value.field == field
        assert (store.realms(), store.pools()) == ([], [])

    # ------------------------------------------------------------------ lineage

    def test_lineage_round_trip(self, backend: MemoryBackend) -> None:
        """A fork record comes back whole; a scope lists its attached forks, by namespace.

        If this fails, check the record's conversion (its time to the microsecond, the tier,
        ``detached``), that ``children`` leaves out detached forks and other tiers' forks,
        and that ``all`` orders by tier, then namespace.
        """
        store = backend.lineage
        later = Fork(
            namespace="ns-0.b",
            tier=Tier.TASK,
            parent="ns-0",
            forked_at=T0 + timedelta(seconds=1, microseconds=250),
            checkpoint="cp-1",
        )
        earlier = Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        detached = Fork(
            namespace="ns-0.c", tier=Tier.TASK, parent="ns-0", forked_at=T0, detached=True
        )
        session = Fork(namespace="ns-0.a", tier=Tier.SESSION, parent="ns-0", forked_at=T0)
        for fork in (later, earlier, detached, session):
            store.record(fork)
        assert store.get("ns-0.b", Tier.TASK) == later
        assert store.get("ns-0.c", Tier.TASK) == detached
        assert store.get("ns-0", Tier.TASK) is None
        assert store.get("ns-0.b", Tier.SESSION) is None
        assert store.children("ns-0", Tier.TASK) == [earlier, later]
        assert store.children("ns-0", Tier.SESSION) == [session]
        assert store.children("ns-0", Tier.PROJECT) == []
        assert store.children("ns-0.a", Tier.TASK) == []
        assert store.all() == [session, earlier, later, detached]

    def test_lineage_detach(self, backend: MemoryBackend) -> None:
        """Detaching once says True and forgets the hidden ids; again, or unknown, says False.

        If this fails, check that the flag and the hidden ids change in one write, and that a
        detached fork is kept (the record is the lineage) but no longer a child.
        """
        store = backend.lineage
        fork = Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        store.record(fork)
        store.hide("ns-0.a", Tier.TASK, ["item-00001", "item-00002"])
        assert store.detach("ns-0.a", Tier.TASK) is True
        assert store.get("ns-0.a", Tier.TASK) == attrs.evolve(fork, detached=True)
        assert store.hidden("ns-0.a", Tier.TASK) == frozenset()
        assert store.children("ns-0", Tier.TASK) == []
        assert store.detach("ns-0.a", Tier.TASK) is False
        assert store.detach("ns-9", Tier.TASK) is False
        assert store.all() == [attrs.evolve(fork, detached=True)]

    def test_lineage_drop(self, backend: MemoryBackend) -> None:
        """Dropping a fork forgets its record and hidden ids; True once, then False; re-recordable.

        If this fails, check that ``drop`` deletes the record and the hidden ids in one write
        (a hidden id left behind shows through to the scope when it is recorded again), takes
        the scope out of its parent's children (Redis: the parent's children set) and says
        whether there was a record, detached or not.
        """
        store = backend.lineage
        fork = Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        store.record(fork)
        store.hide("ns-0.a", Tier.TASK, ["item-00001", "item-00002"])
        assert store.drop("ns-0.a", Tier.TASK) is True
        assert store.get("ns-0.a", Tier.TASK) is None
        assert store.children("ns-0", Tier.TASK) == []
        assert store.hidden("ns-0.a", Tier.TASK) == frozenset()
        assert store.all() == []
        assert store.drop("ns-0.a", Tier.TASK) is False
        assert store.drop("ns-9", Tier.TASK) is False
        again = Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-2", forked_at=T0)
        store.record(again)
        assert store.get("ns-0.a", Tier.TASK) == again
        assert store.hidden("ns-0.a", Tier.TASK) == frozenset()
        assert store.children("ns-0", Tier.TASK) == []
        assert store.children("ns-2", Tier.TASK) == [again]
        assert store.all() == [again]
        store.detach("ns-0.a", Tier.TASK)
        assert store.drop("ns-0.a", Tier.TASK) is True
        assert store.all() == []

    def test_lineage_drop_leaves_the_others(self, backend: MemoryBackend) -> None:
        """Dropping one fork leaves its siblings, its namesake of another tier and its own forks.

        If this fails, check that ``drop`` is keyed by namespace *and* tier, deletes only the
        scope's own hidden ids and children entry, and leaves the records of the scope's own
        forks as they are (they name a parent that is no longer a fork, which is allowed).
        """
        store = backend.lineage
        dropped = Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        sibling = Fork(namespace="ns-0.b", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        namesake = Fork(namespace="ns-0.a", tier=Tier.SESSION, parent="ns-0", forked_at=T0)
        grandchild = Fork(namespace="ns-0.a.x", tier=Tier.TASK, parent="ns-0.a", forked_at=T0)
        for fork in (dropped, sibling, namesake, grandchild):
            store.record(fork)
            store.hide(fork.namespace, fork.tier, ["item-00001", f"of-{fork.namespace}"])
        assert store.drop("ns-0.a", Tier.TASK) is True
        assert store.children("ns-0", Tier.TASK) == [sibling]
        assert store.children("ns-0", Tier.SESSION) == [namesake]
        assert store.children("ns-0.a", Tier.TASK) == [grandchild]
        assert store.all() == [namesake, grandchild, sibling]
        assert store.hidden("ns-0.b", Tier.TASK) == {"item-00001", "of-ns-0.b"}
        assert store.hidden("ns-0.a", Tier.SESSION) == {"item-00001", "of-ns-0.a"}
        assert store.hidden("ns-0.a.x", Tier.TASK) == {"item-00001", "of-ns-0.a.x"}
        assert store.hidden("ns-0.a", Tier.TASK) == frozenset()

    def test_lineage_hide(self, backend: MemoryBackend) -> None:
        """Hidden ids accumulate, each once, on attached forks only; unknown scopes keep none.

        If this fails, check that an id hidden twice is kept once (an upsert), that ids are
        written in batches (a fork may hide thousands), and that ``hide`` reads whether the
        fork is attached in the same write.
        """
        store = backend.lineage
        store.record(Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0))
        store.hide("ns-0.a", Tier.TASK, ["item-00001", "item-00002", "item-00001"])
        store.hide("ns-0.a", Tier.TASK, ["item-00002", "item-00003"])
        store.hide("ns-0.a", Tier.TASK, [])
        assert store.hidden("ns-0.a", Tier.TASK) == {"item-00001", "item-00002", "item-00003"}
        many = [f"item-{n:05d}" for n in range(1200)]
        store.hide("ns-0.a", Tier.TASK, many)
        assert store.hidden("ns-0.a", Tier.TASK) == frozenset(many)
        store.hide("ns-9", Tier.TASK, ["item-00001"])
        assert store.hidden("ns-9", Tier.TASK) == frozenset()
        store.record(Fork(namespace="ns-9", tier=Tier.TASK, parent="ns-0", forked_at=T0))
        assert store.hidden("ns-9", Tier.TASK) == frozenset()
        store.record(
            Fork(namespace="ns-8", tier=Tier.TASK, parent="ns-0", forked_at=T0, detached=True)
        )
        store.hide("ns-8", Tier.TASK, ["item-00001"])
        assert store.hidden("ns-8", Tier.TASK) == frozenset()

    def test_lineage_hides_ids_as_long_as_item_ids(self, backend: MemoryBackend) -> None:
        """A hidden id may be as long as an item's id (1024 characters), and no longer.

        If this fails, check that ``check_hidden`` takes ``MAX_ITEM_ID_LENGTH`` (not the
        255 of other identifiers) and that the hidden id's column or key holds that much.
        """
        store = backend.lineage
        store.record(Fork(namespace="ns-0.a", tier=Tier.TASK, parent="ns-0", forked_at=T0))
        longest = "i" * MAX_ITEM_ID_LENGTH
        store.hide("ns-0.a", Tier.TASK, [longest])
        assert store.hidden("ns-0.a", Tier.TASK) == {longest}
        with pytest.raises(ValidationError) as info:
            store.hide("ns-0.a", Tier.TASK, [longest + "i"])
        assert info.value.field == "item_ids"
        assert store.hidden("ns-0.a", Tier.TASK) == {longest}

    def test_lineage_unhide(self, backend: MemoryBackend) -> None:
        """Unhiding forgets the ids in every fork that hid them and counts the entries that went.

        If this fails, check that ``unhide`` visits every attached fork of every scope and
        tier (not one fork's), leaves the other ids, and deletes in batches (an erase may
        name thousands of ids).
        """
        store = backend.lineage
        for namespace, tier in (
            ("ns-0.a", Tier.TASK),
            ("ns-0.b", Tier.TASK),
            ("ns-0.a", Tier.SESSION),
        ):
            store.record(Fork(namespace=namespace, tier=tier, parent="ns-0", forked_at=T0))
        store.hide("ns-0.a", Tier.TASK, ["item-00001", "item-00002"])
        store.hide("ns-0.b", Tier.TASK, ["item-00001", "item-00003"])
        store.hide("ns-0.a", Tier.SESSION, ["item-00001"])
        assert store.unhide(["item-00001", "item-00009", "item-00001"]) == 3
        assert store.hidden("ns-0.a", Tier.TASK) == {"item-00002"}
        assert store.hidden("ns-0.b", Tier.TASK) == {"item-00003"}
        assert store.hidden("ns-0.a", Tier.SESSION) == frozenset()
        assert store.unhide(["item-00001"]) == 0
        assert store.unhide([]) == 0
        many = [f"many-{n:05d}" for n in range(1200)]
        store.hide("ns-0.b", Tier.TASK, many)
        assert store.unhide([*many, " not an item id "]) == 1200
        assert store.hidden("ns-0.b", Tier.TASK) == {"item-00003"}
        assert [f.namespace for f in store.children("ns-0", Tier.TASK)] == ["ns-0.a", "ns-0.b"]

    def test_lineage_erase_unhides(self, backend: MemoryBackend) -> None:
        """An erased item leaves no trace in the forks: no fork keeps its id hidden.

        If this fails, check that ``erase`` calls the lineage store's ``unhide`` (a backend
        that erases through another backend, as FAISS does, must reach that one's).
        """
        erased, kept = make_item(1), make_item(7)
        backend.add(erased)
        backend.add(kept)
        fork = Fork(
            namespace=erased.namespace + ".a",
            tier=erased.tier,
            parent=erased.namespace,
            forked_at=T0,
        )
        backend.lineage.record(fork)
        backend.lineage.hide(fork.namespace, fork.tier, [erased.id, kept.id])
        assert backend.erase([erased.id]) == 1
        assert backend.lineage.hidden(fork.namespace, fork.tier) == {kept.id}
        assert backend.lineage.get(fork.namespace, fork.tier) == fork

    def test_lineage_records_a_scope_once(self, backend: MemoryBackend) -> None:
        """Recording a scope again is refused and keeps the first record; another tier may.

        If this fails, check that the check and the write are one atomic step (an insert
        that does nothing on a taken scope, or a watched read), keyed by namespace *and* tier.
        """
        store = backend.lineage
        first = Fork(namespace="ns-1", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        store.record(first)
        with pytest.raises(ValidationError) as info:
            store.record(Fork(namespace="ns-1", tier=Tier.TASK, parent="ns-2", forked_at=T0))
        assert (info.value.field, info.value.value) == ("namespace", "ns-1")
        assert store.get("ns-1", Tier.TASK) == first
        assert store.children("ns-2", Tier.TASK) == []
        other = Fork(namespace="ns-1", tier=Tier.SESSION, parent="ns-2", forked_at=T0)
        store.record(other)
        store.hide("ns-1", Tier.TASK, ["item-00001"])
        assert store.hidden("ns-1", Tier.SESSION) == frozenset()
        assert store.detach("ns-1", Tier.TASK) is True
        assert store.get("ns-1", Tier.SESSION) == other
        assert store.children("ns-2", Tier.SESSION) == [other]

    def test_lineage_concurrent_records_have_one_winner(self, backend: MemoryBackend) -> None:
        """Processes forking one scope at once: one record stands, every other is refused.

        If this fails with a driver error (an integrity error), check that a duplicate found
        only at the write is reported as the ValidationError a duplicate found first is.
        """
        outcomes: list[str] = []
        barrier = threading.Barrier(6)

        def fork(n: int) -> None:
            barrier.wait()
            try:
                backend.lineage.record(
                    Fork(namespace="ns-1", tier=Tier.TASK, parent=f"parent-{n}", forked_at=T0)
                )
                outcomes.append("recorded")
            except ValidationError:
                outcomes.append("refused")

        threads = [threading.Thread(target=fork, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["recorded", *["refused"] * 5]
        assert len(backend.lineage.all()) == 1

    def test_lineage_outlives_the_items(self, filled: MemoryBackend) -> None:
        """Lineage is not memory: clearing every item keeps the records and the hidden ids."""
        fork = Fork(namespace="ns-1", tier=Tier.PROJECT, parent="ns-0", forked_at=T0)
        filled.lineage.record(fork)
        filled.lineage.hide("ns-1", Tier.PROJECT, ["item-00000"])
        filled.clear()
        assert filled.lineage.get("ns-1", Tier.PROJECT) == fork
        assert filled.lineage.hidden("ns-1", Tier.PROJECT) == {"item-00000"}

    def test_lineage_refuses_bad_input(self, backend: MemoryBackend) -> None:
        """A non-fork, bad scopes, bad ids, a scope its own parent: refused by field, unchanged."""
        store: Any = backend.lineage  # the wrong types below are the point
        fork = Fork(namespace="ns-1", tier=Tier.TASK, parent="ns-0", forked_at=T0)
        store.record(fork)
        attempts: list[tuple[Callable[[], object], str]] = [
            (lambda: store.record("ns-1"), "fork"),
            (lambda: store.get("", Tier.TASK), "namespace"),
            (lambda: store.children("ns-0", "nowhere"), "tier"),
            (lambda: store.detach(" ns-1", Tier.TASK), "namespace"),
            (lambda: store.drop("ns-1", "nowhere"), "tier"),
            (lambda: store.drop("", Tier.TASK), "namespace"),
            (lambda: store.drop(7, Tier.TASK), "namespace"),
            (lambda: store.hide("ns-1", Tier.TASK, "item-00001"), "item_ids"),
            (lambda: store.hide("ns-1", Tier.TASK, ["item-00001", ""]), "item_ids"),
            (lambda: store.unhide("item-00001"), "item_ids"),
            (lambda: store.unhide(["item-00001", 7]), "item_ids"),
            (lambda: store.hidden("ns-1", None), "tier"),
            (lambda: Fork(namespace="ns-2", tier=Tier.TASK, parent="ns-2", forked_at=T0), "parent"),
            (
                lambda: Fork(
                    namespace="ns-2",
                    tier=Tier.TASK,
                    parent="ns-0",
                    forked_at=T0.replace(tzinfo=None),
                ),
                "forked_at",
            ),
            (
                lambda: Fork(
                    namespace="ns-2", tier=Tier.TASK, parent="ns-0", forked_at=T0, detached="no"
                ),
                "detached",
            ),
        ]
        for bad, field in attempts:
            with pytest.raises(ValidationError) as info:
                bad()
            assert info.value.field == field
        assert store.all() == [fork]
        assert store.hidden("ns-1", Tier.TASK) == frozenset()

    # ------------------------------------------------------------------ properties

    @settings(
        max_examples=60,
        deadline=None,
        # Every backend's subclass runs this same test function: that is the point of a suite.
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.differing_executors,
        ],
    )
    @given(data=st.data())
    def test_query_matches_oracle(self, backend: MemoryBackend, data: st.DataObject) -> None:
        """For random items, filters, orders and limits, query equals a brute-force oracle."""
        backend.clear()
        items = data.draw(st.lists(_items(), max_size=25, unique_by=lambda i: i.id))
        backend.add_many(items)
        filters = data.draw(_filter_docs())
        order_by = data.draw(st.sampled_from(_ORDERS))
        limit = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=30)))
        got = backend.query(filters, limit=limit, order_by=order_by)
        want = _oracle(items, filters, order_by, limit)
        assert _ids(got) == _ids(want)
        assert backend.count(filters) == len(_oracle(items, filters, order_by, None))


class _FailsAfter:
    """An embedder that fails once it has embedded ``texts`` texts (a model crashing mid-way)."""

    def __init__(self, inner: Embedder, *, texts: int) -> None:
        self._inner = inner
        self._left = texts

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        if len(texts) > self._left:
            raise EmbeddingError("the model failed (on purpose)")
        self._left -= len(texts)
        return self._inner.embed(texts)


# ----------------------------------------------------------------------------- oracle

_KINDS = ("a", "b", "c")
_TAGS = ("t1", "t2", "t3", "t4", "t5", "t6")
_ORDERS: tuple[str | Order, ...] = (
    Order.desc("timestamp"),
    "+timestamp",
    "-timestamp",
    Order.desc("importance"),
    "-importance",
    Order.asc("importance"),
    Order.desc("token_cost"),
    "+token_cost",
    Order.desc("access_count"),
    Order.desc("id"),
    "+id",
    Order.desc("kind"),
    Order.desc("expires_at"),
    "+last_accessed_at",
)


@st.composite
def _items(draw: st.DrawFn) -> ContextItem:
    minutes = st.integers(min_value=0, max_value=20)
    optional_time = st.one_of(st.none(), minutes.map(lambda m: T0 + timedelta(minutes=m)))
    archived = draw(optional_time)
    return ContextItem(
        id=draw(
            st.text(alphabet="abcdXYZ0-_é", min_size=1, max_size=6).filter(lambda s: s.strip() == s)
        ),
        kind=draw(st.sampled_from(_KINDS)),
        text=draw(st.text(max_size=20).filter(lambda s: "\x00" not in s)),
        namespace=draw(st.sampled_from(("n1", "n2"))),
        timestamp=T0 + timedelta(minutes=draw(minutes)),
        tags=draw(st.lists(st.sampled_from(_TAGS), max_size=6)),
        importance=draw(st.sampled_from((0.0, 0.25, 0.5, 1.0))),
        token_cost=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=5))),
        access_count=draw(st.integers(min_value=0, max_value=3)),
        status=draw(st.sampled_from(list(Status))),
        last_accessed_at=draw(optional_time),
        expires_at=draw(optional_time),
        key=draw(st.one_of(st.none(), st.sampled_from(("k1", "k2")))),
        valid_to=draw(st.one_of(st.none(), st.just(T0 + timedelta(days=1)))),
        archived_at=archived,
        archived_reason=None if archived is None else ArchiveReason.COMPACTED,
        agent=draw(st.sampled_from(("", "scout", "coder"))),
    )


@st.composite
def _filter_docs(draw: st.DrawFn) -> dict[str, Any]:
    time = st.integers(min_value=0, max_value=20).map(lambda m: T0 + timedelta(minutes=m))
    number = st.sampled_from((0, 0.25, 0.5, 1, 2, 3))
    candidates: dict[str, st.SearchStrategy[Any]] = {
        "kind": st.one_of(
            st.sampled_from(_KINDS),
            st.fixed_dictionaries({"$ne": st.sampled_from(_KINDS)}),
            st.fixed_dictionaries({"$in": st.lists(st.sampled_from(_KINDS), max_size=2)}),
            st.fixed_dictionaries({"$nin": st.lists(st.sampled_from(_KINDS), max_size=2)}),
        ),
        "namespace": st.sampled_from(("n1", "n2")),
        "agent": st.one_of(
            st.sampled_from(("", "scout")),
            st.fixed_dictionaries({"$in": st.lists(st.sampled_from(("", "coder")), max_size=2)}),
        ),
        "importance": st.one_of(
            number,
            st.dictionaries(
                st.sampled_from(("$gt", "$gte", "$lt", "$lte", "$ne")), number, min_size=1
            ),
            st.fixed_dictionaries({"$in": st.lists(number, max_size=3)}),
        ),
        "token_cost": st.one_of(
            st.none(),
            st.fixed_dictionaries({"$exists": st.booleans()}),
            st.dictionaries(st.sampled_from(("$gt", "$lte", "$ne")), number, min_size=1),
            st.fixed_dictionaries({"$nin": st.lists(st.integers(0, 5), max_size=2)}),
        ),
        "timestamp": st.dictionaries(st.sampled_from(("$gt", "$lte")), time, min_size=1),
        "expires_at": st.one_of(
            st.none(),
            st.dictionaries(st.sampled_from(("$gte", "$lt", "$ne")), time, min_size=1),
        ),
        "status": st.sampled_from([s.value for s in Status]),
        "key": st.one_of(
            st.none(), st.sampled_from(("k1", "k2")), st.fixed_dictionaries({"$ne": st.just("k1")})
        ),
        "valid_to": st.one_of(st.none(), st.fixed_dictionaries({"$exists": st.booleans()})),
        "archived_at": st.one_of(
            st.none(),
            st.fixed_dictionaries({"$exists": st.booleans()}),
            st.dictionaries(st.sampled_from(("$gt", "$lte")), time, min_size=1),
        ),
        # Lists cross the length at which SQL stores switch from a probe per tag to one read.
        "tags": st.one_of(
            st.sampled_from(_TAGS),
            st.lists(st.sampled_from(_TAGS), max_size=6),
            st.fixed_dictionaries({"$all": st.lists(st.sampled_from(_TAGS), max_size=6)}),
            st.fixed_dictionaries({"$nin": st.lists(st.sampled_from(_TAGS), max_size=6)}),
            st.fixed_dictionaries({"$ne": st.sampled_from(_TAGS)}),
            st.fixed_dictionaries({"$exists": st.booleans()}),
        ),
    }
    keys = draw(st.lists(st.sampled_from(sorted(candidates)), unique=True, max_size=3))
    return {key: draw(candidates[key]) for key in keys}


def _oracle_match(item: ContextItem, filters: dict[str, Any]) -> bool:  # noqa: C901
    """An independent, deliberately naive reading of docs/filters.md."""
    for field, spec in filters.items():
        actual = getattr(item, field)
        ops = spec if isinstance(spec, dict) else {"$in" if isinstance(spec, list) else "$eq": spec}
        for op, value in ops.items():
            if field == "tags":
                ok = _oracle_tags(set(actual), op, value)
            elif op == "$exists":
                ok = (actual is not None) == value
            elif op == "$eq":
                ok = actual == value
            elif op == "$ne":
                ok = actual != value
            elif op == "$in":
                ok = actual in value
            elif op == "$nin":
                ok = actual not in value
            elif actual is None:
                ok = False
            else:
                ok = {
                    "$gt": actual > value,
                    "$gte": actual >= value,
                    "$lt": actual < value,
                    "$lte": actual <= value,
                }[op]
            if not ok:
                return False
    return True


def _oracle_tags(tags: set[str], op: str, value: Any) -> bool:
    if op == "$exists":
        return bool(tags) is value
    wanted = set(value) if isinstance(value, list) else {value}
    if op == "$all":
        return wanted <= tags
    overlap = bool(tags & wanted)
    return not overlap if op in {"$ne", "$nin"} else overlap


def _oracle(
    items: list[ContextItem], filters: dict[str, Any], order_by: str | Order, limit: int | None
) -> list[ContextItem]:
    matching = [item for item in items if _oracle_match(item, filters)]
    if isinstance(order_by, Order):
        field, descending = order_by.field, order_by.descending
    else:  # the documented spellings, read on their own: "-x" descending, "+x" ascending
        field, descending = order_by[1:], order_by.startswith("-")
    with_value = [i for i in matching if getattr(i, field) is not None]
    without = sorted((i for i in matching if getattr(i, field) is None), key=lambda i: i.id)
    ranked = sorted(with_value, key=lambda i: i.id)
    ranked = sorted(ranked, key=lambda i: getattr(i, field), reverse=descending)
    ordered = ranked + without
    return ordered if limit is None else ordered[:limit]

"""Memory that ages: decay, time to live, staleness and the soft limit, as moves to the archive."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from agent_engine import (
    AgingPolicy,
    AuditAction,
    GlobalMemoryStore,
    InMemoryBackend,
    MemoryStores,
    ProjectMemoryStore,
    Status,
    TaskMemoryStore,
    ValidationError,
)
from agent_engine.models import ArchiveReason, ContextItem
from agent_engine.tiers.aging import DEFAULT_TTL_DAYS, apply_plan, plan_compaction

NOW = datetime(2025, 1, 1, tzinfo=UTC)


class Frozen:
    """A clock that says ``now`` until told otherwise."""

    def __init__(self, now: datetime = NOW):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def aged(store, kind, text, *, days, importance=0.5, reads=0, read_days=None, **fields):
    """Store an item written ``days`` before NOW and last read ``read_days`` before it."""
    read = None if read_days is None else NOW - timedelta(days=read_days)
    item = store.new_item(
        kind,
        text,
        importance=importance,
        timestamp=NOW - timedelta(days=days),
        access_count=reads,
        last_accessed_at=read,
        **fields,
    )
    return store.add(item)


def reasons(report):
    return {move.preview: move.reason.value for move in report.moves}


class TestDecay:
    def item(self, **fields):
        defaults = {"id": "x", "kind": "fact", "importance": 0.8, "timestamp": NOW}
        if "last_accessed_at" in fields:
            defaults["timestamp"] = NOW - timedelta(days=70)
        return ContextItem(**{**defaults, **fields})

    def test_the_seed_formula(self):
        """importance x 0.95^(weeks idle) x status weight x min(1, 0.5 + 0.05 x reads)."""
        item = self.item(access_count=2, last_accessed_at=NOW - timedelta(days=14))
        assert AgingPolicy().decayed(item, NOW) == pytest.approx(0.8 * 0.95**2 * 0.6)

    def test_a_candidate_weighs_less_and_reads_resist(self):
        """Unconfirmed items weigh 0.9; ten reads or more leave decay to time alone."""
        policy = AgingPolicy()
        candidate = self.item(status=Status.CANDIDATE)
        assert policy.decayed(candidate, NOW) == pytest.approx(0.8 * 0.9 * 0.5)
        assert policy.decayed(self.item(access_count=25), NOW) == pytest.approx(0.8)

    def test_pinned_never_decays(self):
        """A pinned item keeps its importance however long it sits unread."""
        pinned = self.item(status=Status.PINNED, timestamp=NOW - timedelta(days=3650))
        assert AgingPolicy().decayed(pinned, NOW) == 0.8

    def test_idle_time_runs_from_the_last_read_or_write(self):
        """Never read, decay runs from when the version was written; a read restarts it."""
        policy = AgingPolicy()
        written = self.item(timestamp=NOW - timedelta(days=70))
        assert policy.decayed(written, NOW) == pytest.approx(0.8 * 0.5 * 0.95**10)
        read = self.item(access_count=10, last_accessed_at=NOW - timedelta(days=7))
        assert policy.decayed(read, NOW) == pytest.approx(0.8 * 0.95)
        future = self.item(timestamp=NOW + timedelta(days=3))
        assert policy.decayed(future, NOW) == pytest.approx(0.4)

    def test_nothing_compounds(self, backend):
        """Planning and compacting leave importance as stored: the same plan twice, same numbers."""
        store = ProjectMemoryStore("p", backend, clock=Frozen())
        kept = aged(store, "fact", "kept", days=30, importance=0.6)
        first = store.compact(dry_run=True)
        second = store.compact()
        assert first.moves == second.moves == ()
        assert store.get(kept.id).importance == 0.6
        assert store.compact(dry_run=True) == second


class TestPolicy:
    def test_the_seed_defaults(self):
        """Floor, TTLs, the 3000 -> 2700 limit and 24 hours of protection, as the seed has them."""
        policy = AgingPolicy()
        assert (policy.soft_limit, policy.low_mark) == (3000, 2700)
        assert policy.protect_recent == timedelta(hours=24)
        assert policy.ttl_exempt_accesses == 3
        seed = {
            "task_progress": 14,
            "discovery": 21,
            "file_change": 21,
            "warning": 30,
            "decision": 90,
            "error": 90,
            "pattern": 180,
            "architecture": 180,
            "preference": 365,
        }
        for kind, days in seed.items():
            assert policy.ttl_of(kind) == timedelta(days=days)
        assert policy.ttl_of("reasoning") == timedelta(days=14)
        assert policy.ttl_of("failure") == timedelta(days=90)
        assert policy.ttl_of("instruction") is None
        assert policy.ttl_of("anything else") is None

    def test_ttl_takes_days_or_durations(self):
        """A TTL is a number of days or a timedelta; kinds it does not name get default_ttl."""
        policy = AgingPolicy(ttl={"note": 1.5, "log": timedelta(hours=6)}, default_ttl=30)
        assert policy.ttl_of("note") == timedelta(days=1.5)
        assert policy.ttl_of("log") == timedelta(hours=6)
        assert policy.ttl_of("decision") == timedelta(days=30)

    @pytest.mark.parametrize(
        ("ttl", "field"),
        [
            pytest.param({"note": -1}, "ttl[note]", id="negative"),
            pytest.param({"note": timedelta(days=-1)}, "ttl[note]", id="negative-timedelta"),
            pytest.param({"note": "ten"}, "ttl[note]", id="text"),
            pytest.param({"note": True}, "ttl[note]", id="bool"),
            pytest.param({"note": math.nan}, "ttl[note]", id="nan"),
            pytest.param({"note": 1e12}, "ttl[note]", id="too-long"),
            pytest.param({"": 3}, "ttl", id="blank-kind"),
            pytest.param([("note", 3)], "ttl", id="not-a-mapping"),
        ],
    )
    def test_a_bad_ttl_table_is_refused(self, ttl, field):
        """Negative, non-numeric or unbounded entries are typed errors naming the entry."""
        with pytest.raises(ValidationError) as info:
            AgingPolicy(ttl=ttl)
        assert info.value.field == field

    @pytest.mark.parametrize(("soft", "low"), [(100, 100), (100, 150), (1, 1)])
    def test_crossing_marks_are_refused(self, soft, low):
        """The low mark lies below the soft limit."""
        with pytest.raises(ValidationError) as info:
            AgingPolicy(soft_limit=soft, low_mark=low)
        assert info.value.field == "low_mark"

    @pytest.mark.parametrize("floor", [-0.01, 1.5, "0.1", None, math.inf])
    def test_a_floor_outside_the_unit_interval_is_refused(self, floor):
        """The decay floor is an importance: a number in [0, 1]."""
        with pytest.raises(ValidationError) as info:
            AgingPolicy(floor=floor)
        assert info.value.field == "floor"

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("soft_limit", 0),
            ("low_mark", -1),
            ("stale_after", -3),
            ("protect_recent", "1 day"),
            ("stale_below", 2),
            ("ttl_exempt_accesses", 0),
            ("weekly_retention", 1.2),
        ],
    )
    def test_every_other_setting_is_checked(self, field, value):
        """Each setting refuses what it cannot mean, naming itself."""
        with pytest.raises(ValidationError) as info:
            AgingPolicy(**{field: value})
        assert info.value.field == field

    def test_a_limit_keeps_its_low_marks_share(self):
        """with_limit moves the soft limit and keeps the low mark at the same share of it."""
        assert AgingPolicy().with_limit(1000).low_mark == 900
        assert AgingPolicy(soft_limit=10, low_mark=5).with_limit(8).low_mark == 4
        assert AgingPolicy().with_limit(1).low_mark == 0
        assert AgingPolicy().with_limit(None).soft_limit is None

    def test_the_default_table_is_read_only(self):
        """The defaults cannot be changed by accident through one policy."""
        with pytest.raises(TypeError):
            AgingPolicy().ttl["note"] = 1  # type: ignore[index]
        assert DEFAULT_TTL_DAYS["note"] == 21


class TestRules:
    def test_each_reason_with_its_numbers(self, backend):
        """Expired, decayed and stale items are named with their reason; the rest stay."""
        # One-word texts collide in the small hashing space: no merging of look-alikes here.
        store = ProjectMemoryStore("p", backend, clock=Frozen(), merge=None)
        aged(store, "tool_output", "old tool output", days=22, importance=0.7)
        aged(store, "tool_output", "often read", days=22, importance=0.7, reads=3, read_days=5)
        aged(store, "decision", "young decision", days=22, importance=0.9)
        aged(
            store,
            "note",
            "own expiry",
            days=1,
            importance=0.9,
            reads=5,
            read_days=0.5,
            expires_at=NOW - timedelta(hours=1),
        )
        aged(store, "fact", "faint", days=30, importance=0.1)
        aged(store, "fact", "solid", days=30, importance=0.5)
        aged(store, "fact", "stale", days=200, importance=0.2, reads=10, read_days=100)
        aged(store, "fact", "unread but rated", days=200, importance=0.4, reads=10, read_days=100)
        aged(store, "fact", "new candidate", days=0, importance=0.11, status=Status.CANDIDATE)
        aged(store, "fact", "new and confirmed", days=0, importance=0.11)
        pinned = aged(store, "tool_output", "pinned", days=100, importance=0.0)
        store.pin(pinned.id)

        report = store.compact(dry_run=True)
        assert reasons(report) == {
            "old tool output": "expired",
            "own expiry": "expired",
            "faint": "decayed",
            "new candidate": "decayed",
            "stale": "stale",
        }
        assert (report.working, report.pinned, report.remaining) == (11, 1, 6)
        moves = {move.preview: move for move in report.moves}
        expired = moves["old tool output"]
        assert (expired.ttl_days, expired.age_days, expired.access_count) == (21, 22, 0)
        assert "age 22.0 d > ttl 21 d" in expired.why(report.policy)
        assert "own expiry" in moves["own expiry"].why(report.policy)
        faint = moves["faint"]
        assert faint.decayed == pytest.approx(0.1 * 0.5 * 0.95 ** (30 / 7))
        assert faint.decayed < report.policy.floor
        assert "< floor 0.05" in faint.why(report.policy)
        assert moves["stale"].idle_days == pytest.approx(100)
        assert "idle 100.0 d > 90 d" in moves["stale"].why(report.policy)

    def test_kinds_without_ttl_never_expire_by_kind(self, backend):
        """Without a TTL for its kind an old, unread item is judged by decay alone."""
        policy = AgingPolicy(ttl={}, floor=0.0)
        store = ProjectMemoryStore("p", backend, clock=Frozen(), aging=policy)
        aged(store, "tool_output", "ancient", days=1000, importance=0.5)
        assert store.compact(dry_run=True).moves == ()


class TestSoftLimit:
    def fill(self, store, importances):
        return [
            aged(store, "fact", f"fact {n}", days=10, importance=importance)
            for n, importance in enumerate(importances)
        ]

    def test_down_to_the_low_mark_lowest_decayed_first(self, backend):
        """Over the soft limit, the lowest decayed importance goes first, to the low mark.

        Pinned items and items read within protect_recent are spared, whatever their rank.
        """
        policy = AgingPolicy(soft_limit=8, low_mark=5, ttl={}, floor=0.0, stale_below=0.0)
        store = GlobalMemoryStore(backend, "u", clock=Frozen(), aging=policy)
        items = self.fill(store, [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.05])
        store.pin(items[9].id)  # the least important, pinned
        aged(store, "fact", "read an hour ago", days=10, importance=0.01, reads=1, read_days=0.04)
        report = store.compact(dry_run=True)
        assert (report.working, report.pinned, report.protected) == (11, 1, 1)
        assert [move.preview for move in report.moves] == [
            "fact 1",
            "fact 5",
            "fact 3",
            "fact 7",
            "fact 0",
            "fact 8",
        ]
        assert {move.reason for move in report.moves} == {ArchiveReason.COMPACTED}
        decayed = [move.decayed for move in report.moves]
        assert decayed == sorted(decayed)
        assert report.remaining == 5
        assert report.short == 0

    def test_the_limit_counts_what_the_rules_already_move(self, backend):
        """Items the rules archive count toward the limit: nothing more goes than needed."""
        policy = AgingPolicy(soft_limit=4, low_mark=2, ttl={"old": 1}, floor=0.0, stale_below=0)
        store = GlobalMemoryStore(backend, "u", clock=Frozen(), aging=policy)
        for n in range(3):
            aged(store, "old", f"old {n}", days=5, importance=0.9)
        self.fill(store, [0.5, 0.6, 0.7, 0.8, 0.9])
        report = store.compact(dry_run=True)
        assert reasons(report) == {
            "old 0": "expired",
            "old 1": "expired",
            "old 2": "expired",
            "fact 0": "compacted",
            "fact 1": "compacted",
            "fact 2": "compacted",
        }
        assert report.remaining == 2

    def test_protected_items_can_leave_it_short(self, backend):
        """When only pinned and recent items are left, compaction stops over the low mark."""
        policy = AgingPolicy(soft_limit=2, low_mark=1, ttl={}, floor=0.0, stale_below=0.0)
        store = GlobalMemoryStore(backend, "u", clock=Frozen(), aging=policy)
        for n in range(4):
            aged(store, "fact", f"busy {n}", days=3, reads=1, read_days=0.1)
        report = store.compact(dry_run=True)
        assert report.moves == ()
        assert (report.protected, report.short) == (4, 3)


class TestApply:
    def build(self, backend, clock=None):
        store = ProjectMemoryStore("p", backend, clock=clock or Frozen())
        aged(store, "tool_output", "expired 1", days=30)
        aged(store, "tool_output", "expired 2", days=40)
        aged(store, "fact", "faint", days=30, importance=0.1)
        aged(store, "fact", "stale", days=200, importance=0.2, reads=10, read_days=100)
        kept = aged(store, "fact", "kept", days=1)
        return store, kept

    def test_a_dry_run_changes_and_journals_nothing(self, backend):
        """The plan names what would move; the store and its journal stay as they were."""
        store, _ = self.build(backend)
        events = len(backend.audit.events(limit=None))
        before = store.list_all(view="all")
        report = store.compact(dry_run=True)
        assert len(report.moves) == 4
        assert not report.applied
        assert store.list_all(view="all") == before
        assert len(backend.audit.events(limit=None)) == events

    def test_applying_moves_journals_and_keeps_everything(self, backend):
        """Applied, the plan's items are archived with their reasons: restorable, not deleted.

        One compact event with the plan's summary comes first, then one archive event per
        reason whose numbers follow its ids.
        """
        store, kept = self.build(backend)
        plan = store.compact(dry_run=True)
        done = store.compact()
        assert done.applied
        assert (done.moved, done.skipped) == (4, ())
        assert [move.id for move in done.moves] == [move.id for move in plan.moves]
        assert [item.id for item in store.list_all()] == [kept.id]
        archived = {item.text: item.archived_reason for item in store.list_all(view="archived")}
        assert archived == {
            "expired 1": ArchiveReason.EXPIRED,
            "expired 2": ArchiveReason.EXPIRED,
            "faint": ArchiveReason.DECAYED,
            "stale": ArchiveReason.STALE,
        }
        assert backend.count() == 5

        events = list(reversed(backend.audit.events(namespace=store.namespace, limit=None)))
        compaction = events.index(
            next(event for event in events if event.action is AuditAction.COMPACT)
        )
        compact = events[compaction]
        assert compact.detail["counts"] == {
            "expired": 2,
            "decayed": 1,
            "stale": 1,
            "compacted": 0,
        }
        assert compact.detail["policy"]["floor"] == 0.05
        moves = events[compaction + 1 :]
        assert [event.action for event in moves] == [AuditAction.ARCHIVE] * 3
        assert [event.detail["reason"] for event in moves] == ["expired", "decayed", "stale"]
        expired = moves[0]
        by_id = {move.id: move for move in done.moves}
        assert expired.detail["age_days"] == [by_id[i].age_days for i in expired.item_ids]
        assert expired.detail["ttl_days"] == [21, 21]
        assert moves[1].detail["decayed"] == [round(by_id[i].decayed, 6) for i in moves[1].item_ids]

        store.restore(*(move.id for move in done.moves))
        assert store.count() == 5
        assert store.compact(dry_run=True).moves == plan.moves

    def test_an_item_read_since_the_plan_stays(self, backend):
        """A planned item read, pinned or archived before the plan is applied is skipped."""
        store, _ = self.build(backend)
        plan = store.compact(dry_run=True)
        read, pinned, gone, *rest = plan.moves
        backend.touch([read.id], NOW)
        store.pin(pinned.id)
        store.archive(gone.id)
        done = apply_plan(store, plan)
        assert set(done.skipped) == {read.id, pinned.id, gone.id}
        assert done.moved == len(rest)
        assert store.get(read.id).current
        assert store.get(gone.id).archived_reason is ArchiveReason.MANUAL

    def test_nothing_to_move_journals_nothing(self, backend):
        """A compaction that finds nothing aged out writes no event."""
        store = ProjectMemoryStore("p", backend, clock=Frozen())
        aged(store, "fact", "fresh", days=1)
        events = len(backend.audit.events(limit=None))
        assert store.compact().moved == 0
        assert len(backend.audit.events(limit=None)) == events

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            pytest.param({"dry_run": "yes"}, "dry_run", id="dry-run-not-a-bool"),
            pytest.param({"policy": {"floor": 0.1}}, "policy", id="policy-not-a-policy"),
        ],
    )
    def test_bad_arguments_change_nothing(self, backend, kwargs, field):
        """A bad argument is a typed error before anything is read or written."""
        store, _ = self.build(backend)
        before = store.list_all(view="all")
        events = len(backend.audit.events(limit=None))
        with pytest.raises(ValidationError) as info:
            store.compact(**kwargs)
        assert info.value.field == field
        assert store.list_all(view="all") == before
        assert len(backend.audit.events(limit=None)) == events

    def test_a_store_refuses_a_policy_of_the_wrong_type(self, backend):
        """aging= takes an AgingPolicy; anything else is refused when the store is built."""
        with pytest.raises(ValidationError) as info:
            ProjectMemoryStore("p", backend, aging={"floor": 0.1})
        assert info.value.field == "aging"
        with pytest.raises(ValidationError) as info:
            ProjectMemoryStore("p", backend).compact(policy="seed")
        assert info.value.field == "policy"


class TestScope:
    def test_compaction_sees_and_moves_only_its_own_scope(self, backend):
        """Another project's aged items on the same backend are neither planned nor moved."""
        mine = ProjectMemoryStore("mine", backend, clock=Frozen())
        theirs = ProjectMemoryStore("theirs", backend, clock=Frozen())
        aged(mine, "tool_output", "my old output", days=60)
        other = aged(theirs, "tool_output", "their old output", days=60)
        done = mine.compact()
        assert [move.preview for move in done.moves] == ["my old output"]
        assert done.working == 1
        assert theirs.get(other.id).current

    def test_every_tier_compacts(self, backend):
        """Task and global memory age by the same rules when compacted."""
        task = TaskMemoryStore("t", backend, clock=Frozen())
        aged(task, "reasoning", "old step", days=15)
        aged(task, "instruction", "the task", days=100, importance=1.0)
        user = GlobalMemoryStore(backend, "u", clock=Frozen(), allow_unconfirmed=True)
        aged(user, "preference", "last year's editor", days=366)
        assert reasons(task.compact()) == {"old step": "expired"}
        assert reasons(user.compact()) == {"last year's editor": "expired"}

    def test_stores_hand_their_policy_to_every_tier(self, backend):
        """MemoryStores(aging=...) is the policy of each store it opens."""
        policy = AgingPolicy(floor=0.2)
        stores = MemoryStores(backend, aging=policy, clock=Frozen(), max_project_items=50)
        assert stores.global_store("u").aging == policy
        assert stores.task_store("t").aging == policy
        project = stores.project_store("p").aging
        assert (project.floor, project.soft_limit, project.low_mark) == (0.2, 50, 45)


class TestPaging:
    def test_every_item_is_read_once_across_pages(self, backend):
        """Pages that end inside a run of one timestamp neither skip nor repeat an item."""
        store = ProjectMemoryStore("p", backend, clock=Frozen())
        stamps = [5, 5, 5, 5, 5, 4, 4, 3, 3, 3, 3, 3, 2]
        for n, days in enumerate(stamps):
            aged(store, "tool_output", f"output {n}", days=days * 10)
        report = plan_compaction(store, AgingPolicy(), NOW, page_size=3)
        assert report.working == len(stamps)
        assert sorted(move.preview for move in report.moves) == sorted(
            f"output {n}" for n, days in enumerate(stamps) if days * 10 > 21
        )

    def test_reads_are_bounded_pages(self):
        """Planning a store asks the backend for pages, never one item at a time."""

        class Counting(InMemoryBackend):
            queries = 0

            def query(self, *args, **kwargs):
                Counting.queries += 1
                return super().query(*args, **kwargs)

        store = ProjectMemoryStore("p", Counting(), clock=Frozen(), max_items=None)
        store.add_many(
            store.new_item("fact", f"fact {n}", timestamp=NOW - timedelta(minutes=n))
            for n in range(95)
        )
        Counting.queries = 0
        plan_compaction(store, AgingPolicy(), NOW, page_size=10)
        assert Counting.queries <= 11


class TestEvictionOnWrite:
    def test_a_write_evicts_by_decayed_importance(self, backend):
        """Eviction ranks as compaction does: an item read often outranks an unread one.

        By stored importance alone the read one would go first.
        """
        store = ProjectMemoryStore("p", backend, clock=Frozen(), max_items=3)
        unread = aged(store, "fact", "rated but never read", days=200, importance=0.6)
        used = aged(
            store, "fact", "read every week", days=200, importance=0.4, reads=10, read_days=2
        )
        aged(store, "fact", "fresh", days=1, importance=0.5)
        aged(store, "fact", "fresher", days=0, importance=0.5)
        assert store.get(unread.id).archived_reason is ArchiveReason.EVICTED
        assert store.get(used.id).current
        assert store.count() == 2

    def test_a_write_spares_items_read_recently(self, backend):
        """Items read within protect_recent stay even when they rank lowest."""
        store = ProjectMemoryStore("p", backend, clock=Frozen(), max_items=2)
        busy = aged(
            store, "fact", "read an hour ago", days=9, importance=0.0, reads=1, read_days=0.04
        )
        aged(store, "fact", "a", days=1, importance=0.9)
        aged(store, "fact", "b", days=1, importance=0.8)  # over 2: down to the low mark, 1
        assert store.get(busy.id).current
        assert store.count() == 1

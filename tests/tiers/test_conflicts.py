"""Conflicts: found when items are written, listed while open, resolved by keeping one side."""

from __future__ import annotations

import json

import attrs
import pytest
from structlog.testing import capture_logs

from agent_engine import (
    AuditAction,
    BackendError,
    ConflictNotFoundError,
    InMemoryBackend,
    ValidationError,
    promote,
)
from agent_engine.errors import LifecycleStateError
from agent_engine.memory.conflicts import ConflictType
from agent_engine.tiers.conflicts import ConflictDetection
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore

ALWAYS = "Always rebase feature branches on main before opening a pull request."
NEVER = "Never rebase feature branches on main before opening a pull request."


def journal(backend, namespace):
    """The namespace's events, oldest first, as (action, item ids, detail)."""
    return [
        (event.action, event.item_ids, event.detail)
        for event in reversed(backend.audit.events(namespace=namespace, limit=None))
    ]


@pytest.fixture
def project(backend, clock):
    return ProjectMemoryStore("shop", backend, clock=clock)


class TestDetection:
    def test_a_contradiction_of_the_same_kind_is_recorded(self, project):
        """A new item that negates an older one of its kind is a contradictory conflict."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        assert conflict.item_ids == (old.id, new.id)
        assert (conflict.version_a, conflict.version_b) == (1, 1)
        assert conflict.type is ConflictType.CONTRADICTORY
        assert conflict.reason == "always/never"
        assert (conflict.tier, conflict.namespace) == (project.tier, project.namespace)
        assert conflict.resolved_at is None

    def test_a_contradiction_close_in_meaning_is_found_without_a_shared_kind(self, project):
        """Items of other kinds and tags are compared when the search by meaning finds them."""
        old = project.add_decision("We use PostgreSQL for the orders database.", tags=("db",))
        for n in range(30):
            project.add(project.new_item("note", f"filler note number {n} about deployments"))
        new = project.add(project.new_item("log", "We no longer use PostgreSQL for orders."))
        assert [c.item_ids for c in project.conflicts()] == [(old.id, new.id)]
        searchless = ProjectMemoryStore(
            "other", project.backend, conflict_detection=ConflictDetection(neighbours=0)
        )
        searchless.add_decision("We use PostgreSQL for the orders database.", tags=("db",))
        searchless.add(searchless.new_item("log", "We no longer use PostgreSQL for orders."))
        assert searchless.conflicts() == []

    def test_agreeing_and_unrelated_items_are_no_conflict(self, project):
        """Paraphrases, double negations and the same cue on another subject record nothing."""
        project.add_convention("Never disable the firewall.", "ops")
        project.add_convention("Always keep the firewall enabled.", "ops")
        project.add_convention("Never commit secrets.", "git")
        project.add_convention("Always write a commit message.", "git")
        assert project.conflicts(include_resolved=True) == []
        assert AuditAction.CONFLICT not in {e.action for e in project.backend.audit.events()}

    def test_the_record_is_journaled_first(self, project):
        """A ``conflict`` event names both items and the conflict, after the add it followed."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        assert journal(project.backend, project.namespace)[-2:] == [
            (AuditAction.ADD, (new.id,), {}),
            (
                AuditAction.CONFLICT,
                (old.id, new.id),
                {"conflict": conflict.id, "type": "contradictory", "reason": "always/never"},
            ),
        ]

    def test_items_of_one_write_are_set_against_each_other(self, project):
        """Two contradicting items added together are one conflict, the earlier as item a."""
        first, second = project.add_many(
            [project.new_item("convention", ALWAYS), project.new_item("convention", NEVER)]
        )
        assert [c.item_ids for c in project.conflicts()] == [(first.id, second.id)]

    def test_archived_items_count_superseded_ones_do_not(self, project):
        """The archive still holds (it is compared); history does not (it never is)."""
        archived = project.add_convention(ALWAYS, "git")
        project.archive(archived.id)
        new = project.add_convention(NEVER, "git")
        assert [c.item_ids for c in project.conflicts()] == [(archived.id, new.id)]
        keyed = project.add(project.new_item("preference", "Use tabs.", key="indent"))
        replacement = project.add(project.new_item("preference", "Use spaces.", key="indent"))
        assert project.get(keyed.id).superseded_by == replacement.id
        project.add(project.new_item("preference", "Don't use tabs."))
        assert {i for c in project.conflicts() for i in c.item_ids} == {archived.id, new.id}

    def test_a_promoted_copy_is_checked(self, backend, project, clock):
        """What a promotion stores in a scope is set against that scope like any add."""
        task = TaskMemoryStore("t", backend, project_id="shop", clock=clock)
        kept = project.add_convention(ALWAYS, "git")
        copy = promote(task, project, task.add_reasoning(NEVER, "plan").id).item
        assert [c.item_ids for c in project.conflicts()] == [(kept.id, copy.id)]

    def test_never_across_scopes(self, backend, clock):
        """A contradiction between two projects (or tiers) on one backend is nobody's conflict."""
        shop = ProjectMemoryStore("shop", backend, clock=clock)
        other = ProjectMemoryStore("pipeline", backend, clock=clock)
        user = GlobalMemoryStore(backend, "ana", allow_unconfirmed=True, clock=clock)
        shop.add_convention(ALWAYS, "git")
        other.add_convention(NEVER, "git")
        user.add_pattern(NEVER, "git")
        assert shop.conflicts() == other.conflicts() == user.conflicts() == []

    def test_one_shared_word_is_too_thin_a_subject(self, backend, clock):
        """A pair sharing one content term is not recorded unless ``min_shared`` allows it."""
        project = ProjectMemoryStore("shop", backend, clock=clock)
        project.add_convention("Gina: ;)", "chat")
        project.add_convention("Gina: I did not go.", "chat")
        project.add_convention("Telemetry is on.", "ops")
        project.add_convention("Telemetry is off.", "ops")
        assert project.conflicts() == []
        loose = ProjectMemoryStore(
            "loose", backend, clock=clock, conflict_detection=ConflictDetection(min_shared=1)
        )
        loose.add_convention("Telemetry is on.", "ops")
        loose.add_convention("Telemetry is off.", "ops")
        assert [c.reason for c in loose.conflicts()] == ["on/off"]

    def test_turns_and_tool_outputs_are_ignored(self, backend, clock):
        """Conversation turns and tool outputs are neither checked nor compared, by default."""
        project = ProjectMemoryStore("shop", backend, clock=clock)
        project.add(project.new_item("turn", ALWAYS))
        project.add(project.new_item("turn", NEVER))
        project.add(project.new_item("tool_output", NEVER))
        assert project.conflicts() == []
        every = ProjectMemoryStore(
            "every", backend, clock=clock, conflict_detection=ConflictDetection(ignore_kinds=())
        )
        every.add(every.new_item("turn", ALWAYS))
        every.add(every.new_item("turn", NEVER))
        assert len(every.conflicts()) == 1

    def test_detection_can_be_turned_off(self, backend, clock):
        """``conflict_detection=None``: the store records nothing and reads nothing for it."""
        quiet = ProjectMemoryStore("shop", backend, clock=clock, conflict_detection=None)
        quiet.add_convention(ALWAYS, "git")
        quiet.add_convention(NEVER, "git")
        assert quiet.conflicts() == []

    def test_a_write_checks_at_most_max_items(self, backend, clock):
        """Items past ``max_items`` of one write are not checked, and the log says how many."""
        with capture_logs() as logs:  # the store's logger is made while logs are captured
            bounded = ProjectMemoryStore(
                "shop", backend, clock=clock, conflict_detection=ConflictDetection(max_items=2)
            )
            fillers = [bounded.new_item("note", f"unrelated note {n}") for n in range(3)]
            bounded.add_many(
                [*fillers, bounded.new_item("c", ALWAYS), bounded.new_item("c", NEVER)]
            )
        assert bounded.conflicts() == []
        truncated = [e for e in logs if e["event"] == "conflict_detection_truncated"]
        assert truncated == [
            {
                "event": "conflict_detection_truncated",
                "log_level": "info",
                "checked": 2,
                "skipped": 3,
                "tier": "project",
                "namespace": "project:shop",
            }
        ]

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("neighbours", -1),
            ("related", 1.5),
            ("max_items", True),
            ("min_similarity", 1.5),
            ("min_shared", -2),
            ("ignore_kinds", "turn"),
            ("ignore_kinds", [""]),
        ],
    )
    def test_settings_are_checked(self, field, value):
        """A negative count, a non-integer or a similarity outside [-1, 1] is refused."""
        with pytest.raises(ValidationError) as info:
            ConflictDetection(**{field: value})
        assert info.value.field == field

    def test_settings_must_be_settings(self, backend):
        """A store refuses anything but a ConflictDetection or None."""
        with pytest.raises(ValidationError) as info:
            ProjectMemoryStore("shop", backend, conflict_detection={"neighbours": 3})
        assert info.value.field == "conflict_detection"


class _FailingConflicts:
    """A conflict store whose writes fail, as a database that went away would."""

    def __init__(self, inner):
        self.inner = inner

    def record(self, conflicts):
        raise BackendError("the conflict table is gone", backend="test")

    def __getattr__(self, name):
        return getattr(self.inner, name)


class _BrokenConflictBackend(InMemoryBackend):
    """An in-memory backend whose conflict store cannot write."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._conflict_store = _FailingConflicts(self._conflict_store)


class TestDetectionNeverCostsTheWrite:
    def test_a_failing_conflict_store_is_logged_and_the_add_stands(self, clock):
        """The add returns and is stored; the failure is a warning and an abort event."""
        backend = _BrokenConflictBackend()
        with capture_logs() as logs:  # the store's logger is made while logs are captured
            project = ProjectMemoryStore("shop", backend, clock=clock)
            project.add_convention(ALWAYS, "git")
            new = project.add_convention(NEVER, "git")
        assert project.get(new.id) == new
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
            "conflict_detection_failed"
        ]
        assert [action for action, _, _ in journal(backend, project.namespace)][-3:] == [
            AuditAction.ADD,
            AuditAction.CONFLICT,
            AuditAction.ABORT,
        ]


class TestOpen:
    def test_a_deleted_or_forgotten_item_takes_its_conflicts(self, project):
        """Deleting or erasing either side removes the conflict from every listing."""
        old = project.add_convention(ALWAYS, "git")
        project.add_convention(NEVER, "git")
        assert len(project.conflicts()) == 1
        project.delete(old.id)
        assert project.conflicts(include_resolved=True) == []
        again = project.add_convention(ALWAYS, "git")
        assert len(project.conflicts()) == 1
        project.forget(again.id)
        assert project.conflicts(include_resolved=True) == []

    def test_superseded_or_changed_by_other_means_is_not_open(self, project):
        """A side superseded (by a key) or changed (a new version) closes the conflict."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        project.supersede(old.id, project.new_item("convention", "Rebase when it helps."))
        assert project.conflicts() == []
        other = project.add_convention("Deploys happen on Fridays.", "deploy")
        negated = project.add_convention("Deploys never happen on Fridays.", "deploy")
        assert len(project.conflicts()) == 1
        project.update(attrs.evolve(negated, text="Deploys happen on Fridays, before noon."))
        assert project.conflicts() == []
        assert project.get(new.id) is not None
        assert project.get(other.id) is not None

    def test_a_new_version_is_checked_again(self, project):
        """An update that now contradicts an item is a new conflict, at the new version."""
        old = project.add_convention(ALWAYS, "git")
        item = project.add_convention("Squash commits when merging.", "git")
        changed = project.update(attrs.evolve(item, text=NEVER))
        (conflict,) = project.conflicts()
        assert conflict.item_ids == (old.id, changed.id)
        assert conflict.version_b == 2

    def test_listing_is_newest_first_and_limited(self, project):
        """Open conflicts come newest first; ``limit`` cuts the list."""
        pairs = [
            ("Always run the linter.", "Never run the linter."),
            ("Always pin versions.", "Never pin versions."),
            ("Always squash merges.", "Never squash merges."),
        ]
        for yes, no in pairs:
            project.add_convention(yes, "x")
            project.add_convention(no, "x")
        listed = project.conflicts()
        assert len(listed) == 3
        assert [c.detected_at for c in listed] == sorted(
            (c.detected_at for c in listed), reverse=True
        )
        assert project.conflicts(limit=2) == listed[:2]
        assert project.conflicts(limit=0) == []


class TestResolve:
    def test_keep_one_side_supersede_the_other(self, project):
        """The kept item stays; the other is history, superseded by it; the conflict is closed."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        resolved = project.resolve(conflict.id, keep=old.id)
        assert resolved.kept == old.id
        assert resolved.resolved_at is not None
        assert project.get(new.id).superseded_by == old.id
        assert project.get(old.id).current
        assert project.conflicts() == []
        assert project.conflicts(include_resolved=True) == [resolved]

    def test_journaled_first_with_the_supersession_inside(self, project):
        """One ``resolve`` event naming the kept item first, then the ``supersede`` it causes."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        project.resolve(conflict.id, keep=new.id.removeprefix(project.id_prefix))
        assert journal(project.backend, project.namespace)[-2:] == [
            (AuditAction.RESOLVE, (new.id, old.id), {"conflict": conflict.id, "keep": new.id}),
            (AuditAction.SUPERSEDE, (old.id,), {"by": [new.id]}),
        ]

    def _state(self, project):
        return (
            project.list_all(view="all"),
            project.conflicts(include_resolved=True),
            len(project.backend.audit.events(limit=None)),
        )

    def test_unknown_and_foreign_ids_are_not_found(self, backend, project, clock):
        """An unknown id, or another project's conflict, is ConflictNotFoundError; nothing moves."""
        other = ProjectMemoryStore("pipeline", backend, clock=clock)
        other.add_convention(ALWAYS, "git")
        other.add_convention(NEVER, "git")
        (theirs,) = other.conflicts()
        before = self._state(project), self._state(other)
        for conflict_id in ("no-such-conflict", theirs.id):
            with pytest.raises(ConflictNotFoundError) as info:
                project.resolve(conflict_id, keep=theirs.item_a)
            assert info.value.conflict_id == conflict_id
            assert info.value.namespace == project.namespace
        assert (self._state(project), self._state(other)) == before

    def test_resolving_twice_is_refused(self, project):
        """A resolved conflict cannot be resolved again, whichever side is named."""
        old = project.add_convention(ALWAYS, "git")
        new = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        project.resolve(conflict.id, keep=old.id)
        before = self._state(project)
        with pytest.raises(LifecycleStateError):
            project.resolve(conflict.id, keep=new.id)
        assert self._state(project) == before

    def test_keep_must_name_a_side(self, project):
        """``keep`` naming neither item is a ValidationError on ``keep``; nothing moves."""
        project.add_convention(ALWAYS, "git")
        project.add_convention(NEVER, "git")
        bystander = project.add_decision("Use Postgres.")
        (conflict,) = project.conflicts()
        before = self._state(project)
        for keep in (bystander.id, "nothing-like-it"):
            with pytest.raises(ValidationError) as info:
                project.resolve(conflict.id, keep=keep)
            assert info.value.field == "keep"
        assert self._state(project) == before

    def test_a_conflict_no_longer_open_is_refused(self, project):
        """A side superseded by other means: resolving says so, and nothing moves."""
        old = project.add_convention(ALWAYS, "git")
        project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        project.supersede(old.id, project.new_item("convention", "Rebase when it helps."))
        before = self._state(project)
        with pytest.raises(LifecycleStateError) as info:
            project.resolve(conflict.id, keep=old.id)
        assert "superseded" in str(info.value)
        assert self._state(project) == before


class TestErase:
    def test_forget_leaves_no_id_in_conflicts_or_journal(self, project):
        """After forget, no conflict names the item and no event does either (only tokens)."""
        doomed = project.add_convention(ALWAYS, "git")
        kept = project.add_convention(NEVER, "git")
        (conflict,) = project.conflicts()
        project.forget(doomed.id)
        assert project.backend.conflicts.get(conflict.id) is None
        text = json.dumps(
            [[e.item_ids, e.detail] for e in project.backend.audit.events(limit=None)]
        )
        assert doomed.id not in text
        assert kept.id in text

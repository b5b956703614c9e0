"""Copy-on-write forks of task and session memory, on every backend.

A fork must read exactly like a deep copy of its parent taken at the fork, while storing
nothing until one side changes something: the model-based test holds every backend to that,
and the others pin down lineage, checkpoints, ends, erasure, promotion and bad input.
"""

from __future__ import annotations

import io

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_engine import (
    AuditAction,
    CheckpointNotFoundError,
    ContextAssembler,
    ContextRequest,
    DuplicateItemError,
    ExportFileError,
    MemoryStores,
    Task,
    ValidationError,
    View,
    promote,
)
from agent_engine.embeddings import HashingEmbedder
from agent_engine.filters import Condition, Filter, Op
from agent_engine.memory import export_store, import_store, restore_plan, restore_scope
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.tiers import AgingPolicy, SessionMemoryStore, TaskMemoryStore
from agent_engine.tiers.aging import plan_compaction
from agent_engine.tiers.checkpoints import rollback_plan

PARENT = Task(id="plan", project_id="shop", user_id="ann")
CHILD = Task(id="plan-b", project_id="shop", user_id="ann")


def _texts(store, view=View.WORKING) -> dict[str, str]:
    """What a store reads, by local id."""
    return {
        item.id.removeprefix(store.id_prefix): item.text
        for item in store.query(None, limit=None, view=view)
    }


def _physical(store) -> int:
    """How many items the backend holds under the store's own namespace, in every state."""
    return store.backend.count(store.scope)


@pytest.fixture
def stores(backend, clock):
    return MemoryStores(backend, clock=clock, confirm=lambda _request: True)


@pytest.fixture
def parent(stores):
    task = stores.task_store(PARENT)
    task.add(task.new_item("note", "The login test sleeps one second", id="sleep"))
    task.add(task.new_item("note", "CI machines are slow on Mondays", id="ci"))
    task.add(task.new_item("note", "The fixture resets the database", id="db"))
    return task


def test_a_fork_reads_its_parent_and_stores_nothing(parent):
    child = parent.fork(CHILD)
    assert _texts(child) == _texts(parent)
    assert _physical(child) == 0
    assert child.count() == 3
    assert child.get("sleep").namespace == child.namespace
    assert child.require("sleep").id == child.scoped_id("sleep")
    assert [f.parent for f in child.lineage()] == [parent.namespace]
    assert child.lineage()[0].detached is False


def test_neither_side_sees_what_the_other_writes_afterwards(parent):
    child = parent.fork(CHILD)
    before = _texts(parent)
    parent.update(attrs.evolve(parent.require("sleep"), text="The login test waits for ready"))
    parent.delete("ci")
    parent.archive("db")
    parent.add(parent.new_item("note", "Retry the upload twice", id="retry"))
    assert _texts(child) == before
    child.update(attrs.evolve(child.require("db"), text="The fixture truncates tables"))
    child.add(child.new_item("note", "Pin the browser version", id="browser"))
    child.delete("sleep")
    assert _texts(parent) == {
        "sleep": "The login test waits for ready",
        "retry": "Retry the upload twice",
    }
    assert _texts(child) == {
        "ci": "CI machines are slow on Mondays",
        "db": "The fixture truncates tables",
        "browser": "Pin the browser version",
    }
    # Only what changed was copied: the updated item (and the version it keeps) and the new one;
    # the parent's changes copied what the child still saw first.
    assert _physical(child) <= 6


def test_a_fork_searches_and_ranks_what_it_reads(parent):
    child = parent.fork(CHILD)
    parent.delete("sleep")
    hits = child.search_text("login test sleeps", k=3)[1]
    assert hits[0].item.id == child.scoped_id("sleep")
    assert child.lexical().hits("sleeps").best(3) == [child.scoped_id("sleep")]
    child.delete("sleep")
    assert child.lexical().hits("sleeps").best(3) == []
    assert all(hit.item.id != child.scoped_id("sleep") for hit in child.search_text("sleeps")[1])


def test_an_added_id_the_fork_reads_is_taken(parent):
    child = parent.fork(CHILD)
    with pytest.raises(DuplicateItemError):
        child.add(child.new_item("note", "again", id="sleep"))
    assert _texts(child) == _texts(parent)


def test_history_and_pins_of_inherited_items_stay_the_forks(parent):
    child = parent.fork(CHILD)
    child.update(attrs.evolve(child.require("sleep"), text="Replace the sleep with a wait"))
    child.pin("ci")
    history = child.history("sleep")
    assert [v.text for v in history] == [
        "The login test sleeps one second",
        "Replace the sleep with a wait",
    ]
    assert [i.id for i in child.pinned()] == [child.scoped_id("ci")]
    assert parent.pinned() == []
    assert len(parent.history("sleep")) == 1


def test_both_sides_promote_and_the_project_keeps_one(parent, stores):
    child = parent.fork(CHILD)
    project = stores.project_store("shop")
    first = promote(parent, project, "sleep")
    second = promote(child, project, "sleep")
    assert (first.duplicate, second.duplicate) == (False, True)
    assert project.count() == 1


def test_a_parent_that_ends_leaves_its_forks_whole(parent, stores):
    child = parent.fork(CHILD)
    child.add(child.new_item("note", "Pin the browser version", id="browser"))
    seen = _texts(child)
    parent.finish()
    assert parent.count() == 0
    assert _texts(child) == seen
    assert child.lineage()[0].detached is True
    reopened = stores.task_store(CHILD)
    assert _texts(reopened) == seen


def test_a_fork_of_a_fork_reads_through_both(parent):
    child = parent.fork(CHILD)
    child.add(child.new_item("note", "Pin the browser version", id="browser"))
    grandchild = child.fork("plan-c")
    seen = _texts(grandchild)
    assert seen == _texts(child)
    parent.update(attrs.evolve(parent.require("ci"), text="CI got faster"))
    child.update(attrs.evolve(child.require("browser"), text="Use the newest browser"))
    child.delete("db")
    assert _texts(grandchild) == seen
    assert [f.namespace for f in grandchild.lineage()] == [grandchild.namespace, child.namespace]


def test_a_fork_checkpoints_and_rolls_back_what_it_reads(parent):
    child = parent.fork(CHILD)
    checkpoint = child.checkpoint("before")
    assert checkpoint.items == 3
    assert _physical(child) == 0
    seen = _texts(child, View.ALL)
    child.delete("sleep")
    child.add(child.new_item("note", "Pin the browser version", id="browser"))
    child.rollback(checkpoint.id)
    assert _texts(child, View.ALL) == seen
    assert child.lineage()[0].detached is True
    parent.delete("ci")
    assert _texts(child, View.ALL) == seen


def test_a_parent_rolling_back_leaves_its_forks_as_they_were(parent):
    checkpoint = parent.checkpoint()
    parent.add(parent.new_item("note", "Retry the upload twice", id="retry"))
    child = parent.fork(CHILD)
    seen = _texts(child)
    parent.rollback(checkpoint.id)
    assert "retry" not in _texts(parent)
    assert _texts(child) == seen


def test_a_fork_starts_from_a_checkpoint(parent):
    checkpoint = parent.checkpoint()
    saved = _texts(parent)
    parent.add(parent.new_item("note", "Retry the upload twice", id="retry"))
    child = parent.fork(CHILD, checkpoint=checkpoint.id)
    assert _texts(child) == saved
    record = child.lineage()[0]
    assert (record.checkpoint, record.detached) == (checkpoint.id, True)
    events = child.backend.audit.events(namespace=child.namespace, limit=5)
    assert events[0].action is AuditAction.FORK
    assert events[0].detail["parent"] == parent.namespace


def test_forking_a_missing_or_foreign_checkpoint_records_nothing(parent, stores):
    other = stores.task_store(Task(id="other", project_id="shop", user_id="ann"))
    other.add(other.new_item("note", "x", id="x"))
    foreign = other.checkpoint()
    for checkpoint in ("no-such-checkpoint", foreign.id):
        with pytest.raises(CheckpointNotFoundError):
            parent.fork(CHILD, checkpoint=checkpoint)
        assert stores.task_store(CHILD).lineage() == []
        assert _physical(stores.task_store(CHILD)) == 0


def test_forks_start_new_scopes_of_their_parents_kind(parent, stores):
    taken = stores.task_store(Task(id="taken", project_id="shop", user_id="ann"))
    taken.add(taken.new_item("note", "mine", id="mine"))
    with pytest.raises(ValidationError) as caught:
        parent.fork("taken")
    assert caught.value.field == "namespace"
    with pytest.raises(ValidationError):
        parent.fork(PARENT)
    with pytest.raises(ValidationError) as caught:
        parent.fork(Task(id="elsewhere", project_id="other", user_id="ann"))
    assert caught.value.field == "task"
    child = parent.fork(CHILD)
    with pytest.raises(ValidationError):
        parent.fork(CHILD)
    assert _texts(child) == _texts(parent)


def test_erasing_in_the_parent_reaches_what_forks_read_through(parent):
    """A fork reading an erased item through loses it, and the checkpoints that saved it.

    A fork that holds its own copy keeps it: that is its memory, to forget there.
    """
    reader = parent.fork(CHILD)
    saved = reader.checkpoint()
    changer = parent.fork("plan-c")
    changer.update(attrs.evolve(changer.require("sleep"), text="The login test sleeps a second"))
    assert parent.forget("sleep") == 1
    assert "sleep" not in _texts(reader, View.ALL)
    assert reader.checkpoints() == []
    with pytest.raises(CheckpointNotFoundError):
        reader.rollback(saved.id)
    assert _texts(changer)["sleep"] == "The login test sleeps a second"


def test_erasing_in_a_fork_only_hides_the_parents_item(parent):
    child = parent.fork(CHILD)
    saved = child.checkpoint()
    assert child.forget("sleep") == 1
    assert "sleep" not in _texts(child, View.ALL)
    assert "sleep" in _texts(parent)
    with pytest.raises(CheckpointNotFoundError):  # it saved what was forgotten
        child.rollback(saved.id)


def test_a_failed_add_in_the_parent_leaves_its_forks_alone(parent):
    child = parent.fork(CHILD)
    with pytest.raises(DuplicateItemError):
        parent.add(parent.new_item("note", "again", id="sleep"))
    assert _texts(child) == _texts(parent)
    assert child.count() == 3


def test_a_fork_finds_what_it_changed_by_what_it_said_before(parent):
    """A search ranks the fork's own version, never the parent's original it hides."""
    child = parent.fork(CHILD)
    child.update(attrs.evolve(child.require("sleep"), text="The login test waits for ready"))
    found = [h.item.text for h in child.search_text("login test sleeps", k=3)[1]]
    assert found[0] == "The login test waits for ready"
    assert "The login test sleeps one second" not in found


def test_a_fork_pages_by_id_like_a_copy(parent):
    child = parent.fork(CHILD)
    first = child.query(None, limit=None, order_by="+id")
    after = child.query(Filter((Condition("id", Op.GT, first[0].id),)), None, "+id")
    assert [i.id for i in after] == [i.id for i in first[1:]]
    assert child.query({"id": parent.scoped_id("sleep")}, limit=None) == []


def test_a_fork_is_walked_by_id_within_an_instant(backend, clock):
    """Compaction pages a run of one instant by id: a fork's run ends as a copy's would."""
    at = clock()
    parent = TaskMemoryStore("p", backend, clock=clock)
    parent.add_many(
        [parent.new_item("note", f"same instant {n}", id=f"n{n}", timestamp=at) for n in range(4)]
    )
    child = parent.fork("c")
    plan = plan_compaction(child, AgingPolicy(), clock(), page_size=1)
    assert plan.working == 4


def test_an_import_into_a_fork_is_refused(parent):
    child = parent.fork(CHILD)
    elsewhere = TaskMemoryStore(CHILD, InMemoryBackend(embedder=HashingEmbedder(dim=64)))
    elsewhere.add(elsewhere.new_item("note", "Other content", id="sleep"))
    saved = io.StringIO()
    export_store(elsewhere.backend, saved, namespace=child.namespace, tier=child.tier)
    with pytest.raises(ExportFileError) as caught:
        import_store(child.backend, io.StringIO(saved.getvalue()))
    assert caught.value.field == "namespace"
    assert _texts(child) == _texts(parent)


def test_planning_a_rollback_writes_nothing(parent):
    child = parent.fork(CHILD)
    saved = child.checkpoint()
    child.delete("ci")
    plan = rollback_plan(child, saved.id)
    assert [i.id for i in plan.add] == [child.scoped_id("ci")]
    assert (plan.replace, plan.forget) == ((), ())
    assert child.lineage()[0].detached is False
    assert _physical(child) == 0
    child.rollback(saved.id)
    assert _texts(child) == _texts(parent)


def test_a_forks_stages_include_its_parents(stores):
    task = stores.task_store(PARENT)
    task.add_stage_output("diagnose", "the test sleeps")
    child = task.fork(CHILD)
    child.add_stage_output("diagnose", "the fixture is slow")
    assert [i.text for i in child.get_stage_outputs("diagnose")] == [
        "the test sleeps",
        "the fixture is slow",
    ]
    assert [i.text for i in task.get_stage_outputs("diagnose")] == ["the test sleeps"]


def test_sessions_fork_too(backend, clock):
    session = SessionMemoryStore("s", backend, project_id="p", user_id="u", clock=clock)
    session.add_message("ann", "Deploys go through the staging box")
    branch = session.fork("s2")
    assert branch.namespace != session.namespace
    assert [i.text for i in branch.list_all()] == ["ann: Deploys go through the staging box"]
    assert branch.lineage()[0].tier.value == "session"


def test_project_memory_cannot_be_forked(stores):
    from agent_engine.tiers.forks import fork_scope  # noqa: PLC0415

    with pytest.raises(ValidationError) as caught:
        fork_scope(stores.project_store("shop"), stores.project_store("shop2"))
    assert caught.value.field == "tier"


def test_a_build_over_a_fork_pages_in_what_it_inherited(parent, stores):
    parent.fork(CHILD)
    package = ContextAssembler(stores).build_context(
        CHILD, ContextRequest(budget_tokens=400, query="why is the login test slow?")
    )
    chosen = {selection.item.id for selection in package.selections}
    assert TaskMemoryStore(CHILD, parent.backend).scoped_id("sleep") in chosen


# ---------------------------------------------------------------------------- the model


_LOCAL = st.sampled_from(["a", "b", "c", "d"])
_STEP = st.tuples(
    st.sampled_from(["parent", "child", "grandchild"]),
    st.sampled_from(["add", "update", "delete", "archive", "fork"]),
    _LOCAL,
    st.text(alphabet="xyz ", min_size=1, max_size=6),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.lists(st.tuples(_LOCAL, st.text("pq", min_size=1, max_size=4)), max_size=4),
    steps=st.lists(_STEP, max_size=12),
)
def test_a_fork_reads_like_a_deep_copy(before, steps):
    """Any mix of writes on any side leaves each reading as if every fork copied eagerly.

    The child forks the parent first; a ``fork`` step forks the grandchild off the child.
    """
    backend = InMemoryBackend(embedder=HashingEmbedder(dim=16))
    _run_model(backend, before, steps)


@pytest.mark.parametrize(
    "steps",
    [
        [
            ("parent", "update", "a", "x"),
            ("child", "update", "a", "y"),
            ("parent", "delete", "a", ""),
        ],
        [("child", "archive", "a", ""), ("parent", "add", "c", "z"), ("child", "add", "c", "w")],
        [
            ("parent", "archive", "b", ""),
            ("child", "delete", "b", ""),
            ("parent", "update", "b", "q"),
        ],
        [
            ("child", "fork", "a", ""),
            ("parent", "update", "a", "x"),
            ("child", "update", "a", "y"),
            ("grandchild", "delete", "b", ""),
            ("child", "delete", "b", ""),
        ],
    ],
)
def test_the_model_holds_on_every_backend(backend, steps):
    _run_model(backend, [("a", "p"), ("b", "q")], steps)


def _run_model(backend, before, steps) -> None:
    parent = TaskMemoryStore("p", backend, merge=None, conflict_detection=None)
    model: dict[str, dict[str, tuple[str, bool]]] = {"parent": {}}
    for local, text in before:
        _apply(parent, model["parent"], "add", local, text)
    child = parent.fork("c")
    model["child"] = dict(model["parent"])
    stores = {"parent": parent, "child": child}
    for side, action, local, text in steps:
        if action == "fork" and "grandchild" not in stores:
            stores["grandchild"] = child.fork("g")
            model["grandchild"] = dict(model["child"])
        elif side in stores:
            _apply(stores[side], model[side], action, local, text)
        for name, each in stores.items():
            read = {
                item.id.removeprefix(each.id_prefix): (item.text, item.archived)
                for item in each.query(None, limit=None, view=View.CURRENT)
            }
            assert read == model[name], (name, side, action, local)
            assert each.count(view=View.CURRENT) == len(model[name])


def _apply(store, held: dict[str, tuple[str, bool]], action: str, local: str, text: str) -> None:
    """One write on ``store`` and on its model ``held`` (a write that makes no sense: none)."""
    if action == "add" and local not in held:
        store.add(store.new_item("note", text, id=local))
        held[local] = (text, False)
    elif action == "update" and local in held:
        store.update(attrs.evolve(store.require(local), text=text))
        held[local] = (text, held[local][1])
    elif action == "delete" and local in held:
        store.delete(local)
        del held[local]
    elif action == "archive" and local in held and not held[local][1]:
        store.archive(local)
        held[local] = (held[local][0], True)


def test_an_import_into_the_parent_stays_out_of_its_forks(parent):
    child = parent.fork(CHILD)
    elsewhere = TaskMemoryStore(PARENT, InMemoryBackend(embedder=HashingEmbedder(dim=64)))
    elsewhere.add(elsewhere.new_item("note", "Imported later", id="late"))
    saved = io.StringIO()
    export_store(elsewhere.backend, saved, namespace=parent.namespace, tier=parent.tier)
    saved.seek(0)
    import_store(parent.backend, saved)
    assert "late" in _texts(parent)
    assert "late" not in _texts(child)


def test_a_shared_scope_is_restored_only_through_its_store(parent):
    checkpoint = parent.checkpoint()
    child = parent.fork(CHILD)
    plan = restore_plan(parent.backend, io.StringIO(parent.backend.checkpoints.data(checkpoint.id)))
    with pytest.raises(ValidationError) as caught:
        restore_scope(parent.backend, plan)
    assert caught.value.field == "plan"
    assert child.lineage()[0].detached is False
    parent.rollback(checkpoint.id)
    assert child.lineage()[0].detached is True


def test_a_fork_is_exported_from_what_its_store_reads(parent):
    """The backend holds only what a fork changed: exporting that alone is refused."""
    child = parent.fork(CHILD)
    with pytest.raises(ValidationError) as caught:
        export_store(child.backend, io.StringIO(), namespace=child.namespace, tier=child.tier)
    assert caught.value.field == "namespace"
    saved = io.StringIO()
    report = export_store(
        child.backend,
        saved,
        namespace=child.namespace,
        tier=child.tier,
        items=child.inherited_view(),
    )
    assert report.items == 3


def test_a_fork_that_ends_holding_candidates_keeps_only_them(parent, clock):
    """A task's end that holds its candidates: the fork copies them in and reads nothing more."""
    for _ in range(3):
        parent.record_access([parent.scoped_id("sleep")], clock())
    child = parent.fork(CHILD)
    end = child.finish(hold=True)
    assert [c.item.id for c in end.candidates] == [child.scoped_id("sleep")]
    assert _texts(child, View.ALL) == {"sleep": "The login test sleeps one second"}
    assert child.lineage()[0].detached is True
    assert len(_texts(parent)) == 3


def test_a_whole_store_moves_with_its_forks(parent):
    """A whole store's file carries its forks: in the new store the fork still reads through."""
    child = parent.fork(CHILD)
    parent.add(parent.new_item("note", "Retry the upload twice", id="retry"))
    child.delete("db")
    seen = _texts(child)
    saved = io.StringIO()
    assert export_store(parent.backend, saved).forks == 1
    target = InMemoryBackend(embedder=HashingEmbedder(dim=64))
    report = import_store(target, io.StringIO(saved.getvalue()))
    assert report.forks == 1
    moved = TaskMemoryStore(CHILD, target)
    assert _texts(moved) == seen
    assert moved.backend.count(moved.scope) == 0
    assert import_store(target, io.StringIO(saved.getvalue())).forks == 0


def test_an_import_naming_another_parent_is_refused_whole(parent):
    parent.fork(CHILD)
    saved = io.StringIO()
    export_store(parent.backend, saved)
    target = InMemoryBackend(embedder=HashingEmbedder(dim=64))
    other = TaskMemoryStore(Task(id="other", project_id="shop", user_id="ann"), target)
    other.fork(CHILD)
    with pytest.raises(ExportFileError) as caught:
        import_store(target, io.StringIO(saved.getvalue()))
    assert caught.value.field == "fork"
    assert target.count() == 0


def test_a_fork_hiding_more_than_a_filter_holds_reads_alike():
    """Past a filter's list limit the hidden ids are fetched over and dropped: same answers."""
    from agent_engine.filters import MAX_LIST_VALUES  # noqa: PLC0415

    backend = InMemoryBackend(embedder=HashingEmbedder(dim=16))
    parent = TaskMemoryStore("p", backend, conflict_detection=None)
    parent.add_many([parent.new_item("note", f"kept {n}", id=f"k{n}") for n in range(5)])
    child = parent.fork("c")
    later = [parent.new_item("note", f"later {n}", id=f"l{n}") for n in range(MAX_LIST_VALUES + 5)]
    parent.add_many(later)
    assert child.count() == 5
    assert sorted(_texts(child).values()) == [f"kept {n}" for n in range(5)]
    assert len(child.query(None, limit=3)) == 3
    assert {hit.item.text for hit in child.search_text("later kept", k=5)[1]} <= {
        f"kept {n}" for n in range(5)
    }

"""The isolation rule, as a property: what one scope does never depends on another scope.

Each example picks two scopes whose names are built to collide (by prefix, case, Unicode
look-alikes, separators, escapes, SQL wildcards; empty names must be refused) and a sequence of
operations in scope A whose ids and filters name scope B. The sequence runs twice, on two
fresh backends of one kind: once with B empty, once with B full of items that share A's ids,
words and tags (some pinned, some written before ids carried their scope). Every outcome in
A (return values, errors, A's audit journal, the packages ``build_context`` makes) must be the
same in both runs, and B must come out of the second run exactly as it went in.

What to check if this fails: the first differing outcome names the operation. A difference in
an error means a write looked at ids outside its scope (``TierStore._resolve`` and
``scoped_id``); in a package, that a tier read or ranked items of another namespace (the
store's scope filter, the backend's lexical index scope, the assembler's store cache key).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_engine import (
    AgentEngineError,
    ContextAssembler,
    ContextItem,
    ContextRequest,
    MemoryStores,
    Status,
    Task,
    ValidationError,
    promote,
)
from agent_engine.assembler.package import ContextPackage
from agent_engine.embeddings import HashingEmbedder
from agent_engine.memory import SearchHit
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.scope import (
    global_namespace,
    owner,
    pool_namespace,
    project_namespace,
    session_namespace,
    task_namespace,
)
from agent_engine.tiers.task import TaskMemoryStore

# Pairs of names built to collide with each other in some way a naive scheme would join.
NAMES = [
    ("alpha", "alpha2"),
    ("alpha", "Alpha"),
    ("a:b", "a"),
    ("a", "a:b"),
    ("a/b", "a"),
    ("a%3Ab", "a:b"),
    ("a%2Fb", "a/b"),
    ("a%", "ab"),
    ("a_", "ab"),
    ("%", "_"),
    ("*", "a"),
    ("café", unicodedata.normalize("NFD", "café")),
    ("paypal", "\u0440\u0430\u0443\u0440\u0430l"),  # Cyrillic look-alikes
    ("ﬁle", "file"),
    ("x y", "x  y"),
    ("project:a", "a"),
    ("default", "default:default"),
]
# Task scopes whose plain concatenations would be equal.
TASKS = [
    (("a:b", "u", "c"), ("a", "u", "b:c")),
    (("a", "u:v", "t"), ("a:u", "v", "t")),
    (("p", "u", "t"), ("p", "u", "t%3A")),
    (("p", "default", "fix-login"), ("q", "default", "fix-login")),
    (("p", "ada", "fix-login"), ("p", "bob", "fix-login")),
]
LOCAL_IDS = ["x", "shared", "fix-1", "a/b", "%", "project:a/x"]
WORDS = ["deploy", "secret", "launch", "code", "database", "login", "rotate", "keys"]
START = datetime(2024, 1, 1, tzinfo=UTC)
BUDGET = 120
FRESH_ID = re.compile(r"\b[0-9a-f]{26}\b")


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def make_backend(backend_kind, open_backend):
    """A factory of empty backends of one kind: each world of an example gets a fresh one.

    Every kind of ``tests/conftest.py`` runs; the one made before is closed first, so a
    PostgreSQL schema (emptied when a backend is opened) serves the worlds one after another.
    """

    def make():
        open_backend.close()
        return open_backend(backend_kind, HashingEmbedder(dim=32))

    return make


# ----------------------------------------------------------------------------- operations

ids = st.sampled_from(LOCAL_IDS)
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
operations = st.one_of(
    st.tuples(st.just("add"), ids, texts, st.booleans()),
    st.tuples(st.just("get"), ids),
    st.tuples(st.just("get_foreign"), ids),
    st.tuples(st.just("get_many"), st.lists(ids, max_size=3)),
    st.tuples(st.just("update"), ids, texts),
    st.tuples(st.just("delete"), ids),
    st.tuples(st.just("delete_foreign"), ids),
    st.tuples(st.just("pin"), ids),
    st.tuples(st.just("query_foreign"), st.sampled_from(["namespace", "id", "tags", "none"])),
    st.tuples(st.just("count_foreign"), st.sampled_from(["namespace", "id", "none"])),
    st.tuples(st.just("search"), texts),
    st.tuples(st.just("build"), texts),
    st.tuples(st.just("promote"), ids),
)


@attrs.define
class _World:
    """One run: a backend, an assembler over it and the two scopes' tasks."""

    backend: Any
    assembler: ContextAssembler
    mine: Task
    theirs: Task

    @classmethod
    def open(cls, backend, mine: Task, theirs: Task) -> _World:
        assembler = ContextAssembler(
            MemoryStores(
                backend, clock=_Clock(), confirm=lambda _request: True, max_project_items=None
            )
        )
        return cls(backend, assembler, mine, theirs)

    def stores(self):
        """A's task and project memory, as the assembler opens them."""
        return self.assembler.task_store(self.mine), self.assembler.project_store(
            self.mine.project_id
        )

    def their_stores(self):
        """B's scopes (its project too when it is not A's), on a clock of their own."""
        clock = _Clock()
        stores = [TaskMemoryStore(self.theirs, self.backend, clock=clock)]
        if self.theirs.project_id != self.mine.project_id:
            stores.append(ProjectMemoryStore(self.theirs.project_id, self.backend, clock=clock))
        return stores


def _fill_theirs(world: _World) -> None:
    """Scope B holds every id A will name, A's words and tags, pinned items and old ids."""
    for store, legacy_id in zip(world.their_stores(), ("x", "fix-1"), strict=False):
        for n, local in enumerate(LOCAL_IDS):
            item = store.new_item(
                "note",
                f"{' '.join(WORDS)} {local}",
                id=local,
                tags=("db", local),
                status=Status.PINNED if n % 2 else Status.CONFIRMED,
                importance=1.0,
            )
            if store.get(item.id) is None:  # "x" and "<scope>/x" name one item
                store.add(item)
        # Written straight to the backend, as stores did before ids carried their scope.
        legacy = ContextItem.create(
            "note",
            f"legacy {' '.join(WORDS)}",
            id=legacy_id,
            tier=store.tier,
            namespace=store.namespace,
            timestamp=START,
            token_cost=10,
        )
        world.backend.add(legacy)


def _foreign_ids(world: _World) -> list[str]:
    theirs = world.their_stores()
    return [store.scoped_id(local) for store in theirs for local in LOCAL_IDS] + ["x", "fix-1"]


def _snapshot(world: _World) -> list[tuple[Any, ...]]:
    items = []
    for store in world.their_stores():
        items.extend(_view(item) for item in store.query(None, limit=None, order_by="+id"))
    return sorted(items)


def _view(value: Any) -> Any:
    """What a caller can observe of a result, ids of fresh copies made comparable."""
    if isinstance(value, ContextItem):
        return (
            value.id,
            value.kind,
            value.text,
            value.tags,
            value.status.value,
            value.importance,
            value.namespace,
            value.access_count,
            value.token_cost,
        )
    if isinstance(value, SearchHit):
        return (_view(value.item), round(value.score, 5))
    if isinstance(value, ContextPackage):
        return (
            [(s.item.id, s.tier.value, s.reason.value, s.tokens) for s in value.selections],
            sorted((o.item_id, o.tier.value, o.reason.value) for o in value.omissions),
            value.tokens_used,
            [(u.tier.value, u.used, u.candidates, u.selected) for u in value.usage],
            value.render(),
        )
    if isinstance(value, list | tuple):
        return [_view(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "duplicate"):
        return (_view(value.item), value.duplicate)
    return value


def _run(world: _World, steps: list[tuple[Any, ...]]) -> list[Any]:
    task_store, project = world.stores()
    act = _Actions(world, task_store, project, _foreign_ids(world))
    outcomes: list[Any] = []
    for name, *args in steps:
        try:
            outcomes.append((name, _view(getattr(act, name)(*args))))
        except AgentEngineError as error:
            outcomes.append((name, type(error).__name__, str(error)))
    mine = {task_store.namespace, project.namespace}
    journal = [
        (e.action.value, e.namespace, e.item_ids, sorted(e.detail))
        for e in world.backend.audit.events(limit=None)
        if e.namespace in mine
    ]
    return _canonical([*outcomes, ("journal", journal)], {})


def _canonical(value: Any, fresh: dict[str, str]) -> Any:
    """Fresh ids (``new_id``: promoted copies) numbered by first appearance: two runs compare."""
    if isinstance(value, str):
        return FRESH_ID.sub(lambda m: fresh.setdefault(m.group(0), f"<fresh {len(fresh)}>"), value)
    if isinstance(value, list | tuple):
        return [_canonical(v, fresh) for v in value]
    return value


@attrs.define
class _Actions:
    """The operations an example runs in scope A, each naming B's ids where it can."""

    world: _World
    task_store: TaskMemoryStore
    store: ProjectMemoryStore
    foreign: list[str]

    def add(self, local, text, pinned):
        status = Status.PINNED if pinned else Status.CONFIRMED
        item = self.store.new_item("note", text, id=local, tags=("db",), status=status)
        return self.store.add(item)

    def get(self, local):
        return self.store.get(local)

    def get_foreign(self, local):
        return [self.store.get(i) for i in self.foreign if i.endswith(local)]

    def get_many(self, locals_):
        return self.store.get_many([*locals_, *self.foreign])

    def update(self, local, text):
        current = self.store.get(local) or self.store.new_item("note", "absent", id=local)
        return self.store.update(attrs.evolve(current, text=text))

    def delete(self, local):
        return self.store.delete(local)

    def delete_foreign(self, local):
        each = [self.store.delete(i) for i in self.foreign if i.endswith(local)]
        return [*each, self.store.delete_many(self.foreign)]

    def pin(self, local):
        return self.store.pin(local)

    def _document(self, name):
        theirs = [store.namespace for store in self.world.their_stores()]
        return {
            "namespace": {"namespace": {"$in": theirs}},
            "id": {"id": {"$in": self.foreign}},
            "tags": {"tags": {"$in": LOCAL_IDS}},
            "none": None,
        }[name]

    def query_foreign(self, name):
        return self.store.query(self._document(name), limit=None, order_by="+id")

    def count_foreign(self, name):
        return self.store.count(self._document(name))

    def search(self, text):
        return self.store.search(text, k=5)

    def build(self, text):
        request = ContextRequest(budget_tokens=BUDGET, query=text)
        return self.world.assembler.build_context(self.world.mine, request)

    def promote(self, local):
        if self.task_store.get(local) is None:
            self.task_store.add(self.task_store.new_item("note", f"task finding {local}", id=local))
        return promote(self.task_store, self.store, local)


def _pair(names):
    return tuple(Task(id=task, project_id=project, user_id=user) for project, user, task in names)


scopes = st.one_of(
    st.sampled_from(NAMES).map(lambda pair: _pair((p, "default", "fix-login") for p in pair)),
    st.sampled_from(TASKS).map(_pair),
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pair=scopes, steps=st.lists(operations, min_size=1, max_size=8))
def test_outcomes_in_one_scope_do_not_depend_on_another(make_backend, pair, steps):
    """Every operation in scope A has the same outcome whether scope B is empty or full."""
    mine, theirs = pair
    alone = _run(_World.open(make_backend(), mine, theirs), steps)
    crowded = _World.open(make_backend(), mine, theirs)
    _fill_theirs(crowded)
    before = _snapshot(crowded)

    assert _run(crowded, steps) == alone
    assert _snapshot(crowded) == before


class TestScopeNames:
    @pytest.mark.parametrize(("first", "second"), NAMES)
    def test_colliding_project_names_give_distinct_scopes(self, first, second):
        """Names that differ in any character give different namespaces and id prefixes."""
        assert project_namespace(first) != project_namespace(second)

    @pytest.mark.parametrize(("first", "second"), TASKS)
    def test_task_scopes_are_injective(self, first, second):
        """(project, user, task) triples whose joins look alike give different namespaces."""
        assert task_namespace(first[2], first[0], first[1]) != task_namespace(
            second[2], second[0], second[1]
        )

    @given(
        st.tuples(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1)),
        st.tuples(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1)),
    )
    def test_no_two_triples_share_a_task_namespace(self, first, second):
        """Whatever the ids, equal task namespaces mean equal (project, user, task)."""
        try:
            a = task_namespace(first[2], first[0], first[1])
            b = task_namespace(second[2], second[0], second[1])
        except ValidationError:
            return
        assert (a == b) == (first == second)

    @given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
    def test_owner_reads_back_the_project_and_user(self, project, user, own):
        """What promotion checks: each namespace names the owners it was built from."""
        try:
            built = {
                project_namespace(project): (project, None),
                global_namespace(user): (None, user),
                task_namespace(own, project, user): (project, user),
                session_namespace(own, project, user): (project, user),
                pool_namespace(own, project): (project, None),
            }
        except ValidationError:
            return
        assert {namespace: owner(namespace) for namespace in built} == built

    @pytest.mark.parametrize("empty", ["", "   "])
    def test_empty_names_are_refused(self, empty):
        """An empty project, user or task id is a ValidationError naming the field."""
        for build, field in (
            (lambda: project_namespace(empty), "project_id"),
            (lambda: task_namespace("t", empty), "project_id"),
            (lambda: task_namespace("t", "p", empty), "user_id"),
            (lambda: task_namespace(empty, "p"), "task_id"),
        ):
            with pytest.raises(ValidationError) as raised:
                build()
            assert raised.value.field == field

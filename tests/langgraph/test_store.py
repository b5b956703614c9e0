"""AgentEngineStore: LangGraph's BaseStore over the tier stores, on real backends.

What LangGraph's own store tests check of a store (namespaces, put/get/delete, search with
filters and pages, list_namespaces with prefixes, suffixes, wildcards and depth), what the
mapping onto scopes adds (each namespace in its scope's store, the rules of that store
applied), and that a batch carrying bad input is refused whole, with nothing written.
"""

from __future__ import annotations

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from agent_engine import InMemoryBackend, MemoryStores, Task, Tier
from agent_engine.errors import ConfirmationDeclined, FilterError, ValidationError
from agent_engine.integrations.langgraph import (
    SOURCE,
    AgentEngineStore,
    UnmappedNamespaceError,
    scope_namespace,
)
from agent_engine.tiers.views import View

PROJECT = ("project", "shop")
TASK = Task(id="t1", project_id="shop", user_id="ada")
SECRET = "ghp_" + "Zq7Lm2Xp9Rt4Vb6Nc8Kd1Hf3Jg5Ws0Ye2Ua4Io"


def _held(backend) -> int:
    """Every row the backend holds, history included: what a refused batch must not add."""
    return backend.count()


class TestScopes:
    def test_each_namespace_writes_its_scopes_store(self, store, stores):
        """project, global and task namespaces land in that scope's store, as the adapter's."""
        store.put(("project", "shop", "facts"), "a", {"text": "project fact"})
        store.put(("global", "ada", "prefs"), "b", {"text": "global preference"})
        store.put(("task", "shop", "ada", "t1"), "c", {"text": "task step"})

        project = stores.project_store("shop").list_all()
        user = stores.global_store("ada").list_all()
        task = stores.task_store(TASK).list_all()
        assert [item.text for item in project] == ["project fact"]
        assert [item.text for item in user] == ["global preference"]
        assert [item.text for item in task] == ["task step"]
        assert {item.source for item in [*project, *user, *task]} == {SOURCE}
        assert stores.project_store("other").list_all() == []

    def test_a_session_namespace_writes_the_sessions_store(self, store, stores):
        """A session's namespace lands in its store: what the session's tasks then read."""
        store.put(("session", "shop", "ada", "s1", "notes"), "k", {"text": "session note"})
        session = stores.session_store("s1", "shop", "ada")
        assert [item.text for item in session.list_all()] == ["session note"]
        hits = store.search(("session", "shop"), query="session note")
        assert [hit.namespace for hit in hits] == [("session", "shop", "ada", "s1", "notes")]
        in_session = Task(id="t1", project_id="shop", user_id="ada", session_id="s1")
        assert scope_namespace("session", in_session) == ("session", "shop", "ada", "s1")
        with pytest.raises(ValidationError, match="runs in no session"):
            scope_namespace("session", TASK)

    def test_scope_namespace_names_a_tasks_scopes(self):
        """The helper gives the namespace each tier of a task's memory maps from."""
        assert scope_namespace("task", TASK, "notes") == ("task", "shop", "ada", "t1", "notes")
        assert scope_namespace(Tier.PROJECT, TASK) == ("project", "shop")
        assert scope_namespace("global", TASK, "prefs") == ("global", "ada", "prefs")
        with pytest.raises(ValidationError):
            scope_namespace("archive", TASK)

    def test_a_task_scope_is_its_project_and_users(self, store):
        """Two users' runs of one task id keep apart, as their task namespaces do."""
        store.put(("task", "shop", "ada", "t1"), "k", {"text": "ada's"})
        store.put(("task", "shop", "bob", "t1"), "k", {"text": "bob's"})
        assert store.get(("task", "shop", "ada", "t1"), "k").value == {"text": "ada's"}
        assert store.get(("task", "shop", "bob", "t1"), "k").value == {"text": "bob's"}

    def test_a_backend_stands_for_its_stores(self):
        """``AgentEngineStore(backend)`` opens ``MemoryStores(backend)``."""
        backend = InMemoryBackend()
        adapter = AgentEngineStore(backend)
        adapter.put(PROJECT, "k", {"text": "x"})
        assert adapter.stores.backends[Tier.PROJECT] is backend
        assert backend.count() == 1


UNMAPPED = [
    pytest.param(("memories", "ada"), id="unknown-first-label"),
    pytest.param(("project",), id="no-project-id"),
    pytest.param(("global",), id="no-user-id"),
    pytest.param(("task", "shop", "ada"), id="no-task-id"),
    pytest.param(("session", "shop", "ada"), id="no-session-id"),
    pytest.param(("project", " shop"), id="id-with-whitespace"),
    pytest.param(("project", "p" * 300), id="id-too-long"),
]


class TestUnmappedNamespaces:
    @pytest.mark.parametrize("namespace", UNMAPPED)
    @pytest.mark.parametrize("method", ["put", "get", "delete"])
    def test_refused_with_a_typed_error(self, store, backend, namespace, method):
        """A namespace naming no scope is an error of both trees, naming the namespace."""
        call = {
            "put": lambda: store.put(namespace, "k", {"text": "x"}),
            "get": lambda: store.get(namespace, "k"),
            "delete": lambda: store.delete(namespace, "k"),
        }[method]
        with pytest.raises(UnmappedNamespaceError) as raised:
            call()
        assert isinstance(raised.value, InvalidNamespaceError)
        assert isinstance(raised.value, ValidationError)
        assert raised.value.field == "namespace"
        assert raised.value.namespace == namespace
        assert _held(backend) == 0

    @pytest.mark.parametrize(
        "prefix", [("memories",), ("task", "shop", " x"), ("project", "p" * 300)]
    )
    def test_a_search_or_listing_under_no_scope_is_refused(self, store, prefix):
        """Reads refuse it too: a graph written for other namespaces must not find nothing."""
        with pytest.raises(UnmappedNamespaceError):
            store.search(prefix)
        with pytest.raises(UnmappedNamespaceError):
            store.list_namespaces(prefix=prefix)

    def test_wide_prefixes_are_not_refused(self, store):
        """The empty prefix and a tier alone reach every scope of it."""
        store.put(("project", "a"), "k", {"text": "x"})
        store.put(("project", "b", "n"), "k", {"text": "y"})
        assert [i.namespace for i in store.search((), limit=5)] != []
        assert {i.namespace for i in store.search(("project",))} == {
            ("project", "a"),
            ("project", "b", "n"),
        }
        assert store.list_namespaces(prefix=("*", "b")) == [("project", "b", "n")]

    @pytest.mark.parametrize(
        "namespace", [("project", "shop", "a.b"), ("project", ""), ("project", 3), "project"]
    )
    def test_labels_langgraph_refuses_are_refused_in_a_direct_batch(self, store, namespace):
        """Ops handed to batch() skip LangGraph's checks; the adapter makes them."""
        with pytest.raises(UnmappedNamespaceError):
            store.batch([PutOp(namespace, "k", {"text": "x"})])

    def test_a_batch_with_one_bad_op_writes_nothing(self, store, backend):
        """Good puts before a bad one are not written: the batch is checked whole first."""
        ops = [
            PutOp(("project", "shop"), "a", {"text": "fine"}),
            PutOp(("task", "shop", "ada", "t1"), "b", {"text": "fine too"}),
            PutOp(("memories", "ada"), "c", {"text": "maps nowhere"}),
        ]
        with pytest.raises(UnmappedNamespaceError):
            store.batch(ops)
        assert _held(backend) == 0
        store.batch(ops[:2])
        assert _held(backend) == 2


class TestRefusedWrites:
    def test_global_writes_need_allow_global(self, stores, backend):
        """By default a graph may read a user's global memory, never write it."""
        adapter = AgentEngineStore(stores)
        for write in (
            lambda: adapter.put(("global", "ada"), "k", {"text": "x"}),
            lambda: adapter.delete(("global", "ada"), "k"),
            lambda: adapter.batch(
                [PutOp(PROJECT, "a", {"text": "x"}), PutOp(("global", "ada"), "k", {"text": "y"})]
            ),
        ):
            with pytest.raises(ValidationError) as raised:
                write()
            assert raised.value.field == "namespace"
        assert _held(backend) == 0
        assert adapter.search(("global", "ada")) == []

    def test_a_declined_confirmation_writes_nothing_of_the_batch(self, backend):
        """Global memory is written first: when its confirmation refuses, nothing is written."""
        stores = MemoryStores(backend, confirm=lambda _request: False)
        adapter = AgentEngineStore(stores, kind="preference", allow_global=True)
        ops = [
            PutOp(("task", "shop", "ada", "t1"), "a", {"text": "task"}),
            PutOp(PROJECT, "b", {"text": "project"}),
            PutOp(("global", "ada"), "c", {"text": "prefers tabs"}),
        ]
        with pytest.raises(ConfirmationDeclined):
            adapter.batch(ops)
        assert _held(backend) == 0

    @pytest.mark.parametrize(
        ("value", "field"),
        [
            pytest.param({"n": float("nan")}, "value", id="nan"),
            pytest.param({"when": object()}, "value", id="not-json"),
            pytest.param(["a", "list"], "value", id="not-a-mapping"),
            pytest.param({"text": "x\x00y"}, "value", id="nul"),
        ],
    )
    def test_a_value_that_is_not_json_is_refused(self, store, backend, value, field):
        with pytest.raises(ValidationError) as raised:
            store.batch([PutOp(PROJECT, "ok", {"text": "fine"}), PutOp(PROJECT, "k", value)])
        assert raised.value.field == field
        assert _held(backend) == 0

    def test_a_key_too_long_for_an_id_is_refused(self, store, backend):
        """Path and key make the item's id; one past the limit is refused, naming the key."""
        with pytest.raises(ValidationError) as raised:
            store.put(("project", "shop", "n" * 100), "k" * 200, {"text": "x"})
        assert raised.value.field == "key"
        assert _held(backend) == 0

    def test_ttl_is_refused(self, store, backend):
        """The store keeps no TTL: LangGraph's put says so, a direct op is a typed error."""
        with pytest.raises(NotImplementedError):
            store.put(PROJECT, "k", {"text": "x"}, ttl=5)
        with pytest.raises(ValidationError) as raised:
            store.batch([PutOp(PROJECT, "k", {"text": "x"}, ttl=5)])
        assert raised.value.field == "ttl"
        assert _held(backend) == 0

    def test_an_item_this_store_did_not_write_is_not_replaced(self, store, stores):
        """An id in the adapter's form written by someone else is refused, not overwritten."""
        project = stores.project_store("shop")
        project.add(project.new_item("note", "hand-written", id="lg:k"))
        with pytest.raises(ValidationError):
            store.put(PROJECT, "k", {"text": "x"})
        assert store.get(PROJECT, "k") is None
        assert [item.text for item in project.list_all()] == ["hand-written"]


class TestItems:
    def test_put_get_roundtrip(self, store):
        value = {"text": "Refunds go through the payments queue", "n": 3, "tags": ["a", "b"]}
        store.put(("project", "shop", "facts"), "refunds", value)
        item = store.get(("project", "shop", "facts"), "refunds")
        assert item.value == value
        assert item.key == "refunds"
        assert item.namespace == ("project", "shop", "facts")
        assert item.created_at == item.updated_at
        assert store.get(("project", "shop", "facts"), "other") is None
        assert store.get(("project", "shop"), "refunds") is None

    @pytest.mark.parametrize(
        "key", ["", " padded ", "a/b", "a.b", "50%", "ключ", "lg:x", "a" * 200]
    )
    def test_any_key_reads_back(self, store, key):
        """A key is quoted into the item's id, so it reads back whatever it holds."""
        store.put(("project", "shop", "n"), key, {"text": "x"})
        assert store.get(("project", "shop", "n"), key).key == key
        assert [item.key for item in store.search(("project", "shop"))] == [key]
        assert store.list_namespaces() == [("project", "shop", "n")]

    def test_a_put_of_a_held_key_is_a_new_version(self, store, stores):
        """The value is replaced, created_at kept, updated_at moved; the old value is history."""
        store.put(PROJECT, "deploy", {"text": "Deploys happen on Wednesdays"})
        first = store.get(PROJECT, "deploy")
        store.put(PROJECT, "deploy", {"text": "Deploys happen on Thursdays"})
        second = store.get(PROJECT, "deploy")
        assert second.value == {"text": "Deploys happen on Thursdays"}
        assert second.created_at == first.created_at
        assert second.updated_at > first.updated_at
        project = stores.project_store("shop")
        [current] = project.list_all()
        assert [v.text for v in project.history(current.id)] == [
            "Deploys happen on Wednesdays",
            "Deploys happen on Thursdays",
        ]

    @pytest.mark.parametrize("text", ["same", f"same {SECRET}"], ids=["plain", "redacted"])
    def test_the_same_value_again_writes_nothing(self, store, stores, backend, text):
        """Not even a journal event; a value redaction changed is compared as it was kept."""
        store.put(PROJECT, "k", {"text": text})
        before = store.get(PROJECT, "k")
        events = backend.audit.count(namespace="project:shop")
        store.put(PROJECT, "k", {"text": text})
        assert store.get(PROJECT, "k") == before
        assert backend.audit.count(namespace="project:shop") == events
        assert stores.project_store("shop").count(view=View.ALL) == 1

    def test_near_duplicates_under_two_keys_stay_two_items(self, store):
        """Project memory merges a near-duplicate add; a key is a slot and never merges."""
        store.put(PROJECT, "a", {"text": "The staging database is PostgreSQL 16"})
        store.put(PROJECT, "b", {"text": "The staging database is PostgreSQL 16"})
        assert store.get(PROJECT, "a") is not None
        assert store.get(PROJECT, "b") is not None
        assert len(store.search(PROJECT)) == 2

    def test_delete_forgets_the_item_and_its_history(self, store, stores, backend):
        store.put(PROJECT, "k", {"text": "one"})
        store.put(PROJECT, "k", {"text": "two"})
        store.delete(PROJECT, "k")
        assert store.get(PROJECT, "k") is None
        assert stores.project_store("shop").count(view=View.ALL) == 0
        store.delete(PROJECT, "k")  # deleting what is gone is a no-op
        store.put(PROJECT, "k", {"text": "three"})
        assert store.get(PROJECT, "k").value == {"text": "three"}

    def test_the_last_op_on_a_key_in_a_batch_wins(self, store):
        store.batch(
            [
                PutOp(PROJECT, "k", {"text": "one"}),
                PutOp(PROJECT, "k", {"text": "two"}),
                PutOp(PROJECT, "gone", {"text": "x"}),
                PutOp(PROJECT, "gone", None),
            ]
        )
        assert store.get(PROJECT, "k").value == {"text": "two"}
        assert store.get(PROJECT, "gone") is None

    def test_a_key_another_writer_added_meanwhile_is_updated(self, backend):
        """A key added by another store between a batch's plan and its write is updated.

        The other writer runs inside the global confirmation, after the batch planned its
        project write as an add: that add finds the key taken and is planned again.
        """
        stores = MemoryStores(backend, confirm=lambda _request: meanwhile())
        first = AgentEngineStore(stores, fields=["text"], kind="preference", allow_global=True)
        other = AgentEngineStore(stores, fields=["text"])

        def meanwhile():
            other.put(PROJECT, "k", {"text": "the other writer's"})
            return True

        first.batch(
            [PutOp(("global", "ada"), "g", {"text": "x"}), PutOp(PROJECT, "k", {"text": "mine"})]
        )
        assert first.get(PROJECT, "k").value == {"text": "mine"}
        project = stores.project_store("shop")
        [current] = project.list_all()
        assert [v.text for v in project.history(current.id)] == ["the other writer's", "mine"]

    def test_reads_in_a_batch_see_the_store_before_its_writes(self, store):
        """As in LangGraph's own stores: a batch's gets and searches run before its puts."""
        store.put(PROJECT, "k", {"text": "old"})
        got, _, found = store.batch(
            [GetOp(PROJECT, "k"), PutOp(PROJECT, "k", {"text": "new"}), SearchOp(PROJECT)]
        )
        assert got.value == {"text": "old"}
        assert [item.value for item in found] == [{"text": "old"}]
        assert store.get(PROJECT, "k").value == {"text": "new"}

    def test_secrets_are_redacted_before_they_are_stored(self, store, stores):
        """A value takes the store's write path: what comes back is what redaction kept."""
        store.put(PROJECT, "k", {"text": f"the token is {SECRET}", "note": f"again {SECRET}"})
        value = store.get(PROJECT, "k").value
        assert SECRET not in str(value)
        assert "[REDACTED:" in value["text"]
        assert "[REDACTED:" in value["note"]
        [item] = stores.project_store("shop").list_all()
        assert SECRET not in item.text

    def test_the_indexed_fields_are_the_items_text(self, stores):
        """``fields`` picks what the item's text (searched, shown in prompts) is made of."""
        whole = AgentEngineStore(stores)
        whole.put(("project", "a"), "k", {"text": "hello", "n": 1})
        picked = AgentEngineStore(stores, fields=["title", "body[*].text"])
        picked.put(("project", "b"), "k", {"title": "T", "body": [{"text": "x"}, {"text": "y"}]})
        picked.put(("project", "c"), "k", {"other": "none of the fields"})
        assert stores.project_store("a").list_all()[0].text == '{"n": 1, "text": "hello"}'
        assert stores.project_store("b").list_all()[0].text == "T\nx\ny"
        assert stores.project_store("c").list_all()[0].text == '{"other": "none of the fields"}'

    def test_bad_settings_are_refused(self, stores):
        for settings in ({"fields": []}, {"fields": [""]}, {"kind": " "}, {"allow_global": 1}):
            with pytest.raises(ValidationError):
                AgentEngineStore(stores, **settings)
        with pytest.raises(ValidationError):
            AgentEngineStore("sqlite:///x.db")


def _fill(store):
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5, "meta": {"size": "s"}}),
    ]
    for key, value in docs:
        store.put(("project", "shop", "docs"), key, value)


class TestSearch:
    def test_filters(self, store):
        """Equality, nested equality and comparison operators, as LangGraph's stores match."""
        _fill(store)

        def keys(**options):
            return sorted(i.key for i in store.search(("project", "shop"), **options))

        assert keys(filter={"color": "red"}) == ["doc1", "doc2"]
        assert keys(filter={"score": {"$gt": 3.2}}) == ["doc1", "doc3", "doc4"]
        assert keys(filter={"score": {"$gte": 4.0}, "color": "green"}) == ["doc3"]
        assert keys(filter={"score": {"$lt": 4, "$ne": 3.0}}) == ["doc4"]
        assert keys(filter={"meta": {"size": "s"}}) == ["doc4"]
        assert keys(filter={"color": {"$eq": "blue"}}) == ["doc4"]
        assert keys(filter={"missing": {"$gt": 1}}) == []
        assert keys(filter={"color": {"$gt": 1}}) == []

    @pytest.mark.parametrize(
        "bad",
        [{"score": {"$in": [1]}}, {"score": {"$gt": "3"}}, {"a": {"$gt": 1, "b": 2}}, ["color"]],
    )
    def test_a_filter_outside_the_language_is_refused(self, store, bad):
        with pytest.raises(FilterError):
            store.search(PROJECT, filter=bad)

    def test_pages(self, store):
        """Without a query: newest change first, limit and offset over that order."""
        for n in range(5):
            store.put(PROJECT, f"doc{n}", {"text": f"document number {n}"})
        assert [i.key for i in store.search(PROJECT, limit=2)] == ["doc4", "doc3"]
        assert [i.key for i in store.search(PROJECT, limit=2, offset=2)] == ["doc2", "doc1"]
        assert [i.key for i in store.search(PROJECT, offset=4)] == ["doc0"]
        assert all(i.score is None for i in store.search(PROJECT))

    def test_a_prefix_holds_its_namespace_and_those_below(self, store):
        store.put(("project", "shop"), "top", {"text": "x"})
        store.put(("project", "shop", "a"), "mid", {"text": "x"})
        store.put(("project", "shop", "a", "b"), "low", {"text": "x"})
        store.put(("project", "shop", "ab"), "beside", {"text": "x"})
        assert sorted(i.key for i in store.search(("project", "shop", "a"))) == ["low", "mid"]
        assert len(store.search(("project", "shop"))) == 4

    def test_a_query_ranks_by_the_scopes_search(self, store):
        """With an embedder: cosine similarity, best first, a score on every ranked item."""
        _fill(store)
        store.put(("project", "shop", "docs"), "hidden", {"text": "red apple"}, index=False)
        results = store.search(("project", "shop"), query="red apple", filter={"color": "red"})
        assert [r.key for r in results] == ["doc1", "doc2"]
        assert results[0].score > results[1].score
        everything = store.search(("project", "shop"), query="red apple")
        assert everything[0].key == "doc1"
        assert everything[-1].key == "hidden"
        assert everything[-1].score is None
        assert all(r.score is not None for r in everything[:-1])
        assert store.search(("project", "shop"), query="", limit=10)[0].score is None

    def test_an_updated_value_is_searched_by_its_new_text(self, store):
        store.put(PROJECT, "doc1", {"text": "zany zebra xerxes"})
        store.put(PROJECT, "doc2", {"text": "something about dogs"})
        before = store.search(PROJECT, query="zany xerxes")[0]
        store.put(PROJECT, "doc1", {"text": "new text about dogs"})
        after = {r.key: r.score for r in store.search(PROJECT, query="zany xerxes")}
        assert before.key == "doc1"
        assert after["doc1"] < before.score
        assert store.search(PROJECT, query="new text about dogs")[0].key == "doc1"

    def test_without_an_embedder_a_query_ranks_by_bm25(self):
        """A backend that embeds nothing ranks by its full-text index; no match, no score."""
        adapter = AgentEngineStore(MemoryStores(InMemoryBackend()), fields=["text"])
        adapter.put(PROJECT, "a", {"text": "the payments queue handles refunds"})
        adapter.put(PROJECT, "b", {"text": "refunds refunds refunds"})
        adapter.put(PROJECT, "c", {"text": "deploys on thursdays"})
        results = adapter.search(PROJECT, query="refunds")
        assert [r.key for r in results] == ["b", "a", "c"]
        assert results[0].score > results[1].score > 0
        assert results[2].score is None

    def test_a_query_across_scopes_ranks_them_together(self, store):
        store.put(("project", "a"), "k", {"text": "red apple"})
        store.put(("project", "b"), "k", {"text": "blue car"})
        store.put(("task", "a", "ada", "t"), "k", {"text": "red apple pie"})
        results = store.search((), query="blue car")
        assert results[0].namespace == ("project", "b")
        assert {r.namespace for r in results} == {
            ("project", "a"),
            ("project", "b"),
            ("task", "a", "ada", "t"),
        }
        assert [r.namespace for r in store.search(("task",))] == [("task", "a", "ada", "t")]


class TestListNamespaces:
    NAMESPACES = (
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    )

    @pytest.fixture
    def listed(self, store):
        """LangGraph's own listing example, under project ``p``: ("project", "p", *path)."""
        for n, path in enumerate(self.NAMESPACES):
            store.put(("project", "p", *path), f"id_{n}", {"data": f"value_{n:02d}"})
        store.put(("project", "q", "a", "b", "c"), "other", {"data": "another project"})

        def listing(**options):
            found = store.list_namespaces(**options)
            assert all(namespace[:2] == ("project", "p") for namespace in found)
            return [namespace[2:] for namespace in found]

        return listing

    def test_prefix_suffix_and_both(self, listed):
        p = ("project", "p")
        assert listed(prefix=(*p, "a", "b")) == [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
        ]
        assert listed(prefix=p, suffix=("f",)) == [
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
        ]
        assert listed(prefix=(*p, "a"), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
        assert listed(prefix=(*p, "nonexistent")) == []
        assert listed(prefix=(*p, "users", "123")) == [("users", "123")]

    def test_wildcards(self, listed):
        p = ("project", "p")
        assert listed(prefix=(*p, "a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
        assert listed(prefix=(*p, "users", "*")) == [("users", "123"), ("users", "456", "settings")]
        assert listed(prefix=p, suffix=("*", "settings")) == [("users", "456", "settings")]

    def test_depth_and_pages(self, listed, store):
        p = ("project", "p")
        assert listed(prefix=(*p, "a", "b"), max_depth=5) == [
            ("a", "b", "c"),
            ("a", "b", "d"),
            ("a", "b", "f"),
        ]
        assert listed(prefix=(*p, "a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
        assert listed(prefix=(*p, "a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
        assert store.list_namespaces(max_depth=2) == [("project", "p"), ("project", "q")]
        assert store.list_namespaces(prefix=("project", "*", "a", "b", "c")) == [
            ("project", "p", "a", "b", "c"),
            ("project", "q", "a", "b", "c"),
        ]

    def test_deleted_items_leave_no_namespace(self, store):
        store.put(("project", "p", "x"), "k", {"data": 1})
        store.delete(("project", "p", "x"), "k")
        assert store.list_namespaces() == []

    def test_bad_conditions_are_refused(self, store):
        with pytest.raises(ValidationError):
            store.batch([ListNamespacesOp((MatchCondition("middle", ("project",)),))])
        with pytest.raises(ValidationError):
            store.list_namespaces(max_depth=0)
        with pytest.raises(ValidationError):
            store.list_namespaces(limit=-1)

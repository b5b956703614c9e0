"""AgentEngineStore against LangGraph's own InMemoryStore: the same ops, the same answers.

LangGraph ships no conformance suite for stores, so its in-memory store is the oracle.
Hypothesis draws sequences of puts, deletes, gets, searches (filters, queries, pages) and
listings over namespaces that map onto scopes, applies each to both stores, and compares
every answer. Both embed with the same hashing embedder (LangGraph's store through its
``embed`` function, ours through the backend), so a query's scores agree too.

Where the two stores differ on purpose the comparison says so: an unqueried search's order
(LangGraph's is insertion order, ours newest change first) is compared as a set when the
whole result fits, timestamps are not compared (LangGraph's store resets ``created_at`` on
every put; ours keeps it), and a namespace holding no item is not listed (as in LangGraph's
database stores; its in-memory store lists any namespace a get or delete named).
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import Item, SearchItem
from langgraph.store.memory import InMemoryStore

from agent_engine import HashingEmbedder, InMemoryBackend, MemoryStores
from agent_engine.integrations.langgraph import AgentEngineStore
from tests.langgraph.conftest import EMBEDDER_DIM

NAMESPACES = [
    ("project", "p1"),
    ("project", "p1", "facts"),
    ("project", "p1", "facts", "deep"),
    ("project", "p2", "facts"),
    ("global", "ada", "prefs"),
    ("task", "p1", "ada", "t1"),
    ("task", "p1", "ada", "t1", "notes"),
]
PREFIXES = [(), ("project",), ("project", "p1"), ("project", "p1", "facts"), ("task",), ("global",)]
WORDS = ["red", "blue", "apple", "car", "queue", "refund", "deploy", "thursday"]

keys = st.sampled_from(["a", "b", "c", "x/y", "k.1", ""])
namespaces = st.sampled_from(NAMESPACES)
values = st.fixed_dictionaries(
    {
        "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        "n": st.integers(0, 5),
    },
    optional={"color": st.sampled_from(["red", "blue"])},
)
filters = st.sampled_from(
    [None, {"color": "red"}, {"n": {"$gt": 2}}, {"n": {"$lte": 1}, "color": "blue"}, {"n": 3}]
)
patterns = st.lists(st.sampled_from(["project", "p1", "facts", "*", "deep", "notes"]), max_size=3)

ops = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values, st.sampled_from([None, None, False])),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(
        st.just("search"),
        st.sampled_from(PREFIXES),
        filters,
        st.one_of(st.none(), st.sampled_from(WORDS)),
        st.integers(0, 12),
        st.integers(0, 3),
    ),
    st.tuples(
        st.just("list"),
        st.one_of(st.none(), patterns.map(lambda p: ("project", *p))),
        st.one_of(st.none(), patterns.filter(bool).map(tuple)),
        st.one_of(st.none(), st.integers(1, 4)),
        st.integers(0, 10),
        st.integers(0, 3),
    ),
)


def _embed(texts):
    return HashingEmbedder(dim=EMBEDDER_DIM).embed(list(texts)).tolist()


def _stores():
    oracle = InMemoryStore(index={"dims": EMBEDDER_DIM, "embed": _embed, "fields": ["text"]})
    backend = InMemoryBackend(embedder=HashingEmbedder(dim=EMBEDDER_DIM))
    ours = AgentEngineStore(
        MemoryStores(backend, confirm=lambda _request: True), fields=["text"], allow_global=True
    )
    return oracle, ours


def _item(item: Item | None):
    return None if item is None else (item.namespace, item.key, item.value)


def _same_search(expected: list[SearchItem], got: list[SearchItem], op) -> None:
    _, _, _, query, limit, offset = op
    if query is None:
        # Orders differ on purpose; with no page cut, the same items must come back.
        if offset == 0 and len(expected) < limit:
            assert sorted(map(_item, got)) == sorted(map(_item, expected))
        else:
            assert len(got) == len(expected)
        return
    # Ranked: the same items at the same scores; among equal scores the order may differ.
    # LangGraph's store fills a page with unranked items (put with index=False) ignoring the
    # offset; ours pages them after the ranked ones, so past the first page only the ranked
    # part is compared.
    if offset > 0:
        expected = [r for r in expected if r.score is not None]
        got = [r for r in got if r.score is not None]
    assert len(got) == len(expected)
    assert [_rounded(r.score) for r in got] == [_rounded(r.score) for r in expected]
    if len(expected) < limit:
        assert sorted(map(_scored, got)) == sorted(map(_scored, expected))


def _rounded(score: float | None) -> float | None:
    return None if score is None else round(score, 4)


def _scored(item: SearchItem):
    return (*_item(item), math.inf if item.score is None else round(item.score, 4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=25))
def test_the_same_ops_give_the_same_answers(sequence):
    oracle, ours = _stores()
    for op in sequence:
        name = op[0]
        if name == "put":
            _, namespace, key, value, index = op
            oracle.put(namespace, key, value, index=index)
            ours.put(namespace, key, value, index=index)
            if index is False:
                # LangGraph's store keeps the vector of the key's previous value; it must
                # rank the item no more than a new one put with index=False.
                oracle._vectors[namespace].pop(key, None)
        elif name == "delete":
            _, namespace, key = op
            oracle.delete(namespace, key)
            ours.delete(namespace, key)
        elif name == "get":
            _, namespace, key = op
            assert _item(ours.get(namespace, key)) == _item(oracle.get(namespace, key))
        elif name == "search":
            _, prefix, filter_, query, limit, offset = op
            options = {"filter": filter_, "query": query, "limit": limit, "offset": offset}
            _same_search(oracle.search(prefix, **options), ours.search(prefix, **options), op)
        else:
            _, prefix, suffix, depth, limit, offset = op
            options = {
                "prefix": prefix,
                "suffix": suffix,
                "max_depth": depth,
                "limit": limit,
                "offset": offset,
            }
            # LangGraph's store lists every namespace it was ever asked about (a get or a
            # delete makes an empty one); a database store, and ours, those of items held.
            for empty in [namespace for namespace, held in oracle._data.items() if not held]:
                del oracle._data[empty]
            assert ours.list_namespaces(**options) == oracle.list_namespaces(**options)

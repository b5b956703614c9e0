"""LexicalIndex: BM25 over items, with session neighbours lending their terms."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import ContextItem
from agent_engine.retrieval import LexicalIndex
from agent_engine.retrieval import bm25 as bm25_module
from agent_engine.retrieval._ranking import TermWeights

T0 = datetime(2024, 1, 1, tzinfo=UTC)
K1, B = 1.2, 0.75


def item(item_id, text, *, session="", minute=0, source=""):
    return ContextItem(
        id=item_id,
        kind="turn",
        text=text,
        session=session,
        source=source,
        timestamp=T0 + timedelta(minutes=minute),
    )


def bm25(query_terms, docs):
    """Okapi BM25 over documents given as {id: {term: (fractional) count}}."""
    lengths = {doc_id: sum(terms.values()) for doc_id, terms in docs.items()}
    average = sum(lengths.values()) / len(docs)
    scores = {}
    for doc_id, terms in docs.items():
        score = 0.0
        for term in query_terms:
            tf = terms.get(term, 0.0)
            if not tf:
                continue
            df = sum(1 for other in docs.values() if other.get(term))
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            norm = K1 * (1 - B + B * lengths[doc_id] / average)
            score += idf * tf * (K1 + 1) / (tf + norm)
        if score:
            scores[doc_id] = score
    return scores


@pytest.fixture
def corpus():
    """d1 and d2 are consecutive turns of one session; d3 stands alone."""
    return [
        item("d1", "apple banana", session="s", minute=1),
        item("d2", "banana cherry cherry", session="s", minute=2),
        item("d3", "durian", minute=3),
    ]


class TestScores:
    def test_matches_hand_computed_bm25_with_neighbour_terms(self, corpus):
        """Each document holds its terms plus 0.4 x its session neighbours' terms."""
        index = LexicalIndex()
        index.upsert(corpus)
        documents = {
            "d1": {"apple": 1.0, "banana": 1.0 + 0.4, "cherry": 0.4 * 2},
            "d2": {"banana": 1.0 + 0.4, "cherry": 2.0, "apple": 0.4},
            "d3": {"durian": 1.0},
        }
        for query in (["apple"], ["cherry"], ["apple", "cherry"], ["banana", "durian"]):
            expected = bm25(query, documents)
            assert index.scores(" ".join(query)) == pytest.approx(expected), query

    def test_plain_bm25_without_neighbour_weight(self, corpus):
        """neighbour_weight=0 gives textbook BM25 over each item's own terms."""
        index = LexicalIndex(neighbour_weight=0)
        index.upsert(corpus)
        documents = {
            "d1": {"apple": 1.0, "banana": 1.0},
            "d2": {"banana": 1.0, "cherry": 2.0},
            "d3": {"durian": 1.0},
        }
        assert index.scores("apple cherry") == pytest.approx(bm25(["apple", "cherry"], documents))
        assert "d2" not in index.scores("apple")

    def test_query_terms_count_once_and_are_analyzed(self, corpus):
        """A repeated query term counts once; the query is stemmed like the documents."""
        index = LexicalIndex()
        index.upsert(corpus)
        assert index.scores("cherry cherry Cherries") == index.scores("cherry")

    def test_no_shared_term_no_score(self, corpus):
        """Items sharing no term with the query are absent; an empty query scores nothing."""
        index = LexicalIndex()
        index.upsert(corpus)
        assert set(index.scores("durian")) == {"d3"}
        assert index.scores("the and of") == {}
        assert index.scores("") == {}

    def test_search_ranks_best_first(self, corpus):
        """search() returns the k best (id, score) pairs, best first."""
        index = LexicalIndex()
        index.upsert(corpus)
        hits = index.search("cherry", k=1)
        assert [item_id for item_id, _ in hits] == ["d2"]
        assert hits[0][1] == index.scores("cherry")["d2"]


class TestMaintenance:
    def test_upsert_replaces(self, corpus):
        """Upserting an id again replaces its terms (and the statistics follow)."""
        index = LexicalIndex()
        index.upsert(corpus)
        index.upsert([item("d3", "apple apple", minute=3)])
        assert len(index) == 3
        assert "d3" in index.scores("apple")
        assert index.scores("durian") == {}

    def test_remove(self, corpus):
        """Removed items stop matching and stop lending terms; unknown ids are ignored."""
        index = LexicalIndex()
        index.upsert(corpus)
        index.remove(["d1", "unknown"])
        assert len(index) == 2
        assert "d1" not in index
        assert index.scores("apple") == {}
        assert index.neighbours("d2", 2) == []

    def test_sources(self):
        """sources() lists the distinct non-empty sources."""
        index = LexicalIndex()
        index.upsert(
            [
                item("a", "x", source="Caroline"),
                item("b", "y", source="Melanie"),
                item("c", "z", source="Caroline"),
                item("d", "w"),
            ]
        )
        assert index.sources() == {"Caroline", "Melanie"}
        index.remove(["b"])
        index.upsert([item("e", "v", source="Jon"), item("a", "x", source="Gina")])
        assert index.sources() == {"Caroline", "Gina", "Jon"}  # follows every write


class TestNeighbours:
    @pytest.fixture
    def index(self):
        index = LexicalIndex()
        index.upsert(
            [item(f"a{n}", f"turn {n}", session="A", minute=n) for n in (3, 0, 4, 1, 2)]
            + [item(f"b{n}", f"other {n}", session="B", minute=n) for n in range(3)]
            + [item("solo", "no session")]
        )
        return index

    def test_within_radius_in_time_order(self, index):
        """Neighbours are the items within ``radius`` places in the same session, with offsets."""
        assert index.neighbours("a2", 1) == [("a1", -1), ("a3", 1)]
        assert index.neighbours("a2", 2) == [("a0", -2), ("a1", -1), ("a3", 1), ("a4", 2)]

    def test_session_edges(self, index):
        """At a session's ends the window is cut off, never filled from another session."""
        assert index.neighbours("a0", 2) == [("a1", 1), ("a2", 2)]
        assert index.neighbours("b2", 5) == [("b0", -2), ("b1", -1)]

    def test_no_session_no_neighbours(self, index):
        """Items without a session, and unknown ids, have no neighbours."""
        assert index.neighbours("solo", 3) == []
        assert index.neighbours("missing", 3) == []

    def test_neighbourhoods_in_one_call(self, index):
        """Many items at once: the same windows, and items without any are left out."""
        found = index.neighbourhoods(["a0", "solo", "b1", "missing", "a0"], 1)
        assert found == {"a0": [("a1", 1)], "b1": [("b0", -1), ("b2", 1)]}

    @given(
        st.lists(
            st.tuples(st.sampled_from(["", "s1", "s2", "s3"]), st.integers(0, 30)),
            min_size=1,
            max_size=25,
        ),
        st.data(),
        st.integers(0, 4),
    )
    @settings(max_examples=150, deadline=None)
    def test_links_are_the_neighbourhoods_inside_the_pool(self, placed, data, radius):
        """``links`` (a pool's neighbour pairs) is ``neighbourhoods`` cut down to the pool."""
        index = LexicalIndex()
        index.upsert(
            item(f"i{n}", "word", session=session, minute=minute)
            for n, (session, minute) in enumerate(placed)
        )
        ids = [f"i{n}" for n in range(len(placed))]
        pool = data.draw(st.lists(st.sampled_from([*ids, "missing"]), unique=True))
        expected = {}
        for item_id, near in index.neighbourhoods(pool, radius).items():
            inside = [(other, offset) for other, offset in near if other in pool]
            if inside:
                expected[item_id] = inside
        assert index.links(pool, radius) == expected

    @given(
        st.lists(
            st.tuples(
                st.integers(0, 11),
                st.one_of(
                    st.none(), st.tuples(st.sampled_from(["", "s1", "s2"]), st.integers(0, 9))
                ),
            ),
            min_size=1,
            max_size=40,
        ),
        st.integers(1, 3),
        st.integers(1, 6),
    )
    @settings(max_examples=150, deadline=None)
    def test_links_follow_every_write(self, writes, radius, every):
        """After moves, removals and re-inserts, ``links`` still pairs by current places.

        A write before an item shifts the places of those after it without touching their
        rows; the reference here is recomputed from the final items alone.
        """
        index = LexicalIndex()
        final: dict[str, ContextItem] = {}
        for n, (key, placement) in enumerate(writes):
            item_id = f"i{key}"
            if placement is None:
                index.remove([item_id])
                final.pop(item_id, None)
            else:
                session, minute = placement
                final[item_id] = item(item_id, "word", session=session, minute=minute)
                index.upsert([final[item_id]])
            if n % every == 0:  # queries between writes refresh the rows part-way
                index.links([f"i{k}" for k in range(12)], radius)
        sessions: dict[str, list[ContextItem]] = {}
        for kept in final.values():
            if kept.session:
                sessions.setdefault(kept.session, []).append(kept)
        expected: dict[str, list[tuple[str, int]]] = {}
        for members in sessions.values():
            members.sort(key=lambda m: (m.timestamp, m.id))
            for at, member in enumerate(members):
                near = [
                    (other.id, place - at)
                    for place, other in enumerate(members)
                    if place != at and abs(place - at) <= radius
                ]
                if near:
                    expected[member.id] = near
        assert index.links([f"i{k}" for k in range(12)], radius) == expected

    def test_links_survive_compaction(self):
        """A compaction rebuilds every row, places too, even of sessions no write touched."""
        index = LexicalIndex()
        index.upsert(item(f"i{n}", "word", session=f"s{n % 7}", minute=n) for n in range(200))
        pool = [f"i{n}" for n in range(0, 200, 2)]
        before = index.links(pool, 2)
        # Writing more session-less items than are live rebuilds every row: a compaction.
        index.upsert(item(f"solo{n}", "other") for n in range(1500))
        index.links(["i0"], 1)
        assert len(index._ids) == 1700  # compacted: one row per item
        expected = {}
        for item_id, near in index.neighbourhoods(pool, 2).items():
            inside = [(other, offset) for other, offset in near if other in pool]
            if inside:
                expected[item_id] = inside
        assert expected
        assert index.links(pool, 2) == expected == before

    def test_terms_are_lent_only_by_adjacent_turns(self):
        """A term reaches the turns just before and after it, not those two places away."""
        index = LexicalIndex()
        index.upsert(
            [
                item("t0", "zebra", session="S", minute=0),
                item("t1", "lion", session="S", minute=1),
                item("t2", "tiger", session="S", minute=2),
                item("t3", "hyena", session="S", minute=3),
            ]
        )
        assert set(index.scores("tiger")) == {"t1", "t2", "t3"}
        assert set(index.scores("zebra")) == {"t0", "t1"}


class TestHits:
    """The array-backed result a build ranks and looks pool scores up in."""

    @staticmethod
    def items():
        words = ["deploy", "retry", "cache", "deploy retry", "deploy cache", "retry cache"]
        # Repeated texts give exact score ties, which the id tie-break must order.
        return [item(f"i{n:02d}", words[n % len(words)]) for n in range(30)] + [
            item("other", "nothing in common")
        ]

    @pytest.fixture
    def index(self):
        index = LexicalIndex(neighbour_weight=0.0)
        index.upsert(self.items())
        return index

    @pytest.mark.parametrize("k", [1, 3, 5, 12, 29, 40])
    def test_best_is_the_sorted_prefix(self, index, k):
        scores = index.scores("deploy retry")
        expected = [i for i, _ in sorted(scores.items(), key=lambda p: (-p[1], p[0]))][:k]
        assert index.hits("deploy retry").best(k) == expected

    def test_lookup_and_size(self, index):
        hits = index.hits("deploy")
        assert len(hits) == 15
        assert hits.get("other") == 0.0
        assert hits.get("unknown id", -1.0) == -1.0
        assert hits.get("i00") == pytest.approx(index.scores("deploy")["i00"])

    def test_scores_of_many_equal_one_by_one(self, index):
        """``of`` reads a pool's scores at once: the same values ``get`` gives, 0 if unknown."""
        hits = index.hits("deploy retry")
        ids = ["i03", "other", "unknown id", "i00", "i05"]
        assert hits.of(ids) == {i: hits.get(i) for i in ids}
        index.upsert([item("i03", "deploy deploy retry")])
        index.hits("zebra")  # re-indexed: i03 now lives on a row this query never scored
        assert hits.of(["i03"]) == {"i03": 0.0} == {"i03": hits.get("i03")}

    def test_queries_in_turn_score_as_each_alone(self, index):
        """The index sums every query in one kept array: nothing carries over between queries."""
        first = index.hits("deploy")
        kept = first.as_dict()
        for query in ["retry cache", "deploy", "zebra", "cache deploy retry"]:
            alone = LexicalIndex(neighbour_weight=0.0)
            alone.upsert(self.items())
            assert_same_scores(index.hits(query).as_dict(), alone.scores(query))
        assert first.as_dict() == kept  # hits already taken are not touched by later queries

    def test_no_shared_term_is_empty(self, index):
        hits = index.hits("zebra")
        assert not hits
        assert hits.best(5) == []
        assert index.search("zebra", 5) == []


class TestRankingDepth:
    """A query ranks only as deep as asked; the answers are those of a full ranking.

    Past a few thousand items the best ``k`` come from the rows at or above the ``k``-th
    best score of a sample, and common words add as one array over every row: both must
    give exactly what summing every posting and sorting every match gives, ties included.
    """

    VOCABULARY = ("deploy", "retry", "cache", "flaky", "queue", "schema", "token", "lint")

    @pytest.fixture(scope="class")
    @classmethod
    def index(cls):
        rng = random.Random(3)
        index = LexicalIndex()
        words = cls.VOCABULARY
        texts = [
            " ".join(rng.choices(words, weights=range(8, 0, -1), k=rng.randint(1, 9)))
            for _ in range(400)
        ]
        # Texts repeat, so many items tie and the id tie-break decides the last places.
        index.upsert(
            item(f"i{n:05d}", rng.choice(texts), session=f"s{n // 20}", minute=n % 20)
            for n in range(4000)
        )
        return index

    @staticmethod
    def full_ranking(hits):
        return [i for i, _ in sorted(hits.as_dict().items(), key=lambda p: (-p[1], p[0]))]

    @settings(max_examples=40, deadline=None)
    @given(
        words=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4),
        depths=st.lists(st.integers(1, 300), min_size=1, max_size=3),
    )
    def test_best_at_any_depth_is_the_full_rankings_prefix(self, index, words, depths):
        query = " ".join(words)
        hits = index.hits(query)
        for k in depths:  # deeper and shallower again: each answer as if asked first
            assert hits.best(k) == self.full_ranking(index.hits(query))[:k]
        assert len(hits) == len(index.hits(query).as_dict())

    def test_a_store_of_equal_items_ranks_by_id(self):
        """Every item ties: the sampled floor is the best score itself, and must keep them all."""
        index = LexicalIndex(neighbour_weight=0.0)
        index.upsert(item(f"e{n:04d}", "deploy retry") for n in range(3000, 0, -1))
        hits = index.hits("deploy")
        assert hits.best(10) == [f"e{n:04d}" for n in range(1, 11)]

    def test_scores_of_a_pool_are_those_the_ranking_used(self, index):
        hits = index.hits("flaky queue token")
        best = hits.best(50)
        full = index.hits("flaky queue token").as_dict()
        pool = [*best, "i00000", "i03999", "not an id"]
        assert hits.of(pool) == {i: full.get(i, 0.0) for i in pool}
        assert [hits.get(i) for i in best] == [full[i] for i in best]

    def test_common_and_rare_words_keep_their_weights_alike(self, index):
        """A word held by most rows keeps its weights over every row, a rare one its posting."""
        everywhere = index.hits("deploy")  # the first, most frequent word
        weights = everywhere._weights[0]  # which form was chosen
        assert weights.dense is not None
        rows = np.arange(len(weights.dense))
        sparse = TermWeights(weights.rows, weights.values, None)
        assert np.array_equal(sparse.at(rows), weights.at(rows))
        assert np.array_equal(weights.dense[weights.rows], weights.values)

    def test_common_words_arrays_stay_within_their_budget(self, index, monkeypatch):
        """Past the budget the least recently used arrays go; answers do not change."""
        before = {word: index.hits(word).as_dict() for word in self.VOCABULARY}
        monkeypatch.setattr(bm25_module, "DENSE_CACHE_BYTES", 2 * 4000 * 8 + 1)
        index.upsert([item("extra", "deploy retry")])  # a write drops every cached weight
        for word in self.VOCABULARY:
            index.hits(word)
            assert index._dense_bytes <= bm25_module.DENSE_CACHE_BYTES
        held = [w for w in index._weights.values() if w.dense is not None]
        assert len(held) <= 2
        index.remove(["extra"])
        assert {word: index.hits(word).as_dict() for word in self.VOCABULARY} == before

    def test_a_match_count_is_taken_only_when_asked(self, index):
        hits = index.hits("lint")
        hits.best(10)
        assert hits  # truth is not a count either
        assert hits._count is None  # a build never pays for the count
        assert not index.hits("zzz-nothing")
        assert len(hits) == sum(1 for score in hits.as_dict().values() if score > 0)


WORDS = ["apple", "banana", "cherry", "durian", "elder", "fig", "grape"]


def fresh_scores(items, query):
    index = LexicalIndex()
    index.upsert(items.values())
    return index.scores(query)


def assert_same_scores(got, want):
    assert got.keys() == want.keys()
    for item_id, score in want.items():
        assert got[item_id] == pytest.approx(score, rel=1e-9)


def _put(*extra):
    """A write of item ``i<n>``: its words, session, minute (and ``extra`` fields)."""
    return st.tuples(
        st.just("put"),
        st.integers(0, 12),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        st.sampled_from(["", "s1", "s2"]),
        st.integers(0, 20),
        *extra,
    )


DELETE = st.tuples(st.just("del"), st.integers(0, 12))


class TestIncrementalWrites:
    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.one_of(
                _put(),
                DELETE,
                st.tuples(st.just("query"), st.sampled_from(WORDS)),
            ),
            max_size=40,
        )
    )
    def test_scores_and_neighbours_equal_an_index_built_from_scratch(self, ops):
        """Any mix of adds, replacements (moves between sessions too) and deletes, queried in
        between, leaves the same scores and neighbours as indexing the final items at once."""
        index = LexicalIndex()
        current = {}
        for op in ops:
            if op[0] == "put":
                _, n, words, session, minute = op
                current[f"i{n}"] = item(f"i{n}", " ".join(words), session=session, minute=minute)
                index.upsert([current[f"i{n}"]])
            elif op[0] == "del":
                current.pop(f"i{op[1]}", None)
                index.remove([f"i{op[1]}"])
            else:
                assert_same_scores(index.scores(op[1]), fresh_scores(current, op[1]))
        rebuilt = LexicalIndex()
        rebuilt.upsert(current.values())
        for word in WORDS:
            assert_same_scores(index.scores(word), rebuilt.scores(word))
        assert index.neighbourhoods(current, 2) == rebuilt.neighbourhoods(current, 2)
        assert len(index) == len(current)

    def test_deleting_a_middle_turn_joins_its_neighbours(self):
        """Once b goes, a and c stop carrying b's terms and start lending each other theirs."""
        index = LexicalIndex()
        a, b, c = (
            item("a", "apple", session="s", minute=1),
            item("b", "banana", session="s", minute=2),
            item("c", "cherry", session="s", minute=3),
        )
        index.upsert([a, b, c])
        assert set(index.scores("banana")) == {"a", "b", "c"}
        assert set(index.scores("cherry")) == {"b", "c"}
        index.remove(["b"])
        assert index.scores("banana") == {}
        assert set(index.scores("cherry")) == {"a", "c"}
        assert_same_scores(
            index.scores("apple cherry"), fresh_scores({"a": a, "c": c}, "apple cherry")
        )

    def test_moving_a_turn_out_of_a_session_joins_its_neighbours(self):
        index = LexicalIndex()
        index.upsert(
            [
                item("a", "apple", session="s", minute=1),
                item("b", "banana", session="s", minute=2),
                item("c", "cherry", session="s", minute=3),
            ]
        )
        index.scores("apple")  # rows built before the move
        index.upsert([item("b", "banana", session="t", minute=2)])
        assert set(index.scores("banana")) == {"b"}
        assert set(index.scores("cherry")) == {"a", "c"}

    def test_hits_taken_before_a_write_stay_readable(self):
        """A build in one thread may read its hits while another thread stores a memory."""
        index = LexicalIndex()
        index.upsert([item("a", "apple", session="s", minute=1), item("b", "banana", minute=2)])
        hits = index.hits("apple")
        score = hits.get("a")
        index.upsert(
            [item("a", "apple apple", session="s", minute=1), item("c", "apple", minute=3)]
        )
        index.scores("apple")  # the write reaches the rows
        assert score > 0
        assert hits.best(5) == ["a"]
        assert hits.get("c") == 0.0
        assert hits.get("a") in (0.0, score)

    def test_retired_rows_are_compacted(self):
        """Rewriting the same items many times keeps the index near their number of rows."""
        index = LexicalIndex()
        items = {
            f"i{n}": item(f"i{n}", f"apple {WORDS[n % 7]}", session="s", minute=n)
            for n in range(50)
        }
        index.upsert(items.values())
        for round_ in range(60):
            for n in range(0, 50, 2):
                items[f"i{n}"] = item(f"i{n}", f"{WORDS[round_ % 7]} apple", session="s", minute=n)
                index.upsert([items[f"i{n}"]])
            assert_same_scores(index.scores("apple fig"), fresh_scores(items, "apple fig"))
        assert len(index._ids) <= 2 * 1024 + 100  # retired rows were dropped along the way


class TestSnapshots:
    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.one_of(
                _put(st.sampled_from(["", "chat", "tool"])),
                DELETE,
                st.tuples(st.just("restore")),
            ),
            max_size=40,
        )
    )
    def test_a_restored_snapshot_goes_on_as_the_index_would(self, ops):
        """Restoring a snapshot at any point (then writing on) changes no answer: scores,
        neighbours, links, sources and size equal those of the final items indexed at once."""
        index = LexicalIndex()
        current = {}
        for op in ops:
            if op[0] == "put":
                _, n, words, session, minute, source = op
                current[f"i{n}"] = item(
                    f"i{n}", " ".join(words), session=session, minute=minute, source=source
                )
                index.upsert([current[f"i{n}"]])
            elif op[0] == "del":
                current.pop(f"i{op[1]}", None)
                index.remove([f"i{op[1]}"])
            else:
                index = LexicalIndex.restore(index.snapshot())
        rebuilt = LexicalIndex()
        rebuilt.upsert(current.values())
        for word in WORDS:
            assert_same_scores(index.scores(word), rebuilt.scores(word))
        assert index.neighbourhoods(current, 2) == rebuilt.neighbourhoods(current, 2)
        assert index.links(current, 2) == rebuilt.links(current, 2)
        assert index.sources() == rebuilt.sources()
        assert len(index) == len(current)

    def test_a_term_only_removed_items_held_leaves_the_next_snapshot(self):
        """Restore, remove every item holding a term, snapshot again: the others, never read
        since the restore, keep their terms."""
        index = LexicalIndex()
        index.upsert([item("a", "apple"), item("b", "banana cherry"), item("c", "cherry")])
        index = LexicalIndex.restore(index.snapshot())
        index.remove(["a"])
        again = LexicalIndex.restore(index.snapshot())
        assert again.scores("apple") == {}
        assert_same_scores(again.scores("banana cherry"), index.scores("banana cherry"))
        again.upsert([item("b", "banana")])  # reads b's terms from the arrays
        assert set(again.scores("cherry")) == {"c"}

    def test_restoring_keeps_the_okapi_parameters(self):
        index = LexicalIndex(k1=0.9, b=0.4, neighbour_weight=0.0)
        index.upsert([item("a", "apple fig", session="s"), item("b", "apple", session="s")])
        restored = LexicalIndex.restore(index.snapshot())
        assert (restored.k1, restored.b, restored.neighbour_weight) == (0.9, 0.4, 0.0)
        assert_same_scores(restored.scores("apple"), index.scores("apple"))

    def test_a_snapshot_of_another_format_is_refused(self):
        snapshot = LexicalIndex().snapshot()
        snapshot["format"] = snapshot["format"] + 1
        with pytest.raises(ValueError, match="format"):
            LexicalIndex.restore(snapshot)

    def test_a_snapshot_whose_arrays_disagree_is_refused(self):
        index = LexicalIndex()
        index.upsert([item("a", "apple"), item("b", "banana")])
        snapshot = index.snapshot()
        snapshot["lengths"] = snapshot["lengths"][:1]
        with pytest.raises(ValueError, match="length"):
            LexicalIndex.restore(snapshot)

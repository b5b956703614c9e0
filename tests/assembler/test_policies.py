"""Scoring policies: each named policy ranks a small crafted pool as it promises."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import (
    DEFAULT_POLICIES,
    AssemblerConfig,
    ContextAssembler,
    ContextItem,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    Policy,
    Task,
    Tier,
)
from agent_engine.assembler import Candidates, HybridScorer, RandomScorer, RRFScorer
from agent_engine.assembler.candidates import GatherLimits, strip_names
from agent_engine.assembler.policies import adjacent_coherence, lexical_coverage, median_words
from agent_engine.errors import ValidationError
from agent_engine.retrieval.names import named

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


@pytest.fixture
def assembler(backend):
    """A frozen-clock, read-only assembler; the pools live in project memory."""
    return ContextAssembler(
        backend, clock=lambda: NOW, config=AssemblerConfig(head=0, tail=0, track_access=False)
    )


@pytest.fixture
def project(assembler):
    return assembler.project_store("p")


def scores(assembler, policy, query="", budget=5000):
    """Every selected item's text and score under ``policy``, best first."""
    request = ContextRequest(budget_tokens=budget, query=query, policy=policy)
    package = assembler.build_context(TASK, request)
    assert package.policy == policy
    ranked = sorted(package.selections, key=lambda s: -s.score)
    return {s.item.text: s.score for s in ranked}


def ranking(assembler, policy, query=""):
    return list(scores(assembler, policy, query))


def crafted(items, query="q", **signals):
    """Candidates over items given as ``(id, item fields)``, with the given signals.

    An item's text is its id unless its fields say otherwise.
    """
    pool = {
        item_id: ContextItem(id=item_id, kind="turn", timestamp=NOW, **{"text": item_id, **fields})
        for item_id, fields in items
    }
    return Candidates(tier=Tier.PROJECT, query=query, items=pool, now=NOW, **signals)


class TestImportance:
    def test_ranks_by_importance(self, assembler, project):
        """The seed's policy: most important first, the score is the importance."""
        for text, importance in [("low", 0.2), ("high", 0.9), ("mid", 0.5)]:
            project.add_pattern(text, importance=importance)
        assert scores(assembler, "importance") == {"high": 0.9, "mid": 0.5, "low": 0.2}

    def test_ties_go_to_the_older_item(self, assembler, project):
        """Of two equally important items only one fits: the older one is chosen."""
        older = project.add(project.new_item("note", "first", timestamp=NOW - timedelta(days=2)))
        project.add(project.new_item("note", "second", timestamp=NOW - timedelta(days=1)))
        roomy = assembler.build_context(
            TASK, ContextRequest(budget_tokens=5000, policy="importance")
        )
        budget = max(s.tokens for s in roomy.selections)
        package = assembler.build_context(
            TASK, ContextRequest(budget_tokens=budget, policy="importance")
        )
        assert [s.item.id for s in package.selections] == [older.id]


class TestRecency:
    def test_halves_every_week(self, assembler, project):
        """A new item scores 1, a week-old one 0.5, a fortnight-old one 0.25."""
        for text, age in [("fortnight", 14), ("today", 0), ("week", 7)]:
            project.add(project.new_item("note", text, timestamp=NOW - timedelta(days=age)))
        assert scores(assembler, "recency") == pytest.approx(
            {"today": 1.0, "week": 0.5, "fortnight": 0.25}
        )
        assert ranking(assembler, "recency") == ["today", "week", "fortnight"]


class TestSemantic:
    def test_ranks_by_similarity_to_the_query(self, assembler, project):
        """Items worded like the query outrank unrelated ones; the score is the cosine."""
        project.add_pattern("painting a sunset over the lake")
        project.add_pattern("the database migration failed on deploy")
        project.add_pattern("database migration rollback steps")
        ranked = scores(assembler, "semantic", "database migration failed")
        first, *_, last = ranked
        assert first == "the database migration failed on deploy"
        assert last == "painting a sunset over the lake"
        assert all(-1.0 <= score <= 1.0 for score in ranked.values())


class TestLexical:
    def test_ranks_by_bm25(self, assembler, project):
        """More query terms, rarer terms: higher BM25; items without any are not candidates."""
        project.add_pattern("Flaky login test after the cache change")
        project.add_pattern("Login page redesign")
        project.add_pattern("Coffee machine is broken")
        request = ContextRequest(budget_tokens=5000, query="flaky login", policy="lexical")
        package = assembler.build_context(TASK, request)
        assert ranking(assembler, "lexical", "flaky login") == [
            "Flaky login test after the cache change",
            "Login page redesign",
        ]
        assert package.usage_of(Tier.PROJECT).candidates == 2
        assert package.omissions == ()


class TestFrequency:
    def test_ranks_by_past_use(self, assembler, project):
        """Items used in more past contexts rank higher (log-damped access count)."""
        for text, count in [("rare", 0), ("popular", 10), ("sometimes", 3)]:
            project.add(project.new_item("note", text, access_count=count))
        assert scores(assembler, "frequency") == pytest.approx(
            {"popular": math.log1p(10), "sometimes": math.log1p(3), "rare": 0.0}
        )


class TestRRF:
    def test_fuses_ranks_not_scores(self):
        """Each ranking adds 1/(60 + rank); being found by both signals beats one top rank."""
        candidates = crafted(
            [("both", {}), ("dense_top", {}), ("lexical_top", {}), ("neither", {})],
            dense={"dense_top": 0.9, "both": 0.5, "lexical_top": 0.1},
            lexical={"lexical_top": 7.0, "both": 3.0, "neither": 0.0},
        )
        fused = RRFScorer()(candidates)
        assert fused["both"] == pytest.approx(1 / 62 + 1 / 62)
        assert fused["dense_top"] == pytest.approx(1 / 61)
        assert fused["lexical_top"] == pytest.approx(1 / 61 + 1 / 63)
        assert fused["neither"] == 0.0

    def test_named_policy(self, assembler, project):
        """Through the assembler, an item matching both ways comes first."""
        project.add_pattern("deploy pipeline failed at the migration step")
        project.add_pattern("deploy on Fridays is forbidden")
        project.add_pattern("lunch menu for Friday")
        assert ranking(assembler, "rrf", "migration failed")[0] == (
            "deploy pipeline failed at the migration step"
        )


class TestRandom:
    def test_deterministic_per_query(self, backend, project):
        """The same query gives the same order in any assembler; another query, another one."""
        for n in range(20):
            project.add_pattern(f"fact number {n}")
        config = AssemblerConfig(track_access=False)
        first = ContextAssembler(backend, clock=lambda: NOW, config=config)
        second = ContextAssembler(backend, clock=lambda: NOW + timedelta(days=3), config=config)
        assert scores(first, "random", "a") == scores(second, "random", "a")
        assert ranking(first, "random", "a") != ranking(first, "random", "b")

    def test_seed_changes_the_order(self):
        """Another seed gives another order."""
        candidates = crafted([(f"i{n}", {}) for n in range(20)])
        by_seed = [RandomScorer(seed)(candidates) for seed in (0, 1)]
        orders = [sorted(s, key=s.__getitem__) for s in by_seed]
        assert orders[0] != orders[1]
        assert all(0.0 <= v < 1.0 for s in by_seed for v in s.values())


class TestHybrid:
    scorer = DEFAULT_POLICIES["hybrid"].scorer

    def test_is_the_default(self, assembler, project):
        """A request that names no policy is ranked by hybrid."""
        project.add_pattern("anything")
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=100))
        assert package.policy == "hybrid"

    def test_dense_weighs_more_than_lexical(self):
        """Min-max fused: the best dense match (0.6) beats the best lexical match (0.4)."""
        candidates = crafted(
            [("dense", {}), ("lexical", {}), ("none", {})],
            dense={"dense": 0.8, "lexical": 0.1, "none": 0.1},
            lexical={"lexical": 4.0, "dense": 0.0, "none": 0.0},
        )
        fused = HybridScorer(importance_weight=0, lexical_confidence=False)(candidates)
        assert fused == pytest.approx({"dense": 0.6, "lexical": 0.4, "none": 0.0})

    def test_lexical_weight_follows_how_much_of_the_query_its_best_matches_hold(self):
        """Fixed weights let an incidental word win; adapted, the paraphrase wins."""
        items = [
            ("incidental", {"text": "we talked about the weather"}),
            ("paraphrase", {"text": "a rough few days at the office"}),
            ("other", {"text": "lunch"}),
        ]
        query = "did she feel low about work and the weather lately"
        candidates = crafted(
            items,
            query=query,
            dense={"incidental": 0.5, "paraphrase": 0.6, "other": 0.0},
            lexical={"incidental": 3.0, "paraphrase": 0.0, "other": 0.0},
        )
        # One term of five (feel, low, work, weather, lately) is held: 0.4 becomes 0.08,
        # and half of the 0.32 not earned goes to the dense weight (0.6 + 0.16).
        assert lexical_coverage(candidates) == pytest.approx(1 / 5)
        adapted = HybridScorer(importance_weight=0, lexical_confidence=True)
        assert adapted._weights(candidates) == pytest.approx((0.08, 0.76))
        fixed = HybridScorer(importance_weight=0, lexical_confidence=False)
        assert max(fixed(candidates).items(), key=lambda kv: kv[1])[0] == "incidental"
        assert max(adapted(candidates).items(), key=lambda kv: kv[1])[0] == "paraphrase"

    def test_a_query_its_matches_hold_keeps_the_fixed_weights(self):
        candidates = crafted(
            [("hit", {"text": "deploy retries timeout"}), ("miss", {"text": "lunch"})],
            query="deploy retries timeout",
            dense={"hit": 0.5, "miss": 0.1},
            lexical={"hit": 2.0, "miss": 0.0},
        )
        assert lexical_coverage(candidates) == 1.0
        assert HybridScorer(lexical_confidence=True)._weights(candidates) == (0.4, 0.6)
        stopwords_only = attrs.evolve(candidates, query="what is it")
        assert lexical_coverage(stopwords_only) == 1.0

    def test_lexical_alone_without_an_embedder(self):
        """With no dense signal at all, BM25 carries the full weight."""
        candidates = crafted([("hit", {}), ("miss", {})], lexical={"hit": 2.0, "miss": 0.0})
        assert HybridScorer(importance_weight=0)(candidates) == {"hit": 1.0, "miss": 0.0}

    @staticmethod
    def session(words_each, quiet=6):
        """Turns of ``words_each`` words: a match, its neighbour, one too far, one alone, and
        ``quiet`` others, so the pool fills a smoothing window (nine items) by default."""
        turns = ("match", "next", "far", "alone", *(f"quiet{n}" for n in range(quiet)))
        return crafted(
            [(i, {"text": " ".join([i] * words_each)}) for i in turns],
            lexical=dict.fromkeys(turns, 0.0) | {"match": 3.0},
            neighbours={"next": [("match", -1), ("far", 2)], "far": [("match", -5)]},
        )

    def test_smoothing_lifts_the_turn_next_to_a_match(self):
        """A turn within four places of a match gains half its score; one further away does not."""
        smoothed = self.scorer(self.session(words_each=20))
        assert smoothed["next"] - smoothed["alone"] == pytest.approx(0.5)
        assert smoothed["far"] == pytest.approx(smoothed["alone"])
        assert smoothed["match"] > smoothed["next"] > smoothed["far"]

    @pytest.mark.parametrize(
        ("words_each", "weight"),
        [
            pytest.param(40, 0.5, id="long-turns"),
            pytest.param(15, 0.5, id="at-the-threshold"),
            pytest.param(10, 0.75, id="shorter"),
            pytest.param(3, 1.2, id="capped"),
            pytest.param(0, 1.2, id="empty-texts"),
        ],
    )
    def test_smoothing_grows_as_messages_shorten(self, words_each, weight):
        """Under 15 words per item the weight grows as 0.5 x 15 / median words, up to 1.2."""
        candidates = self.session(words_each)
        if words_each == 0:
            candidates = attrs.evolve(
                candidates,
                items={i: attrs.evolve(item, text="") for i, item in candidates.items.items()},
            )
        assert self.scorer.smoothing_weight(candidates) == pytest.approx(weight)
        smoothed = self.scorer(candidates)
        assert smoothed["next"] - smoothed["alone"] == pytest.approx(weight)

    def test_a_few_long_items_do_not_move_the_median(self):
        """The weight follows the median item, so one long item among short ones changes nothing."""
        candidates = self.session(words_each=5)
        long = attrs.evolve(candidates.items["alone"], text="word " * 500)
        mixed = attrs.evolve(candidates, items={**candidates.items, "alone": long})
        assert median_words(mixed) == 5
        assert self.scorer.smoothing_weight(mixed) == pytest.approx(1.2)

    def test_a_pool_smaller_than_one_window_keeps_the_weight(self):
        """Fewer than nine items (2 x radius + 1) say too little about a store's messages."""
        assert self.scorer.smoothing_weight(self.session(words_each=3, quiet=4)) == 0.5
        assert self.scorer.smoothing_weight(self.session(words_each=3, quiet=5)) == 1.2
        assert HybridScorer(radius=2).smoothing_weight(self.session(3, quiet=0)) == 0.5
        assert HybridScorer(radius=2).smoothing_weight(self.session(3, quiet=1)) == 1.2

    @staticmethod
    def chat(vectors):
        """Short messages of one session in a row with ``vectors``, linked as the gather links
        them (both ways, within four places), the first a lexical match."""
        ids = [f"m{n}" for n in range(len(vectors))]
        neighbours = {
            item_id: [
                (ids[other], other - at) for other in range(len(ids)) if 0 < abs(other - at) <= 4
            ]
            for at, item_id in enumerate(ids)
        }
        return crafted(
            [
                (i, {"text": "three short words", "embedding": v})
                for i, v in zip(ids, vectors, strict=True)
            ],
            neighbours=neighbours,
            lexical=dict.fromkeys(ids, 0.0) | {"m0": 3.0},
        )

    def test_adjacent_coherence_is_adjacent_pairs_against_any_two(self):
        """Adjacent pairs' mean cosine (1 and 0) less all pairs' (1, 0 and 0)."""
        three = self.chat([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
        assert adjacent_coherence(three) == pytest.approx(1 / 2 - 1 / 3)
        assert adjacent_coherence(self.session(words_each=3)) is None  # no vectors
        assert adjacent_coherence(self.chat([[1.0, 0.0]])) is None  # no pair

    def test_smoothing_grows_only_where_messages_continue_each_other(self):
        """Short messages grow the weight when each is closer to the next than to any other
        (one thought over several messages); unrelated ones, as alike as any two, do not."""
        drifting = [[math.cos(step * 0.3), math.sin(step * 0.3)] for step in range(9)]
        unrelated = [[1.0 if axis == at else 0.0 for axis in range(9)] for at in range(9)]
        assert adjacent_coherence(self.chat(drifting)) > 0
        assert adjacent_coherence(self.chat(unrelated)) == pytest.approx(0)
        assert self.scorer.smoothing_weight(self.chat(drifting)) == pytest.approx(1.2)
        assert self.scorer.smoothing_weight(self.chat(unrelated)) == 0.5
        smoothed = self.scorer(self.chat(unrelated))
        assert smoothed["m1"] - smoothed["m5"] == pytest.approx(0.5)

    def test_fixed_smoothing_when_asked(self):
        """``smoothing_words=None`` keeps the weight, a weight over the cap is not lowered."""
        short = self.session(words_each=2)
        assert HybridScorer(smoothing_words=None).smoothing_weight(short) == 0.5
        assert HybridScorer(smoothing=1.5).smoothing_weight(short) == 1.5
        assert HybridScorer(smoothing=0.0).smoothing_weight(short) == 0.0

    @pytest.mark.parametrize(
        ("setting", "value"),
        [
            ("smoothing_words", 0),
            ("smoothing_words", -3.0),
            ("smoothing_words", "15"),
            ("max_smoothing", -0.1),
            ("max_smoothing", float("nan")),
        ],
    )
    def test_bad_smoothing_settings_are_refused(self, setting, value):
        with pytest.raises(ValidationError, match=setting):
            HybridScorer(**{setting: value})

    @pytest.mark.parametrize(
        ("named", "boosted"),
        [
            pytest.param({"Melanie"}, True, id="one-source"),
            pytest.param({"Melanie", "Caroline"}, False, id="two-sources"),
            pytest.param(set(), False, id="no-source"),
        ],
    )
    def test_source_boost_only_when_one_source_is_named(self, named, boosted):
        """Items of the one source a query names gain 0.3; naming two (or none) boosts nobody."""
        candidates = crafted(
            [("m", {"source": "Melanie"}), ("c", {"source": "Caroline"})],
            named_sources=frozenset(named),
        )
        scored = HybridScorer(importance_weight=0)(candidates)
        assert scored["m"] - scored["c"] == pytest.approx(0.3 if boosted else 0.0)

    def test_importance_breaks_ties(self):
        """Between equally relevant items the more important one ranks first."""
        candidates = crafted(
            [("key", {"importance": 0.9}), ("minor", {"importance": 0.1})],
            lexical={"key": 1.0, "minor": 1.0},
        )
        scored = self.scorer(candidates)
        assert scored["key"] - scored["minor"] == pytest.approx(0.1 * 0.8)

    def test_known_sources_are_found_and_stripped_from_the_dense_query(self):
        """Named speakers are detected as words and removed (with 's) before dense matching."""
        query = "What did Melanie's sister paint after Caroline left?"
        names = named(query, {"Melanie", "Caroline", "Mel", "42"})
        assert names == {"Melanie", "Caroline"}
        assert strip_names(query, names) == "What did sister paint after left?"

    @pytest.mark.parametrize(
        ("speakers", "query"),
        [
            pytest.param(("Melanie", "Caroline"), "Where did Melanie go hiking?", id="as-labelled"),
            pytest.param(("Mel", "Caro"), "Where did Melanie go hiking?", id="labelled-short"),
            pytest.param(("Melanie", "Caroline"), "Where did Mel go hiking?", id="asked-short"),
            pytest.param(("Melanie Ellis", "Caroline"), "Where did Melanie go?", id="full-name"),
        ],
    )
    def test_named_speaker_boost_through_the_assembler(self, assembler, project, speakers, query):
        """Asking about one speaker ranks that speaker's turn above an equal one by another,
        however the question writes the speaker's name."""
        for speaker in reversed(speakers):  # the one asked about last: no tie goes its way
            project.add(
                project.new_item(
                    "turn", f"{speaker}: I went hiking last weekend", source=speaker, session="s"
                )
            )
        top = ranking(assembler, "hybrid", query)[0]
        assert top.startswith(f"{speakers[0]}:")

    @given(st.data())
    @settings(max_examples=200, deadline=None)
    def test_scores_follow_the_documented_formula(self, data):
        """Fusion, smoothing, the source boost and the priors, checked item by item."""
        n = data.draw(st.integers(1, 12))
        ids = [f"i{k}" for k in range(n)]
        score = st.floats(-2, 5, allow_nan=False)
        lexical = data.draw(st.dictionaries(st.sampled_from(ids), score))
        dense = data.draw(st.dictionaries(st.sampled_from(ids), score))
        neighbours = data.draw(
            st.dictionaries(
                st.sampled_from(ids),
                st.lists(st.tuples(st.sampled_from([*ids, "gone"]), st.integers(-6, 6))),
            )
        )
        sources = data.draw(st.lists(st.sampled_from(["A", "B", ""]), min_size=n, max_size=n))
        named = frozenset(data.draw(st.sets(st.sampled_from(["A", "B"]))))
        importance = data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
        vocabulary = ["deploy", "retry", "timeout", "cache"]
        words = st.lists(st.sampled_from(vocabulary), min_size=1, max_size=3)
        texts = [
            " ".join(data.draw(st.lists(st.sampled_from(vocabulary), max_size=30))) for _ in ids
        ]
        query = " ".join(data.draw(words))
        candidates = crafted(
            [
                (i, {"source": src, "importance": imp, "text": text})
                for i, src, imp, text in zip(ids, sources, importance, texts, strict=True)
            ],
            query=query,
            lexical=lexical,
            dense=dense,
            neighbours=neighbours,
            named_sources=named,
        )
        scorer = HybridScorer(recency_weight=0.05, frequency_weight=0.02, lexical_confidence=True)

        def normalized(signal):
            if not signal:
                return dict.fromkeys(ids, 0.0)
            low, high = min(signal.values()), max(signal.values())
            values = {i: signal.get(i, low) for i in ids}
            return {i: (v - low) / (high - low) if high > low else 0.0 for i, v in values.items()}

        # The lexical weight: 0.4 times the share of the query's words held by the best of
        # the three best lexical matches (scores above 0); half of the rest goes to dense.
        asked = set(query.split())
        best = sorted(lexical.items(), key=lambda hit: -hit[1])[:3]
        held = [
            len(asked & set(texts[ids.index(i)].split())) / len(asked) for i, v in best if v > 0
        ]
        coverage = max(held, default=0.0)
        weights = (0.4 * coverage, 0.6 + 0.5 * (0.4 - 0.4 * coverage)) if lexical else (0.4, 0.6)
        weights = weights if dense else (1.0, 0.0)
        base = {
            i: weights[0] * normalized(lexical)[i] + weights[1] * normalized(dense)[i] for i in ids
        }
        recency = scorer.recency(candidates)
        # The smoothing weight: 0.5, grown as 0.5 x 15 / median words under 15, up to 1.2,
        # once the pool fills a window of nine items.
        median = max(statistics.median(len(t.split()) for t in texts), 1)
        smoothing = min(0.5 * max(1.0, 15 / median), 1.2) if n > 8 else 0.5
        expected = {}
        for i, src, imp in zip(ids, sources, importance, strict=True):
            near = [max(base.get(o, 0.0), 0.0) for o, off in neighbours.get(i, ()) if abs(off) <= 4]
            expected[i] = (
                base[i]
                + (smoothing * max(near) if near else 0.0)
                + (0.3 if len(named) == 1 and src in named else 0.0)
                + 0.1 * imp
                + 0.05 * recency[i]
            )  # frequency: no item was accessed, log1p(0) = 0
        assert scorer(candidates) == pytest.approx(expected, abs=1e-9)

    def test_tiers_sharing_an_embedder_embed_the_query_once(self):
        """A model embedding costs as much as the rest of a build: once per build, not per tier."""
        embedder = CountingEmbedder()
        assembler = ContextAssembler(
            MemoryStores(
                InMemoryBackend(embedder=embedder), clock=lambda: NOW, confirm=lambda _request: True
            ),
            config=AssemblerConfig(track_access=False),
        )
        task = Task(id="t", project_id="p", user_id="u", description="ship the release")
        assembler.task_store(task).add_reasoning("checked the release notes", "plan")
        assembler.project_store("p").add(
            assembler.project_store("p").new_item("note", "release on Fridays")
        )
        assembler.global_store("u").add(
            assembler.global_store("u").new_item("preference", "short release notes")
        )
        embedder.texts.clear()
        package = assembler.build_context(
            task, ContextRequest(budget_tokens=500, query="when do we release?")
        )
        # Every tier searched (the task runs in no session).
        assert {s.tier for s in package.selections} == {Tier.TASK, Tier.PROJECT, Tier.GLOBAL}
        assert embedder.texts == ["when do we release?"]

    def test_embedders_of_one_identity_embed_the_query_once(self):
        """Backends built with equal embedders (one name, one size) share the query vector."""
        embedders = [CountingEmbedder() for _ in range(3)]
        task_backend, project_backend, global_backend = (
            _LookupCounting(embedder=embedder) for embedder in embedders
        )
        assembler = ContextAssembler(
            MemoryStores(
                task_backend=task_backend,
                project_backend=project_backend,
                global_backend=global_backend,
                clock=lambda: NOW,
                confirm=lambda _request: True,
            ),
            config=AssemblerConfig(track_access=False, limits=GatherLimits(widening_rounds=0)),
        )
        task = Task(id="t", project_id="p", user_id="u", description="ship the release")
        assembler.task_store(task).add_reasoning("checked the release notes", "plan")
        project = assembler.project_store("p")
        project.add(project.new_item("note", "release on Fridays"))
        user = assembler.global_store("u")
        user.add(user.new_item("preference", "short release notes"))
        for embedder in embedders:
            embedder.texts.clear()
        package = assembler.build_context(
            task, ContextRequest(budget_tokens=500, query="when do we release?")
        )
        assert {s.tier for s in package.selections} == {Tier.TASK, Tier.PROJECT, Tier.GLOBAL}
        assert [text for e in embedders for text in e.texts] == ["when do we release?"]
        # Each tier's gather looks its lexical index up once, whatever it asks of it.
        lookups = [b.lookups for b in (task_backend, project_backend, global_backend)]
        assert lookups == [1, 1, 1]


class _LookupCounting(InMemoryBackend):
    """An in-memory backend that counts lexical index lookups."""

    lookups = 0

    def lexical_index(self, filters=None):
        self.lookups += 1
        return super().lexical_index(filters)


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, remembering every text it embedded."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


class TestCustomPolicy:
    def test_a_plain_function_is_a_scorer(self, backend):
        """Any callable from candidates to scores can be registered as a policy."""
        shortest = Policy(
            "shortest",
            lambda candidates: {i: -len(item.text) for i, item in candidates.items.items()},
            frozenset({"recent"}),
        )
        assembler = ContextAssembler(
            backend,
            clock=lambda: NOW,
            policies={**DEFAULT_POLICIES, "shortest": shortest},
            config=AssemblerConfig(head=0, tail=0, track_access=False),
        )
        project = assembler.project_store("p")
        for text in ("medium text", "a", "the longest text of all"):
            project.add_pattern(text)
        assert ranking(assembler, "shortest") == ["a", "medium text", "the longest text of all"]

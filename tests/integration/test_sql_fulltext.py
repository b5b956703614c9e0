"""Lexical search from PostgreSQL's full-text search, on plain PostgreSQL and with pgvector.

With ``fulltext=True`` the backend's ``lexical_index`` on PostgreSQL is
:class:`FullTextScope`: every question is a statement over ``ae_items``. These tests hold it
to what the in-process BM25 index answers (which items match, which are left out, session
order) and to what only a database can promise: another backend object's write is seen by
the very next question.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest
import sqlalchemy as sa

from agent_engine.errors import ValidationError
from agent_engine.memory.sql import SQLAlchemyBackend, _fulltext
from agent_engine.memory.sql._engine import create_engine
from agent_engine.memory.sql._fulltext import COLUMN, INDEX_NAME, FullTextScope
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.bm25 import LexicalIndex
from tests.integration.conftest import empty_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = {"namespace": "project:a", "tier": "project"}


@pytest.fixture(params=["postgresql", "pgvector"])
def pg_url(request, tmp_path):
    """An empty schema on the PostgreSQL test server, or on the pgvector one."""
    with empty_database(request, request.param, tmp_path) as url:
        yield url


@pytest.fixture
def backend(pg_url):
    """A backend on a new store at the head revision, searching text by full text."""
    with SQLAlchemyBackend(pg_url, fulltext=True) as opened:
        yield opened


def _item(item_id, text, *, namespace="project:a", tier=Tier.PROJECT, **fields):
    fields.setdefault("timestamp", T0)
    fields.setdefault("session", "")
    return ContextItem.create("note", text, id=item_id, namespace=namespace, tier=tier, **fields)


def _ids(backend, query, k=10, filters=SCOPE):
    return [hit.item.id for hit in backend.lexical_search(query, k=k, filters=filters)]


class TestMatches:
    def test_the_backend_answers_from_the_database(self, backend):
        """With full text the lexical index is the full-text scope, not an in-process index;
        without it (the default) an in-process one."""
        assert isinstance(backend.lexical_index(SCOPE), FullTextScope)
        with SQLAlchemyBackend(backend.url) as default:
            assert isinstance(default.lexical_index(SCOPE), LexicalIndex)

    @pytest.mark.parametrize(("option", "expected"), [("off", LexicalIndex), ("on", FullTextScope)])
    def test_the_url_chooses(self, pg_url, option, expected):
        """``?fulltext=off`` in the URL (all a command's ``--db`` can say) keeps an in-process
        index; the URL reaches the driver without it; an argument given wins."""
        joint = "&" if "?" in pg_url else "?"
        with SQLAlchemyBackend(f"{pg_url}{joint}fulltext={option}") as chosen:
            assert isinstance(chosen.lexical_index(SCOPE), expected)
            assert "fulltext" not in chosen.url
        told = option == "off"
        with SQLAlchemyBackend(f"{pg_url}{joint}fulltext={option}", fulltext=told) as backend:
            assert backend.fulltext is told

    def test_a_url_option_other_than_on_or_off_is_refused(self, pg_url):
        joint = "&" if "?" in pg_url else "?"
        with pytest.raises(ValidationError, match="fulltext") as raised:
            SQLAlchemyBackend(f"{pg_url}{joint}fulltext=maybe")
        assert raised.value.field == "fulltext"

    def test_every_item_sharing_a_term_matches(self, backend):
        """Inflections, punctuation-joined words and PostgreSQL's own stopwords all match.

        ``now`` is a stopword of PostgreSQL's ``english`` configuration and a term of ours;
        ``example.com`` is one token to PostgreSQL's parser and two words to our analyzer.
        """
        backend.add_many(
            [
                _item("run", "she runs every morning"),
                _item("running", "running shoes"),
                _item("url", "see example.com/docs for details"),
                _item("quote", "the zebra\u2019s stripes"),
                _item("now", "right now"),
                _item("party", "two parties tonight"),
                _item("none", "nothing relevant at all"),
            ]
        )
        assert sorted(_ids(backend, "running")) == ["run", "running"]
        assert _ids(backend, "example") == ["url"]
        assert _ids(backend, "docs") == ["url"]
        assert _ids(backend, "zebras") == ["quote"]
        assert _ids(backend, "now") == ["now"]
        assert _ids(backend, "party") == ["party"]

    def test_matches_agree_with_the_bm25_index(self, backend):
        """The items matching a query are those the in-process BM25 index matches.

        Items stand outside sessions, where the BM25 index lends no neighbour terms.
        """
        texts = [
            "Caroline went to the LGBTQ support group yesterday",
            "Melanie painted a sunrise over the lake",
            "the support groups meet on tuesdays",
            "painting classes start in may",
            "she classes it as a hobby, nothing more",
            "yesterday's meeting ran long",
        ]
        items = [_item(f"i{n}", text) for n, text in enumerate(texts)]
        backend.add_many(items)
        index = LexicalIndex()
        index.upsert(items)
        scope = backend.lexical_index(SCOPE)
        for query in ["support group", "painting", "classes", "yesterday", "what did she paint?"]:
            hits = scope.hits(query)
            assert sorted(hits.best(100)) == sorted(index.scores(query)), query
            assert len(hits) == len(index.scores(query))

    def test_neighbours_lend_their_terms(self, backend):
        """An item matches by its session neighbours' words too, below those holding them.

        As in the in-process index: "Yes, yesterday!" answers the turn before it. The match
        set is the BM25 index's on the same sessions.
        """
        texts = ["did you paint the lake?", "yes, yesterday!", "then we had lunch", "unrelated"]
        items = [
            _item(f"t{n}", text, session="talk", timestamp=T0 + timedelta(minutes=n))
            for n, text in enumerate(texts)
        ]
        items.append(_item("far", "a lake far away", session="other"))
        backend.add_many(items)
        hits = backend.lexical_index(SCOPE).hits("lake")
        index = LexicalIndex()
        index.upsert(items)
        assert sorted(hits.best(10)) == sorted(index.scores("lake")) == ["far", "t0", "t1"]
        scores = hits.of(["t0", "t1", "t2"])
        assert scores["t0"] > scores["t1"] > 0.0 == scores["t2"]

    def test_rare_terms_outrank_common_ones(self, backend):
        """Scores weigh a term by its rarity in the scope, as BM25 does."""
        backend.add_many(
            [_item(f"common{n}", f"a note about the weather {n}") for n in range(8)]
            + [_item("rare", "a note about kubernetes")]
        )
        hits = backend.lexical_index(SCOPE).hits("weather kubernetes")
        assert hits.best(1) == ["rare"]
        scores = hits.of(["rare", "common0", "nowhere"])
        assert scores["rare"] > scores["common0"] > 0.0 == scores["nowhere"]

    def test_matches_beyond_the_prefetched_are_asked_for(self, backend, monkeypatch):
        """``best`` past the matches fetched with the query, and ``of`` outside them, agree.

        With two matches fetched per query, the rest come from further statements: the
        ranking and the scores are those of a query that fetched them all.
        """
        backend.add_many([_item(f"i{n}", "kubernetes " * (n + 1) + "x" * n) for n in range(6)])
        everything = backend.lexical_index(SCOPE).hits("kubernetes")
        ranked = everything.best(10)
        scores = everything.of(ranked)
        monkeypatch.setattr(_fulltext, "PREFETCH", 2)
        hits = backend.lexical_index(SCOPE).hits("kubernetes")
        assert len(hits) == 6
        assert hits.of([ranked[-1], "nowhere"]) == {ranked[-1]: scores[ranked[-1]], "nowhere": 0.0}
        assert hits.best(4) == ranked[:4]
        assert hits.best(10) == ranked
        assert hits.of(ranked) == scores

    @pytest.mark.parametrize("query", ["", "   ", "the and of", "!!! ???", "yes oh wow"])
    def test_a_term_less_query_matches_nothing(self, backend, query):
        """An empty query, or one of stopwords and punctuation, matches no item."""
        backend.add(_item("a", "the and of yes oh wow"))
        hits = backend.lexical_index(SCOPE).hits(query)
        assert len(hits) == 0
        assert hits.best(5) == []
        assert hits.of(["a"]) == {"a": 0.0}
        assert backend.lexical_search(query, k=5, filters=SCOPE) == []


class TestScope:
    def test_superseded_items_are_left_out_and_archived_ones_kept(self, backend):
        """History is not searched: size, matches, sources and sessions skip superseded items."""
        backend.add_many(
            [
                _item("old", "zebra crossing", source="notes.md", session="s"),
                _item("new", "zebra herd", source="", session="s"),
                _item("kept", "zebra archive", session="s", timestamp=T0 + timedelta(1)),
            ]
        )
        old, kept = backend.get("old"), backend.get("kept")
        backend.update(attrs.evolve(old, valid_to=T0 + timedelta(days=2), superseded_by="new"))
        backend.update(attrs.evolve(kept, archived_at=T0, archived_reason="compacted"))
        scope = backend.lexical_index(SCOPE)
        assert len(scope) == 2
        assert sorted(scope.hits("zebra").best(5)) == ["kept", "new"]
        assert scope.hits("crossing").best(5) == []
        assert scope.hits("zebra").of(["old"]) == {"old": 0.0}
        assert scope.sources() == frozenset()
        assert scope.neighbourhoods(["new", "old"], 2) == {"new": [("kept", 1)]}

    def test_other_scopes_are_never_returned(self, backend):
        """Another namespace's or tier's items never appear, whatever is asked."""
        backend.add_many(
            [
                _item("mine", "shared words here", source="a.md", session="s"),
                _item("ns", "shared words here", namespace="project:b", source="b.md", session="s"),
                _item("tier", "shared words here", tier=Tier.TASK, source="c.md", session="s"),
            ]
        )
        scope = backend.lexical_index(SCOPE)
        assert len(scope) == 1
        hits = scope.hits("shared words")
        assert len(hits) == 1
        assert hits.best(10) == ["mine"]
        assert hits.of(["ns", "tier"]) == {"ns": 0.0, "tier": 0.0}
        assert scope.sources() == frozenset({"a.md"})
        assert scope.neighbourhoods(["mine", "ns", "tier"], 3) == {}
        assert sorted(backend.lexical_index({"namespace": "project:b"}).hits("shared").best(9)) == [
            "ns"
        ]
        assert len(backend.lexical_index({})) == 3

    def test_another_backends_write_is_seen_at_once(self, backend, pg_url):
        """A scope held by one backend object answers for what another just committed."""
        backend.add(_item("first", "postgres migrations"))
        scope = backend.lexical_index(SCOPE)
        assert scope.hits("postgres").best(5) == ["first"]
        with SQLAlchemyBackend(pg_url) as other:
            other.add(_item("second", "postgres backups", source="ops.md"))
            other.update(attrs.evolve(other.get("first"), text="css modules"))
        assert scope.hits("postgres").best(5) == ["second"]
        assert len(scope) == 2
        assert scope.sources() == frozenset({"ops.md"})


class TestSessions:
    def test_neighbours_follow_time_then_id(self, backend):
        """Session order is ``(timestamp, id)``: equal times are ordered by id."""
        at = [T0, T0 + timedelta(1), T0 + timedelta(1), T0 + timedelta(2), T0 + timedelta(3)]
        ids = ["e", "b", "c", "a", "d"]  # by (time, id): e, b, c, a, d
        backend.add_many(
            [
                _item(i, f"turn {i}", session="talk", timestamp=t)
                for i, t in zip(ids, at, strict=True)
            ]
            + [_item("alone", "no session")]
        )
        scope = backend.lexical_index(SCOPE)
        assert scope.neighbourhoods(["c", "alone", "unknown"], 2) == {
            "c": [("e", -2), ("b", -1), ("a", 1), ("d", 2)]
        }
        assert scope.neighbourhoods(["e"], 1) == {"e": [("b", 1)]}
        assert list(scope.neighbourhoods(["d", "b", "e"], 1)) == ["d", "b", "e"]
        assert scope.links(["e", "c", "d", "alone"], 2) == {
            "e": [("c", 2)],
            "c": [("e", -2), ("d", 2)],
            "d": [("c", -2)],
        }
        assert scope.links([], 2) == {}

    def test_sessions_agree_with_the_bm25_index(self, backend):
        """Neighbourhoods and links are those the in-process index gives for the same items."""
        items = [
            _item(f"i{n:02d}", f"turn {n}", session=f"s{n % 3}", timestamp=T0 + timedelta(n // 2))
            for n in range(30)
        ]
        backend.add_many(items)
        index = LexicalIndex()
        index.upsert(items)
        scope = backend.lexical_index(SCOPE)
        asked = [f"i{n:02d}" for n in range(0, 30, 4)]
        for radius in (1, 2, 5):
            assert scope.neighbourhoods(asked, radius) == index.neighbourhoods(asked, radius)
            assert scope.links(asked, radius) == index.links(asked, radius)


class TestIndex:
    def test_the_planner_reads_the_gin_index(self, backend, pg_url):
        """A match is found through the GIN index of the stored ``tsvector``."""
        backend.add_many([_item(f"i{n}", f"note {n}") for n in range(50)])
        engine = create_engine(pg_url)
        try:
            with engine.connect() as connection:
                connection.execute(sa.text("SET enable_seqscan = off"))
                plan = connection.execute(
                    sa.text(
                        "EXPLAIN SELECT id FROM ae_items AS i "  # noqa: S608 - fixed SQL
                        f"WHERE i.{COLUMN} @@ CAST('note' AS tsquery)"
                    )
                ).scalars()
                assert INDEX_NAME in "\n".join(plan)
        finally:
            engine.dispose()

    def test_the_ranking_has_no_per_row_subquery(self, backend, pg_url):
        """Every step of the ranking is a join: its cost grows with the matches, not their square.

        A subquery the planner cannot hash (its rows outgrow ``work_mem``, as they do past a
        few tens of thousands of matches) is run again for every row: the ranking at 30k items
        took 130 s instead of 1.7. A small ``work_mem`` shows here what a large scope would.
        """
        backend.add_many(
            [_item(f"i{n:03d}", f"deploy note {n}", session=f"s{n % 7}") for n in range(300)]
        )
        where, params = FullTextScope(None, "project:a", Tier.PROJECT).condition("i")
        statement = _fulltext.ranking_sql(where, among_ids=False, limited=True)
        bound = {**params, **_fulltext._Terms.of("deploy note").params(), "k1": 1.2, "b": 0.75}
        engine = create_engine(pg_url)
        try:
            with engine.connect() as connection:
                connection.execute(sa.text("ANALYZE ae_items"))
                connection.execute(sa.text("SET work_mem = '64kB'"))
                plan = "\n".join(
                    connection.execute(
                        sa.text(f"EXPLAIN {statement}"), {**bound, "limit": 10}
                    ).scalars()
                )
        finally:
            engine.dispose()
        assert "SubPlan" not in plan, plan

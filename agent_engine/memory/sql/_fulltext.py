"""PostgreSQL's full-text search as a store's lexical index: BM25 over ``tsvector``, in SQL.

On PostgreSQL, :class:`FullTextScope` answers the
:class:`~agent_engine.retrieval.lexical.LexicalScope` questions with SQL over ``ae_items``,
so no process builds an index of its own (a full scan, seconds at 100k items, repeated in
every process and whenever another one writes the scope), and every answer includes what
other processes committed a moment before.

**What is stored.** On PostgreSQL ``ae_items`` has one more column, :data:`COLUMN`: a
``tsvector`` generated from the item's text and stored with the row (migration 0009), which
a GIN index (:data:`INDEX_NAME`) indexes. :func:`document_sql` spells the expression: the
first :data:`TEXT_LIMIT` characters of the text, with punctuation turned into spaces,
through the ``simple`` text search configuration. It is stored rather than computed by the
queries (an expression index would do for finding matches) because ranking reads every
matching item's ``tsvector``, and computing one costs about 40 µs for a two-line text: a
query matching a few thousand items would spend more on that than on everything else, and
on a small scope, which the planner scans rather than reading the index, every question
would pay it for every row. The database computes it on every write; the column is not in
the shared table declaration (SQLite has none), so no read of items fetches it.

**Why ``simple``, and how queries are stemmed.** The ranking should match what the
in-process BM25 index matches: every item sharing a term of :func:`~agent_engine.retrieval.
text.analyze` (our stopwords, our light stemmer) with the query. The ``english``
configuration would stem with Snowball and drop PostgreSQL's stopwords, which are not ours
(``now`` is one of theirs and a term of ours): items sharing a term would be missed. So the
database indexes words as written, only lower-cased (``simple`` has no stopwords and no
stemmer), and the stemming is done on the query side: each query term asks for every word
that our stemmer turns into it (:func:`~agent_engine.retrieval.text.inflections`), which
finds exactly the items whose words stem to the term. Punctuation becomes spaces before
parsing because PostgreSQL's parser keeps ``example.com``, ``/usr/bin`` or ``1.2.3`` as one
token, where our analyzer sees words (``example``, ``com``); without it those words would
not be found.

**How matches are ranked.** By the in-process index's BM25 over sessions (``k1`` 1.2, ``b``
0.75, each item lent :data:`LENT` of its session neighbours' term counts and length, so an
item also matches by a neighbour's words), computed in the statement. The matches are the
items holding a query word, found through the GIN index, and their session neighbours; term
counts are read from the stored ``tsvector`` positions; each term's document frequency is
counted among the matches. One thing differs: length is measured in characters rather than
terms (the scope's average lent length taking every session member as having two
neighbours), which moves scores by a few percent and rankings little. One statement does
it all and returns the best :data:`PREFETCH` matches with their number
(:meth:`FullTextScope.hits`), so a build on a small scope asks once; ``best`` beyond them or
``of`` an id outside them asks again, never for more rows than asked. Nothing outlives the
query's matches, so there is nothing to go stale.

Superseded items (``valid_to`` set) are left out everywhere, archived ones kept, as the
in-process index does. Session order is ``(timestamp, id)`` by ``row_number()`` over the
session's current items.
"""

# ruff: noqa: S608 - statements are built from fixed fragments; every value is a bound parameter

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from agent_engine.models import Tier
from agent_engine.retrieval.lexical import Neighbourhoods
from agent_engine.retrieval.text import ACCENTED, UNACCENTED, analyze, inflections

if TYPE_CHECKING:
    from agent_engine.memory.sql._audit import Runner

__all__ = [
    "COLUMN",
    "CONFIG",
    "INDEX_NAME",
    "TEXT_LIMIT",
    "PREFETCH",
    "FullTextMatches",
    "FullTextScope",
    "add_column",
    "document_sql",
    "drop_column",
    "postgresql_metadata",
]

COLUMN: Final = "fulltext"
"""The generated ``tsvector`` column of ``ae_items`` (PostgreSQL only)."""
CONFIG: Final = "simple"
"""The text search configuration: lower-cased words, no stopwords, no stemming (see above)."""
INDEX_NAME: Final = "ix_ae_items_fulltext"
TEXT_LIMIT: Final = 100_000
"""Characters of an item's text that are indexed: a ``tsvector`` holds at most 1 MB, and a
text whose words outgrow it would make the write fail."""
K1: Final = 1.2
B: Final = 0.75
PREFETCH: Final = 8192
"""Matches whose scores are kept when a query is asked. A build asks for the best few hundred
and then for the scores of its whole pool, vector hits included, which would cost a second
ranking statement for any pool item outside the kept ones; a query matches most of a chat
scope (a speaker's name is in half its turns), and 8,192 pairs of id and score are a few
hundred kilobytes, so a scope of that many items is always answered by one statement."""
LENT: Final = 0.4
"""What share of its session neighbours' term counts (and length) an item is scored with, as
in the in-process index (:class:`~agent_engine.retrieval.bm25.LexicalIndex`)."""
_LENGTH: Final = f"least(char_length(i.text), {TEXT_LIMIT})"
# ASCII punctuation, and the non-ASCII marks PostgreSQL's parser would take for letters
# (it treats every non-ASCII character as one): curly quotes, dashes, ellipses, NBSP...
_PUNCTUATION: Final = (
    r"[[:punct:]\u00a0\u00a1\u00ab\u00b4\u00b7\u00bb\u00bf\u2000-\u206f\u3000-\u303f]+"
)


def document_sql(column: str) -> str:
    """The ``tsvector`` of the text in ``column``: what :data:`COLUMN` is generated as.

    Its letters lose their diacritics by the analyzer's own table
    (:data:`~agent_engine.retrieval.text.ACCENTED`), so a query's folded terms find them.
    """
    return (
        f"to_tsvector('{CONFIG}'::regconfig, regexp_replace("
        f"translate(left({column}, {TEXT_LIMIT}), '{ACCENTED}', '{UNACCENTED}'), "
        f"'{_PUNCTUATION}', ' ', 'g'))"
    )


def add_column(connection: sa.Connection) -> None:
    """Add :data:`COLUMN` to ``ae_items`` (computed for every stored item) and its GIN index."""
    connection.execute(
        sa.text(
            f"ALTER TABLE ae_items ADD COLUMN IF NOT EXISTS {COLUMN} tsvector "
            f"GENERATED ALWAYS AS ({document_sql('text')}) STORED"
        )
    )
    connection.execute(
        sa.text(f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON ae_items USING gin ({COLUMN})")
    )


def drop_column(connection: sa.Connection) -> None:
    """Drop what :func:`add_column` made."""
    connection.execute(sa.text(f"DROP INDEX IF EXISTS {INDEX_NAME}"))
    connection.execute(sa.text(f"ALTER TABLE ae_items DROP COLUMN IF EXISTS {COLUMN}"))


def postgresql_metadata() -> sa.MetaData:
    """The schema of a PostgreSQL store: the shared tables plus :data:`COLUMN` and its index.

    What a schema comparison holds a PostgreSQL store to; SQLite stores are compared with
    the shared declaration, which leaves the column out because SQLite has none.
    """
    from agent_engine.memory.sql._schema import metadata  # noqa: PLC0415 - a copy of it

    copy = sa.MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.tables.values():
        table.to_metadata(copy)
    table = copy.tables["ae_items"]
    column = sa.Column(
        COLUMN, postgresql.TSVECTOR(), sa.Computed(document_sql("text"), persisted=True)
    )
    table.append_column(column)
    sa.Index(INDEX_NAME, column, postgresql_using="gin")
    return copy


@attrs.frozen
class _Terms:
    """A query's terms, each with the words it stands for, as ``tsquery`` texts."""

    groups: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, query: str) -> _Terms:
        terms = dict.fromkeys(analyze(query))
        return cls(tuple(tuple(sorted(inflections(term))) for term in terms))

    def any_of(self) -> str:
        """A ``tsquery`` matching a document holding any word of any term."""
        return " | ".join(_lexeme(word) for group in self.groups for word in group)

    def params(self) -> dict[str, Any]:
        """The parameters of :func:`_matches_sql`: the query and each word's term number."""
        words = [word for group in self.groups for word in group]
        numbers = [n for n, group in enumerate(self.groups) for _ in group]
        return {"query": self.any_of(), "words": words, "numbers": numbers}


def _lexeme(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("'", "''")
    return f"'{escaped}'"


@attrs.frozen
class FullTextScope:
    """:class:`~agent_engine.retrieval.lexical.LexicalScope` of one scope, in SQL.

    ``read`` runs a function in one read transaction of the backend; ``namespace`` and
    ``tier`` name the scope (``None``: any).
    """

    read: Runner
    namespace: str | None
    tier: Tier | None

    def condition(self, alias: str) -> tuple[str, dict[str, Any]]:
        """The scope's condition on ``ae_items`` rows named ``alias``, and its parameters."""
        parts = [f"{alias}.valid_to IS NULL"]
        params: dict[str, Any] = {}
        if self.namespace is not None:
            parts.append(f"{alias}.namespace = :namespace")
            params["namespace"] = self.namespace
        if self.tier is not None:
            parts.append(f"{alias}.tier = :tier")
            params["tier"] = self.tier.value
        return " AND ".join(parts), params

    def __len__(self) -> int:
        """How many current (not superseded) items the scope holds."""
        where, params = self.condition("i")
        statement = sa.text(f"SELECT count(*) FROM ae_items AS i WHERE {where}")
        return int(self.read(lambda connection: connection.execute(statement, params).scalar_one()))

    def hits(self, query: str) -> FullTextMatches:
        """The scope's items matching ``query``: counted, and the best :data:`PREFETCH` scored.

        One statement finds the matches (through the GIN index), counts each term's document
        frequency among them, scores them all in the database and returns the best
        :data:`PREFETCH` with the number of matches: what a context build asks for next, so
        a build on a scope of up to that many matches asks the database once.
        """
        terms = _Terms.of(query)
        matches = FullTextMatches(self, terms)
        if terms.groups:
            matches.fetch(PREFETCH)
        return matches

    def ranked(self, terms: _Terms, *, limit: int | None, ids: list[str] | None = None) -> _Ranked:
        """The matches of ``terms`` best first (ties by id): the first ``limit``, or ``ids``'."""
        where, params = self.condition("i")
        among, limited = ids is not None, limit is not None
        statement = sa.text(ranking_sql(where, among_ids=among, limited=limited))
        bound = {**params, **terms.params(), "k1": K1, "b": B, "limit": limit, "ids": ids}
        rows = self.read(lambda connection: _planned(connection).execute(statement, bound).all())
        return _Ranked(
            [(row.id, float(row.score)) for row in rows], int(rows[0].matched) if rows else 0
        )

    def sources(self) -> frozenset[str]:
        """Every distinct non-empty ``source`` among the scope's current items."""
        where, params = self.condition("i")
        statement = sa.text(
            f"SELECT DISTINCT i.source FROM ae_items AS i WHERE {where} AND i.source <> ''"
        )
        rows = self.read(lambda connection: connection.execute(statement, params).scalars().all())
        return frozenset(rows)

    def neighbourhoods(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """Each item's session neighbours within ``radius`` places, by increasing offset."""
        return self._near(list(dict.fromkeys(item_ids)), radius, among=False)

    def links(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """:meth:`neighbourhoods` keeping only neighbours among ``item_ids``."""
        return self._near(list(dict.fromkeys(item_ids)), radius, among=True)

    def _near(self, ids: list[str], radius: int, *, among: bool) -> Neighbourhoods:
        """One statement: the asked items' sessions ranked by ``(timestamp, id)``, paired."""
        if not ids or radius < 1:
            return {}
        where, params = self.condition("i")
        kept = "AND m.id IN (SELECT wanted.id FROM wanted) " if among else ""
        statement = sa.text(
            'WITH wanted AS (SELECT unnest(CAST(:ids AS text[])) COLLATE "C" AS id), '
            "asked AS ("
            "  SELECT i.id, i.session FROM ae_items AS i "
            f"  WHERE {where} AND i.id IN (SELECT wanted.id FROM wanted) AND i.session <> ''), "
            "members AS ("
            "  SELECT i.id, i.session, "
            "   row_number() OVER (PARTITION BY i.session ORDER BY i.timestamp, i.id) AS place "
            f"  FROM ae_items AS i WHERE {where} "
            "   AND i.session IN (SELECT asked.session FROM asked)) "
            "SELECT p.id AS item_id, m.id AS neighbour, m.place - p.place AS step "
            "FROM asked JOIN members AS p ON p.id = asked.id "
            "JOIN members AS m ON m.session = p.session AND m.id <> p.id "
            f" AND abs(m.place - p.place) <= :radius {kept}"
            "ORDER BY p.id, step"
        )
        params = {**params, "ids": ids, "radius": radius}
        rows = self.read(lambda connection: _planned(connection).execute(statement, params).all())
        found: Neighbourhoods = {}
        for row in rows:
            found.setdefault(row.item_id, []).append((row.neighbour, int(row.step)))
        # In the order asked, as the in-process index answers: callers keep the seeds' order.
        return {item_id: found[item_id] for item_id in ids if item_id in found}


@attrs.frozen
class _Ranked:
    """Scored matches, best first, and how many rows the statement had before its cut."""

    scores: list[tuple[str, float]]
    matched: int


class FullTextMatches:
    """:class:`~agent_engine.retrieval.lexical.LexicalMatches` of one query, scored in SQL.

    Holds the best matches :meth:`FullTextScope.hits` fetched; ``best`` beyond them and
    ``of`` for ids outside them ask the database again (when there are matches left to
    ask about), and keep what it answered, so an id gets the same score however it is
    asked for.
    """

    def __init__(self, scope: FullTextScope, terms: _Terms) -> None:
        self._scope = scope
        self._terms = terms
        self._matched = 0
        self._ranked: list[str] = []
        self._scores: dict[str, float] = {}

    def fetch(self, limit: int) -> None:
        """Read the ``limit`` best matches (and the number of matches) from the database."""
        found = self._scope.ranked(self._terms, limit=limit)
        self._matched = found.matched
        self._ranked = [item_id for item_id, _ in found.scores]
        self._scores.update(found.scores)

    def __len__(self) -> int:
        return self._matched

    @property
    def _complete(self) -> bool:
        return len(self._ranked) >= self._matched

    def best(self, k: int) -> list[str]:
        """The ``k`` best-scoring matching ids, best first, ties by id."""
        if k > len(self._ranked) and not self._complete:
            self.fetch(k)
        return self._ranked[: max(k, 0)]

    def of(self, item_ids: Iterable[str]) -> dict[str, float]:
        """The score of each id, ``0.0`` for those that did not match."""
        ids = list(item_ids)
        missing = [i for i in dict.fromkeys(ids) if i not in self._scores]
        if missing and not self._complete:
            found = self._scope.ranked(self._terms, limit=None, ids=missing)
            self._scores.update(found.scores)
        return {item_id: self._scores.get(item_id, 0.0) for item_id in ids}


def _planned(connection: sa.Connection) -> sa.Connection:
    """``connection`` set up for the ranking and session statements, until its transaction ends.

    JIT off: their estimated cost passes PostgreSQL's ``jit_above_cost`` from a few thousand
    rows on, and compiling the ranking's expressions took 2 s of a 2.4 s statement at 10k
    items (0.36 s without); each runs once, so compiling never pays. Nested loops off (where
    anything else can do): their joins are of sets of thousands of rows, and a table not
    analyzed yet (autovacuum analyzes a new store within a minute or so) made the planner
    join two of them row by row: 8 s instead of 0.4 for a ranking, 0.45 s instead of 0.04
    for the links of 300 items.
    """
    connection.execute(sa.text("SET LOCAL jit = off"))
    connection.execute(sa.text("SET LOCAL enable_nestloop = off"))
    return connection


def ranking_sql(where: str, *, among_ids: bool, limited: bool) -> str:
    """The statement of :meth:`FullTextScope.ranked`: matches scored, best first.

    ``where``: the scope's condition on ``ae_items`` rows named ``i``; ``among_ids``: keep
    only the ids of parameter ``ids``; ``limited``: return the first ``limit``. Parameters
    besides: the scope's, :meth:`_Terms.params`, ``k1`` and ``b``.
    """
    kept = 'WHERE scored.id IN (SELECT unnest(CAST(:ids AS text[])) COLLATE "C") '
    return (
        _matches_sql(where)
        + ", frequencies AS (SELECT lent.term, count(*) AS df FROM lent GROUP BY lent.term), "
        "stats AS ("
        f" SELECT count(*) AS size, greatest(avg({_LENGTH} "
        f"  * CASE WHEN i.session <> '' THEN {1 + 2 * LENT} ELSE 1 END), 1) AS mean "
        f" FROM ae_items AS i WHERE {where}), "
        "scored AS ("
        " SELECT lent.id, sum("
        "  ln(1 + (stats.size - frequencies.df + 0.5::float8) "
        "   / (frequencies.df + 0.5::float8)) "
        "  * lent.tf * (:k1 + 1) "
        "  / (lent.tf + :k1 * (1 - :b + :b * lengths.length / stats.mean)) "
        "  ORDER BY lent.term) AS score "
        " FROM lent JOIN frequencies ON frequencies.term = lent.term "
        " JOIN lengths ON lengths.id = lent.id CROSS JOIN stats "
        " GROUP BY lent.id) "
        "SELECT scored.id, scored.score, count(*) OVER () AS matched FROM scored "
        + (kept if among_ids else "")
        + "ORDER BY scored.score DESC, scored.id"
        + (" LIMIT :limit" if limited else "")
    )


def _matches_sql(where: str) -> str:
    """The common table expressions of a query's matches, with the lent term counts.

    ``seeds`` are the scope's items holding a query word (through the GIN index), ``own``
    their term counts, ``ordered`` the members of the seeds' sessions with the ids and
    lengths of their neighbours, ``lent`` each match's count of each term with its
    neighbours' at :data:`LENT` (an item matches by its own words or a neighbour's) and
    ``lengths`` each match's length, lent alike. Parameters: the scope's, ``query``,
    ``words`` and ``numbers`` (:meth:`_Terms.params`).
    """
    return (
        "WITH seeds AS ("
        f"  SELECT i.id, i.session, i.{COLUMN} AS document, {_LENGTH} AS length "
        f"  FROM ae_items AS i WHERE {where} AND i.{COLUMN} @@ CAST(:query AS tsquery)), "
        "own AS ("
        "  SELECT seeds.id, q.term, sum(cardinality(u.positions))::float8 AS tf "
        "  FROM seeds CROSS JOIN LATERAL unnest(seeds.document) AS u "
        "  JOIN unnest(CAST(:words AS text[]), CAST(:numbers AS int[])) AS q(word, term) "
        "   ON q.word = u.lexeme "
        "  GROUP BY seeds.id, q.term), "
        "ordered AS ("
        f"  SELECT i.id, {_LENGTH} AS length, "
        "   lag(i.id) OVER w AS previous, lead(i.id) OVER w AS next, "
        f"   lag({_LENGTH}) OVER w AS previous_length, lead({_LENGTH}) OVER w AS next_length "
        f"  FROM ae_items AS i WHERE {where} "
        "   AND i.session IN (SELECT seeds.session FROM seeds WHERE seeds.session <> '') "
        "  WINDOW w AS (PARTITION BY i.session ORDER BY i.timestamp, i.id)), "
        "matches AS ("
        "  SELECT seeds.id, ordered.previous, ordered.next FROM seeds "
        "  LEFT JOIN ordered ON ordered.id = seeds.id "
        "  UNION "
        "  SELECT ordered.id, ordered.previous, ordered.next FROM ordered "
        "  JOIN seeds ON seeds.id = ordered.previous "
        "  UNION "
        "  SELECT ordered.id, ordered.previous, ordered.next FROM ordered "
        "  JOIN seeds ON seeds.id = ordered.next), "
        "lent AS ("
        "  SELECT matches.id, own.term, sum(own.tf * source.weight) AS tf FROM matches "
        "  CROSS JOIN LATERAL (VALUES (matches.id, 1.0::float8), "
        f"   (matches.previous, {LENT}::float8), (matches.next, {LENT}::float8)) "
        "   AS source(id, weight) "
        "  JOIN own ON own.id = source.id "
        "  GROUP BY matches.id, own.term), "
        "lengths AS ("
        "  SELECT matches.id, coalesce(ordered.length, seeds.length) "
        f"   + {LENT} * (coalesce(ordered.previous_length, 0) "
        "   + coalesce(ordered.next_length, 0)) AS length "
        "  FROM matches LEFT JOIN ordered ON ordered.id = matches.id "
        "  LEFT JOIN seeds ON seeds.id = matches.id) "
    )

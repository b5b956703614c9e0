"""PostgreSQL's full-text search as a store's lexical index: BM25 over ``tsvector``, in SQL.

On PostgreSQL, :class:`FullTextScope` answers the
:class:`~agent_engine.retrieval.lexical.LexicalScope` questions with SQL over ``ae_items``,
so no process builds an index of its own (a full scan, seconds at 100k items, repeated in
every process and whenever another one writes the scope), and every answer includes what
other processes committed a moment before.

**What is indexed.** A GIN index (:data:`INDEX_NAME`, migration 0008) holds
:func:`document_sql` of each item's text: the first :data:`TEXT_LIMIT` characters, with
punctuation turned into spaces, through the ``simple`` text search configuration. A query
filters with the same expression, so the planner reads the index.

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

**How matches are ranked.** By BM25 (``k1`` 1.2, ``b`` 0.75), computed in the statement:
each query term's document frequency in the scope is counted through the GIN index when
the query is asked (:meth:`FullTextScope.hits`), a matching item's term frequency is read
from its ``tsvector`` positions, and its length is its text's length in characters against
the scope's average. Two things differ from the in-process index: an item is scored on its
own words only (that index also lends each item 0.4 of its session neighbours' terms), and
length is measured in characters rather than terms. ``best`` and ``of`` each run one
statement that scores the matching rows in the database and returns only the rows asked
for; nothing is cached between calls, so there is nothing to go stale.

Superseded items (``valid_to`` set) are left out everywhere, archived ones kept, as the
in-process index does. Session order is ``(timestamp, id)`` by ``row_number()`` over the
session's current items.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import sqlalchemy as sa

from agent_engine.models import Tier
from agent_engine.retrieval.lexical import Neighbourhoods
from agent_engine.retrieval.text import analyze, inflections

if TYPE_CHECKING:
    from agent_engine.memory.sql._audit import Runner

__all__ = [
    "CONFIG",
    "INDEX_NAME",
    "TEXT_LIMIT",
    "FullTextMatches",
    "FullTextScope",
    "create_index",
    "document",
    "document_sql",
    "drop_index",
]

CONFIG: Final = "simple"
"""The text search configuration: lower-cased words, no stopwords, no stemming (see above)."""
INDEX_NAME: Final = "ix_ae_items_fulltext"
TEXT_LIMIT: Final = 100_000
"""Characters of an item's text that are indexed: a ``tsvector`` holds at most 1 MB, and a
text whose words outgrow it would make the write fail."""
K1: Final = 1.2
B: Final = 0.75
# ASCII punctuation, and the non-ASCII marks PostgreSQL's parser would take for letters
# (it treats every non-ASCII character as one): curly quotes, dashes, ellipses, NBSP...
_PUNCTUATION: Final = (
    r"[[:punct:]\u00a0\u00a1\u00ab\u00b4\u00b7\u00bb\u00bf\u2000-\u206f\u3000-\u303f]+"
)


def document_sql(column: str) -> str:
    """The ``tsvector`` of the text in ``column``: the indexed expression, spelled once.

    Index and queries must spell it alike for the planner to match them, so it holds only
    constants (no bound parameter).
    """
    return (
        f"to_tsvector('{CONFIG}'::regconfig, "
        f"regexp_replace(left({column}, {TEXT_LIMIT}), '{_PUNCTUATION}', ' ', 'g'))"
    )


def document(column: sa.ColumnElement[str]) -> sa.ColumnElement[Any]:
    """:func:`document_sql` of a column as an expression (how the schema declares the index)."""
    constant = sa.text
    cleaned = sa.func.regexp_replace(
        sa.func.left(column, constant(str(TEXT_LIMIT))),
        constant(f"'{_PUNCTUATION}'"),
        constant("' '"),
        constant("'g'"),
    )
    return sa.func.to_tsvector(constant(f"'{CONFIG}'::regconfig"), cleaned)


def create_index(connection: sa.Connection) -> None:
    """Create the GIN index of :func:`document_sql` on ``ae_items`` (PostgreSQL only)."""
    connection.execute(
        sa.text(
            f"CREATE INDEX IF NOT EXISTS {INDEX_NAME} ON ae_items USING gin "
            f"(({document_sql('text')}))"
        )
    )


def drop_index(connection: sa.Connection) -> None:
    """Drop the index of :func:`create_index`."""
    connection.execute(sa.text(f"DROP INDEX IF EXISTS {INDEX_NAME}"))


@attrs.frozen
class _Terms:
    """A query's terms, each with the words it stands for, as ``tsquery`` texts."""

    groups: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, query: str) -> _Terms:
        terms = dict.fromkeys(analyze(query))
        return cls(tuple(tuple(sorted(inflections(term))) for term in terms))

    def any_of(self, groups: Sequence[tuple[str, ...]] | None = None) -> str:
        """A ``tsquery`` matching a document holding any word of ``groups`` (default: all)."""
        chosen = self.groups if groups is None else groups
        return " | ".join(_lexeme(word) for group in chosen for word in group)


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
        statement = sa.text(f"SELECT count(*) FROM ae_items AS i WHERE {where}")  # noqa: S608 - fixed SQL
        return int(self.read(lambda connection: connection.execute(statement, params).scalar_one()))

    def hits(self, query: str) -> FullTextMatches:
        """The scope's items sharing a term with ``query``, counted now, scored on demand.

        One statement counts the scope, its average text length, the matches and each
        term's document frequency (the last two through the GIN index).
        """
        terms = _Terms.of(query)
        if not terms.groups:
            return FullTextMatches(self, terms, 0, ())
        where, params = self.condition("i")
        document = document_sql("i.text")
        counts = [
            f"(SELECT count(*) FROM ae_items AS i WHERE {where} "  # noqa: S608 - fixed SQL
            f"AND {document} @@ CAST(:q{n} AS tsquery))"
            for n in range(len(terms.groups) + 1)
        ]
        params = {
            **params,
            "q0": terms.any_of(),
            **{f"q{n}": terms.any_of([group]) for n, group in enumerate(terms.groups, 1)},
        }
        statement = sa.text(
            f"SELECT count(*) AS size, avg(least(char_length(i.text), {TEXT_LIMIT})) AS mean, "  # noqa: S608
            + ", ".join(f"{count} AS c{n}" for n, count in enumerate(counts))
            + f" FROM ae_items AS i WHERE {where}"
        )
        row = self.read(lambda connection: connection.execute(statement, params).mappings().one())
        size, matched = int(row["size"]), int(row["c0"])
        if not matched:
            return FullTextMatches(self, terms, 0, ())
        frequencies = [int(row[f"c{n}"]) for n in range(1, len(terms.groups) + 1)]
        idfs = tuple(math.log(1.0 + (size - df + 0.5) / (df + 0.5)) for df in frequencies)
        mean = float(row["mean"]) if row["mean"] else 1.0
        return FullTextMatches(self, terms, matched, idfs, max(mean, 1.0))

    def sources(self) -> frozenset[str]:
        """Every distinct non-empty ``source`` among the scope's current items."""
        where, params = self.condition("i")
        statement = sa.text(
            f"SELECT DISTINCT i.source FROM ae_items AS i WHERE {where} AND i.source <> ''"  # noqa: S608
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
        kept = "AND m.id = ANY(:ids) " if among else ""
        statement = sa.text(
            "WITH asked AS ("  # noqa: S608 - fixed SQL
            f"  SELECT i.id, i.session FROM ae_items AS i WHERE {where} "
            "   AND i.id = ANY(:ids) AND i.session <> ''), "
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
        rows = self.read(lambda connection: connection.execute(statement, params).all())
        found: Neighbourhoods = {}
        for row in rows:
            found.setdefault(row.item_id, []).append((row.neighbour, int(row.step)))
        return found


class FullTextMatches:
    """:class:`~agent_engine.retrieval.lexical.LexicalMatches` of one query, scored in SQL.

    ``best`` and ``of`` run the BM25 statement over the matching rows with the statistics
    counted when the query was asked; the scores they return are kept, so an id ranked by
    ``best`` and asked for by ``of`` gets the very same score.
    """

    def __init__(
        self,
        scope: FullTextScope,
        terms: _Terms,
        matched: int,
        idfs: tuple[float, ...],
        mean_length: float = 1.0,
    ) -> None:
        self._scope = scope
        self._terms = terms
        self._matched = matched
        self._idfs = idfs
        self._mean = mean_length
        self._scores: dict[str, float] = {}

    def __len__(self) -> int:
        return self._matched

    def best(self, k: int) -> list[str]:
        """The ``k`` best-scoring matching ids, best first, ties by id (one statement)."""
        if k < 1 or not self._matched:
            return []
        rows = self._rank("", {"k": int(k)}, limit=True)
        return [item_id for item_id, _ in rows]

    def of(self, item_ids: Iterable[str]) -> dict[str, float]:
        """The score of each id, ``0.0`` for those that did not match (one statement)."""
        ids = list(item_ids)
        missing = [i for i in dict.fromkeys(ids) if i not in self._scores]
        if missing and self._matched:
            self._rank("AND i.id = ANY(:ids)", {"ids": missing}, limit=False)
        return {item_id: self._scores.get(item_id, 0.0) for item_id in ids}

    def _rank(self, extra: str, params: dict[str, Any], *, limit: bool) -> list[tuple[str, float]]:
        """Score the matching rows (restricted by ``extra``), best first, ties by id."""
        where, scope_params = self._scope.condition("i")
        lexemes: list[str] = []
        groups: list[int] = []
        idfs: list[float] = []
        for n, (group, idf) in enumerate(zip(self._terms.groups, self._idfs, strict=True)):
            lexemes += group
            groups += [n] * len(group)
            idfs += [idf] * len(group)
        length = f"least(char_length(i.text), {TEXT_LIMIT})"
        statement = sa.text(
            "SELECT i.id, s.score FROM ae_items AS i CROSS JOIN LATERAL ("  # noqa: S608
            "  SELECT sum(t.idf * t.tf * (:k1 + 1) "
            f"   / (t.tf + :k1 * (1 - :b + :b * {length} / :mean)) ORDER BY t.term) AS score "
            "  FROM (SELECT q.term, max(q.idf) AS idf, "
            "         sum(cardinality(u.positions))::float8 AS tf "
            f"        FROM unnest({document_sql('i.text')}) AS u "
            "        JOIN unnest(CAST(:lexemes AS text[]), CAST(:groups AS int[]), "
            "                    CAST(:idfs AS float8[])) AS q(lexeme, term, idf) "
            "          ON q.lexeme = u.lexeme "
            "        GROUP BY q.term) AS t) AS s "
            f"WHERE {where} AND {document_sql('i.text')} @@ CAST(:query AS tsquery) {extra} "
            "ORDER BY s.score DESC, i.id" + (" LIMIT :k" if limit else "")
        )
        bound = {
            **scope_params,
            **params,
            "k1": K1,
            "b": B,
            "mean": self._mean,
            "lexemes": lexemes,
            "groups": groups,
            "idfs": idfs,
            "query": self._terms.any_of(),
        }
        rows = self._scope.read(lambda connection: connection.execute(statement, bound).all())
        ranked = [(row.id, float(row.score)) for row in rows]
        self._scores.update(ranked)
        return ranked

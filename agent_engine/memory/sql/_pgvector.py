"""PostgreSQL with the pgvector extension: vectors in a ``vector`` column, searched in SQL.

On a server that offers the ``vector`` extension, the upgrade enables it (``CREATE EXTENSION
IF NOT EXISTS vector``) and turns ``ae_items.embedding`` from a blob into a pgvector
``vector`` column, carrying every stored vector over; :meth:`SQLAlchemyBackend.search` is
then one ``SELECT`` that applies the filters (the ``WHERE`` of every read), orders by cosine
distance and stops at ``k``. Without the extension (or without the right to create it) the
column stays a blob and search stays the exact scan in Python; the backend logs which it is
when it opens a PostgreSQL store (``vector_search``), and how to get pgvector.

**The column has no dimension; each dimension gets its own partial HNSW index.** A store's
dimension is only known at its first vector (and changes with a re-embedding), while the
schema is created before. So the column is an untyped ``vector``, and the index is an
expression index on ``(embedding::vector(D))`` with ``WHERE vector_dims(embedding) = D``,
created (:func:`index_vectors`) in the transaction that records ``D`` as the store's
dimension: the first write of a vector, a store whose vectors were all deleted taking
another embedder, or the upgrade of a store that already holds vectors. A re-embedding
creates the target dimension's index when it starts (empty then, filled batch by batch as
vectors are written) and drops the old one when it finishes. Alternatives were worse: a
typed ``vector(D)`` column must be altered (rewritten) whenever ``D`` changes and cannot
hold two sizes mid-way through a re-embedding; indexing at the first search would put a
long index build on a reader's statement deadline. The index uses cosine distance on the
stored vectors as they are, so scores are the cosines of the exact scan, and ``get``
returns the vectors that were written, not normalized copies.

HNSW is approximate, and pgvector filters its candidates after the index scan (before 0.8
it has no iterative index scans; the test server runs 0.6). A search sets
``hnsw.ef_search`` to at least 200 and at least the rows it asks for (pgvector's default of
40 found 6 of the true 10 nearest of 20k random 64-dimensional vectors, 200 found 9.9 in the
same time), and when the statement returns fewer rows than it asked for (a selective
filter, or fewer matches) it is repeated once as an exact scan of the matching rows, which
the index cannot serve, so no match is ever missed for lack of candidates. An ordering
operator reads the index only when it is the whole ``ORDER BY``, so ties are not broken by
id in SQL: the backend asks for :func:`candidates` rows, more than ``k``, and rescores them.

Values cross the driver as the blob codec's bytes (:mod:`._rows` is the same on every
store): :func:`register_adapters` teaches each connection of a pgvector store to send a
bound blob as a binary ``vector`` and to read a ``vector`` back as little-endian float32
bytes. The adapter takes every blob SQLAlchemy wraps for the driver (``Binary``), so the one
other binary column, the saved BM25 indexes of :mod:`._snapshots`, is bound as plain bytes,
which stay ``bytea``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy import event

from agent_engine._log import get_logger
from agent_engine.memory.sql._schema import items

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = [
    "EXTENSION",
    "INDEX_PREFIX",
    "PGVECTOR_HOWTO",
    "PGVECTOR_PACKAGE",
    "blobs_to_vectors",
    "candidates",
    "drop_other_indexes",
    "ef_search",
    "extension_available",
    "holds_pgvector",
    "include_name",
    "recorded_dim",
    "index_name",
    "index_vectors",
    "package_installed",
    "register_adapters",
    "search_statement",
    "vector_literal",
    "vector_metadata",
    "vectors_to_blobs",
]

EXTENSION = "vector"
INDEX_PREFIX = "ix_ae_items_embedding_hnsw_"
"""Each dimension's HNSW index is named this plus the dimension."""
PGVECTOR_PACKAGE = "pip install 'agent-engine[postgres]'"
"""What installs the ``pgvector`` Python package next to psycopg."""
PGVECTOR_HOWTO = (
    "install the pgvector extension on the server (https://github.com/pgvector/pgvector; "
    "the role needs the right to CREATE EXTENSION vector, or an administrator runs it) and "
    "run `agent-engine db upgrade`"
)
"""How to move a plain PostgreSQL store to in-database vector search."""
_EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search
_EF_SEARCH_MIN = 200  # pgvector's default, 40, misses too many (see above)
_INDEX_LOCK = 0x61655F686E73  # "ae_hns": serializes index creation across processes
_COPY_CHUNK = 1000


def vector_literal(vector: Any) -> str:
    """The pgvector text form of a float32 vector (each float's shortest exact decimal)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(repr(value) for value in values) + "]"


def _vector_type(dim: int | None = None) -> Any:
    from pgvector.sqlalchemy import VECTOR  # noqa: PLC0415 - only pgvector stores need it

    return VECTOR(dim)


# --------------------------------------------------------------------- detection


def extension_available(connection: sa.Connection) -> bool:
    """Whether the server offers the ``vector`` extension (installed or installable)."""
    query = sa.text("SELECT 1 FROM pg_available_extensions WHERE name = :name")
    return connection.execute(query, {"name": EXTENSION}).first() is not None


def _type_visible(connection: sa.Connection) -> bool:
    found = connection.execute(sa.text("SELECT to_regtype('vector') IS NOT NULL")).scalar()
    return bool(found)


def package_installed() -> bool:
    """Whether the ``pgvector`` Python package (extra ``postgres``) can be imported."""
    try:
        import pgvector.sqlalchemy  # noqa: F401, PLC0415 - a probe
    except ImportError:
        return False
    return True


def holds_pgvector(connection: sa.Connection) -> bool:
    """Whether ``ae_items.embedding`` is a pgvector column (else a blob, or not PostgreSQL)."""
    if connection.dialect.name != "postgresql":
        return False
    query = sa.text(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass('ae_items') AND attname = 'embedding' "
        "AND NOT attisdropped"
    )
    kind = connection.execute(query).scalar()
    return kind is not None and str(kind).split(".")[-1].startswith("vector")


def _enable(connection: sa.Connection, log: FilteringBoundLogger) -> bool:
    """Create the extension if the server has it; whether its type is usable here."""
    if not extension_available(connection):
        log.info("vector_search", search="scan", reason="no pgvector on server", how=PGVECTOR_HOWTO)
        return False
    if not package_installed():
        log.warning(
            "vector_search",
            search="scan",
            reason="the pgvector Python package is missing",
            how=f"{PGVECTOR_PACKAGE} and run `agent-engine db upgrade`",
        )
        return False
    if not _type_visible(connection):
        try:
            with connection.begin_nested():
                connection.execute(sa.text(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}"))
        except sa.exc.DBAPIError as error:
            log.warning(
                "vector_search",
                search="scan",
                reason=f"cannot create the extension: {error.orig}",
                how=PGVECTOR_HOWTO,
            )
            return False
    if not _type_visible(connection):
        log.warning(
            "vector_search",
            search="scan",
            reason="the vector extension is installed in a schema outside the search_path",
            how="add the extension's schema to the search_path",
        )
        return False
    return True


# --------------------------------------------------------------------- migration


def recorded_dim(connection: sa.Connection) -> int | None:
    """The dimension recorded as the store's (``None``: none yet), read without the models."""
    value = connection.execute(
        sa.text("SELECT value FROM ae_store_meta WHERE key = 'embedder'")
    ).scalar()
    return None if value is None else int(json.loads(value)["dim"])


def blobs_to_vectors(connection: sa.Connection, dim: int | None) -> int:
    """Enable pgvector and move a blob ``embedding`` column to a ``vector`` one, in place.

    A no-op (returning 0) when the column already is one, or when the server cannot have
    the extension (logged, with the way to get it). Returns how many vectors were carried
    over; with ``dim`` (the store's recorded dimension) its HNSW index is created too.
    """
    log = get_logger(component="sql", feature="pgvector")
    if connection.dialect.name != "postgresql" or holds_pgvector(connection):
        return 0
    if not _enable(connection, log):
        return 0
    connection.execute(sa.text("ALTER TABLE ae_items ADD COLUMN embedding_vector vector"))
    carried = _copy(
        connection,
        "embedding",
        "embedding_vector",
        lambda blob: vector_literal(np.frombuffer(blob, dtype="<f4")),
        "CAST(:value AS vector)",
    )
    connection.execute(sa.text("ALTER TABLE ae_items DROP COLUMN embedding"))
    connection.execute(sa.text("ALTER TABLE ae_items RENAME COLUMN embedding_vector TO embedding"))
    if dim is not None:
        index_vectors(connection, dim)
    log.info("vector_search", search="pgvector", vectors_carried=carried, dim=dim)
    return carried


def vectors_to_blobs(connection: sa.Connection) -> int:
    """The way back: the ``vector`` column becomes a blob again, its HNSW indexes dropped."""
    if not holds_pgvector(connection):
        return 0
    drop_other_indexes(connection, None)
    connection.execute(sa.text("ALTER TABLE ae_items ADD COLUMN embedding_blob bytea"))
    carried = _copy(
        connection,
        "embedding::text",
        "embedding_blob",
        _text_to_blob,
        ":value",
    )
    connection.execute(sa.text("ALTER TABLE ae_items DROP COLUMN embedding"))
    connection.execute(sa.text("ALTER TABLE ae_items RENAME COLUMN embedding_blob TO embedding"))
    return carried


def _text_to_blob(text: str) -> bytes:
    return np.array(text[1:-1].split(","), dtype=np.float64).astype("<f4").tobytes()


def _copy(
    connection: sa.Connection,
    source: str,
    target: str,
    convert: Callable[[Any], Any],
    value: str,
) -> int:
    """Copy every non-null ``source`` into ``target`` through ``convert``, in id order."""
    carried = 0
    after: str | None = None
    read = sa.text(
        f"SELECT id, {source} AS value FROM ae_items WHERE embedding IS NOT NULL "  # noqa: S608 - fixed names
        "AND (CAST(:after AS text) IS NULL OR id > :after) ORDER BY id LIMIT :limit"
    )
    write = sa.text(f"UPDATE ae_items SET {target} = {value} WHERE id = :id")  # noqa: S608
    while True:
        rows = connection.execute(read, {"after": after, "limit": _COPY_CHUNK}).all()
        if not rows:
            return carried
        connection.execute(write, [{"id": row.id, "value": convert(row.value)} for row in rows])
        carried += len(rows)
        after = rows[-1].id


# --------------------------------------------------------------------- indexes


def index_name(dim: int) -> str:
    """The name of the HNSW index of ``dim``-dimensional vectors."""
    return f"{INDEX_PREFIX}{int(dim)}"


def index_vectors(connection: sa.Connection, dim: int, *, keep_others: bool = False) -> None:
    """Make sure the vectors of ``dim`` dimensions have their HNSW index (drop the others').

    Runs in the caller's transaction (the one recording ``dim``), under a transaction-level
    advisory lock, so two processes recording it at once create one index. ``keep_others``
    keeps the other dimensions' indexes (a re-embedding under way still has the old vectors).
    """
    dim = int(dim)
    connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _INDEX_LOCK})
    if not keep_others:
        drop_other_indexes(connection, dim)
    connection.execute(
        sa.text(
            f"CREATE INDEX IF NOT EXISTS {index_name(dim)} ON ae_items "
            f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
            f"WHERE vector_dims(embedding) = {dim}"
        )
    )


def drop_other_indexes(connection: sa.Connection, dim: int | None) -> None:
    """Drop the HNSW indexes of every dimension but ``dim`` (``None``: all of them)."""
    names = connection.execute(
        sa.text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'ae_items' "
            "AND schemaname = current_schema() AND indexname LIKE :prefix"
        ),
        {"prefix": INDEX_PREFIX + "%"},
    ).scalars()
    keep = None if dim is None else index_name(dim)
    for name in list(names):
        if name != keep and name.removeprefix(INDEX_PREFIX).isdigit():
            connection.execute(sa.text(f'DROP INDEX IF EXISTS "{name}"'))


# --------------------------------------------------------------------- search


def search_statement(
    where: sa.ColumnElement[bool], query: Any, k: int, *, exact: bool
) -> sa.Select[Any]:
    """One ``SELECT`` of the ``k`` matching items nearest ``query``, with their distance.

    The ordering is the index's expression alone, so the planner can read the HNSW index
    in distance order; ``exact`` adds zero to it, which no index can serve: the matching
    rows (found through the filter's own indexes) are all measured and sorted, ties by id.
    """
    dim = int(np.asarray(query).shape[0])
    typed = _vector_type(dim)
    stored = sa.cast(items.c.embedding, typed)
    probe = sa.cast(sa.bindparam("probe", vector_literal(query), type_=sa.Text()), typed)
    distance = stored.op("<=>", return_type=sa.Float())(probe)
    # An ordering operator reads the index only as the whole ORDER BY: no id after it.
    ordering = [distance + sa.literal_column("0"), items.c.id] if exact else [distance]
    dims = sa.func.vector_dims(items.c.embedding) == sa.literal_column(str(dim))
    return (
        sa.select(*items.c, distance.label("distance"))
        .where(where, items.c.embedding.is_not(None), dims)
        .order_by(*ordering)
        .limit(k)
    )


def candidates(k: int) -> int:
    """How many nearest rows a search for ``k`` hits asks the database for.

    pgvector sums in single precision in another order than numpy, so two items whose
    cosines differ in the last bits can swap places; the backend rescores a few more rows
    than ``k`` as the scan scores them, so the ``k`` it keeps are the scan's.
    """
    return k + max(8, k)


def ef_search(k: int) -> int:
    """``hnsw.ef_search`` for a search of ``k`` rows: at least ``k`` and 200, at most 1,000."""
    return max(_EF_SEARCH_MIN, min(_EF_SEARCH_MAX, k))


# --------------------------------------------------------------------- driver adapters


def register_adapters(engine: sa.Engine) -> None:
    """Have every new connection of ``engine`` send blobs as ``vector`` and read them as blobs.

    Connections already in the pool are closed, so none is left without the adapters.
    """
    from psycopg import Binary  # noqa: PLC0415 - only pgvector stores need it
    from psycopg.adapt import Dumper, Loader  # noqa: PLC0415
    from psycopg.pq import Format  # noqa: PLC0415

    class _BlobAsVector(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            raw = obj.obj if isinstance(obj, Binary) else obj
            values = np.frombuffer(bytes(raw), dtype="<f4")
            return struct.pack(">HH", len(values), 0) + values.astype(">f4").tobytes()

    class _VectorAsBlob(Loader):
        format = Format.TEXT

        def load(self, data: Any) -> bytes:
            return _text_to_blob(bytes(data).decode("ascii"))

    @event.listens_for(engine, "connect")
    def _adapt(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT to_regtype('vector')::oid")
            row = cursor.fetchone()
        dbapi_connection.commit()
        oid = int(row[0]) if row is not None and row[0] is not None else 0
        if not oid:  # pragma: no cover - the column's type exists while the column does
            return
        dumper = type("_BlobAsVectorDumper", (_BlobAsVector,), {"oid": oid})
        dbapi_connection.adapters.register_dumper(Binary, dumper)
        dbapi_connection.adapters.register_loader(oid, _VectorAsBlob)

    engine.dispose()


# --------------------------------------------------------------------- schema comparison


def vector_metadata() -> sa.MetaData:
    """The schema of a pgvector store: a PostgreSQL store's, with a ``vector`` embedding column."""
    from agent_engine.memory.sql._fulltext import postgresql_metadata  # noqa: PLC0415

    copy = postgresql_metadata()
    copy.tables["ae_items"].c.embedding.type = _vector_type()
    return copy


def include_name(name: str | None, type_: str, _parents: Any) -> bool:
    """Leave the per-dimension HNSW indexes out of alembic comparisons: made at run time."""
    return not (type_ == "index" and name is not None and name.startswith(INDEX_PREFIX))

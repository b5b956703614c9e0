"""Schema revisions: where the alembic scripts are, which revision a database is at, upgrades.

The scripts live in the top-level ``migrations/`` folder of a checkout and are shipped inside
the wheel as ``agent_engine/_migrations``, so an installed package finds them through
``importlib.resources``. An upgrade runs in one transaction that first takes a lock
(``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL) and only then reads the
revision, so two processes upgrading the same new database at once both succeed: the second
finds the work done. On PostgreSQL an upgrade of a store already at the head revision still
moves its vectors to pgvector if the server has gained the extension since
(:mod:`._pgvector`). Migrations run without the backend's statement timeout: rebuilding a
large table may take longer than any query should.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agent_engine.errors import BackendUnavailableError, SchemaVersionError
from agent_engine.memory.sql import _pgvector
from agent_engine.memory.sql._engine import (
    IMMEDIATE,
    UNTIMED,
    create_engine,
    is_sqlite,
    retrying,
    sqlite_file,
)

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

# alembic is imported where it is used: importing agent_engine (and starting the CLI) stays
# fast, and only opening or migrating a database pays for it.

__all__ = [
    "UPGRADE_COMMAND",
    "VERSION_TABLE",
    "alembic_config",
    "check_revision",
    "current_revision",
    "database_revision",
    "head_revision",
    "upgrade",
    "upgrade_database",
]

VERSION_TABLE = "ae_alembic_version"
UPGRADE_COMMAND = "agent-engine db upgrade"
_ADVISORY_LOCK = 0x61655F6D6967  # "ae_mig": serializes upgrades of one PostgreSQL database


def migrations_path() -> Path:
    """The alembic script folder: inside the installed package, else the checkout's."""
    shipped = importlib.resources.files("agent_engine") / "_migrations"
    if shipped.is_dir():
        return Path(str(shipped))
    checkout = Path(__file__).resolve().parents[3] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    raise BackendUnavailableError(  # pragma: no cover - a broken installation
        "the database migrations are missing from this installation of agent_engine"
    )


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An alembic configuration for the shipped scripts (bound to ``connection`` if given)."""
    from alembic.config import Config  # noqa: PLC0415 - see the note on imports above

    config = Config()
    config.set_main_option("script_location", str(migrations_path()))
    config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - see the note on imports above

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The revision this version of agent_engine works with."""
    head = _scripts().get_current_head()
    if head is None:  # pragma: no cover - the scripts always have a head
        raise BackendUnavailableError("the shipped migrations have no head revision")
    return head


_REVISION = re.compile(r'^(down_revision|revision) = (?:"([^"]+)"|None)$', re.MULTILINE)


@functools.cache
def _listed_head(folder: Path) -> str | None:
    """The head of the scripts in ``folder``, read from their ``revision`` lines.

    Opening a store at the head then needs no alembic import (a tenth of a second of every
    command). ``None`` when the scripts do not form one chain: alembic decides then.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (folder / "versions").glob("*.py"):
        found = dict(_REVISION.findall(script.read_text()))
        if "revision" not in found:
            return None
        revisions.add(found["revision"])
        if found.get("down_revision"):
            parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def current_revision(connection: sa.Connection) -> str | None:
    """The revision recorded in the database (``None``: no schema yet).

    Read with one query rather than through alembic, which every open would otherwise import.
    """
    if not connection.dialect.has_table(connection, VERSION_TABLE):
        return None
    version = sa.table(VERSION_TABLE, sa.column("version_num"))
    found = connection.execute(sa.select(version.c.version_num)).scalars().all()
    if len(found) > 1:  # pragma: no cover - a linear history records one row
        raise SchemaVersionError(f"{VERSION_TABLE} holds several revisions: {found}")
    return found[0] if found else None


def check_revision(current: str | None, *, url: str) -> None:
    """Raise :class:`SchemaVersionError` unless ``current`` is the head revision."""
    if current is not None and current == _listed_head(migrations_path()):
        return
    head = head_revision()
    if current == head:
        return
    where = _display(url)
    if current is None:
        raise SchemaVersionError(
            f"{where} has no agent_engine schema yet; create it with `{UPGRADE_COMMAND}` "
            "(or open it with upgrade=True)",
            current=None,
            expected=head,
        )
    if not _known(current):
        raise SchemaVersionError(
            f"{where} is at schema revision {current!r}, which this version of agent_engine "
            f"does not know (expected {head!r}): it was written by a newer version; "
            "upgrade agent_engine. The database was not modified.",
            current=current,
            expected=head,
        )
    raise SchemaVersionError(
        f"{where} is at schema revision {current!r}, older than {head!r}; run "
        f"`{UPGRADE_COMMAND}` (or open it with upgrade=True)",
        current=current,
        expected=head,
    )


def _known(revision: str) -> bool:
    from alembic.util import CommandError  # noqa: PLC0415 - see the note on imports above

    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


def _display(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:  # pragma: no cover - callers pass parsed URLs
        return repr(url)


def upgrade(engine: sa.Engine, *, url: str, revision: str = "head") -> None:
    """Bring the database behind ``engine`` to ``revision`` in one locked transaction."""
    from alembic import command  # noqa: PLC0415 - see the note on imports above

    def run() -> None:
        with engine.connect() as connection:
            connection.execution_options(**{IMMEDIATE: True, UNTIMED: True})
            with connection.begin():
                if not is_sqlite(engine):
                    connection.execute(sa.text("SET LOCAL statement_timeout = 0"))
                    connection.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK}
                    )
                current = current_revision(connection)
                if current is not None and not _known(current):
                    check_revision(current, url=url)
                command.upgrade(alembic_config(connection), revision)
                if current == head_revision() and not is_sqlite(engine):
                    # A store made on a server without pgvector moves to it once it is there.
                    _pgvector.blobs_to_vectors(connection, _pgvector.recorded_dim(connection))

    retrying(run, "upgrade")


def downgrade(engine: sa.Engine, revision: str) -> None:
    """Take the database back to ``revision`` (``"base"``: drop the schema); for tests and ops."""
    from alembic import command  # noqa: PLC0415 - see the note on imports above

    with engine.connect() as connection:
        connection.execution_options(**{IMMEDIATE: True})
        with connection.begin():
            command.downgrade(alembic_config(connection), revision)


def upgrade_database(url: str) -> str:
    """Create or upgrade the schema of the database at ``url``; return its revision (head).

    Safe to run concurrently from several processes, and a no-op on a current database. A
    database written by a newer agent_engine is refused with
    :class:`~agent_engine.errors.SchemaVersionError` and left untouched.
    """
    engine = create_engine(url)
    try:
        upgrade(engine, url=url)
    except sa.exc.OperationalError as error:
        raise BackendUnavailableError(f"cannot open {_display(url)}: {error.orig}") from None
    finally:
        engine.dispose()
    return head_revision()


def database_revision(url: str) -> str | None:
    """The schema revision of the database at ``url`` (``None``: no schema yet).

    Only reads: a SQLite file that does not exist is not created (its revision is ``None``),
    and an existing one is opened read-only.
    """
    file = sqlite_file(url) if isinstance(url, str) else None
    if file is not None and not file.exists():
        return None
    engine = create_engine(url, read_only=True)
    try:
        with engine.connect() as connection:
            return current_revision(connection)
    except sa.exc.OperationalError as error:
        raise BackendUnavailableError(f"cannot open {_display(url)}: {error.orig}") from None
    finally:
        engine.dispose()

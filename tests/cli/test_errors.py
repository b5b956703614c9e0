"""Errors as a user sees them: one line on stderr, a non-zero exit code, no traceback."""

from __future__ import annotations

import importlib.util
import signal

import pexpect
import pytest

from agent_engine import (
    BackendUnavailableError,
    ConfirmationDeclined,
    IndexCorruptError,
    ItemNotFoundError,
    SchemaVersionError,
    ValidationError,
)
from agent_engine.cli._errors import (
    EXIT_DECLINED,
    EXIT_ERROR,
    EXIT_INTERNAL,
    describe,
)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


class TestUserErrors:
    def test_unsupported_url(self, cli):
        """A URL of an unknown scheme names the scheme and the URLs that work."""
        result = cli("--db", "mysql://root@localhost/x", "memory", "list")
        assert result.code == EXIT_ERROR
        line = one_line(result.err)
        assert line.startswith("error: unsupported database URL scheme 'mysql'")
        assert "sqlite:///PATH" in line
        assert result.out == ""

    def test_not_a_url(self, cli):
        """Something that is not a URL at all is refused the same way."""
        result = cli("--db", "just-a-name", "memory", "status")
        assert result.code == EXIT_ERROR
        assert "not a database URL: 'just-a-name'" in one_line(result.err)

    def test_malformed_sqlite_url(self, cli):
        """A SQLite URL without its slashes says what shape it should have."""
        result = cli("--db", "sqlite:memory.db", "memory", "list")
        assert result.code == EXIT_ERROR
        assert one_line(result.err) == (
            "error: malformed SQLite URL 'sqlite:memory.db'; expected sqlite:///PATH"
        )

    def test_missing_postgresql_database(self, cli):
        """A PostgreSQL database that does not exist (or a server that is down) is one line."""
        url = "postgresql+psycopg://postgres@127.0.0.1:5432/agent_engine_no_such_database"
        result = cli("--db", url, "memory", "list")
        assert result.code == EXIT_ERROR
        assert one_line(result.err).startswith("error: ")

    def test_missing_sqlite_file(self, cli, tmp_path):
        """An explicit SQLite file that does not exist is reported, not silently created."""
        missing = tmp_path / "nowhere" / "memory.db"
        result = cli("--db", f"sqlite:///{missing}", "memory", "list")
        assert result.code == EXIT_ERROR
        assert f"no database at {missing}" in one_line(result.err)
        assert not missing.parent.exists()

    def test_unknown_id(self, cli):
        """An id that is not in the scope is an error naming the id and the scope."""
        result = cli("memory", "show", "no-such-id")
        assert result.code == EXIT_ERROR
        line = one_line(result.err)
        assert "no item with id 'no-such-id'" in line
        assert "project:webshop" in line
        assert "global:ada" in line

    def test_debug_shows_the_traceback(self, cli):
        """--debug adds the traceback above the same one-line message."""
        result = cli("--debug", "memory", "pin", "no-such-id")
        assert result.code == EXIT_ERROR
        assert "Traceback (most recent call last)" in result.err
        assert "ItemNotFoundError" in result.err
        assert result.err.rstrip().splitlines()[-1].startswith("error: no item with id")

    def test_declined_global_preference(self, cli):
        """With nobody to answer, a global preference is declined: exit 3, nothing written."""
        result = cli(
            "--embedder", "hashing", "memory", "add", "Answer in French",
            "--kind", "preference", "--tier", "global",
        )  # fmt: skip
        assert result.code == EXIT_DECLINED
        assert "[y/N]" in result.err
        assert result.err.rstrip().splitlines()[-1] == (
            "declined: add_preference was not confirmed; nothing was written"
        )
        assert "added" not in result.out

    def test_usage_error(self, cli):
        """An unknown command is a usage error (exit 2), not a crash."""
        result = cli("memory", "frobnicate")
        assert result.code == 2
        assert "No such command" in result.err
        assert "Traceback" not in result.err

    def test_negative_statement_timeout_is_a_usage_error(self, sql_cli):
        """--statement-timeout takes a non-negative number of seconds."""
        result = sql_cli("--statement-timeout", "-1", "memory", "list")
        assert result.code == 2
        assert "--statement-timeout" in result.err
        assert "Traceback" not in result.err

    def test_bad_statement_timeout_variable(self, sql_cli):
        """A $AGENT_ENGINE_STATEMENT_TIMEOUT that is not a number is named in one line."""
        sql_cli.env["AGENT_ENGINE_STATEMENT_TIMEOUT"] = "soon"
        result = sql_cli("memory", "add", "--kind", "note", "hello")
        assert result.code == EXIT_ERROR
        assert one_line(result.err) == (
            "error: $AGENT_ENGINE_STATEMENT_TIMEOUT must be a number of seconds (0: no limit), "
            "got 'soon'"
        )

    def test_forget_needs_id_or_query(self, cli):
        """forget without an id or a query says what it needs."""
        result = cli("memory", "forget")
        assert result.code == EXIT_ERROR
        assert one_line(result.err) == "error: give either an ID or --query WORDS (not both)"

    def test_db_commands_need_sql(self, cli):
        """memory:// has no schema; db current says so."""
        result = cli("db", "current")
        assert result.code == EXIT_ERROR
        assert "has no schema" in one_line(result.err)


class TestDescribe:
    @pytest.mark.parametrize(
        ("error", "start", "code"),
        [
            pytest.param(ItemNotFoundError("x"), "error: no item with id 'x'", 1, id="not-found"),
            pytest.param(
                BackendUnavailableError("cannot connect\n  to server"),
                "error: cannot connect to server",
                1,
                id="unavailable-multiline",
            ),
            pytest.param(
                IndexCorruptError("the FAISS index at /x is unreadable"),
                "error: the FAISS index at /x is unreadable",
                1,
                id="corrupt-index",
            ),
            pytest.param(
                SchemaVersionError("database is at revision 0001, code expects 0002"),
                "error: database is at revision 0001, code expects 0002 (run `agent-engine db",
                1,
                id="schema-hint",
            ),
            pytest.param(ValidationError("bad importance"), "error: bad importance", 1, id="bad"),
            pytest.param(
                ConfirmationDeclined("clear_global"),
                "declined: clear_global was not confirmed",
                EXIT_DECLINED,
                id="declined",
            ),
            pytest.param(
                RuntimeError("boom"), "internal error: RuntimeError: boom", EXIT_INTERNAL, id="bug"
            ),
        ],
    )
    def test_one_line_and_code(self, error, start, code):
        """Every error becomes one line with the exit code of its kind."""
        line, exit_code = describe(error)
        assert line.startswith(start)
        assert "\n" not in line
        assert exit_code == code


class TestInterrupt:
    def test_ctrl_c_says_interrupted_and_exits_1(self, sql_cli):
        """SIGINT while a command waits (here: on a confirmation) prints one line, exit 1."""
        added = sql_cli("--json", "--embedder", "hashing", "memory", "add", "Reproduce first")
        item = added.json()["id"]
        child = pexpect.spawn(
            sql_cli.command[0],
            [*sql_cli.command[1:], "--embedder", "hashing", "memory", "promote", item, "--to",
             "global"],
            env=sql_cli.env,
            cwd=str(sql_cli.cwd),
            encoding="utf-8",
            timeout=60,
        )  # fmt: skip
        child.expect_exact("[y/N]")
        child.kill(signal.SIGINT)
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == EXIT_ERROR
        assert child.before.strip().splitlines()[-1] == "interrupted"
        assert "Traceback" not in child.before
        assert sql_cli("--json", "memory", "list", "--tier", "global").json() == []

    def test_interrupt_is_described(self):
        """KeyboardInterrupt maps to the documented line and exit code."""
        assert describe(KeyboardInterrupt()) == ("interrupted", EXIT_ERROR)


class TestUsageWording:
    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            pytest.param(
                ("memory", "add", "x", "--importance", "abc"),
                "Invalid value for '--importance': 'abc' is not a number",
                id="number",
            ),
            pytest.param(
                ("memory", "list", "--limit", "2.5"),
                "Invalid value for '--limit': '2.5' is not a whole number",
                id="integer",
            ),
            pytest.param(
                ("demo", "--budget", "5"),
                "Invalid value for '--budget': must be at least 32, got 5",
                id="minimum",
            ),
            pytest.param(
                ("memory", "list", "--tier", "foo"),
                "Invalid value for '--tier' / '-t': 'foo' is not one of 'project', 'global', 'all'",
                id="choice",
            ),
            pytest.param(
                ("--embedder", "word2vec", "memory", "list"),
                "Invalid value for '--embedder' (env var: 'AGENT_ENGINE_EMBEDDER'): 'word2vec' "
                "is not one of 'auto', 'minilm', 'hashing'",
                id="global-choice",
            ),
        ],
    )
    def test_bad_values_are_told_in_the_commands_words(self, cli, args, expected):
        """A bad option value is a usage error in plain words, never the parser's internals."""
        result = cli(*args)
        assert result.code == 2
        assert result.err.strip().splitlines()[-1] == f"Error: {expected}"
        for internal in ("Input should be", "Value error", "pydantic", "<bool>", "╭"):
            assert internal not in result.err

    def test_usage_errors_keep_the_usage_line(self, cli):
        """A usage error still shows the command's usage and where to find help."""
        result = cli("memory", "list", "--limit", "many")
        assert result.err.startswith("Usage: agent-engine memory list [OPTIONS]")
        assert "Try 'agent-engine memory list -h' for help." in result.err


class TestMissingDriver:
    def test_install_hint(self, cli):
        """A PostgreSQL URL whose driver is not installed says how to install one."""
        driver = _missing_driver()
        result = cli("--db", f"postgresql+{driver}://postgres@127.0.0.1/test", "memory", "list")
        assert result.code == EXIT_ERROR
        line = one_line(result.err)
        assert f"the PostgreSQL driver {driver!r} is not installed" in line
        assert "pip install 'agent-engine[postgres]'" in line


def _missing_driver() -> str:
    """A PostgreSQL driver SQLAlchemy knows that is not installed here."""
    for driver, module in (("pg8000", "pg8000"), ("psycopg2", "psycopg2"), ("asyncpg", "asyncpg")):
        if importlib.util.find_spec(module) is None:
            return driver
    pytest.skip("every PostgreSQL driver is installed")  # pragma: no cover
    return ""  # pragma: no cover

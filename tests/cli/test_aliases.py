"""``memory alias add/list/remove`` on a SQLite file: the project's aliases persist between runs,
and a build of the project's tasks uses them.
"""

from __future__ import annotations

from agent_engine import ContextAssembler, ContextRequest, SQLAlchemyBackend, Task
from agent_engine.cli._errors import EXIT_ERROR
from agent_engine.tiers import MemoryStores


def alias(cli, *args):
    result = cli("--json", "memory", "alias", *args)
    assert result.code == 0, result.err
    return result.json()


def test_add_list_remove_persist(sql_cli, sqlite_url):
    """Each command is a process of its own: what one adds, the next lists, and a build uses."""
    assert alias(sql_cli, "add", "Mel", "Melanie", "Mellie") == {
        "term": "Mel",
        "expansions": ["Melanie", "Mellie"],
    }
    alias(sql_cli, "add", "auth", "authentication")
    alias(sql_cli, "add", "--project", "elsewhere", "auth", "authorization")
    assert alias(sql_cli, "list") == {"auth": ["authentication"], "mel": ["Melanie", "Mellie"]}
    with SQLAlchemyBackend(sqlite_url) as backend:
        stores = MemoryStores(backend, confirm=lambda _request: True)
        stores.project_store("webshop").add_decision("Authentication moved to OAuth.")
        package = ContextAssembler(stores).build_context(
            Task(id="t", project_id="webshop", user_id="ada"),
            ContextRequest(query="auth", budget_tokens=400),
        )
        assert [s.item.text for s in package.selections] == ["Authentication moved to OAuth."]
    assert alias(sql_cli, "remove", "MEL", "Mellie") == {"term": "MEL", "removed": 1}
    assert alias(sql_cli, "remove", "auth") == {"term": "auth", "removed": 1}
    assert alias(sql_cli, "list") == {"mel": ["Melanie"]}
    assert alias(sql_cli, "list", "--project", "elsewhere") == {"auth": ["authorization"]}
    table = sql_cli("memory", "alias", "list")
    assert table.code == 0
    assert "Melanie" in table.out


def test_mistakes_are_one_line_and_change_nothing(sql_cli):
    """An expansion that is the term itself, or a term without a word: an error, nothing kept."""
    alias(sql_cli, "add", "db", "database")
    for args in (("add", "db", "DB"), ("add", "...", "x")):
        result = sql_cli("memory", "alias", *args)
        assert result.code == EXIT_ERROR
        assert len(result.err.strip().splitlines()) == 1
    assert alias(sql_cli, "list") == {"db": ["database"]}

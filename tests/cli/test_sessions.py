"""A session's memory from the shell: add to it, list it, check it, finalise it."""

from __future__ import annotations

from agent_engine.cli._errors import EXIT_ERROR


def run(cli, *args):
    result = cli("--json", "--embedder", "hashing", *args)
    assert result.code == 0, result.err
    return result.json()


def test_a_session_is_added_to_listed_and_finalised(sql_cli):
    """Each command a process: the session's memory is kept in the store between them."""
    added = run(sql_cli, "memory", "add", "The proxy drops uploads over 1 MB.", "--session", "s1")
    assert (added["tier"], added["session"]) == ("session", "s1")
    run(sql_cli, "memory", "add", "Releases go out on Tuesdays.")
    listed = run(sql_cli, "memory", "list", "--session", "s1")
    assert [item["text"] for item in listed] == ["The proxy drops uploads over 1 MB."]
    assert [item["tier"] for item in run(sql_cli, "memory", "list")] == ["project"]
    saved = run(sql_cli, "memory", "checkpoint", "--session", "s1")
    assert saved["namespace"] == "session:webshop:ada:s1"

    end = run(sql_cli, "memory", "finish-session", "s1")
    assert (end["removed"], end["promoted"]) == (1, [])
    assert end["summary"] == "- The proxy drops uploads over 1 MB."
    project = run(sql_cli, "memory", "list")
    kinds = sorted(item["kind"] for item in project)
    assert kinds == ["note", "session_summary"]
    assert run(sql_cli, "memory", "list", "--session", "s1") == []
    assert run(sql_cli, "memory", "checkpoint", "--list", "--session", "s1") == []


def test_finishing_an_unknown_session_is_refused(sql_cli):
    """A session that holds nothing is most likely a typo: say so, change nothing."""
    run(sql_cli, "memory", "add", "Releases go out on Tuesdays.", "--session", "s1")
    result = sql_cli("memory", "finish-session", "s2")
    assert result.code == EXIT_ERROR
    assert "holds no memory" in result.err
    assert len(run(sql_cli, "memory", "list", "--session", "s1")) == 1


def test_one_scope_at_a_time(sql_cli):
    """--task and --session, or --session and --tier, name two scopes: refused."""
    both = sql_cli("memory", "list", "--task", "t", "--session", "s")
    assert both.code != 0
    assert "--task and --session" in both.err
    tiered = sql_cli("memory", "add", "x y z", "--session", "s", "--tier", "global")
    assert tiered.code != 0
    assert "--session and --tier" in tiered.err
    exported = sql_cli("memory", "export", "-", "--session", "s", "--tier", "global")
    assert exported.code != 0
    assert "--session and --tier" in exported.err

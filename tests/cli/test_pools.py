"""A project's shared pools from the shell: agents, grants, reading and posting as an agent."""

from __future__ import annotations

from agent_engine.cli._errors import EXIT_ERROR


def run(cli, *args):
    result = cli("--json", "--embedder", "hashing", *args)
    assert result.code == 0, result.err
    return result.json()


def test_grants_decide_who_reads_and_posts(sql_cli):
    """Each command a process: the grants in the store decide, and every post names its agent."""
    assert run(sql_cli, "memory", "pool", "register", "scout")["new"] is True
    run(sql_cli, "memory", "pool", "register", "critic")
    granted = run(sql_cli, "memory", "pool", "grant", "notes", "scout", "--write", "--by", "ada")
    assert (granted["access"], granted["granted_by"]) == ("write", "ada")
    run(sql_cli, "memory", "pool", "grant", "notes", "critic")
    posted = run(
        sql_cli, "memory", "pool", "post", "notes", "Staging reboots at 02:00.", "-a", "scout"
    )
    assert (posted["agent"], posted["namespace"]) == ("scout", "pool:webshop:notes")
    read = run(sql_cli, "memory", "pool", "list", "notes", "--agent", "critic")
    assert [item["text"] for item in read] == ["Staging reboots at 02:00."]
    refused = sql_cli(
        "--embedder", "hashing", "memory", "pool", "post", "notes", "Me too.", "--agent", "critic"
    )
    assert refused.code != 0
    assert "agent 'critic' may not write pool 'notes'" in refused.err
    assert run(sql_cli, "memory", "pool", "revoke", "notes", "critic")["revoked"] is True
    assert [g["agent"] for g in run(sql_cli, "memory", "pool", "grants", "notes")] == ["scout"]
    assert sql_cli("memory", "pool", "list", "notes", "--agent", "critic").code != 0


def test_granting_to_an_unregistered_agent_is_refused(sql_cli):
    """A typo in an agent's name grants nothing and says why."""
    run(sql_cli, "memory", "pool", "register", "scout")
    result = sql_cli("memory", "pool", "grant", "notes", "scuot")
    assert result.code == EXIT_ERROR
    assert "no agent 'scuot' is registered in project:webshop" in result.err
    assert run(sql_cli, "memory", "pool", "grants", "notes") == []

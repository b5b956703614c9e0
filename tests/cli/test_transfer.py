"""``memory export`` and ``memory import`` between two SQLite files, each command a process."""

from __future__ import annotations

import json

import attrs

from agent_engine.cli._errors import EXIT_ERROR


def run(cli, *args):
    result = cli("--json", *args)
    assert result.code == 0, result.err
    return result.json()


def test_a_project_moves_to_another_store_once(sql_cli, tmp_path):
    """Exported from one file, imported into another: the memories, once however often."""
    run(
        sql_cli,
        "--embedder",
        "hashing",
        "memory",
        "add",
        "Prices are integer cents",
        "--kind",
        "decision",
    )
    run(
        sql_cli, "--embedder", "hashing", "memory", "add", "Posts are Markdown", "--project", "blog"
    )
    run(sql_cli, "memory", "alias", "add", "k8s", "kubernetes")
    path = tmp_path / "webshop.jsonl"
    exported = run(sql_cli, "memory", "export", str(path))
    assert (exported["scope"], exported["items"], exported["aliases"]) == ("project:webshop", 1, 1)
    other = attrs.evolve(
        sql_cli, env={**sql_cli.env, "AGENT_ENGINE_DB": f"sqlite:///{tmp_path / 'other.db'}"}
    )
    first = run(other, "--embedder", "hashing", "memory", "import", str(path))
    again = run(other, "--embedder", "hashing", "memory", "import", str(path))
    assert (first["items"], again["items"], again["unchanged"]) == (1, 0, 1)
    listed = run(other, "memory", "list")
    assert [item["text"] for item in listed] == ["Prices are integer cents"]
    assert run(other, "memory", "alias", "list") == {"k8s": ["kubernetes"]}


def test_the_whole_store_to_stdout(sql_cli):
    """``--store -`` writes every scope to stdout; each line is JSON, the last the trailer."""
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Prices are integer cents")
    run(
        sql_cli, "--embedder", "hashing", "memory", "add", "Posts are Markdown", "--project", "blog"
    )
    result = sql_cli("memory", "export", "-", "--store", "--no-vectors")
    assert result.code == 0, result.err
    records = [json.loads(line) for line in result.out.splitlines()]
    assert records[0]["namespace"] is None
    assert records[0]["vectors"] is False
    assert records[-1]["counts"]["item"] == 2


def test_a_damaged_file_is_one_line_and_imports_nothing(sql_cli, tmp_path):
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Prices are integer cents")
    path = tmp_path / "webshop.jsonl"
    run(sql_cli, "memory", "export", str(path))
    path.write_text(path.read_text(encoding="utf-8").replace("cents", "dollars"), encoding="utf-8")
    other = attrs.evolve(
        sql_cli, env={**sql_cli.env, "AGENT_ENGINE_DB": f"sqlite:///{tmp_path / 'other.db'}"}
    )
    result = other("--embedder", "hashing", "memory", "import", str(path))
    assert result.code == EXIT_ERROR
    assert "hash does not match" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert run(other, "memory", "list") == []


def test_rollback_to_an_export_asks_first(sql_cli, tmp_path):
    """What was added since the export is forgotten, once approved; unanswered, nothing moves."""
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Prices are integer cents")
    path = tmp_path / "snapshot.jsonl"
    run(sql_cli, "memory", "export", str(path))
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Tabs, not spaces")
    declined = sql_cli("--embedder", "hashing", "memory", "rollback", str(path))
    assert declined.code != 0
    assert len(run(sql_cli, "memory", "list")) == 2
    done = run(sql_cli, "--embedder", "hashing", "memory", "rollback", str(path), "--yes")
    assert (done["added"], len(done["forgotten"]), done["unchanged"]) == ([], 1, 1)
    assert [item["text"] for item in run(sql_cli, "memory", "list")] == ["Prices are integer cents"]


def test_checkpoint_and_roll_back_to_it(sql_cli):
    """A checkpoint saved by one command is listed and rolled back to by the next ones."""
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Prices are integer cents")
    saved = run(sql_cli, "memory", "checkpoint", "--label", "before the refactor")
    assert (saved["label"], saved["items"]) == ("before the refactor", 1)
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Tabs, not spaces")
    assert [c["id"] for c in run(sql_cli, "memory", "checkpoint", "--list")] == [saved["id"]]
    done = run(sql_cli, "memory", "rollback", "--checkpoint", saved["id"], "--yes")
    assert len(done["forgotten"]) == 1
    assert [item["text"] for item in run(sql_cli, "memory", "list")] == ["Prices are integer cents"]
    unknown = sql_cli("memory", "rollback", "--checkpoint", "no-such-checkpoint", "--yes")
    assert unknown.code != 0
    assert "no checkpoint with id 'no-such-checkpoint'" in unknown.err


def test_rollback_to_another_scopes_file_is_refused(sql_cli, tmp_path):
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Prices are integer cents")
    path = tmp_path / "webshop.jsonl"
    run(sql_cli, "memory", "export", str(path))
    run(sql_cli, "--embedder", "hashing", "memory", "add", "Posts are Markdown", "-p", "blog")
    result = sql_cli(
        "--embedder", "hashing", "memory", "rollback", str(path), "--project", "blog", "--yes"
    )
    assert result.code == EXIT_ERROR
    assert "snapshot of project:webshop, not of project:blog" in result.err
    assert [i["text"] for i in run(sql_cli, "memory", "list", "-p", "blog")] == [
        "Posts are Markdown"
    ]


def test_a_session_forks_and_each_goes_its_own_way(sql_cli, tmp_path):
    """``memory fork``: the fork lists the parent's memories; later writes stay on their side."""
    add = ("--embedder", "hashing", "memory", "add")
    run(sql_cli, *add, "The login test sleeps", "--session", "plan", "-p", "shop")
    record = run(sql_cli, "memory", "fork", "plan-b", "--session", "plan", "-p", "shop")
    assert (record["parent"], record["detached"]) == ("session:shop:ada:plan", False)
    run(sql_cli, *add, "Retry the upload", "--session", "plan", "-p", "shop")
    run(sql_cli, *add, "Pin the browser", "--session", "plan-b", "-p", "shop")
    listed = run(sql_cli, "memory", "list", "--session", "plan-b", "-p", "shop")
    assert {i["text"] for i in listed} == {"The login test sleeps", "Pin the browser"}
    lineage = run(sql_cli, "memory", "fork", "--lineage", "--session", "plan-b", "-p", "shop")
    assert [r["namespace"] for r in lineage] == ["session:shop:ada:plan-b"]
    path = tmp_path / "plan-b.jsonl"
    exported = run(sql_cli, "memory", "export", str(path), "--session", "plan-b", "-p", "shop")
    assert exported["items"] == 2  # what the fork reads, its parent's memory included
    saved = run(sql_cli, "memory", "checkpoint", "--session", "plan", "-p", "shop")
    from_saved = run(
        sql_cli,
        "memory",
        "fork",
        "plan-c",
        "--session",
        "plan",
        "-p",
        "shop",
        "--checkpoint",
        saved["id"],
    )
    assert (from_saved["checkpoint"], from_saved["detached"]) == (saved["id"], True)
    missing = sql_cli("memory", "fork", "d", "--session", "plan", "-p", "shop", "--checkpoint", "x")
    assert missing.code == EXIT_ERROR
    assert "no checkpoint with id 'x'" in missing.err
    taken = sql_cli("memory", "fork", "plan-b", "--session", "plan", "-p", "shop")
    assert taken.code == EXIT_ERROR
    assert "a fork starts a new scope" in taken.err

"""``agent-engine mcp`` end to end: the official MCP SDK's client talks to it over stdio.

The server is the installed command in a subprocess, on a SQLite file, embedding with the
hashing embedder (offline, fast). Bad calls must come back as tool errors while the server
keeps serving.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agent_engine import HashingEmbedder, SessionMemoryStore, SQLAlchemyBackend

EXPECTED_TOOLS = {
    "memory_search",
    "memory_insert",
    "memory_promote",
    "memory_pin",
    "memory_forget",
    "build_context",
}


def _server(db: Path, *extra: str) -> StdioServerParameters:
    command = shutil.which("agent-engine", path=str(Path(sys.executable).parent))
    assert command is not None
    env = {**os.environ, "AGENT_ENGINE_EMBEDDER": "hashing", "HF_HUB_OFFLINE": "1"}
    args = ["--db", f"sqlite:///{db}", "mcp", "--project", "shop", "--user", "ada", *extra]
    return StdioServerParameters(command=command, args=args, env=env)


async def _session(params, work):
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


def _content(result) -> dict:
    return json.loads(result.content[0].text)


def test_a_session_writes_searches_and_builds(tmp_path):
    db = tmp_path / "memory.db"

    async def work(session):
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == EXPECTED_TOOLS
        schema = next(t for t in listed.tools if t.name == "memory_insert").input_schema
        assert schema["additionalProperties"] is False
        inserted = await session.call_tool(
            "memory_insert", {"text": "Refunds go through the payments queue", "kind": "decision"}
        )
        assert not inserted.is_error, inserted
        found = await session.call_tool("memory_search", {"query": "refunds payments"})
        assert _content(found)["results"][0]["id"] == _content(inserted)["id"]
        built = await session.call_tool("build_context", {"query": "how do refunds work"})
        assert "payments queue" in _content(built)["context"]
        await session.call_tool("memory_insert", {"text": "Refunds log to audit", "kind": "note"})
        notes = await session.call_tool(
            "build_context",
            {"query": "refunds", "kinds": ["note"], "tiers": ["project"], "limit": 5},
        )
        assert "Refunds log to audit" in _content(notes)["context"]
        assert "payments queue" not in _content(notes)["context"]
        return _content(inserted)["id"]

    item_id = anyio.run(_session, _server(db), work)
    with SQLAlchemyBackend(f"sqlite:///{db}") as backend:
        assert backend.get(item_id).namespace == "project:shop"


def test_bad_calls_are_tool_errors_and_the_server_goes_on(tmp_path):
    db = tmp_path / "memory.db"

    async def work(session):
        for name, arguments, field in [
            ("memory_insert", {}, "text"),
            ("memory_insert", {"text": "x", "colour": "red"}, "colour"),
            ("memory_search", {"query": "x", "limit": "many"}, "limit"),
            ("memory_forget", {"id": "project:other/nope"}, None),
            ("build_context", {"query": "x", "budget_tokens": -5}, "budget_tokens"),
            ("build_context", {"query": "x", "tiers": ["team"]}, "tiers"),
            ("build_context", {"query": "x", "limit": 0}, "limit"),
            ("memory_everything", {"a": 1}, "name"),
        ]:
            result = await session.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
            if field is not None:
                assert field in result.content[0].text, result.content[0].text
        # Still serving, and nothing was written.
        found = await session.call_tool("memory_search", {"query": "x"})
        assert not found.is_error
        return _content(found)["results"]

    assert anyio.run(_session, _server(db), work) == []


@pytest.mark.parametrize("allowed", [False, True])
def test_global_writes_need_the_servers_consent(tmp_path, allowed):
    db = tmp_path / "memory.db"
    params = _server(db, "--allow-global") if allowed else _server(db)

    async def work(session):
        return await session.call_tool(
            "memory_insert", {"text": "Ada works in UTC", "kind": "preference", "tier": "global"}
        )

    result = anyio.run(_session, params, work)
    assert result.is_error is not allowed
    with SQLAlchemyBackend(f"sqlite:///{db}") as backend:
        assert backend.count({"namespace": "global:ada"}) == (1 if allowed else 0)


def test_a_task_in_a_session_reads_the_sessions_memory(tmp_path):
    """With --session, the served task's contexts and searches reach the session's memory."""
    db = tmp_path / "memory.db"
    with SQLAlchemyBackend(f"sqlite:///{db}", embedder=HashingEmbedder()) as backend:
        SessionMemoryStore("morning", backend, project_id="shop", user_id="ada").add_message(
            "ada", "Call me Ada, and keep answers short."
        )

    async def work(session):
        built = await session.call_tool("build_context", {"query": "how should answers be"})
        found = await session.call_tool("memory_search", {"query": "answers short"})
        return _content(built)["context"], _content(found)["results"]

    context, results = anyio.run(_session, _server(db, "--session", "morning"), work)
    assert "keep answers short" in context
    assert [hit["tier"] for hit in results] == ["session"]
    alone, _ = anyio.run(_session, _server(db), work)
    assert "keep answers short" not in alone

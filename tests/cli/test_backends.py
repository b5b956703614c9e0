"""A backend from another package joins through the ``agent_engine.backends`` entry points.

The package here is a folder on ``PYTHONPATH`` with a module and its distribution metadata,
as ``pip install`` would leave it; the command runs in a subprocess, so it finds the entry
points as an installed command would.
"""

from __future__ import annotations

import os
import textwrap

import pytest

PLUGIN = textwrap.dedent(
    """
    from agent_engine.memory.inmemory import InMemoryBackend
    from agent_engine.memory.registry import Backend


    class ScratchBackend(InMemoryBackend):
        pass


    def open_url(url, options):
        return ScratchBackend(embedder=options.embedder)


    BACKEND = Backend(
        "scratch",
        "scratch_plugin:ScratchBackend",
        schemes=("scratch",),
        urls=("scratch://",),
        opener="scratch_plugin:open_url",
        configurations={"scratch": "agent_engine.memory.inmemory:empty"},
    )
    """
)

ENTRY_POINTS = """\
[agent_engine.backends]
scratch = scratch_plugin:BACKEND
broken = scratch_plugin_missing:BACKEND
"""


@pytest.fixture
def plugin_cli(cli, tmp_path):
    """The command with the plugin package installed (and one broken entry point beside it)."""
    site = tmp_path / "site"
    info = site / "scratch_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "scratch_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scratch-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    cli.env["PYTHONPATH"] = os.pathsep.join([str(site), cli.env["PYTHONPATH"]])
    return cli


def test_the_command_opens_a_plugin_backend(plugin_cli):
    """``--db scratch://`` opens the plugin's backend; the broken entry point is skipped."""
    result = plugin_cli("--db", "scratch://", "--json", "memory", "status")
    assert result.code == 0, result.err
    assert result.json()["backend"] == "ScratchBackend"
    assert "scratch://" in plugin_cli("--help").out


def test_the_bench_lists_a_plugin_backend(plugin_cli):
    """The bench's --backends choices include the plugin's configuration."""
    result = plugin_cli("bench", "--help")
    assert result.code == 0, result.err
    assert "faiss-sqlite, redis, scratch" in " ".join(result.out.split())

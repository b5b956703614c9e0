"""Run the real ``agent-engine`` command in a subprocess, isolated from the user's own store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import agent_engine

# The subprocess imports the agent_engine these tests import, wherever it is installed.
SOURCE_ROOT = str(Path(agent_engine.__file__).resolve().parents[1])
COMMAND = [sys.executable, "-m", "agent_engine.cli"]


@attrs.frozen
class Result:
    """What a run of the command left behind."""

    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@attrs.define
class Cli:
    """Runs the command with a private environment: its own store, project and user."""

    env: dict[str, str]
    cwd: Path
    command: tuple[str, ...] = tuple(COMMAND)

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120) -> Result:  # noqa: A002
        done = subprocess.run(  # noqa: S603 - our own command, arguments from the tests
            [*self.command, *args],
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """The environment of a run: no store of the user's is ever touched."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AGENT_ENGINE_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [SOURCE_ROOT, env.get("PYTHONPATH")])),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        AGENT_ENGINE_PROJECT="webshop",
        AGENT_ENGINE_USER="ada",
        COLUMNS="200",
        HOME=str(tmp_path / "home"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    return env


@pytest.fixture
def cli(cli_env, tmp_path) -> Cli:
    """The command on an in-memory store (nothing persists between runs)."""
    return Cli({**cli_env, "AGENT_ENGINE_DB": "memory://"}, tmp_path)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A SQLite file URL in the test's temporary folder (the file does not exist yet)."""
    return f"sqlite:///{tmp_path / 'store' / 'memory.db'}"


@pytest.fixture
def sql_cli(cli_env, tmp_path, sqlite_url) -> Cli:
    """The command on a temporary SQLite file (the SQL backend must be importable)."""
    return Cli({**cli_env, "AGENT_ENGINE_DB": sqlite_url}, tmp_path)


@pytest.fixture
def default_cli(cli_env, tmp_path) -> Cli:
    """The command as a fresh install runs it: no --db, no $AGENT_ENGINE_DB.

    HOME and XDG_DATA_HOME point into the test's folder, so the per-user default store is
    created there, never in the real user's data directory.
    """
    return Cli(cli_env, tmp_path)

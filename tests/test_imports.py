"""Importing the package stays light: SQL, Redis, FAISS, embedders and LangGraph load on first use.

Each check runs in a fresh interpreter, since this test process has long imported them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import agent_engine

HEAVY = frozenset(
    {
        "alembic",
        "faiss",
        "langchain_core",
        "langgraph",
        "pgserver",
        "pgvector",
        "psycopg",
        "psycopg2",
        "redis",
        "sentence_transformers",
        "sqlalchemy",
        "torch",
        "transformers",
    }
)
"""Top-level packages that only the SQL or Redis backend, FAISS, a model-backed embedder, the
LangGraph integration or the tests' pgvector server need."""

_REPORT = (
    "import json, sys; "
    f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(HEAVY)!r})))"
)


def _heavy_modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the heavy modules it left imported."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", f"{code}\n{_REPORT}"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


class TestLightImport:
    @pytest.mark.parametrize(
        "package",
        [
            "agent_engine",
            "agent_engine.assembler",
            "agent_engine.integrations",
            "agent_engine.memory",
            "agent_engine.retrieval",
            "agent_engine.testing",
            "agent_engine.tiers",
        ],
    )
    def test_import_a_front_door(self, package):
        """Importing the package, or a subpackage's API, imports none of the heavy stacks."""
        assert _heavy_modules_after(f"import {package}") == []

    def test_cli_on_the_in_memory_store(self):
        """A CLI command on ``memory://`` runs without the SQL backend's dependencies."""
        code = (
            "from agent_engine.cli import main\n"
            "code = main(['--db', 'memory://', 'memory', 'list'])\n"
            "assert code == 0, code"
        )
        assert _heavy_modules_after(code) == []

    def test_a_read_command_never_loads_the_assembler(self):
        """Commands that only read memory pay no import of the assembler (a tenth of a second)."""
        code = (
            "import sys\n"
            "from agent_engine.cli import main\n"
            "assert main(['--db', 'memory://', 'memory', 'search', 'query', '-p', 'x']) == 0\n"
            "assert 'agent_engine.assembler' not in sys.modules, 'assembler loaded'"
        )
        _heavy_modules_after(code)

    def test_backend_registry_lookups(self):
        """Looking backends up by scheme, name or configuration imports none of them."""
        code = (
            "from agent_engine.memory import registry\n"
            "assert registry.backend_for_scheme('sqlite').class_name == 'SQLAlchemyBackend'\n"
            "assert registry.backend_for_scheme('redis').class_name == 'RedisBackend'\n"
            "assert 'faiss-sqlite' in [c.name for c in registry.configurations()]"
        )
        assert _heavy_modules_after(code) == []


class TestLazyExports:
    @pytest.mark.parametrize(
        ("name", "module"),
        [
            ("ContextAssembler", "agent_engine.assembler"),
            ("ContextPackage", "agent_engine.assembler"),
            ("SQLAlchemyBackend", "agent_engine.memory.sql"),
            ("database_revision", "agent_engine.memory.sql"),
            ("default_database_url", "agent_engine.memory.sql"),
            ("upgrade_database", "agent_engine.memory.sql"),
        ],
    )
    def test_lazy_name_is_the_submodule_object(self, name, module):
        """A name loaded on first use is the very object its submodule defines."""
        assert getattr(agent_engine, name) is getattr(sys.modules[module], name)

    @pytest.mark.parametrize(
        ("name", "module"),
        [
            ("SQLAlchemyBackend", "agent_engine.memory.sql"),
            ("RedisBackend", "agent_engine.memory.redis"),
        ],
    )
    def test_subpackage_lazy_name_is_the_submodule_object(self, name, module):
        """``agent_engine.memory`` hands out the backend class its submodule defines."""
        import agent_engine.memory  # noqa: PLC0415

        assert getattr(agent_engine.memory, name) is getattr(sys.modules[module], name)

    def test_from_import(self):
        """``from agent_engine import X`` works for a lazily loaded name."""
        from agent_engine import SQLAlchemyBackend  # noqa: PLC0415

        assert SQLAlchemyBackend.__name__ == "SQLAlchemyBackend"

    def test_dir_lists_every_export(self):
        """``dir()`` shows the lazy names too, before and after their first use."""
        assert set(agent_engine.__all__) <= set(dir(agent_engine))

    def test_unknown_name(self):
        """A name that is not exported is an AttributeError naming it, as for any module."""
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = agent_engine.no_such_name  # type: ignore[attr-defined]

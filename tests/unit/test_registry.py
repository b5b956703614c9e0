"""The backend registry: what is registered, what an unknown name gets, and joining it."""

from __future__ import annotations

import json

import pytest

from agent_engine import BackendUnavailableError, HashingEmbedder, InMemoryBackend, ValidationError
from agent_engine.bench import cost
from agent_engine.bench.runner import SuiteOptions, parse_options
from agent_engine.cli import main
from agent_engine.cli._store import Access, open_store, scheme_of
from agent_engine.errors import UnknownBackendError
from agent_engine.memory import registry


class ScratchBackend(InMemoryBackend):
    """A backend that is not built in: the in-memory one under another name."""


def _open_scratch(url, options):
    return ScratchBackend(embedder=options.embedder)


@pytest.fixture
def scratch():
    """A ``scratch`` backend registered for the test (``scratch://``), removed after it."""
    entry = registry.register_backend(
        "scratch",
        ScratchBackend,
        schemes=("scratch",),
        urls=("scratch://",),
        opener=_open_scratch,
        # An import path, so the bench's worker process can build it too.
        configurations={"scratch": "agent_engine.memory.inmemory:empty"},
    )
    yield entry
    registry.unregister_backend("scratch")


class TestBuiltIn:
    def test_names(self):
        """The three built-in backends, in the order help texts list them."""
        assert [entry.name for entry in registry.backends()][:3] == ["memory", "sql", "faiss"]

    def test_configurations(self):
        """The bench's choices, and the default run without the slow HNSW build (nor a
        pgvector server of its own, which runs on request)."""
        assert [c.name for c in registry.configurations()][:7] == [
            "memory",
            "sqlite",
            "pgvector",
            "pgvector-fulltext",
            "faiss",
            "faiss-hnsw",
            "faiss-sqlite",
        ]
        assert cost.default_backend_names()[:4] == ("memory", "sqlite", "faiss", "faiss-sqlite")
        assert SuiteOptions().backends == cost.default_backend_names()

    @pytest.mark.parametrize(
        ("scheme", "name"),
        [("memory", "memory"), ("sqlite", "sql"), ("postgresql", "sql"), ("POSTGRES", "sql")],
    )
    def test_schemes(self, scheme, name):
        """Each URL scheme belongs to one backend, compared in lower case."""
        assert registry.backend_for_scheme(scheme).name == name

    def test_class_by_path(self):
        """The class is named without importing it and imported when asked for."""
        entry = registry.get_backend("memory")
        assert entry.class_name == "InMemoryBackend"
        assert entry.backend_class() is InMemoryBackend

    def test_configurations_build_empty_backends(self, tmp_path):
        """A configuration builds an empty backend of its backend's class in the folder."""
        built = registry.configuration("faiss-sqlite").build(tmp_path, HashingEmbedder(dim=16))
        try:
            assert built.count() == 0
            assert type(built) is registry.get_backend("faiss").backend_class()
        finally:
            built.close()
        assert (tmp_path / "bench.db").exists()


class TestUnknown:
    def test_name(self):
        """An unknown name is an UnknownBackendError (a lookup and availability error) naming
        the registered ones."""
        with pytest.raises(
            UnknownBackendError, match=r"no backend 'mongodb'.*memory, sql, faiss, redis"
        ) as info:
            registry.get_backend("mongodb")
        assert isinstance(info.value, BackendUnavailableError)
        assert isinstance(info.value, LookupError)
        assert info.value.name == "mongodb"
        assert {"memory", "sql", "faiss", "redis"} <= set(info.value.known)

    def test_scheme(self):
        """An unknown scheme lists the schemes that are registered."""
        with pytest.raises(UnknownBackendError, match="memory, sqlite, postgresql, postgres"):
            registry.backend_for_scheme("mysql")

    def test_configuration(self):
        """An unknown configuration lists the configurations."""
        with pytest.raises(UnknownBackendError, match="faiss-hnsw"):
            registry.configuration("faiss-ivf")

    def test_unregister_unknown(self):
        """Removing a backend that is not registered is an error, not a silent no-op."""
        with pytest.raises(UnknownBackendError):
            registry.unregister_backend("mongodb")

    def test_backend_without_urls_is_not_opened(self):
        """A backend with no opener says it is not opened from a URL."""
        with pytest.raises(UnknownBackendError, match="not opened from a URL"):
            registry.get_backend("faiss").open("faiss://", registry.OpenOptions())


class TestRegister:
    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"name": "memory"}, "name"),
            ({"name": "other", "schemes": ("sqlite",), "opener": _open_scratch}, "schemes"),
            ({"name": "other", "configurations": {"faiss": "m:f"}}, "configurations"),
        ],
    )
    def test_taken(self, fields, field):
        """A name, scheme or configuration another backend holds is refused."""
        with pytest.raises(ValidationError, match="taken") as info:
            registry.register_backend(cls=ScratchBackend, **fields)
        assert info.value.field == field
        assert "other" not in {entry.name for entry in registry.backends()}

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"cls": "no_colon"}, "cls"),
            ({"cls": 42}, "cls"),
            ({"cls": ScratchBackend, "schemes": ("scratch",)}, "opener"),
            ({"cls": ScratchBackend, "configurations": {"Bad Name": "m:f"}}, "configurations"),
            (
                {"cls": ScratchBackend, "configurations": {"a": "m:f"}, "on_request": ("b",)},
                "on_request",
            ),
        ],
    )
    def test_malformed(self, fields, field):
        """A malformed entry is refused when it is made, not when it is first used."""
        with pytest.raises(ValidationError) as info:
            registry.Backend("scratch", **fields)
        assert info.value.field == field

    def test_missing_dependency_is_unavailable(self):
        """A backend whose module does not import is unavailable, with the reason."""
        entry = registry.Backend(
            "ghost",
            "agent_engine_ghost:Ghost",
            schemes=("ghost",),
            opener="agent_engine_ghost:open",
        )
        with pytest.raises(
            BackendUnavailableError, match=r"'ghost' backend is unavailable.*agent_engine_ghost"
        ):
            entry.open("ghost://", registry.OpenOptions())

    def test_the_cli_opens_a_registered_backend(self, scratch, capsys):
        """``--db scratch://`` opens the registered backend through its opener."""
        assert scheme_of("scratch://x") == "scratch"
        store = open_store("scratch://", embedder=HashingEmbedder(dim=16), access=Access.READ)
        assert type(store.backend) is ScratchBackend
        assert store.kind == "scratch"
        assert store.revision() is None
        code = main(["--db", "scratch://", "--json", "memory", "status"])
        assert code == 0
        assert json.loads(capsys.readouterr().out)["backend"] == "ScratchBackend"

    def test_the_bench_lists_a_registered_backend(self, scratch, capsys):
        """The bench's --backends accepts and lists a registered configuration."""
        assert "scratch" in cost.backend_names()
        assert parse_options(["cost", "--backends", "memory,scratch"]).backends == (
            "memory",
            "scratch",
        )
        with pytest.raises(SystemExit):
            parse_options(["--help"])
        assert "scratch" in capsys.readouterr().out

    def test_the_bench_measures_a_registered_backend(self, scratch):
        """A configuration registered in this process is measured in the bench's worker."""
        (cell,) = cost.run_cost((60,), ("scratch",), queries=2, budget=256)
        assert cell["backend"] == "scratch"
        assert cell["size"] == 60

    def test_the_bench_refuses_an_unknown_backend_before_running(self):
        """run_cost checks every name before it starts a worker."""
        with pytest.raises(UnknownBackendError, match="nope"):
            cost.run_cost((60,), ("memory", "nope"))

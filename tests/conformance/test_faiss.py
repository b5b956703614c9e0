"""The conformance suite against the FAISS backend, in each of its configurations.

Each configuration is a factory ``(embedder, tmp_path) -> FaissBackend``; a record store with
its own storage (a database file, a server) joins the list as one more factory.
"""

from __future__ import annotations

import pytest

from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.conformance import BackendConformance


def _flat(embedder, tmp_path):
    return FaissBackend(InMemoryBackend(embedder=embedder), embedder=embedder)


def _hnsw(embedder, tmp_path):
    # exact_below=1 sends every unscoped search through the graph, as in a large store.
    return FaissBackend(embedder=embedder, index="hnsw", exact_below=1, hnsw_m=16)


def _flat_with_file(embedder, tmp_path):
    return FaissBackend(embedder=embedder, index_path=tmp_path / "vectors.faiss")


def _flat_over_sqlite(embedder, tmp_path):
    # The persistent pairing: vectors in a FAISS file, records in an SQLite file.
    store = SQLAlchemyBackend(
        f"sqlite:///{tmp_path / 'records.db'}", embedder=embedder, upgrade=True
    )
    return FaissBackend(store, embedder=embedder, index_path=tmp_path / "vectors.faiss")


CONFIGURATIONS = {
    "flat-inmemory": _flat,
    "hnsw-inmemory": _hnsw,
    "flat-index-file": _flat_with_file,
    "flat-over-sqlite": _flat_over_sqlite,
}


class TestFaissBackend(BackendConformance):
    @pytest.fixture(params=sorted(CONFIGURATIONS))
    def backend(self, request, embedder, tmp_path):
        with CONFIGURATIONS[request.param](embedder, tmp_path) as backend:
            yield backend

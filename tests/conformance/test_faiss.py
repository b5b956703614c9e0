"""The conformance suite against the FAISS backend's configurations beyond its test kinds.

FAISS over an in-memory store and over an SQLite file run in ``test_backends.py`` with every
other kind of backend. Each configuration here is a factory ``(embedder, tmp_path) ->
FaissBackend``.
"""

from __future__ import annotations

import pytest

from agent_engine.memory.faiss import FaissBackend
from agent_engine.testing.conformance import BackendConformance


def _hnsw(embedder, tmp_path):
    # exact_below=1 sends every unscoped search through the graph, as in a large store.
    return FaissBackend(embedder=embedder, index="hnsw", exact_below=1, hnsw_m=16)


def _flat_with_file(embedder, tmp_path):
    return FaissBackend(embedder=embedder, index_path=tmp_path / "vectors.faiss")


CONFIGURATIONS = {
    "hnsw-inmemory": _hnsw,
    "flat-index-file": _flat_with_file,
}


class TestFaissBackend(BackendConformance):
    @pytest.fixture(params=sorted(CONFIGURATIONS))
    def backend(self, request, embedder, tmp_path):
        with CONFIGURATIONS[request.param](embedder, tmp_path) as backend:
            yield backend

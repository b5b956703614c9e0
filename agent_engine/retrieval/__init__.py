"""Ranking components: lexical analysis, BM25 over sessions, and score fusion.

The assembler composes these; they are public for custom scorers and backends (a backend's
``lexical_index`` returns a :class:`LexicalIndex`), not re-exported at the top level.
"""

from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.fusion import minmax_fusion, rrf

__all__ = [
    "LexicalIndex",
    "minmax_fusion",
    "rrf",
]

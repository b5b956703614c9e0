"""Ranking components: lexical analysis, BM25 over sessions, and score fusion.

The assembler composes these; they are public for custom scorers and backends (a backend's
``lexical_index`` returns a :class:`LexicalScope`, of which the BM25 :class:`LexicalIndex` is
one implementation), not re-exported at the top level.
"""

from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.fusion import minmax_fusion, rrf
from agent_engine.retrieval.lexical import LexicalMatches, LexicalScope, Neighbourhoods

__all__ = [
    "LexicalIndex",
    "LexicalMatches",
    "LexicalScope",
    "Neighbourhoods",
    "minmax_fusion",
    "rrf",
]

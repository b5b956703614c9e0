"""Text components: lexical analysis, BM25, score fusion, contradiction cues, aliases.

The assembler composes the rankers, and stores can check a new item against old ones with
:func:`contradicts`. They are public for custom scorers and backends (a backend's
``lexical_index`` returns a :class:`LexicalScope`, of which the BM25 :class:`LexicalIndex` is
one implementation), not re-exported at the top level.
"""

from agent_engine.retrieval.aliases import Aliases
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.contradiction import MIN_OVERLAP, Contradiction, contradicts
from agent_engine.retrieval.fusion import minmax_fusion, rrf
from agent_engine.retrieval.lexical import LexicalMatches, LexicalScope, Neighbourhoods

__all__ = [
    "Aliases",
    "Contradiction",
    "LexicalIndex",
    "LexicalMatches",
    "LexicalScope",
    "MIN_OVERLAP",
    "Neighbourhoods",
    "contradicts",
    "minmax_fusion",
    "rrf",
]

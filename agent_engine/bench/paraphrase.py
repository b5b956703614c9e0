"""A conversation whose questions paraphrase their memories: where BM25 has only noise to say.

LoCoMo's questions mostly reuse their evidence's words, so even its low-overlap group (a
quarter of the terms or fewer) leaves BM25 something true to match. Users' questions often
do not: "How has Dana been feeling lately?" of a memory that "this week at the office wore
me down". This set, written for the project, holds 30 such questions in one chat of 231
turns between two people over six sessions, in LoCoMo's format so the quality part reads it
as it reads LoCoMo (``--data``):

- each question shares **no word with its evidence but the speaker's name** (BM25's own
  analysis: stopwords out, light stems);
- each has one or two **distractors**, turns elsewhere that share an incidental word with it
  ("I've been feeling great lately" for the question above), said two sessions away, so they
  are never the evidence's session neighbours;
- the rest is small talk, and every evidence turn is followed by a reply that holds none of
  its facts, as a chat has it; the answer is a phrase of the evidence turn.

It is a check of one failure, not a measure of quality in general: a plain dense retriever
should do well on it, and a policy that falls far below dense-only here leans on lexical
matches that mean nothing (``docs/benchmarks.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["PARAPHRASE_DATA"]

PARAPHRASE_DATA: Final = Path(__file__).parent / "data" / "paraphrase.json"
"""The set, in LoCoMo's format (one conversation)."""

"""A reranker stage after fusion: a model reads the query beside each of a tier's best candidates.

Fusion ranks a pool from signals computed apart (a vector's cosine, BM25, recency); a
cross-encoder reads the query and the candidate together, which tells paraphrases and near
misses apart better, at the price of one model call per pair. So it reorders only each tier's
``top`` best candidates (after fusion, the threshold and the protected items set aside), and
the scores those candidates had are dealt out again in the reranker's order: the same set
stays on top with the same scores, so budgets, thresholds and explanations read as before,
and only the order within it is the reranker's.

A reranker is the user's (:class:`CrossEncoderReranker` loads a sentence-transformers
``CrossEncoder`` from a local folder; nothing is downloaded). One that raises or answers
something other than one finite number per candidate leaves the fused order in place, and the
build goes on (it raises with ``strict=True``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem

__all__ = ["DEFAULT_RERANK_TOP", "CrossEncoderReranker", "RerankConfig", "Reranker", "rerank_order"]

DEFAULT_RERANK_TOP = 50
"""Candidates per tier a reranker reads: past the first fifty, a budget rarely reaches."""


@runtime_checkable
class Reranker(Protocol):
    """**Protocol:** scores each of ``items`` for ``query``; higher is more relevant."""

    def rerank(self, query: str, items: Sequence[ContextItem]) -> Sequence[float]:
        """One score per item, in the order given (any scale: only the order is used)."""
        ...


@attrs.frozen
class RerankConfig:
    """The reranker stage: who reranks, and how many of each tier's best candidates."""

    reranker: Reranker
    top: int = DEFAULT_RERANK_TOP

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.reranker, Reranker):
            raise ValidationError(
                "reranker must have a rerank(query, items) method",
                field="reranker",
                value=self.reranker,
            )
        if isinstance(self.top, bool) or not isinstance(self.top, int) or self.top < 1:
            raise ValidationError("top must be a positive integer", field="top", value=self.top)


def rerank_order(query: str, items: Sequence[ContextItem], reranker: Reranker) -> list[int]:
    """The positions of ``items`` (given best first) in ``reranker``'s order, best first.

    Ties in the reranker's scores keep the given order. Raises :class:`ValueError` when
    the reranker does not answer one finite number per item (and lets its own errors
    through): the caller keeps the given order then.
    """
    answer = list(reranker.rerank(query, items))
    if len(answer) != len(items):
        raise ValueError(f"the reranker gave {len(answer)} scores for {len(items)} candidates")
    relevance = [_finite(value) for value in answer]
    return sorted(range(len(items)), key=lambda at: -relevance[at])


def _finite(value: object) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError  # noqa: TRY301 - a flag is not a score, though float() takes it
        number = float(value)  # type: ignore[arg-type]  # numpy scalars, ints, floats
    except (TypeError, ValueError):
        raise ValueError(f"the reranker gave {value!r}, not a score") from None
    if not math.isfinite(number):
        raise ValueError(f"the reranker gave {number!r}, not a finite score")
    return number


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` loaded from ``path``, a local model folder.

    Offline by construction: the folder must hold the model (``local_files_only``). Needs the
    ``embeddings`` extra. ``batch_size`` pairs go through the model at a time.
    """

    def __init__(
        self, path: str | Path, *, batch_size: int = 32, device: str | None = None
    ) -> None:
        folder = Path(path)
        if not folder.is_dir():
            raise ValidationError(
                f"no model folder at {str(folder)!r}: give the path of a CrossEncoder model "
                "saved on this machine",
                field="path",
                value=str(path),
            )
        from sentence_transformers import CrossEncoder  # noqa: PLC0415 - the extra loads late

        self.path = folder
        self.batch_size = batch_size
        self._model: Any = CrossEncoder(
            str(folder), device=device, local_files_only=True, num_labels=1
        )

    def rerank(self, query: str, items: Sequence[ContextItem]) -> list[float]:
        """The model's relevance of each item's text to ``query``."""
        if not items:
            return []
        pairs = [(query, item.text) for item in items]
        scores = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return [float(score) for score in scores]

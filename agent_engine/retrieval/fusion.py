"""Combining rankings: Reciprocal Rank Fusion and min-max linear fusion.

RRF (``score = sum 1/(k + rank)``, k = 60; seed 000) needs no score calibration and is the
textbook baseline. Linear fusion of min-max normalized scores keeps *how much* better one
item scored than another, and on the LoCoMo tuning split it beat RRF at every k (10-100) by
2-4 recall points, so the hybrid policy uses it; RRF stays available as a policy and baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["minmax", "minmax_fusion", "rrf"]

RRF_K = 60


def rrf(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Fuse ranked id lists: each list adds ``1 / (k + rank)`` (rank from 1) to its ids."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item_id in enumerate(ranking, start=1):
            fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (k + rank)
    return fused


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Scale scores to [0, 1]; all-equal scores become 0 (they tell nothing apart)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    if span <= 0:
        return dict.fromkeys(scores, 0.0)
    return {item_id: (score - low) / span for item_id, score in scores.items()}


def minmax_fusion(
    signals: Sequence[tuple[Mapping[str, float], float]], ids: Iterable[str]
) -> dict[str, float]:
    """Weighted sum of min-max normalized signals over ``ids`` (a missing score is the minimum)."""
    universe = list(dict.fromkeys(ids))
    return dict(zip(universe, fused_array(signals, universe).tolist(), strict=True))


def fused_array(
    signals: Sequence[tuple[Mapping[str, float], float]], ids: Sequence[str]
) -> npt.NDArray[np.float64]:
    """:func:`minmax_fusion` over distinct ``ids``, as an array in their order.

    A build fuses the signals of a pool of several hundred candidates for every tier; array
    arithmetic does it in a fraction of the time a dict pass per signal took, with the same
    operations per id and so the same floats.
    """
    fused = np.zeros(len(ids), dtype=np.float64)
    for scores, weight in signals:
        if not weight or not scores:
            continue
        values = np.fromiter((scores.get(i, math.nan) for i in ids), np.float64, len(ids))
        missing = np.isnan(values)
        if missing.all():
            continue
        floor = values[~missing].min()
        values[missing] = floor
        span = values.max() - floor
        if span > 0:
            fused += weight * ((values - floor) / span)
    return fused

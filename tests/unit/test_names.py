"""Names as people write them: case, accents, first names, near spellings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_engine.assembler.candidates import strip_names
from agent_engine.retrieval.names import fold, name_words, named

SPEAKERS = {"Caroline", "Melanie Smith", "José", "Mel", "New York Times", "bash"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Caroline paint?", {"Caroline"}),
        ("what did caroline paint?", {"Caroline"}),  # the whole name, any case
        ("What did CAROLINE paint?", {"Caroline"}),
        ("Did Carolin go to the park?", {"Caroline"}),  # one letter dropped
        ("Did Carolyne go to the park?", {"Caroline"}),  # one letter changed
        ("Where does Melanie work?", {"Melanie Smith"}),  # the first of several words
        ("Where does Melanie Smith work?", {"Melanie Smith"}),
        ("What is Melanie's job?", {"Melanie Smith"}),
        ("What did Jose cook?", {"José"}),  # accents aside
        ("What did JOSÉ cook?", {"José"}),
        ("What did Mel say?", {"Mel"}),
        ("Which NEW YORK TIMES piece?", {"New York Times"}),
        ("Ran bash twice", {"bash"}),
        ("Ask Mel.", {"Mel"}),  # a full stop after a name is not part of it
        ("Ask melanie smith.", {"Melanie Smith"}),
    ],
)
def test_a_name_as_people_write_it(query, expected):
    assert named(query, SPEAKERS) == expected


@pytest.mark.parametrize(
    "query",
    [
        "what's new today?",  # a lower-case first word of a longer name is a word
        "did carolin go?",  # a near spelling must be written as a name
        "Did Mek say it?",  # short names only exactly
        "Did Daroline go?",  # near spellings keep the first letter
        "Did Carolinexx go?",  # two letters off
        "What did Melanies sister say?",  # not a near spelling of a two-word name
        "Was it 42?",
        "",
    ],
)
def test_words_that_are_not_names(query):
    assert named(query, SPEAKERS) == frozenset()


def test_the_words_that_named_are_what_a_dense_query_loses():
    query = "What did Melanie's sister paint after Carolin left?"
    words = name_words(query, SPEAKERS)
    assert words == {"Melanie Smith": ("Melanie's",), "Caroline": ("Carolin",)}
    flat = [word for found in words.values() for word in found]
    assert strip_names(query, flat) == "What did sister paint after left?"


def test_folding_drops_accents_and_case():
    assert fold("José Ñúñez") == "jose nunez"
    assert fold("STRASSE") == fold("strasse")


@given(st.text(max_size=60))
def test_any_text_is_safe(query):
    assert named(query, SPEAKERS) <= SPEAKERS
    strip_names(query, [w for found in name_words(query, SPEAKERS).values() for w in found])

"""Names as people write them: case, accents, first names, near spellings, short forms."""

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
        ("What did Melanies sister say?", {"Melanie Smith"}),  # near a longer name's first word
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
        "Was it 42?",
        "",
    ],
)
def test_words_that_are_not_names(query):
    assert named(query, SPEAKERS) == frozenset()


NICKNAMED = {"Mel", "Christopher Lee", "Katherine", "Daniel", "Jennifer", "Dave", "Mary"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Melanie say?", {"Mel"}),  # a speaker labelled with a short form
        ("What did Melanie's brother say?", {"Mel"}),
        ("Did Chris call?", {"Christopher Lee"}),  # a short form of a full name's first word
        ("Did Kath call?", {"Katherine"}),
        ("Did Kathy call?", {"Katherine"}),  # a pet-name ending dropped
        ("Did Katie call?", {"Katherine"}),
        ("Did Kate call?", {"Katherine"}),
        ("Did Jenny call?", {"Jennifer"}),
        ("Did Danny call?", {"Daniel"}),  # a doubled letter before the ending is one
        ("Did David call?", {"Dave"}),  # the label the short form, with its ending
        ("Did Chris call Jenny?", {"Christopher Lee", "Jennifer"}),
    ],
)
def test_a_short_form_names_the_longer_name_either_way(query, expected):
    assert named(query, NICKNAMED) == expected


@pytest.mark.parametrize(
    "query",
    [
        "did melanie go?",  # a short form must be written as a name
        "Did Ka call?",  # two letters are no short form
        "Did Mark call?",  # as long as "Mary": a different name, not a short one
        "Did Christopherson call?",  # "Christopher" is no short form: too long to be one
        "Did Jeff call?",  # "Jennifer" only shares "Je"
    ],
)
def test_words_that_are_no_short_forms(query):
    assert named(query, NICKNAMED) == frozenset()


@pytest.mark.parametrize(
    ("speakers", "query", "expected"),
    [
        ({"Mel", "Melanie"}, "What did Melanie say?", {"Melanie"}),  # its own name wins
        ({"Mel", "Melanie"}, "What did Mel say?", {"Mel"}),
        ({"Mel", "Melanie"}, "Did Mel and Melanie meet?", {"Mel", "Melanie"}),
        ({"Mel", "Melanie Smith"}, "Did Melanie go?", {"Melanie Smith"}),
        ({"Caroline", "Caro"}, "Did Carolin go?", {"Caroline"}),  # near before short
        ({"Caroline", "Caro"}, "Did Caro go?", {"Caro"}),  # not a short form of "Caroline"
    ],
)
def test_the_closest_reading_of_each_word_wins(speakers, query, expected):
    assert named(query, speakers) == expected


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

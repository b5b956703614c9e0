"""Finding a project's alias terms in a query: whole words, any case, possessives, overlaps."""

from __future__ import annotations

from agent_engine.retrieval.aliases import NO_ALIASES, Aliases, term_key

MEL = Aliases({"mel": ("Melanie",), "new york": ("NYC",), "york": ("Yorkshire",)})


def test_term_key_folds_case_accents_and_space():
    assert term_key("  MÉL  ") == "mel"
    assert term_key("New   York") == "new york"
    assert term_key("...") == ""


def test_terms_are_whole_words():
    assert list(MEL.found("Mel's painting")) == [(("Mel's",), ("Melanie",))]
    assert list(MEL.found("Melbourne, melody")) == []


def test_a_longer_term_takes_its_words_first():
    assert list(MEL.found("flights to New York and York")) == [
        (("New", "York"), ("NYC",)),
        (("York",), ("Yorkshire",)),
    ]


def test_expand_appends_each_expansion_once():
    assert MEL.expand("mel met Mel in new york") == "mel met Mel in new york NYC Melanie"
    assert MEL.expand("nothing here") == "nothing here"
    assert NO_ALIASES.expand("mel") == "mel"
    assert not NO_ALIASES


def test_naming_goes_through_the_expansions():
    """An expansion names a source by the names rules; the query's term is what named it."""
    sources = ["Melanie Smith", "Caroline", "NYC desk"]
    assert MEL.naming("What did mel paint?", sources) == {"Melanie Smith": ("mel",)}
    assert MEL.naming("in New York", sources) == {"NYC desk": ("New", "York")}
    assert MEL.naming("nobody", sources) == {}

"""Deciding what to remember: small talk is dropped with a reason, anything said is kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_engine import ContextItem
from agent_engine.ingest.decide import (
    DEFAULT_DECIDER,
    Decision,
    MemoryDecider,
    Reason,
    RuleDecider,
)


def turn(text, *, kind="turn", source="Nate"):
    return ContextItem(
        id="t", kind=kind, text=f"{source}: {text}" if source else text, source=source
    )


class TestRuleDecider:
    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("Bye!", Reason.GREETING),
            ("Bye Joanna! Take care!", Reason.GREETING),
            ("Hey, good morning!", Reason.GREETING),
            ("Thanks, Jon!", Reason.ACKNOWLEDGEMENT),
            ("Sounds good, will do.", Reason.ACKNOWLEDGEMENT),
            ("ok", Reason.ACKNOWLEDGEMENT),
            ("haha wow", Reason.CHIT_CHAT),
            (";)", Reason.NEAR_EMPTY),
            ("   ", Reason.NEAR_EMPTY),
        ],
    )
    def test_small_talk_is_dropped_with_its_reason(self, text, reason):
        assert DEFAULT_DECIDER.decide(turn(text)) == Decision.dropped(reason)

    @pytest.mark.parametrize(
        "text",
        [
            "Paris!",  # one word may answer a question
            "Where is it?",  # a capital that starts a sentence is not a name
            "Thanks for the ride to the airport!",
            "Bye! My flight leaves at 6.",
            "It was great!",
            "See you at the climbing gym on Friday",
        ],
    )
    def test_anything_said_is_kept(self, text):
        assert DEFAULT_DECIDER.decide(turn(text)) == Decision.kept()

    def test_only_conversation_turns_are_judged(self):
        """A decision or a preference was written on purpose: kept, however short."""
        assert DEFAULT_DECIDER.decide(turn("ok", kind="decision")).keep
        assert RuleDecider(kinds={"decision"}).decide(turn("ok", kind="decision")) == (
            Decision.dropped(Reason.ACKNOWLEDGEMENT)
        )

    def test_the_speaker_is_not_what_was_said(self):
        """'Bye: ...' would be a farewell if the speaker's name were read as a word."""
        assert DEFAULT_DECIDER.decide(turn("I moved to Lisbon", source="Bye")).keep
        assert not RuleDecider(speaker_prefix=True).decide(turn("Thanks!", source="Sam")).keep

    def test_it_is_a_memory_decider(self):
        assert isinstance(DEFAULT_DECIDER, MemoryDecider)

    @given(
        st.lists(st.sampled_from(["thanks", "bye", "ok", "haha", "see", "you"]), max_size=5),
        st.lists(st.sampled_from(["flight", "Lisbon", "dentist", "42", "promotion"]), min_size=2),
    )
    def test_two_words_that_are_not_small_talk_always_keep_a_turn(self, talk, said):
        assert DEFAULT_DECIDER.decide(turn(" ".join([*talk, *said]))).keep

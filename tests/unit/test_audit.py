"""Erasure tokens and the redaction of erased ids from journal events."""

from __future__ import annotations

from agent_engine.memory.audit import erasure_token, redact_value


class TestErasureToken:
    def test_tokens_name_no_id_and_never_repeat(self):
        """A token is erased:<32 hex>, holds no part of the id, and differs at every call."""
        first, second = erasure_token("item-42"), erasure_token("item-42")
        assert first.startswith("erased:")
        assert len(first) == len("erased:") + 32
        assert "item-42" not in first
        assert first != second


class TestRedactValue:
    def test_equal_strings_become_tokens_at_any_depth(self):
        """Ids in lists, tuples and dict values are replaced; other values are kept."""
        tokens = {"a": "erased:1"}
        value = {"ids": ["a", "b"], "pair": ("a", 3), "source_item_id": "a", "n": 1.5}
        assert redact_value(value, tokens) == {
            "ids": ["erased:1", "b"],
            "pair": ("erased:1", 3),
            "source_item_id": "erased:1",
            "n": 1.5,
        }

    def test_quoted_ids_in_messages_are_replaced(self):
        """An id quoted as repr or JSON prints it is replaced inside a longer message."""
        tokens = {"it's": "erased:2", "b": "erased:3"}
        message = """no item with id "it's"; and id 'b' is "b", but a b is a word"""
        assert redact_value(message, tokens) == (
            """no item with id 'erased:2'; and id 'erased:3' is "erased:3", but a b is a word"""
        )

"""Redaction: what the detectors find, and what a policy does with it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import ContextItem, ValidationError
from agent_engine.bench.redaction import KINDS, TECHNICAL, RedactionBenchConfig, fake_secrets
from agent_engine.redaction import (
    DEFAULT_REDACTION,
    SENSITIVE_TAG,
    RedactionMode,
    RedactionPolicy,
)
from agent_engine.redaction._detectors import shannon_entropy

GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OPENAI = "sk-proj-abc123DEF456ghi789JKL012mno345"


def kinds(text, policy=DEFAULT_REDACTION):
    return [finding.kind for finding in policy.find(text)]


class TestDetectors:
    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            (f"my token is {GITHUB}.", "github_token"),
            (f"OPENAI_API_KEY={OPENAI}", "openai_api_key"),
            ("key sk-ant-api03-" + "x1" * 40 + " here", "anthropic_api_key"),
            ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
            ("glpat-AbCdEfGhIj0123456789", "gitlab_token"),
            (
                (
                    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
                ),
                "jwt",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----",
                "private_key",
            ),
            ("postgres://admin:hunter2@db.example.com/prod", "connection_string"),
            ("Server=db;Password=s3cr3t!;", "connection_string"),
            ("write to jane.doe+work@mail.example.org today", "email"),
            ("call (415) 555-0123", "phone"),
            ("+44 20 7946 0958", "phone"),
            ("call me at 4155550123", "phone"),
            ("token 9fQ2xZ7kLmP4wR8tYv3NcB6hJ1 rotated", "high_entropy"),
        ],
    )
    def test_each_kind_is_found_as_itself(self, text, kind):
        assert kinds(text) == [kind]

    def test_a_connection_string_keeps_all_but_its_password(self):
        text, _ = DEFAULT_REDACTION.redact_text("postgres://admin:hunter2@db.example.com:5432/prod")
        assert text == "postgres://admin:[REDACTED:connection_string]@db.example.com:5432/prod"

    def test_a_private_key_cut_short_is_redacted_to_the_end(self):
        text, _ = DEFAULT_REDACTION.redact_text("key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN")
        assert text == "key:\n[REDACTED:private_key]"

    def test_a_specific_kind_wins_over_a_random_looking_string(self):
        """A GitHub token is random too; it is reported once, as what it is."""
        assert kinds(GITHUB) == ["github_token"]

    @pytest.mark.parametrize("line", TECHNICAL)
    def test_ordinary_technical_lines_are_left_alone(self, line):
        assert kinds(line) == []

    @pytest.mark.parametrize(
        "text",
        [
            "I was born in 1990 and moved in 2023-05-08.",
            "We met at 10:30 and talked for 2 hours about page 214.",
            "internationalization and ContextAssemblerConfigurationValidationError",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "the password must be at least 12 characters",
            "email me when you're back!",
        ],
    )
    def test_conversation_without_secrets_is_left_alone(self, text):
        assert kinds(text) == []

    def test_entropy_is_bits_per_character(self):
        assert shannon_entropy("") == 0.0
        assert shannon_entropy("aaaa") == 0.0
        assert shannon_entropy("abcd") == pytest.approx(2.0)

    def test_every_planted_kind_is_found_in_the_benchmark_set(self):
        """A smoke run of the benchmark's fake secrets: each kind is found in most lines."""
        planted = fake_secrets(RedactionBenchConfig(per_kind=20, seed=5))
        assert {p.kind for p in planted} == set(KINDS)
        for kind in KINDS:
            lines = [p for p in planted if p.kind == kind]
            found = sum(
                any(f.start <= p.start and f.end >= p.end for f in DEFAULT_REDACTION.find(p.text))
                for p in lines
            )
            assert found >= 0.9 * len(lines), kind


class TestModes:
    TEXT = f"mail jane@example.com the key {GITHUB} now"

    def test_mask_replaces_each_finding_with_its_kind(self):
        text, found = DEFAULT_REDACTION.redact_text(self.TEXT)
        assert text == "mail [REDACTED:email] the key [REDACTED:github_token] now"
        assert [f.kind for f in found] == ["email", "github_token"]

    def test_drop_removes_it(self):
        text, _ = RedactionPolicy(mode="drop").redact_text(self.TEXT)
        assert text == "mail  the key  now"

    def test_tag_keeps_the_text_and_tags_the_item(self):
        policy = RedactionPolicy(kinds={"email": "tag"})
        item = ContextItem(id="i", kind="note", text=self.TEXT, tags=["x"])
        redacted = policy.redact(item)
        assert redacted.item.text == "mail jane@example.com the key [REDACTED:github_token] now"
        assert redacted.item.tags == ("x", f"{SENSITIVE_TAG}email")
        assert redacted.modes == {"email": RedactionMode.TAG, "github_token": RedactionMode.MASK}

    def test_off_does_not_look(self):
        policy = RedactionPolicy(kinds={"email": "off"})
        assert kinds(self.TEXT, policy) == ["github_token"]

    def test_an_unknown_mode_is_refused(self):
        with pytest.raises(ValueError, match="shout"):
            RedactionPolicy(kinds={"email": "shout"})

    def test_items_of_a_kind_may_have_their_own_policy_or_none(self):
        policy = RedactionPolicy(
            item_kinds={"contact": RedactionPolicy(kinds={"email": "tag"}), "raw": None}
        )
        contact = policy.redact(ContextItem(id="c", kind="contact", text=self.TEXT))
        raw = policy.redact(ContextItem(id="r", kind="raw", text=self.TEXT))
        note = policy.redact(ContextItem(id="n", kind="note", text=self.TEXT))
        assert "jane@example.com" in contact.item.text
        assert GITHUB not in contact.item.text
        assert raw.item.text == self.TEXT
        assert not raw.found
        assert note.found == {"email": 1, "github_token": 1}


class TestItems:
    def test_payload_strings_are_redacted_too(self):
        item = ContextItem(
            id="i",
            kind="tool_output",
            text="called the API",
            payload={"env": {"TOKEN": GITHUB}, "args": ["--key", OPENAI], "n": 3},
        )
        redacted = DEFAULT_REDACTION.redact(item)
        assert redacted.item.payload == {
            "env": {"TOKEN": "[REDACTED:github_token]"},
            "args": ["--key", "[REDACTED:openai_api_key]"],
            "n": 3,
        }
        assert redacted.found == {"github_token": 1, "openai_api_key": 1}

    def test_an_item_without_findings_is_returned_as_is(self):
        item = ContextItem(id="i", kind="note", text="nothing to see", token_cost=4)
        assert DEFAULT_REDACTION.redact(item).item is item

    def test_a_redacted_item_loses_its_token_cost(self):
        item = ContextItem(id="i", kind="note", text=f"key {GITHUB}", token_cost=30)
        assert DEFAULT_REDACTION.redact(item).item.token_cost is None

    def test_the_detail_names_kinds_and_counts_never_the_secret(self):
        item = ContextItem(id="i", kind="note", text=f"{GITHUB} and {GITHUB}")
        detail = DEFAULT_REDACTION.redact(item).detail()
        assert detail == {
            "id": "i",
            "found": {"github_token": 2},
            "modes": {"github_token": "mask"},
        }
        assert GITHUB not in repr(detail)

    @settings(max_examples=60, deadline=None)
    @given(
        prefix=st.text(max_size=40),
        suffix=st.text(max_size=40),
        mode=st.sampled_from(["mask", "drop"]),
    )
    def test_a_planted_token_never_survives(self, prefix, suffix, mode):
        """Whatever text surrounds a token (separated from it), masking or dropping removes it."""
        text = f"{prefix} {GITHUB} {suffix}"
        redacted, _ = RedactionPolicy(mode=mode).redact_text(text)
        assert GITHUB not in redacted


class TestStoresRefuseBadPolicies:
    def test_a_policy_that_is_not_one_is_a_validation_error(self):
        from agent_engine import MemoryStores  # noqa: PLC0415

        with pytest.raises(ValidationError, match="redaction"):
            MemoryStores(redaction="mask")

"""Global memory: confirmation of high-risk writes, and what a refusal leaves behind."""

from __future__ import annotations

import attrs
import pytest

from agent_engine import AuditAction, ConfirmationDeclined, ConfirmationRequest
from agent_engine.tiers.global_ import GlobalMemoryStore


class Recorder:
    """A confirmation callback that answers from a script and remembers what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked: list[ConfirmationRequest] = []

    def __call__(self, request):
        self.asked.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class TestConfirmation:
    def test_approved_preference_is_written(self, backend, clock):
        """An approved preference is stored, and the callback saw what it approved."""
        confirm = Recorder(True)
        store = GlobalMemoryStore(backend, "u", confirm=confirm, clock=clock)
        item = store.add_preference("Prefer concise answers", "style")
        assert store.query_preferences("style") == [item]
        assert confirm.asked[0].operation == "add_preference"
        assert confirm.asked[0].items == (item,)
        assert "Prefer concise answers" in confirm.asked[0].message

    @pytest.mark.parametrize("answer", [False, None, "yes", 1])
    def test_declined_writes_nothing(self, backend, clock, answer):
        """Anything but True declines: ConfirmationDeclined, no item, no journal entry."""
        store = GlobalMemoryStore(backend, "u", confirm=Recorder(answer), clock=clock)
        with pytest.raises(ConfirmationDeclined) as info:
            store.add_preference("Always use tabs")
        assert info.value.operation == "add_preference"
        assert store.count() == 0
        assert backend.audit.events(namespace=store.namespace) == []

    def test_raising_callback_writes_nothing(self, backend, clock):
        """A callback that raises propagates its error and nothing is half-written."""
        store = GlobalMemoryStore(
            backend, "u", confirm=Recorder(RuntimeError("UI crashed")), clock=clock
        )
        with pytest.raises(RuntimeError, match="UI crashed"):
            store.add_many([store.new_item("preference", "a"), store.new_item("pattern", "b")])
        assert store.count() == 0

    def test_no_callback_refuses_by_default(self, backend, clock):
        """Without a callback, high-risk writes are refused unless explicitly allowed."""
        store = GlobalMemoryStore(backend, "u", clock=clock)
        with pytest.raises(ConfirmationDeclined, match="confirm="):
            store.add_preference("x")
        allowed = GlobalMemoryStore(backend, "u", allow_unconfirmed=True, clock=clock)
        allowed.add_preference("x")
        assert allowed.count() == 1

    def test_patterns_need_no_confirmation(self, backend, clock):
        """Low-risk writes (patterns) go through without asking."""
        confirm = Recorder()
        store = GlobalMemoryStore(backend, "u", confirm=confirm, clock=clock)
        store.add_pattern("Write the test first", "testing")
        assert confirm.asked == []
        assert store.count() == 1

    def test_changing_a_preference_is_confirmed(self, backend, clock):
        """Updating a preference asks first; a refusal leaves the old text."""
        store = GlobalMemoryStore(backend, "u", confirm=Recorder(True, False), clock=clock)
        item = store.add_preference("Reply in English")
        with pytest.raises(ConfirmationDeclined):
            store.update(attrs.evolve(item, text="Reply in German"))
        assert store.get(item.id).text == "Reply in English"

    def test_clear_is_confirmed(self, backend, clock):
        """Clearing global memory asks, and a refusal keeps everything."""
        confirm = Recorder(True, False, True)
        store = GlobalMemoryStore(backend, "u", confirm=confirm, clock=clock)
        store.add_preference("keep")
        with pytest.raises(ConfirmationDeclined):
            store.clear()
        assert store.count() == 1
        assert store.clear() == 1
        assert confirm.asked[-1].operation == "clear_global"
        assert "DANGER" in confirm.asked[-1].message
        cleared = backend.audit.events(namespace=store.namespace, actions=[AuditAction.CLEAR])
        assert len(cleared) == 1

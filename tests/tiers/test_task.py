"""Task memory: typed helpers, the timeline, and the lifecycle."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import Task, TaskState, Tier
from agent_engine.tiers.task import TaskMemoryStore


@pytest.fixture
def store(backend, clock):
    return TaskMemoryStore(Task(id="t-1", project_id="p"), backend, clock=clock)


class TestHelpers:
    def test_typed_items(self, store):
        """Each helper stores its kind with the seed's importance, tags and payload."""
        instruction = store.add_instruction("Fix the flaky login test")
        thought = store.add_reasoning("The test sleeps instead of waiting", "diagnose")
        output = store.add_tool_output("pytest", {"failed": 1, "passed": 41}, stage_id="diagnose")
        stage = store.add_stage_output("diagnose", "root cause: race in fixture")
        assert [i.kind for i in (instruction, thought, output, stage)] == [
            "instruction",
            "reasoning",
            "tool_output",
            "stage_output",
        ]
        assert (thought.importance, output.importance) == (0.5, 0.7)
        assert output.payload == {"tool_id": "pytest", "output": {"failed": 1, "passed": 41}}
        assert output.text == 'pytest: {"failed": 1, "passed": 41}'
        assert all(
            i.tier is Tier.TASK and i.namespace == "task:p:default:t-1" for i in store.list_all()
        )

    def test_stage_outputs(self, store):
        """get_stage_outputs returns one stage's records in order."""
        first = store.add_reasoning("look at logs", "diagnose")
        store.add_reasoning("write fix", "fix")
        second = store.add_stage_output("diagnose", "found it")
        assert store.get_stage_outputs("diagnose") == [first, second]

    def test_timeline_is_chronological(self, backend):
        """The timeline keeps insertion order even when timestamps are equal."""
        frozen = datetime(2024, 1, 1, tzinfo=UTC)
        store = TaskMemoryStore("same-time", backend, clock=lambda: frozen)
        texts = [f"step {n}" for n in range(20)]
        for text in texts:
            store.add_reasoning(text, "s")
        assert [i.text for i in store.timeline()] == texts


class TestLifecycle:
    @pytest.mark.parametrize("state", [TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED])
    def test_terminal_state_clears(self, store, state):
        """Reaching a terminal state clears the task's memory."""
        store.add_reasoning("x", "s")
        store.add_reasoning("y", "s")
        assert store.on_state(state) == 2
        assert store.count() == 0

    @pytest.mark.parametrize("state", [TaskState.PENDING, TaskState.RUNNING])
    def test_running_keeps(self, store, state):
        """A non-terminal state keeps everything."""
        store.add_reasoning("x", "s")
        assert store.on_state(state) == 0
        assert store.count() == 1

    def test_default_backend_is_in_memory(self):
        """Without a backend, task memory lives in memory (the seed's default)."""
        store = TaskMemoryStore("solo")
        store.add_reasoning("x", "s")
        assert store.count() == 1

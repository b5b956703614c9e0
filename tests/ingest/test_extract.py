"""Extraction: turns become semantic, procedural and episodic memories, and failures stay put."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agent_engine import HashingEmbedder, MemoryStores, Task
from agent_engine.ingest import (
    Extracted,
    ExtractionError,
    ExtractionHook,
    IngestQueue,
    IngestWorker,
    LLMExtractor,
    MemoryKind,
    RuleExtractor,
)
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem

MAY = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)


def _turn(n: int, speaker: str, said: str) -> ContextItem:
    return ContextItem(
        id=f"D1:{n}", kind="turn", text=f"{speaker}: {said}", source=speaker, timestamp=MAY
    )


TURNS = [
    _turn(1, "Caroline", "Hi! I moved to Lisbon in May with my partner. The weather is lovely."),
    _turn(2, "Melanie", "Wow, that's great!"),
    _turn(3, "Caroline", "To renew a visa, book the appointment three months ahead."),
    _turn(4, "Melanie", "Always keep copies of your passport when you travel abroad."),
    _turn(5, "Melanie", "My sister is a nurse in Porto, she loves the hospital there."),
]


class TestRuleExtractor:
    def test_facts_and_rules_are_kept_with_their_speaker(self):
        found = RuleExtractor().extract(TURNS)
        assert [(e.kind, e.text) for e in found] == [
            ("semantic", "Caroline: I moved to Lisbon in May with my partner."),
            ("procedural", "Caroline: To renew a visa, book the appointment three months ahead."),
            ("procedural", "Melanie: Always keep copies of your passport when you travel abroad."),
            ("semantic", "Melanie: My sister is a nurse in Porto, she loves the hospital there."),
        ]
        assert found[0].sources == ("D1:1",)

    def test_the_end_of_a_task_adds_a_summary_of_what_happened(self):
        (summary,) = [e for e in RuleExtractor().extract(TURNS, final=True) if e.kind == "episodic"]
        assert summary.text.startswith("On 2026-05-08, Caroline and Melanie talked about ")
        assert "lisbon" in summary.text
        assert summary.sources == tuple(t.id for t in TURNS)

    def test_small_talk_gives_nothing(self):
        assert RuleExtractor().extract([TURNS[1]]) == []


class ScriptedModel:
    """A stand-in for an LLM client: answers from a script, records the prompts."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> object:
        self.prompts.append(prompt)
        return self.answers.pop(0)


class TestLLMExtractor:
    def test_the_answer_is_read_from_prose_and_fences(self):
        answer = (
            "Here you go:\n```json\n"
            + json.dumps(
                [
                    {"type": "semantic", "content": "Caroline moved to Lisbon in May 2026"},
                    {"type": "procedural", "content": "Book visa appointments 3 months ahead"},
                    {"type": "opinion", "content": "Lisbon is nice"},
                    {"type": "semantic", "content": "  "},
                    "not an object",
                ]
            )
            + "\n```"
        )
        model = ScriptedModel(answer)
        found = LLMExtractor(model).extract(TURNS)
        assert [(e.kind, e.text) for e in found] == [
            ("semantic", "Caroline moved to Lisbon in May 2026"),
            ("procedural", "Book visa appointments 3 months ahead"),
        ]
        assert "- Caroline: To renew a visa" in model.prompts[0]
        assert "episodic" not in model.prompts[0]

    def test_the_end_of_a_task_asks_for_a_summary(self):
        model = ScriptedModel('[{"type": "episodic", "content": "They talked about moving"}]')
        (summary,) = LLMExtractor(model).extract(TURNS, final=True)
        assert summary.kind == MemoryKind.EPISODIC
        assert '"semantic|procedural|episodic"' in model.prompts[0]

    @pytest.mark.parametrize("answer", ["Sorry, I can't.", "[not json]", None, '{"a": 1}'])
    def test_an_answer_without_memories_is_an_error(self, answer):
        with pytest.raises(ExtractionError):
            LLMExtractor(ScriptedModel(answer)).extract(TURNS)


def _stores():
    return MemoryStores(InMemoryBackend(embedder=HashingEmbedder()))


def _chat(stores, task, turns):
    timeline = stores.task_store(task)
    for turn in turns:
        timeline.add(timeline.new_item("turn", turn.text, source=turn.source))


class TestHook:
    TASK = Task(id="chat-1", project_id="travel")

    def test_every_n_turns_and_at_the_end_into_the_project(self):
        stores = _stores()
        hook = ExtractionHook(stores, every=2, window=2)
        reports = []
        for turn in TURNS:
            _chat(stores, self.TASK, [turn])
            reports.append(hook.turn_added(self.TASK))
        assert [r is not None for r in reports] == [False, True, False, True, False]
        assert [e.kind for e in reports[1].extracted] == ["semantic"]
        end = hook.task_ended(self.TASK)
        assert end.turns == 1  # the one turn since the last extraction
        assert [e.kind for e in end.extracted] == ["semantic", "episodic"]
        project = stores.project_store("travel")
        kinds = sorted(item.kind for item in project.list_all())
        assert kinds == ["episodic", "procedural", "procedural", "semantic", "semantic"]
        assert all("extracted" in item.tags for item in project.list_all())

    def test_a_memory_found_again_is_not_stored_twice(self):
        stores = _stores()
        _chat(stores, self.TASK, TURNS)
        hook = ExtractionHook(stores, every=1, window=5)
        first = hook.turn_added(self.TASK)
        again = hook.turn_added(self.TASK)
        assert sorted(first.written) == sorted(again.written)
        assert stores.project_store("travel").count() == 4

    def test_through_the_queue_the_worker_stores_them(self):
        from agent_engine.memory.sql import SQLAlchemyBackend  # noqa: PLC0415

        backend = SQLAlchemyBackend("sqlite://", embedder=HashingEmbedder())
        stores = MemoryStores(backend)
        queue = IngestQueue.of(backend)
        _chat(stores, self.TASK, TURNS)
        report = ExtractionHook(stores, queue=queue).task_ended(self.TASK)
        assert len(report.written) == 5
        assert stores.project_store("travel").count() == 0  # queued, not yet stored
        assert IngestWorker(queue, stores).run(until_idle=True).stored == 5
        assert stores.project_store("travel").count() == 5

    def test_an_extractor_that_raises_writes_nothing_and_says_why(self):
        class Broken:
            def extract(self, turns, *, final=False):
                raise RuntimeError("model crashed")

        stores = _stores()
        _chat(stores, self.TASK, TURNS)
        report = ExtractionHook(stores, Broken()).task_ended(self.TASK)
        assert report.error == "RuntimeError: model crashed"
        assert report.written == []
        assert stores.project_store("travel").count() == 0

    def test_garbage_entries_are_dropped_and_the_rest_written(self):
        class Sloppy:
            def extract(self, turns, *, final=False):
                return [
                    Extracted("semantic", "Caroline lives in Lisbon"),
                    "Caroline lives in Lisbon",
                    Extracted("semantic", ""),
                    None,
                ]

        stores = _stores()
        _chat(stores, self.TASK, TURNS)
        report = ExtractionHook(stores, Sloppy()).task_ended(self.TASK)
        assert len(report.written) == 1
        assert len(report.rejected) == 3
        assert stores.project_store("travel").count() == 1

    @pytest.mark.parametrize("answer", [5, "semantic", None, {"kind": "semantic"}])
    def test_an_answer_that_is_no_list_is_contained(self, answer):
        class Odd:
            def extract(self, turns, *, final=False):
                return answer

        stores = _stores()
        _chat(stores, self.TASK, TURNS)
        report = ExtractionHook(stores, Odd()).task_ended(self.TASK)
        assert report.error is not None
        assert report.error.endswith("not a list")
        assert report.written == []
        assert stores.project_store("travel").count() == 0

    def test_text_that_cannot_be_stored_is_rejected_not_raised(self):
        class Surrogate:
            def extract(self, turns, *, final=False):
                return [Extracted("semantic", "broken \ud83d emoji"), Extracted("semantic", "ok")]

        stores = _stores()
        _chat(stores, self.TASK, TURNS)
        report = ExtractionHook(stores, Surrogate()).task_ended(self.TASK)
        assert len(report.rejected) == 1
        assert "surrogate" in report.rejected[0]
        assert len(report.written) == 1

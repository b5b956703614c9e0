"""Query building: a vague request is read with the turns before it; a clear one as asked."""

from __future__ import annotations

import pytest

from agent_engine import ContextAssembler, ContextRequest, HashingEmbedder, MemoryStores, Task
from agent_engine.assembler.query import (
    DEFAULT_QUERY_BUILDER,
    HistoryQuery,
    QueryBuilder,
    RewriteQuery,
    vague,
)
from agent_engine.errors import ValidationError
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem


def _turn(n: int, text: str) -> ContextItem:
    return ContextItem(id=f"t{n}", kind="turn", text=text)


HISTORY = [
    _turn(1, "Let's plan the Hawaii vacation for June"),
    _turn(2, "I'm looking at hotels on Maui near the beach"),
]


class TestVague:
    @pytest.mark.parametrize(
        "request_text",
        [
            "How much?",
            "Where did she go?",
            "and the other one?",
            "Why?",
            "How much does it cost?",
            "What did he say about that?",
        ],
    )
    def test_requests_that_lean_on_what_came_before_are_vague(self, request_text):
        assert vague(request_text)

    @pytest.mark.parametrize(
        "request_text",
        [
            "What is Ann's cat called?",
            "When did Caroline move?",
            "Who is Anthony?",
            "How much does the hotel cost?",
            "",
        ],
    )
    def test_requests_that_say_what_they_mean_are_not(self, request_text):
        assert not vague(request_text)


class TestHistoryQuery:
    def test_a_vague_request_comes_after_the_last_turns(self):
        query = HistoryQuery(turns=1).build_query("How much?", HISTORY)
        assert query == "I'm looking at hotels on Maui near the beach How much?"

    def test_a_clear_request_is_left_as_asked(self):
        assert DEFAULT_QUERY_BUILDER.build_query("When did Caroline move?", HISTORY) == (
            "When did Caroline move?"
        )

    def test_always_puts_the_turns_before_any_request(self):
        query = HistoryQuery(turns=1, always=True).build_query("When did Caroline move?", HISTORY)
        assert query == "I'm looking at hotels on Maui near the beach When did Caroline move?"

    def test_long_turns_are_cut_and_no_history_changes_nothing(self):
        long = _turn(3, " ".join(f"word{n}" for n in range(100)))
        query = HistoryQuery(max_words=5).build_query("How much?", [long])
        assert query == "word0 word1 word2 word3 word4 How much?"
        assert HistoryQuery().build_query("How much?", []) == "How much?"

    def test_bad_settings_are_refused(self):
        with pytest.raises(ValidationError) as raised:
            HistoryQuery(turns=-1)
        assert raised.value.field == "turns"

    def test_it_is_a_query_builder(self):
        assert isinstance(DEFAULT_QUERY_BUILDER, QueryBuilder)
        assert isinstance(RewriteQuery(lambda request, history: request), QueryBuilder)


class TestRewriteQuery:
    def test_the_callable_sees_request_and_history_and_writes_the_query(self):
        seen = []

        def rewrite(request, history):
            seen.append((request, [item.text for item in history]))
            return "What is the budget for the Hawaii trip?"

        builder = RewriteQuery(rewrite, turns=1)
        assert builder.build_query("How much?", HISTORY) == (
            "What is the budget for the Hawaii trip?"
        )
        assert seen == [("How much?", [HISTORY[-1].text])]

    def test_hyde_searches_the_request_with_the_hypothetical_answer(self):
        builder = RewriteQuery(lambda r, h: " The  budget is\n$10,000 ", keep_request=True)
        assert builder.build_query("How much?", HISTORY) == "How much? The budget is $10,000"

    @pytest.mark.parametrize("answer", [None, "", "   ", 42])
    def test_nothing_usable_falls_back_to_the_base(self, answer):
        builder = RewriteQuery(lambda r, h: answer, base=HistoryQuery(turns=1))
        assert builder.build_query("How much?", HISTORY) == (
            "I'm looking at hotels on Maui near the beach How much?"
        )

    def test_a_raising_callable_falls_back_and_is_logged(self, caplog):
        def down(request, history):
            raise TimeoutError("the model is down")

        assert RewriteQuery(down).build_query("When did Caroline move?", HISTORY) == (
            "When did Caroline move?"
        )
        assert "the model is down" in caplog.text


class TestInTheAssembler:
    FACTS = (
        "The budget for the Hawaii vacation is 10,000 dollars",
        "The office party budget is 500 dollars, paid by the team",
        "The new laptop budget is 2,000 dollars",
        "Conference travel has a budget of 3,000 dollars",
    )

    def _assembler(self, **options):
        backend = InMemoryBackend(embedder=HashingEmbedder())
        stores = MemoryStores(backend)
        project = stores.project_store("home")
        for fact in self.FACTS:
            project.add(project.new_item("fact", fact))
        task = Task(id="trip", project_id="home")
        timeline = stores.task_store(task)
        for item in reversed(HISTORY):  # the trip is what was said last
            timeline.add(timeline.new_item("turn", item.text))
        return ContextAssembler(stores, **options), task

    def _best_fact(self, assembler, task, query):
        package = assembler.build_context(task, ContextRequest(budget_tokens=2000, query=query))
        facts = [s for s in package.selections if s.item.kind == "fact"]
        return max(facts, key=lambda s: s.score).item.text, package

    def _scores(self, package):
        return {s.item.text: s.score for s in package.selections if s.item.kind == "fact"}

    def test_a_vague_follow_up_finds_what_the_conversation_is_about(self):
        assembler, task = self._assembler()
        best, package = self._best_fact(assembler, task, "How much?")
        assert best == self.FACTS[0]
        scores = self._scores(package)
        assert scores[self.FACTS[0]] > max(scores[fact] for fact in self.FACTS[1:])
        assert package.query == "Let's plan the Hawaii vacation for June How much?"

    def test_without_a_builder_the_request_is_searched_as_given(self):
        assembler, task = self._assembler(query_builder=None)
        _, package = self._best_fact(assembler, task, "How much?")
        assert package.query == "How much?"
        assert len(set(self._scores(package).values())) == 1  # nothing to tell them apart

    def test_a_rewrite_is_what_the_build_ranks_against(self):
        rewrite = RewriteQuery(lambda r, h: "budget for the laptop")
        assembler, task = self._assembler(query_builder=rewrite)
        best, package = self._best_fact(assembler, task, "How much?")
        assert package.query == "budget for the laptop"
        assert best == self.FACTS[2]

    def test_a_query_builder_must_be_one(self):
        with pytest.raises(ValidationError) as raised:
            ContextAssembler(InMemoryBackend(), query_builder="history")
        assert raised.value.field == "query_builder"


class TestContained:
    """A builder of the user's that fails never fails a build: the request is ranked as given."""

    class Raises:
        def history_turns(self, request):
            return 1

        def build_query(self, request, history):
            raise RuntimeError("no model")

    class Fractional:
        def history_turns(self, request):
            return 2.5

        def build_query(self, request, history):
            return request

    class Nothing:
        def history_turns(self, request):
            return 0

        def build_query(self, request, history):
            return None

    @pytest.mark.parametrize("builder", [Raises(), Fractional(), Nothing()])
    def test_the_build_goes_on_with_the_request(self, builder, caplog):
        backend = InMemoryBackend(embedder=HashingEmbedder())
        assembler = ContextAssembler(MemoryStores(backend), query_builder=builder)
        task = Task(id="t", project_id="p")
        package = assembler.build_context(task, ContextRequest(budget_tokens=200, query="Why?"))
        assert package.query == "Why?"
        assert "query_builder_failed" in caplog.text

    def test_a_strict_assembler_lets_the_error_through(self):
        backend = InMemoryBackend(embedder=HashingEmbedder())
        assembler = ContextAssembler(
            MemoryStores(backend), query_builder=self.Raises(), strict=True
        )
        with pytest.raises(RuntimeError, match="no model"):
            assembler.build_context(Task(id="t"), ContextRequest(budget_tokens=200, query="x"))

    def test_a_failing_base_of_a_rewrite_leaves_the_request(self):
        builder = RewriteQuery(lambda r, h: None, base=self.Raises())
        assert builder.build_query("How much?", HISTORY) == "How much?"

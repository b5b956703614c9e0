"""One assembler shared by threads: an executor stepping several tasks at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from agent_engine import AssemblerConfig, ContextAssembler, ContextRequest, Task
from agent_engine.assembler import candidates

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TOPICS = ["deploy", "billing", "search", "auth"]


def test_parallel_builds_match_serial_builds(backend):
    """Builds on many threads give exactly the packages they give one at a time."""
    assembler = ContextAssembler(
        backend, clock=lambda: NOW, config=AssemblerConfig(track_access=False)
    )
    tasks = []
    for n, topic in enumerate(TOPICS):
        project = assembler.project_store(f"p{n}")
        for i in range(40):
            project.add_decision(f"{topic} decision {i}: keep the {topic} retries at {i}")
        task = Task(id=f"t{n}", project_id=f"p{n}", description=f"fix the {topic} retries")
        for step in range(6):
            assembler.task_store(task).add_reasoning(f"{topic} step {step}", "work")
        tasks.append(task)
    requests = [
        ContextRequest(budget_tokens=b, query=f"{t} retries") for t in TOPICS for b in (90, 400)
    ]

    def render(job):
        task, request = job
        return assembler.build_context(task, request).render()

    jobs = [(task, request) for task in tasks for request in requests] * 5
    serial = [render(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(render, jobs))
    assert parallel == serial
    assert len(set(serial)) > len(TOPICS)  # the builds differ: the comparison means something


def test_searches_on_a_worker_thread_give_the_same_packages(backend, monkeypatch):
    """Overlapping a tier's vector search with its BM25 scoring changes nothing in a package."""
    monkeypatch.setattr(candidates, "OVERLAP_FROM", 0)  # these tiers are small
    overlapped, in_line = (
        ContextAssembler(
            backend,
            clock=lambda: NOW,
            config=AssemblerConfig(track_access=False, overlap_searches=overlap),
        )
        for overlap in (True, False)
    )
    project = overlapped.project_store("p")
    for i in range(60):
        topic = TOPICS[i % len(TOPICS)]
        project.add_decision(f"{topic} decision {i}: keep the {topic} retries at {i}")
    task = Task(id="t", project_id="p", description="fix the retries")
    overlapped.task_store(task).add_reasoning("deploy step one", "work")  # one shared backend
    for topic in TOPICS:
        request = ContextRequest(budget_tokens=150, query=f"{topic} retries")
        one, other = (a.build_context(task, request) for a in (overlapped, in_line))
        assert one.selections == other.selections
        assert one.omissions == other.omissions
        assert any(topic in s.item.text for s in one.selections)

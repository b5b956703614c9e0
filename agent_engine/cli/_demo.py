"""``agent-engine demo``: a small pipeline executor working through a task of a sample project.

The sample (:mod:`agent_engine.bench.sample`, invented for the demo) is Ledgerline, an
invoicing service with three past working sessions of decisions, conventions, failures with
their lessons and patterns, and a user's global preferences. The demo:

1. ingests the sample into the store (its own project and user namespaces, reset on every run,
   so running it twice shows the same thing and touches nothing else in the store);
2. runs :class:`PipelineExecutor` through the task's steps: before each step it asks the
   assembler for a context, shows the package (selected items by tier with scores, budget use
   per tier, what was left out and why, the prompt block), then records the step's reasoning
   and tool output in task memory, as a real executor would after calling its model;
3. promotes the task's lesson to project memory, then to global memory, which asks for
   confirmation (``--yes`` approves; with nobody to answer, it is declined and reported);
4. ends the task, which clears its task memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.rule import Rule
from rich.text import Text

from agent_engine import (
    ConfirmationDeclined,
    ContextRequest,
    GlobalMemoryStore,
    MemoryStores,
    Task,
    TaskState,
    promote,
)
from agent_engine.bench.sample import SampleProject, Step, ingest
from agent_engine.cli._confirm import make_confirm
from agent_engine.cli._output import console, emit_json, err_console, package_json, show_package
from agent_engine.cli._settings import settings
from agent_engine.cli._store import Access, make_embedder, open_store

if TYPE_CHECKING:  # loaded when the demo runs: other commands never load the assembler
    from agent_engine import ContextAssembler, ContextPackage

__all__ = ["PipelineExecutor", "demo", "finish_task"]

OnContext = Callable[[int, Step, "ContextPackage"], None]

_LEGEND = (
    "Before each step the executor asks for a context about the step. Why an item is in: "
    "head = the first items of the task's timeline, tail = its latest steps, ranked = chosen "
    "by the hybrid relevance policy, pinned = always first. Budget bars: green within the "
    "tier's share, yellow = spill-over from budget other tiers left unused."
)


class PipelineExecutor:
    """The smallest useful executor: context in, step out, everything recorded.

    Per step it asks the assembler for a context about the step, hands it to ``on_context``
    (where a real executor calls its model) and records the step's reasoning and tool output
    in task memory, so the next step's context includes them.
    """

    def __init__(self, assembler: ContextAssembler, *, budget_tokens: int) -> None:
        self.assembler = assembler
        self.budget_tokens = budget_tokens

    def run(self, task: Task, steps: Sequence[Step], on_context: OnContext) -> None:
        """Run ``steps`` of ``task`` in order."""
        memory = self.assembler.task_store(task)
        memory.add_instruction(task.description)
        for number, step in enumerate(steps, 1):
            request = ContextRequest(budget_tokens=self.budget_tokens, query=step.query)
            package = self.assembler.build_context(task, request)
            on_context(number, step, package)
            memory.add_reasoning(step.reasoning, step.stage)
            memory.add_tool_output(step.tool, step.output, stage_id=step.stage)


def finish_task(assembler: ContextAssembler, sample: SampleProject) -> dict[str, Any]:
    """Promote the task's lesson (to project, then, if confirmed, to global); end the task."""
    task = sample.task
    memory = assembler.task_store(task)
    project = assembler.project_store(task.project_id)
    # What the task learned outlives it only by explicit promotion.
    lesson = memory.add(memory.new_item("lesson", sample.lesson, importance=0.9, tags=("lesson",)))
    to_project = promote(memory, project, lesson.id, reason="lesson of the task")
    global_write: dict[str, Any] = {"from": "project", "to": "global", "confirmed": False}
    try:
        to_global = promote(
            project,
            assembler.global_store(task.user_id),
            to_project.item.id,
            reason="holds in every project",
        )
    except ConfirmationDeclined:
        pass  # declined: nothing was written, and the demo goes on to show it
    else:
        global_write.update(confirmed=True, id=to_global.item.id)
    # The task succeeded: its memory goes.
    cleared = memory.on_state(TaskState.SUCCEEDED)
    assembler.cleanup_task(task.id)
    return {
        "promotions": [{"from": "task", "to": "project", "id": to_project.item.id}, global_write],
        "task_memories_cleared": cleared,
    }


def demo(
    ctx: typer.Context,
    budget: Annotated[
        int, typer.Option(min=32, metavar="TOKENS", help="Token budget of each step's context.")
    ] = 320,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve the global write without asking.")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run a pipeline executor through a sample project's task and show every context."""
    from agent_engine import ContextAssembler  # noqa: PLC0415 - see the TYPE_CHECKING import

    options = settings(ctx)
    as_json = json_output or options.json
    out = console()
    sample = SampleProject.load()
    embedder = make_embedder(options.embedder)
    store = open_store(
        options.db,
        embedder=embedder,
        access=Access.CREATE,
        statement_timeout=options.statement_timeout,
    )
    ctx.call_on_close(store.backend.close)
    assembler = ContextAssembler(
        MemoryStores(store.backend, confirm=make_confirm(yes or options.yes))
    )
    task = sample.task
    now = assembler.clock()
    project = assembler.project_store(sample.project)
    seeding = GlobalMemoryStore(store.backend, sample.user, allow_unconfirmed=True)
    assembler.cleanup_task(task.id)  # what an interrupted earlier run may have left

    if not as_json:
        out.print(
            Text(f"agent_engine demo · store {store.url} · embedder {embedder.name}"),
            soft_wrap=True,
        )
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err_console(),
            transient=False,
        ) as progress:
            bar = progress.add_task("Ingesting the sample project", total=sample.item_count)
            ingested = ingest(
                sample, project, seeding, now=now, advance=lambda n: progress.advance(bar, n)
            )
        out.print(
            Text(
                f"Ingested {ingested} memories: {len(sample.sessions)} past sessions of "
                f"{sample.project}, and global memory of {sample.user}."
            )
        )
        out.print(Text(f"Task: {task.description}", style="bold"))
        out.print(Text(_LEGEND, style="dim"))
    else:
        ingested = ingest(sample, project, seeding, now=now)

    steps: list[dict[str, Any]] = []

    def on_context(number: int, step: Step, package: ContextPackage) -> None:
        omitted = {
            item.id: item
            for item in store.backend.get_many(omission.item_id for omission in package.omissions)
        }
        if as_json:
            steps.append(
                {
                    "step": number,
                    "stage": step.stage,
                    "query": step.query,
                    "package": package_json(package, omitted),
                }
            )
            return
        out.print(Rule(f"Step {number}/{len(sample.steps)}: {step.stage}"))
        out.print(Text(f"query: {step.query}"))
        show_package(out, package, omitted)
        out.print(
            Text(
                f"The model runs with this context; the executor records its reasoning and "
                f"the {step.tool} output in task memory.",
                style="dim",
            )
        )

    PipelineExecutor(assembler, budget_tokens=budget).run(task, sample.steps, on_context)

    if not as_json:
        out.print(Rule("Promotion"))
    outcome = finish_task(assembler, sample)
    if as_json:
        emit_json(
            {
                "store": store.url,
                "embedder": embedder.name,
                "project": sample.project,
                "user": sample.user,
                "ingested": ingested,
                "budget_tokens": budget,
                "steps": steps,
                **outcome,
            }
        )
        return
    to_project, to_global = outcome["promotions"]
    out.print(Text(f"task -> project: {sample.lesson} ({to_project['id']})"))
    if to_global["confirmed"]:
        out.print(Text(f"project -> global: confirmed ({to_global['id']})"))
    else:
        out.print(Text("project -> global: declined; the lesson stays in project memory only"))
    out.print(Text(f"Task done: {outcome['task_memories_cleared']} task memories cleared."))
    if store.scheme != "memory":
        out.print(
            Text(
                f"Explore what stayed: agent-engine --db {store.url} memory list "
                f"--project {sample.project} --user {sample.user}"
            )
        )

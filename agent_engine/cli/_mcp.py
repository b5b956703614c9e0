"""``agent-engine mcp``: one project's memory as an MCP server over stdio.

Coding agents reach tools through the Model Context Protocol; this serves the memory
functions of :mod:`agent_engine.tools` (search, insert, promote, pin, forget) and
``build_context`` to one, with the official ``mcp`` SDK (the ``mcp`` extra). One server
works in one project, for one user, in one task's memory (``--task``; task memory lives in
the same store, so a session can resume it). A call is checked and run exactly as
:class:`~agent_engine.tools.MemoryTools` runs it; a refused call comes back as a tool error
the client shows the model, and the server goes on. Global memory is the user's: the server
refuses to write it unless started with ``--allow-global``, which is the user's consent.

Store calls block, so each runs on a worker thread and the server keeps answering the
protocol (pings, cancellations) meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

import agent_engine
from agent_engine.cli._errors import CommandError
from agent_engine.cli._memory import Project, User
from agent_engine.cli._settings import default_project, default_user, settings
from agent_engine.cli._store import Access, make_embedder, open_store
from agent_engine.errors import AgentEngineError, ValidationError

if TYPE_CHECKING:
    from agent_engine.tiers.global_ import ConfirmationRequest
    from agent_engine.tools.schemas import ToolSpec

__all__ = ["build_context_spec", "mcp"]


def build_context_spec() -> ToolSpec:
    """The one function beyond :data:`~agent_engine.tools.SPECS`: a context build.

    Made when the server starts: the CLI's other commands import none of the tools.
    """
    from agent_engine.tools.schemas import ToolSpec  # noqa: PLC0415 - see above

    return ToolSpec(
        "build_context",
        "Assemble the memory relevant to a question or a step, within a token budget: the "
        "project's decisions, conventions, failures and patterns, the user's preferences and "
        "this session's notes, ranked, with what was paged out for lack of room.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "The step or question."},
                "budget_tokens": {"type": "integer", "minimum": 64, "maximum": 200_000},
                "kinds": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": 32,
                    "description": "Only memories of these kinds (decision, convention, "
                    "failure, pattern, preference, note, ...). Default: every kind.",
                },
                "tiers": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["task", "project", "global"]},
                    "maxItems": 3,
                    "description": "Only these tiers. Default: all three.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1000,
                    "description": "At most this many memories.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        {"budget_tokens": 2000},
    )


def mcp(
    ctx: typer.Context,
    project: Project = None,
    user: User = None,
    task: Annotated[
        str, typer.Option("--task", metavar="ID", help="The task whose memory the session uses.")
    ] = "mcp",
    in_session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="ID",
            help="Run the task in this session: its contexts read the session's memory too.",
            show_default=False,
        ),
    ] = None,
    allow_global: Annotated[
        bool,
        typer.Option(
            "--allow-global", help="Let the model write the user's global memory (refused else)."
        ),
    ] = False,
) -> None:
    """Serve this project's memory to an MCP client over stdio."""
    try:
        from mcp.server.lowlevel import Server  # noqa: PLC0415 - an optional extra
        from mcp.server.stdio import stdio_server  # noqa: PLC0415
    except ImportError as error:
        raise CommandError(
            'the MCP server needs the mcp extra: pip install "agent-engine[mcp]"'
        ) from error
    import anyio  # noqa: PLC0415 - installed with mcp
    import mcp_types as types  # noqa: PLC0415

    # Imported here, not with the command tree: the other commands never load the assembler.
    from agent_engine import ContextAssembler, ContextRequest, MemoryStores, Task  # noqa: PLC0415
    from agent_engine.tools import SPECS, MemoryTools, ToolCall, ToolResult  # noqa: PLC0415
    from agent_engine.tools.apply import checked_arguments  # noqa: PLC0415

    build_context = build_context_spec()

    options = settings(ctx)
    store = open_store(
        options.db,
        embedder=make_embedder(options.embedder),
        access=Access.CREATE,
        statement_timeout=options.statement_timeout,
    )
    ctx.call_on_close(store.backend.close)

    def consent(request: ConfirmationRequest) -> bool:
        del request
        return allow_global

    stores = MemoryStores(store.backend, confirm=consent)
    session = Task(
        id=task,
        project_id=project or default_project(),
        user_id=user or default_user(),
        session_id=in_session,
    )
    memory = MemoryTools(stores, session, allow_global=allow_global)
    assembler = ContextAssembler(stores)
    listed = [
        types.Tool(name=spec.name, description=spec.description, input_schema=dict(spec.parameters))
        for spec in (*SPECS, build_context)
    ]

    def run(name: str, arguments: dict[str, Any]) -> ToolResult:
        if name != build_context.name:
            return memory.apply(ToolCall(name, arguments))
        call = ToolCall(name, arguments)
        try:
            checked = checked_arguments(build_context, arguments)
            request = ContextRequest(
                budget_tokens=checked["budget_tokens"],
                query=checked["query"],
                kinds=checked.get("kinds"),
                tiers=checked.get("tiers"),
                limit=checked.get("limit"),
            )
            package = assembler.build_context(session, request)
        except AgentEngineError as error:
            return ToolResult.refused(call, error)
        content = {
            "context": package.render(),
            "tokens": package.tokens_used,
            "memory_pressure": package.pressure.message(),
        }
        return ToolResult(call, content)

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(_ctx: Any, params: Any) -> Any:
        arguments = params.arguments if params.arguments is not None else {}
        if not isinstance(arguments, dict):
            error = ValidationError("tool arguments are an object", field="arguments")
            result = ToolResult.refused(ToolCall(params.name, {}), error)
        else:
            result = await anyio.to_thread.run_sync(run, params.name, arguments)
        text = types.TextContent(type="text", text=result.text())
        return types.CallToolResult(content=[text], is_error=not result.ok)

    server = Server(
        "agent-engine",
        version=agent_engine.__version__,
        instructions="Memory of project "
        f"{session.project_id!r}: search it before assuming something was never recorded; "
        "insert decisions, conventions, failures and their lessons as you learn them.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)

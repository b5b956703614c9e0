"""``agent-engine bench``: the benchmark suite, through the suite's own runner.

Every argument after ``bench`` goes to the runner unchanged (``agent-engine bench --help``
lists them), so the command and ``python -m agent_engine.bench`` can never drift apart.
"""

from __future__ import annotations

import typer

__all__ = ["bench"]


def bench(ctx: typer.Context) -> int:
    """Run the benchmark suite (quality, cost, ..., redaction, decider, processes).

    `bench --help` lists the options.
    """
    from agent_engine.bench.runner import main as run  # noqa: PLC0415 - heavy, only when asked

    return run(list(ctx.args))

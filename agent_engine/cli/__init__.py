"""The ``agent-engine`` command: the demo, memory management, migrations and benchmarks.

A thin shell over the public API (``docs/cli.md``). :func:`main` runs it and returns the exit
code instead of exiting, so it can be called from Python as well as from the console script.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

from agent_engine.cli._errors import report as _report
from agent_engine.cli._settings import Settings as _Settings

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    settings = _Settings(debug="--debug" in args)
    try:
        # Imported here: `import agent_engine.cli` stays light, and Ctrl-C while the command
        # loads is reported like Ctrl-C while it runs.
        from agent_engine.cli._run import run  # noqa: PLC0415

        if argv is None:
            _settle()
        code = run(args, settings)
    except KeyboardInterrupt as error:
        return _report(error, debug=settings.debug)
    if argv is None:
        _settle()
    return code


def _settle() -> None:
    """Exempt what exists from garbage collection, in a process that runs one command.

    Called once the command's modules are loaded and again when it is done. Its modules
    (SQLAlchemy's above all) and what it read are hundreds of thousands of objects that live
    until the process ends; every collection, and the one at exit, walks them all. Frozen,
    they are skipped: 0.2 s of a one-shot search at 100k items went to walking them at exit.
    Only when ``main`` runs the process's own command line (``argv`` not given): a program that
    calls it repeatedly keeps its collector as it was.
    """
    gc.freeze()

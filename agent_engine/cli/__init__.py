"""The ``agent-engine`` command: the demo, memory management, migrations and benchmarks.

A thin shell over the public API (``docs/cli.md``). :func:`main` runs it and returns the exit
code instead of exiting, so it can be called from Python as well as from the console script.
"""

from __future__ import annotations

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

        return run(args, settings)
    except KeyboardInterrupt as error:
        return _report(error, debug=settings.debug)

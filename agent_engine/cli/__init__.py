"""The ``agent-engine`` command: the demo, memory management, migrations and benchmarks.

A thin shell over the public API (``docs/cli.md``). :func:`main` runs it and returns the exit
code instead of exiting, so it can be called from Python as well as from the console script.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agent_engine.cli._errors import EXIT_ERROR, EXIT_OK, report
from agent_engine.cli._settings import Settings

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    import typer  # noqa: PLC0415 - keeps `import agent_engine.cli` light

    from agent_engine.cli._app import app  # noqa: PLC0415

    args = list(sys.argv[1:] if argv is None else argv)
    settings = Settings(debug="--debug" in args)
    try:
        # Standalone mode: typer reports usage errors (exit 2) and --help itself, and ends
        # with SystemExit; agent_engine's own errors come through to be reported here.
        typer.main.get_command(app).main(
            args=args, prog_name="agent-engine", standalone_mode=True, obj=settings
        )
    except SystemExit as exited:
        code = exited.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_ERROR)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the one place that reports
        return report(error, debug=settings.debug)
    return EXIT_OK

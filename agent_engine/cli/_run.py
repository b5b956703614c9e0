"""Parsing and running one command line, and turning every way it can end into an exit code.

The framework's own ``main`` is not used: it turns Ctrl-C into a silent exit 130, and prints
its parameter errors in the words of the validation library it converts values with
("Input should be a valid number"). Here the command is parsed and invoked directly, so:

- a usage error (unknown option, bad value) prints the usage line, the help hint and one
  ``Error:`` line in the command's own words, and exits 2;
- ``--help`` and ``--version`` exit 0 after printing;
- Ctrl-C anywhere, and every other failure, goes to :func:`._errors.report`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer

# typer vendors click as ``typer._click`` and re-exports only some of its exceptions; the
# base class of its usage errors is not among them.
from typer._click.exceptions import ClickException

from agent_engine.cli._app import app
from agent_engine.cli._errors import EXIT_ERROR, EXIT_OK, report
from agent_engine.cli._settings import Settings

__all__ = ["run"]

_PROGRAM = "agent-engine"


def run(args: Sequence[str], settings: Settings) -> int:
    """Parse ``args``, run the command they name, and return its exit code."""
    command = typer.main.get_command(app)
    try:
        with command.make_context(_PROGRAM, list(args), obj=settings) as ctx:
            result = command.invoke(ctx)
    except typer.Exit as done:
        return done.exit_code
    except ClickException as error:
        if isinstance(error, typer.BadParameter):
            error.message = _usage_words(error)
        error.show(sys.stderr)
        return error.exit_code
    except SystemExit as exited:  # the benchmark runner's own parser (exit 2 on bad usage)
        code = exited.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_ERROR)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the one place that reports
        return report(error, debug=settings.debug)
    return result if isinstance(result, int) else EXIT_OK


def _usage_words(error: typer.BadParameter) -> str:
    """What was wrong with a parameter's value, said plainly.

    typer converts values through pydantic and keeps pydantic's message; the structured
    error under it (its kind, the input, the limit) is said again here in the command's
    words. A message typer wrote itself (a missing value, say) is kept.
    """
    try:
        from pydantic import ValidationError  # noqa: PLC0415 - typer's converter, loaded by now
    except ImportError:  # pragma: no cover - typer always installs it
        return error.message
    cause = error.__cause__
    if not isinstance(cause, ValidationError) or not cause.errors():
        return error.message
    detail = cause.errors()[0]
    return _say(detail["type"], detail.get("input"), detail.get("ctx") or {})


_LIMITS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def _say(kind: str, given: Any, context: dict[str, Any]) -> str:
    if kind in {"float_parsing", "float_type", "decimal_parsing"}:
        return f"{given!r} is not a number"
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"{given!r} is not a whole number"
    if kind in {"bool_parsing", "bool_type"}:
        return f"{given!r} is not true or false"
    if kind in _LIMITS:
        key, words = _LIMITS[kind]
        return f"must be {words} {context.get(key)}, got {given}"
    if kind == "value_error" and "error" in context:
        return str(context["error"]).rstrip(".")
    return f"{given!r} is not accepted here"

"""How failures reach a user of the command: one line on stderr and an exit code.

A user error (a wrong URL, a missing database, an unknown id, a declined confirmation) is
something the user can fix, so it gets one sentence saying what was wrong and never a
traceback; ``--debug`` adds the traceback for whoever needs it. Anything else is a bug in
agent_engine and says so.

Exit codes::

    0  success (a declined confirmation inside the demo is a success: the demo shows it)
    1  a user error: bad input, unknown id, unreachable or missing store, schema too old;
       and Ctrl-C, which stops a command with the line "interrupted"
    2  the command line itself is wrong (unknown option, missing argument, bad value)
    3  a confirmation was declined, so nothing was written
    4  an unexpected internal error (a bug: please report it with the --debug output)

Ctrl-C is the user's choice, not a failure of the store, but it leaves a command's work
undone, so it is not a success either; 1 is what the documentation has always promised.
"""

from __future__ import annotations

import sys
import traceback

from agent_engine import AgentEngineError, ConfirmationDeclined, SchemaVersionError

__all__ = [
    "EXIT_DECLINED",
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "report",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DECLINED = 3
EXIT_INTERNAL = 4


class CommandError(AgentEngineError):
    """A user error found by the command itself (nothing matched, an option is missing)."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def describe(error: BaseException) -> tuple[str, int]:
    """The line a user sees for ``error``, and the exit code it maps to."""
    if isinstance(error, ConfirmationDeclined):
        what = _one_line(str(error)).removeprefix("confirmation declined: ")
        return f"declined: {what} was not confirmed; nothing was written", EXIT_DECLINED
    if isinstance(error, SchemaVersionError):
        hint = "" if "db upgrade" in str(error) else " (run `agent-engine db upgrade`)"
        return f"error: {_one_line(str(error))}{hint}", EXIT_ERROR
    if isinstance(error, AgentEngineError):
        return f"error: {_one_line(str(error))}", EXIT_ERROR
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", EXIT_ERROR
    message = _one_line(str(error)) or "no message"
    line = (
        f"internal error: {type(error).__name__}: {message} "
        "(a bug in agent_engine; rerun with --debug for the traceback)"
    )
    return line, EXIT_INTERNAL


def report(error: BaseException, *, debug: bool) -> int:
    """Write ``error`` to stderr (with its traceback under ``--debug``); return the exit code."""
    line, code = describe(error)
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return code

"""The confirmation callback the command gives global memory: ask a human, or say no.

``--yes`` approves every request (and says so on stderr). Otherwise the question goes to
stderr and one line is read from stdin: ``y`` or ``yes`` approves, anything else declines,
and so does a closed or empty stdin (a CI job, ``< /dev/null``), so a run nobody watches can
never write to global memory by accident. A pipe works like a terminal (``echo y | ...``).
"""

from __future__ import annotations

import sys

from agent_engine import Confirm, ConfirmationRequest

__all__ = ["make_confirm"]

_YES = frozenset({"y", "yes"})


def make_confirm(assume_yes: bool) -> Confirm:
    """A callback that approves with ``assume_yes``, or else asks on stdin."""

    def confirm(request: ConfirmationRequest) -> bool:
        if assume_yes:
            sys.stderr.write(f"{request.message} yes (--yes)\n")
            return True
        sys.stderr.write(f"{request.message} [y/N] ")
        sys.stderr.flush()
        try:
            answer = sys.stdin.readline() if sys.stdin is not None else ""
        except (OSError, ValueError):  # stdin closed or unreadable: nobody can answer
            answer = ""
        if not answer:
            sys.stderr.write("\nno answer (stdin is closed): declined\n")
            return False
        if not sys.stdin.isatty():  # a terminal echoes the answer; show a piped one too
            sys.stderr.write(answer.strip() + "\n")
        return answer.strip().casefold() in _YES

    return confirm

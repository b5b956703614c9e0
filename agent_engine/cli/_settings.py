"""The global options, resolved once and handed to every command through its context.

Scopes: memory commands work on one project's memory and one user's global memory. The
project defaults to ``AGENT_ENGINE_PROJECT`` or else the name of the current directory (run
the command from a project's checkout and it finds that project's memory); the user defaults
to ``AGENT_ENGINE_USER`` or else ``default``, the same user a library caller gets from
``GlobalMemoryStore(backend)``.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path

import attrs
import typer

__all__ = [
    "EMBEDDER_ENV",
    "EmbedderName",
    "Settings",
    "default_project",
    "default_user",
    "settings",
]

PROJECT_ENV = "AGENT_ENGINE_PROJECT"
USER_ENV = "AGENT_ENGINE_USER"
EMBEDDER_ENV = "AGENT_ENGINE_EMBEDDER"


def default_project() -> str:
    """``AGENT_ENGINE_PROJECT``, or else the current directory's name."""
    return os.environ.get(PROJECT_ENV) or Path.cwd().name or "default"


def default_user() -> str:
    """``AGENT_ENGINE_USER``, or else ``default``."""
    return os.environ.get(USER_ENV) or "default"


class EmbedderName(enum.StrEnum):
    """The embedders ``--embedder`` can name."""

    AUTO = "auto"
    MINILM = "minilm"
    HASHING = "hashing"


@attrs.define
class Settings:
    """What the global options said; commands may turn ``json``/``yes`` on for themselves."""

    db: str | None = None
    json: bool = False
    debug: bool = False
    yes: bool = False
    embedder: str = "auto"
    statement_timeout: float | None = None
    """Seconds per SQL statement; ``None``: the backend's default (its environment variable)."""


def settings(ctx: typer.Context) -> Settings:
    """The settings of the command being run."""
    found = ctx.find_object(Settings)
    return found if found is not None else Settings()

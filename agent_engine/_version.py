"""The version of agent_engine: the installed distribution's, else the checkout's.

An installed package (wheel or editable) knows its version from its metadata. A source
checkout imported without installing (``PYTHONPATH=.``) has no metadata, so the version
comes from the ``pyproject.toml`` beside the package, and ``0+unknown`` when even that is
missing (a copied folder): a version that sorts below every release rather than a crash.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["DISTRIBUTION", "UNKNOWN", "__version__"]

DISTRIBUTION = "agent-engine"
UNKNOWN = "0+unknown"


def _checkout_version(pyproject: Path) -> str:
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    found = project.get("version")
    return found if isinstance(found, str) and found else UNKNOWN


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return _checkout_version(Path(__file__).resolve().parents[1] / "pyproject.toml")


__version__ = _version()
"""This copy's version, read once at import: what bug reports and ``--version`` should quote."""

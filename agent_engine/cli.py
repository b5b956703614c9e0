"""The ``agent-engine`` command (grows into the full CLI; for now the demo main job)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agent_engine import ContextItem, InMemoryBackend, Tier

__all__ = ["main"]


def _demo() -> int:
    backend = InMemoryBackend()
    backend.add_many(
        [
            ContextItem.create("decision", "Use SQLite as the default store.", tier=Tier.PROJECT),
            ContextItem.create(
                "convention", "Type-annotate every public function.", importance=0.8
            ),
            ContextItem.create("preference", "Prefer short answers.", tier=Tier.GLOBAL),
        ]
    )
    for item in backend.query({"importance": {"$gte": 0.5}}, order_by="importance"):
        sys.stdout.write(f"[{item.tier}] {item.kind}: {item.text}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = argparse.ArgumentParser(prog="agent-engine", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="store a few memories and query them")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo()
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""Async twin tests run the sync tests' backends: every kind, through the tiers' fixtures."""

from __future__ import annotations

from tests.tiers.conftest import backend, clock

__all__ = ["backend", "clock"]

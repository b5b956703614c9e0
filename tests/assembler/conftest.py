"""Assembler tests run on every backend: they reuse the tier tests' `backend` and `clock`.

The kinds of backend are ``BACKEND_KINDS`` in ``tests/conftest.py``; the assembler tests pick
up a backend added there.
"""

from __future__ import annotations

import pytest

from agent_engine import ContextAssembler, MemoryStores
from tests.tiers.conftest import backend, clock

__all__ = ["assembler", "backend", "clock"]


@pytest.fixture
def assembler(backend, clock):
    """An assembler whose three tiers share the `backend` (global writes are approved)."""
    return ContextAssembler(MemoryStores(backend, clock=clock, confirm=lambda _request: True))

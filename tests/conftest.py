"""Shared fixtures: structlog is reset around every test so captured logs never leak."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

pytest.register_assert_rewrite("agent_engine.testing")


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()

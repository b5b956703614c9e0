"""Loggers for agent_engine's modules.

A library must not configure logging: that is the application's call. structlog, left
unconfigured, prints every event to stdout, which would turn a library's debug events into
noise in its users' programs. So while the application has not configured structlog, our
events go through the standard library logger ``agent_engine`` (silent below WARNING unless the
application says otherwise); once it has, they flow through the application's structlog
pipeline with their bound context (task, project, tier, backend).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import structlog
from structlog.typing import FilteringBoundLogger

__all__ = ["get_logger"]

_STDLIB_NAME = "agent_engine"


def get_logger(**context: Any) -> FilteringBoundLogger:
    """Return a logger bound to ``context``; call it where the context is known, not at import."""
    if structlog.is_configured():
        logger = structlog.get_logger(_STDLIB_NAME)
    else:
        logger = structlog.wrap_logger(
            logging.getLogger(_STDLIB_NAME),
            wrapper_class=structlog.stdlib.BoundLogger,
            processors=[
                structlog.stdlib.filter_by_level,
                structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
            ],
            context_class=dict,
        )
    return cast("FilteringBoundLogger", logger.bind(**context))

"""Library logging never configures anything and carries bound context."""

from __future__ import annotations

import logging

import structlog
from structlog.testing import capture_logs

from agent_engine._log import get_logger


class TestGetLogger:
    def test_importing_does_not_configure_structlog(self):
        """Importing agent_engine leaves structlog unconfigured (the application decides)."""
        import agent_engine  # noqa: F401, PLC0415

        assert not structlog.is_configured()

    def test_unconfigured_goes_to_stdlib_silently(self, caplog):
        """Without structlog config, events go to the 'agent_engine' stdlib logger."""
        with caplog.at_level(logging.INFO, logger="agent_engine"):
            get_logger(tier="project").info("stored", count=3)
        assert "stored" in caplog.text
        assert "tier='project'" in caplog.text

    def test_configured_apps_receive_bound_context(self):
        """When the app configures structlog, events flow through it with their context."""
        with capture_logs() as logs:
            get_logger(task="t1", tier="task").info("cleared", removed=2)
        assert logs == [
            {"event": "cleared", "log_level": "info", "task": "t1", "tier": "task", "removed": 2}
        ]

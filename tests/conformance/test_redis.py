"""The conformance suite on Redis stores whose namespaces expire.

A plain Redis store runs in ``test_backends.py`` with every other kind of backend; here every
write also starts its namespace's expiry again, which the suite must not notice.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from agent_engine.testing.conformance import BackendConformance


class TestRedisWithTTL(BackendConformance):
    @pytest.fixture
    def backend(self, embedder):
        from agent_engine.memory.redis import RedisBackend  # noqa: PLC0415
        from agent_engine.testing.databases import redis_server_url  # noqa: PLC0415

        with RedisBackend(
            redis_server_url(),
            embedder=embedder,
            prefix=f"agent_engine:test:{uuid.uuid4().hex}:",
            ttl=timedelta(hours=1),
            temporary=True,
        ) as backend:
            yield backend

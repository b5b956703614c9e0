"""Two processes writing to one SQL store at once: nothing lost, nothing doubled, no errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agent_engine.memory.sql import SQLAlchemyBackend, upgrade_database
from agent_engine.models import ContextItem

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 3.0
WRITER = textwrap.dedent(
    """
    import json, sys, time
    from datetime import UTC, datetime
    from agent_engine.memory.sql import SQLAlchemyBackend
    from agent_engine.models import ContextItem

    url, name, start, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    batches = touches = 0
    with SQLAlchemyBackend(url, dim=4) as backend:
        while time.time() < start:
            time.sleep(0.005)
        # Write for `seconds` from whenever this process got going (a slow start still overlaps).
        deadline = time.time() + seconds
        while time.time() < deadline:
            backend.add_many(
                ContextItem(id=f"{name}-{batches}-{n}", kind="note", embedding=[1, 0, 0, n])
                for n in range(20)
            )
            batches += 1
            touches += backend.touch(["shared"], datetime.now(UTC))
            backend.delete(f"{name}-{batches - 1}-0")
    print(json.dumps({"batches": batches, "touches": touches}))
    """
)


def test_two_writers(sql_url):
    upgrade_database(sql_url)
    with SQLAlchemyBackend(sql_url, dim=4) as backend:
        backend.add(ContextItem(id="shared", kind="note", embedding=[1, 0, 0, 0]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.time() + 2.0
    writers = [
        subprocess.Popen(  # noqa: S603 - our own script
            [sys.executable, "-c", WRITER, sql_url, name, str(start), str(SECONDS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    reports = {}
    for name, writer in zip(("a", "b"), writers, strict=True):
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert "locked" not in err
        reports[name] = json.loads(out)
    expected = {"shared"}
    for name, report in reports.items():
        assert report["batches"] > 0
        expected |= {f"{name}-{b}-{n}" for b in range(report["batches"]) for n in range(1, 20)}
    with SQLAlchemyBackend(sql_url, dim=4) as backend:
        stored = [item.id for item in backend.query(limit=None)]
        assert len(stored) == len(set(stored))
        assert set(stored) == expected
        shared = backend.get("shared")
        assert shared is not None
        assert shared.access_count == sum(r["touches"] for r in reports.values())

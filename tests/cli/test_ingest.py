"""``agent-engine ingest``: backfill a JSONL file, run a worker, read the status, retry."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import sqlalchemy as sa

from .conftest import Cli


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def _turns(n: int, start: int = 0) -> list[str]:
    return [
        json.dumps(
            {"text": f"Caroline: I adopted dog number {i}", "source": "Caroline", "kind": "turn"}
        )
        for i in range(start, start + n)
    ]


def _counts(sqlite_url: str) -> dict[str, int]:
    engine = sa.create_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT state, count(*) FROM ae_ingest_queue GROUP BY state")
            )
            return dict(rows.all())
    finally:
        engine.dispose()


class TestBackfill:
    def test_a_dry_run_names_the_bad_lines_and_creates_nothing(self, sql_cli, tmp_path):
        lines = [*_turns(2), "{oops", json.dumps({"kind": "note"})]
        result = sql_cli("ingest", "backfill", _write(tmp_path / "e.jsonl", lines), "--dry-run")
        assert result.code == 0, result.err
        assert "would queue 2, 2 rejected" in result.out
        assert "line 3: not JSON" in result.out
        assert "line 4: an event needs its text" in result.out
        assert not (tmp_path / "store").exists()

    def test_backfill_work_status_and_a_second_backfill_queues_nothing(
        self, sql_cli, tmp_path, sqlite_url
    ):
        lines = [
            *_turns(3),
            json.dumps({"text": "Melanie: haha", "source": "Melanie", "kind": "turn"}),
            "{oops",
        ]
        file = _write(tmp_path / "chat.jsonl", lines)
        first = sql_cli("ingest", "backfill", file, "--json").json()
        assert (first["lines"], first["queued"]) == (5, 4)
        assert first["rejected"][0]["line"] == 5
        again = sql_cli("ingest", "backfill", file, "--json").json()
        assert (again["queued"], again["duplicates"]) == (0, 4)
        work = sql_cli("--embedder", "hashing", "ingest", "worker", "--until-idle", "--json")
        assert work.code == 0, work.err
        assert (work.json()["stored"], work.json()["dropped"]) == (3, {"chit_chat": 1})
        status = sql_cli("ingest", "status", "--json").json()
        assert (status["pending"], status["done"], status["dropped"], status["dead"]) == (
            0,
            3,
            1,
            2,
        )
        assert {d["origin"] for d in status["dead_letters"]} == {"chat.jsonl:5"}
        listed = sql_cli("memory", "list", "--json").json()
        assert sorted(i["text"] for i in listed) == [
            f"Caroline: I adopted dog number {i}" for i in range(3)
        ]

    def test_stdin_and_the_project_option(self, sql_cli, tmp_path, sqlite_url):
        result = sql_cli("ingest", "backfill", "-", "--project", "ops", input="\n".join(_turns(2)))
        assert result.code == 0, result.err
        sql_cli("--embedder", "hashing", "ingest", "worker", "--until-idle")
        assert len(sql_cli("memory", "list", "-p", "ops", "--json").json()) == 2

    def test_the_queue_needs_a_database(self, cli, tmp_path):
        result = cli("ingest", "backfill", _write(tmp_path / "e.jsonl", _turns(1)))
        assert result.code != 0
        assert "SQL database" in result.err


class TestRetry:
    def test_a_refused_event_is_retried_and_stored_once_approved(self, sql_cli, tmp_path):
        pref = {"text": "Prefers tabs", "kind": "preference", "tier": "global"}
        sql_cli("ingest", "backfill", _write(tmp_path / "p.jsonl", [json.dumps(pref)]))
        sql_cli("--embedder", "hashing", "ingest", "worker", "--until-idle")
        status = sql_cli("ingest", "status")
        assert "1 dead" in status.out
        assert "refused: ConfirmationDeclined" in status.out
        assert sql_cli("ingest", "retry").code != 0  # neither SEQ nor --all
        assert "queued 1 dead letter(s) again" in sql_cli("ingest", "retry", "--all").out
        sql_cli("--embedder", "hashing", "ingest", "worker", "--until-idle", "--yes")
        listed = sql_cli("memory", "list", "--tier", "global", "--json").json()
        assert [i["text"] for i in listed] == ["Prefers tabs"]


class TestWorkerProcess:
    def _start(self, cli: Cli, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(  # noqa: S603 - our own command
            [
                *cli.command,
                "--embedder",
                "hashing",
                "ingest",
                "worker",
                "--batch-size",
                "8",
                "--poll",
                "0.05",
                "--lease",
                "1",
                *args,
            ],
            env=cli.env,
            cwd=cli.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def _wait_for(self, condition, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.05)

    def test_sigterm_finishes_the_batch_in_hand_and_exits_cleanly(
        self, sql_cli, tmp_path, sqlite_url
    ):
        sql_cli("ingest", "backfill", _write(tmp_path / "e.jsonl", _turns(2000)))
        worker = self._start(sql_cli)
        self._wait_for(lambda: _counts(sqlite_url).get("done", 0) >= 8)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        done = _counts(sqlite_url)["done"]
        assert f"done: {done} claimed, {done} stored" in out
        assert done < 2000  # it stopped early, and left no batch half done:
        engine = sa.create_engine(sqlite_url)
        try:
            with engine.connect() as connection:
                leased = connection.execute(
                    sa.text("SELECT count(*) FROM ae_ingest_queue WHERE lease_owner IS NOT NULL")
                ).scalar_one()
        finally:
            engine.dispose()
        assert leased == 0

    def test_a_worker_killed_mid_run_loses_nothing(self, sql_cli, tmp_path, sqlite_url):
        sql_cli("ingest", "backfill", _write(tmp_path / "e.jsonl", _turns(400)))
        for _ in range(3):
            before = _counts(sqlite_url).get("done", 0)
            worker = self._start(sql_cli)
            self._wait_for(lambda before=before: _counts(sqlite_url).get("done", 0) > before)
            worker.kill()
            worker.communicate(timeout=60)
        time.sleep(1.1)  # the killed worker's lease runs out
        done = sql_cli("--embedder", "hashing", "ingest", "worker", "--until-idle", "--json")
        assert done.code == 0, done.err
        assert _counts(sqlite_url) == {"done": 400}
        listed = sql_cli("memory", "list", "--limit", "1000", "--json").json()
        assert len(listed) == 400
        assert len({i["text"] for i in listed}) == 400


class TestMemoryAdd:
    """``memory add`` takes the same path: redaction and the decider, each with a way around."""

    SECRET = "mail dana.kowalski@example.com about the invoice"  # noqa: S105 - a fake address

    def test_small_talk_is_not_stored_unless_asked(self, sql_cli):
        args = ("--embedder", "hashing", "memory", "add", "--kind", "turn", "--source", "Nate")
        dropped = sql_cli(*args, "Nate: Thanks so much!")
        assert dropped.code == 0, dropped.err
        assert "not stored: the decider drops this turn as acknowledgement" in dropped.out
        as_json = sql_cli(*args, "Nate: haha", "--json").json()
        assert (as_json["id"], as_json["dropped"]) == (None, "chit_chat")
        assert sql_cli("memory", "list", "--json").json() == []
        kept = sql_cli(*args, "Nate: Thanks so much!", "--no-decider")
        assert "added " in kept.out
        note = sql_cli("--embedder", "hashing", "memory", "add", "Thanks so much!")
        assert "added " in note.out  # a note was written on purpose: not judged

    def test_secrets_are_masked_and_said_so_unless_asked(self, sql_cli):
        masked = sql_cli("--embedder", "hashing", "memory", "add", self.SECRET, "--json").json()
        assert masked["text"] == "mail [REDACTED:email] about the invoice"
        assert masked["redacted"] == {"email": 1}
        shown = sql_cli("--embedder", "hashing", "memory", "add", self.SECRET + " twice")
        assert "redacted before storing: email x1" in shown.err
        raw = sql_cli(
            "--embedder",
            "hashing",
            "memory",
            "add",
            self.SECRET + " again",
            "--no-redaction",
            "--json",
        ).json()
        assert raw["text"] == self.SECRET + " again"
        assert raw["redacted"] == {}

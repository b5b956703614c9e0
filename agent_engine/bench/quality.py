"""Paging-policy quality on LoCoMo: how much of a question's evidence lands in the context.

Set-up, per conversation (as a live conversation would have it): every turn but the last few
is project memory, the last ``live_turns`` are task memory, and each question with evidence
asks ``build_context`` for a context under each budget, once per policy. Scores:

* evidence recall: the share of the question's evidence turns the context includes;
* full: whether all of them are included;
* recall@k: evidence share among the k best-scored items of the largest context;
* answer: whether the gold answer's text appears in the rendered context (casefolded). Most
  answers are paraphrased or dated ("7 May 2023" for a turn that says "yesterday"), so this
  is low for every row; it is measured the same way for every row, summary or not.

With ``QualityConfig(rerank=...)`` or ``QualityConfig(diversity=...)`` every policy is
measured again, as ``<policy>+rerank`` or ``<policy>+diverse``, by an assembler with that
stage on, on the same stores.

With ``QualityConfig(summary=...)`` every policy is measured a second time, as
``<policy>+summary``, by an assembler that summarizes what it leaves out for lack of room
(:mod:`agent_engine.assembler.summary`). There an evidence turn counts when the context holds
it whole, or when a line of its summary section is a fragment of it: at least
``MIN_FRAGMENT_WORDS`` words of its text, in order (after the speaker's label, which the
extractive summarizer keeps), with a cut's trailing mark removed. A fragment need not hold
the answer, so these rows also report ``items`` (the evidence share held whole, as the
plain rows count) and ``coverage`` (over the evidence turns credited to the summary, the mean
share of the turn's words its fragment shows). A summary that paraphrases (an LLM's) is
never credited.

Every policy runs in the same process on the same stores, so each figure reads as a ratio to
the baselines beside it. Conversations 0-4 are the tuning split; 5-9 are for measurement.
Access tracking is off, so questions do not influence each other.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import attrs

from agent_engine.assembler._cut import CUT_MARK
from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.diversity import Diversity
from agent_engine.assembler.package import ContextPackage, Selection
from agent_engine.assembler.policies import (
    DEFAULT_POLICIES,
    DENSE,
    LEXICAL,
    NEIGHBOURS,
    Policy,
)
from agent_engine.assembler.query import DEFAULT_QUERY_BUILDER, QueryBuilder
from agent_engine.assembler.rerank import RerankConfig
from agent_engine.assembler.summary import SummaryConfig
from agent_engine.bench.locomo import CATEGORIES, Conversation
from agent_engine.bench.stress import STRESS
from agent_engine.embeddings import Embedder
from agent_engine.errors import ValidationError
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextRequest, Task, Tier
from agent_engine.retrieval.text import analyze
from agent_engine.tiers.scope import local_id
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.views import View
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = [
    "ABLATIONS",
    "BASELINES",
    "DIVERSE_SUFFIX",
    "LOW_OVERLAP",
    "LOW_OVERLAP_SHARE",
    "MIN_FRAGMENT_WORDS",
    "OVERALL",
    "QualityConfig",
    "RERANK_SUFFIX",
    "SUMMARY_SUFFIX",
    "answered",
    "conversation_stores",
    "overlap",
    "run_quality",
    "split_of",
    "turn_id",
    "with_ablations",
]

BASELINES = ("random", "recency", "importance", "lexical", "semantic")
"""The baseline policies every result is reported beside."""

TUNING_CONVERSATIONS = 5
"""Conversations 0-4 are for tuning; only 5-9 measure honestly."""

OVERALL = (1, 2, 3, 4)
"""Categories averaged as "overall" (the usual convention; 5 is adversarial)."""

SUMMARY_SUFFIX = "+summary"
"""What a policy's name gets in the rows measured with a summary section."""
LOW_OVERLAP = "low overlap"
"""The group of questions whose evidence holds at most :data:`LOW_OVERLAP_SHARE` of their terms."""
LOW_OVERLAP_SHARE = 0.25
"""Where a question counts as sharing few words with its evidence: a quarter of its terms.

Measured with BM25's own analysis, the speaker's label included: these are the questions a
lexical signal has least to say about (a paraphrase of the memory), about 15% of LoCoMo's."""
RERANK_SUFFIX = "+rerank"
"""What a policy's name gets in the rows measured with a reranker stage."""
DIVERSE_SUFFIX = "+diverse"
"""What a policy's name gets in the rows measured with diversity caps."""
SUFFIXES = {SUMMARY_SUFFIX: "summary", RERANK_SUFFIX: "rerank", DIVERSE_SUFFIX: "diversity"}
"""Each row suffix and the ``QualityConfig`` (and ``AssemblerConfig``) field it measures."""

MIN_FRAGMENT_WORDS = 3
"""The fewest words of a turn a summary line must show for the turn to count as in it."""


@attrs.frozen
class QualityConfig:
    """What to measure."""

    budgets: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    policies: tuple[str, ...] = (*BASELINES, "hybrid")
    live_turns: int = 4
    recall_at: tuple[int, ...] = (5, 10)
    working_set: int | None = None
    """The project store's item limit (``None``: unlimited). A limit far below a
    conversation's length pages most of it out to the archive as it is loaded, so builds must
    page it back in: what the archive costs in recall, against an unlimited store."""
    drop_archive: bool = False
    """Forget what the limit archived: eviction as it was before the archive (it deleted)."""
    query_builder: QueryBuilder | None = DEFAULT_QUERY_BUILDER
    """What the assembler ranks against (:mod:`agent_engine.assembler.query`; ``None``: the
    question as asked)."""
    stable_prefix: bool = False
    """Build with ``AssemblerConfig(stable_prefix=True)``: what a cache-stable prompt costs."""
    summary: SummaryConfig | None = None
    """Measure every policy with this summary section too (rows ``<policy>+summary``)."""
    rerank: RerankConfig | None = None
    """Measure every policy with this reranker stage too (rows ``<policy>+rerank``)."""
    diversity: Diversity | None = None
    """Measure every policy with these diversity caps too (rows ``<policy>+diverse``)."""
    ablations: bool = False
    """Measure the default policy again without each of its signals (rows ``hybrid-no-*``).

    Without it, ``policies`` may still name single :data:`ABLATIONS` rows."""
    stress: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    """Measure each conversation's stressed copies too (:data:`~agent_engine.bench.stress.
    STRESS` names), each reported as a group of its name; the other groups stay the plain
    conversations'."""

    @stress.validator
    def _known_stress(
        self, _attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
    ) -> None:
        unknown = [name for name in value if name not in STRESS]
        if unknown:
            raise ValidationError(
                f"unknown stress {unknown[0]!r}; choose from {', '.join(STRESS)}",
                field="stress",
                value=unknown[0],
            )

    def variants(self) -> tuple[str, ...]:
        """The rows measured: each policy, and each with a summary, reranker or caps when set."""
        rows = list(self.policies)
        if self.ablations:
            rows += [name for name in ABLATIONS if name not in rows]
        for suffix, setting in SUFFIXES.items():
            if getattr(self, setting) is not None:
                rows += [f"{policy}{suffix}" for policy in self.policies]
        return tuple(rows)


def _without(
    name: str, *, sources: frozenset[str] = frozenset(), strip: bool = True, **settings: object
) -> Callable[[Policy], Policy]:
    """The default policy less some of its sources and settings, as the ablation ``name``."""

    def ablate(hybrid: Policy) -> Policy:
        scorer = copy.copy(hybrid.scorer)
        for setting, value in settings.items():
            setattr(scorer, setting, value)
        return Policy(name, scorer, hybrid.sources - sources, strip_sources=strip)

    return ablate


ABLATIONS: Mapping[str, Callable[[Policy], Policy]] = {
    "hybrid-no-lexical": _without(
        "hybrid-no-lexical", sources=frozenset({LEXICAL}), lexical_weight=0.0
    ),
    "hybrid-no-dense": _without("hybrid-no-dense", sources=frozenset({DENSE}), dense_weight=0.0),
    "hybrid-no-neighbours": _without(
        "hybrid-no-neighbours", sources=frozenset({NEIGHBOURS}), smoothing=0.0
    ),
    "hybrid-no-names": _without("hybrid-no-names", strip=False, source_boost=0.0),
    "hybrid-no-importance": _without("hybrid-no-importance", importance_weight=0.0),
    "hybrid-fixed-smoothing": _without("hybrid-fixed-smoothing", smoothing_words=None),
    "hybrid-adaptive": _without("hybrid-adaptive", lexical_confidence=True),
}
"""Each of the default policy's signals taken out, one at a time: what each contributes.

``-lexical`` and ``-dense`` drop the signal's search as well as its weight (no candidates
from it), ``-neighbours`` the session neighbours and the smoothing over them, ``-names`` the
boost of a source the question names (and the stripping of its name from the dense query),
``-importance`` the importance prior, ``-fixed-smoothing`` the smoothing weight's growth for
short messages (``HybridScorer(smoothing_words=None)``); and one row adds a signal:
``-adaptive`` scales the lexical weight to the query (``HybridScorer(lexical_confidence=True)``)."""


def with_ablations(policies: Mapping[str, Policy]) -> dict[str, Policy]:
    """``policies`` and the :data:`ABLATIONS` of its ``hybrid`` policy (none without one)."""
    hybrid = policies.get("hybrid")
    if hybrid is None:
        return dict(policies)
    return {**policies, **{name: ablate(hybrid) for name, ablate in ABLATIONS.items()}}


def split_of(index: int) -> str:
    """The split a conversation belongs to: 0-4 tuning, 5-9 held out."""
    return "tuning (0-4)" if index < TUNING_CONVERSATIONS else "held-out (5-9)"


def conversation_stores(
    conversation: Conversation,
    embedder: Embedder,
    counter: TokenCounter,
    config: QualityConfig,
    policies: Mapping[str, Policy],
) -> tuple[ContextAssembler, Task]:
    """The stores of one conversation as the quality part sets them up (see the module)."""
    backend = InMemoryBackend(embedder=embedder)
    end = conversation.ends_at + timedelta(days=1)
    assembler = ContextAssembler(
        MemoryStores(
            backend,
            task_backend=backend,
            max_project_items=config.working_set,
            clock=lambda: end,
        ),
        config=AssemblerConfig(track_access=False, stable_prefix=config.stable_prefix),
        counter=counter,
        policies=policies,
        query_builder=config.query_builder,
    )
    task = Task(id=conversation.sample_id, project_id=conversation.sample_id)
    live = config.live_turns
    history = conversation.items[:-live] if live else conversation.items
    recent = conversation.items[-live:] if live else ()
    project = assembler.project_store(task.project_id)
    project.add_many(history)
    if config.drop_archive:
        project.forget(*(item.id for item in project.list_all(view=View.ARCHIVED)))
    task_store = assembler.task_store(task)
    task_store.add_many(
        attrs.evolve(item, tier=Tier.TASK, namespace=task_store.namespace) for item in recent
    )
    return assembler, task


def turn_id(selection: Selection) -> str:
    """The dataset's own id of a selected turn (stores prefix ids with their scope)."""
    return local_id(selection.item.namespace, selection.item.id)


def run_quality(
    conversations: Iterable[Conversation],
    embedder: Embedder,
    *,
    counter: TokenCounter = DEFAULT_COUNTER,
    config: QualityConfig | None = None,
    policies: Mapping[str, Policy] = DEFAULT_POLICIES,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Measure every policy at every budget; return per-question records and aggregates.

    ``policies`` is the registry the names in ``config.policies`` are looked up in, so a
    custom policy can be measured beside the shipped ones.
    """
    config = config or QualityConfig()
    # Every ablation row can be named in ``config.policies``; ``ablations`` measures them all.
    policies = with_ablations(policies)
    records: list[dict[str, Any]] = []
    for original in conversations:
        for stress in ("", *config.stress):
            conversation = STRESS[stress](original) if stress else original
            records += _measure(
                conversation,
                stress,
                embedder=embedder,
                counter=counter,
                config=config,
                policies=policies,
                progress=progress,
            )
    return {
        "config": {
            **attrs.asdict(config),
            "query_builder": repr(config.query_builder),
            "summary": repr(config.summary),
            "rerank": repr(config.rerank),
        },
        "records": records,
        "summary": summarize(records, config),
    }


def _measure(
    conversation: Conversation,
    stress: str,
    *,
    embedder: Embedder,
    counter: TokenCounter,
    config: QualityConfig,
    policies: Mapping[str, Policy],
    progress: Callable[[int], None] | None,
) -> list[dict[str, Any]]:
    """One conversation's records: each question, each row, every budget; progress per question."""
    records: list[dict[str, Any]] = []
    plain, task = conversation_stores(conversation, embedder, counter, config, policies)
    assemblers = _variants(plain, config)
    texts = {item.id: item.text for item in conversation.items}
    for question in conversation.questions:
        evidence = set(question.evidence)
        shared = overlap(question.text, (texts[t] for t in evidence if t in texts))
        for variant in config.variants():
            policy, suffix = _policy_of(variant)
            assembler = assemblers[variant]
            summarizing = suffix == SUMMARY_SUFFIX
            record: dict[str, Any] = {
                "stress": stress,
                "overlap": shared,
                "conversation": conversation.index,
                "split": split_of(conversation.index),
                "category": question.category,
                "policy": variant,
                "recall": {},
                "full": {},
                "answer": {},
            }
            if summarizing:
                record.update(items={}, shown={})
            largest = None
            for budget in sorted(config.budgets):
                package = assembler.build_context(
                    task,
                    ContextRequest(budget_tokens=budget, query=question.text, policy=policy),
                )
                included = {turn_id(selection) for selection in package.selections}
                found = len(evidence & included)
                if summarizing:
                    fragments = summarized(package, evidence - included, texts)
                    record["items"][budget] = found / len(evidence)
                    record["shown"][budget] = sorted(fragments.values())
                    found += len(fragments)
                record["recall"][budget] = found / len(evidence)
                record["full"][budget] = found == len(evidence)
                record["answer"][budget] = answered(package, question.answer)
                largest = package
            if largest is not None:
                ranked = sorted(largest.selections, key=lambda s: (-s.score, turn_id(s)))
                for k in config.recall_at:
                    top = {turn_id(s) for s in ranked[:k]}
                    record["recall"][f"@{k}"] = len(evidence & top) / len(evidence)
            records.append(record)
        if progress is not None:
            progress(1)
    return records


def _policy_of(variant: str) -> tuple[str, str]:
    """The policy a row measures and its suffix (``""`` for a plain row)."""
    for suffix in SUFFIXES:
        if variant.endswith(suffix):
            return variant.removesuffix(suffix), suffix
    return variant, ""


def _variants(plain: ContextAssembler, config: QualityConfig) -> dict[str, ContextAssembler]:
    """The assembler each row is measured with: ``plain``, or one beside it on its stores."""
    beside = {
        suffix: _beside(plain, **{setting: getattr(config, setting)})
        for suffix, setting in SUFFIXES.items()
    }
    chosen: dict[str, ContextAssembler] = {}
    for variant in config.variants():
        _, suffix = _policy_of(variant)
        chosen[variant] = beside.get(suffix) or plain
    return chosen


def _beside(plain: ContextAssembler, **setting: Any) -> ContextAssembler | None:
    """An assembler like ``plain`` on its stores, with one more setting; ``None`` without it.

    The setting is an ``AssemblerConfig`` field: a summary, a reranker, diversity caps.
    """
    if all(value is None for value in setting.values()):
        return None
    return ContextAssembler(
        plain.stores,
        config=attrs.evolve(plain.config, **setting),
        counter=plain.counter,
        policies=plain.policies,
        query_builder=plain.query_builder,
    )


_LABEL_LENGTH = 40
"""The longest a speaker's label may be (as the extractive summarizer reads one)."""


def _label_free(text: str) -> str:
    """``text`` without a speaker's label ("Caroline: "), whitespace collapsed."""
    text = " ".join(text.split())
    head, colon, rest = text.partition(": ")
    return rest if colon and len(head) <= _LABEL_LENGTH and ":" not in head else text


def answered(package: ContextPackage, answer: str) -> bool:
    """Whether ``answer`` (non-blank) appears in the package's render, case aside."""
    wanted = " ".join(answer.split()).casefold()
    return bool(wanted) and wanted in " ".join(package.render().split()).casefold()


def summarized(
    package: ContextPackage, wanted: Iterable[str], texts: Mapping[str, str]
) -> dict[str, float]:
    """Which of ``wanted`` (turn ids) the summary section shows a fragment of, and how much.

    A turn is shown when a line of the summary, less a cut's mark and the speaker's label,
    has at least :data:`MIN_FRAGMENT_WORDS` words and is a part of the turn's text (label
    removed too). The value is the share of the turn's words that the longest such line
    shows.
    """
    if package.summary is None or not package.summary.text:
        return {}
    lines = [
        _label_free(line.removesuffix(CUT_MARK.strip()).rstrip())
        for line in package.summary.text.splitlines()
    ]
    lines = [line for line in lines if len(line.split()) >= MIN_FRAGMENT_WORDS]
    shown: dict[str, float] = {}
    for turn in wanted:
        text = _label_free(texts[turn])
        words = len(text.split())
        parts = [len(line.split()) for line in lines if line in text]
        if parts and words:
            shown[turn] = min(1.0, max(parts) / words)
    return shown


def _groups(config: QualityConfig) -> list[tuple[str, Callable[[dict[str, Any]], bool]]]:
    """The groups each row reports.

    Overall, per category and low overlap, of the plain conversations; and overall on each
    stressed copy measured.
    """
    return [
        ("overall", lambda record: _plain(record) and record["category"] in OVERALL),
        *((CATEGORIES[category], _in_category(category)) for category in sorted(CATEGORIES)),
        (LOW_OVERLAP, _low_overlap),
        *((stress, _stressed(stress)) for stress in config.stress),
    ]


def _plain(record: dict[str, Any]) -> bool:
    return not record.get("stress")


def _in_category(category: int) -> Callable[[dict[str, Any]], bool]:
    return lambda record: _plain(record) and record["category"] == category


def _low_overlap(record: dict[str, Any]) -> bool:
    return bool(
        _plain(record) and record["category"] in OVERALL and record["overlap"] <= LOW_OVERLAP_SHARE
    )


def _stressed(stress: str) -> Callable[[dict[str, Any]], bool]:
    return lambda record: record.get("stress") == stress and record["category"] in OVERALL


def overlap(question: str, evidence: Iterable[str]) -> float:
    """The share of ``question``'s terms (BM25's: no stopwords, light stems) its evidence has."""
    asked = set(analyze(question))
    if not asked:
        return 1.0
    held = {term for text in evidence for term in analyze(text)}
    return len(asked & held) / len(asked)


def summarize(records: Sequence[dict[str, Any]], config: QualityConfig) -> dict[str, Any]:
    """Mean recall and full-evidence share per split, policy, budget and category."""
    keys = [*sorted(config.budgets), *(f"@{k}" for k in config.recall_at)]
    summary: dict[str, Any] = {}
    for split in sorted({r["split"] for r in records}):
        summary[split] = {}
        for policy in config.variants():
            mine = [r for r in records if r["split"] == split and r["policy"] == policy]
            if not mine:
                continue
            entry: dict[str, Any] = {}
            for group, belongs in _groups(config):
                chosen = [r for r in mine if belongs(r)]
                if not chosen:
                    continue
                entry[group] = {
                    "n": len(chosen),
                    "recall": {
                        str(k): statistics.fmean(r["recall"][k] for r in chosen) for k in keys
                    },
                    "full": {
                        str(b): statistics.fmean(float(r["full"][b]) for r in chosen)
                        for b in sorted(config.budgets)
                    },
                    "answer": {
                        str(b): statistics.fmean(float(r["answer"][b]) for r in chosen)
                        for b in sorted(config.budgets)
                    },
                }
                if "items" in chosen[0]:
                    entry[group]["items"] = {
                        str(b): statistics.fmean(r["items"][b] for r in chosen)
                        for b in sorted(config.budgets)
                    }
                    entry[group]["coverage"] = {
                        str(b): statistics.fmean(
                            [share for r in chosen for share in r["shown"][b]] or [0.0]
                        )
                        for b in sorted(config.budgets)
                    }
            summary[split][policy] = entry
    return summary

"""The benchmark suite's own parts: data loading, the synthetic generator, the report."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import attrs
import pytest

from agent_engine import ValidationError
from agent_engine.assembler import ContextPackage, Layout, RerankConfig, Summary, SummaryConfig
from agent_engine.assembler.diversity import Diversity
from agent_engine.assembler.policies import (
    DEFAULT_POLICIES,
    DENSE,
    LEXICAL,
    NEIGHBOUR_RADIUS,
    NEIGHBOURS,
)
from agent_engine.bench import locomo
from agent_engine.bench.cost import _load, _PrimedEmbedder, backend_names, run_cell
from agent_engine.bench.paraphrase import PARAPHRASE_DATA
from agent_engine.bench.quality import (
    ABLATIONS,
    LOW_OVERLAP,
    LOW_OVERLAP_SHARE,
    OVERALL,
    QualityConfig,
    answered,
    conversation_stores,
    overlap,
    run_quality,
    split_of,
    summarized,
    with_ablations,
)
from agent_engine.bench.report import write_report
from agent_engine.bench.runner import PARTS, SuiteOptions, main, parse_ints, parse_options
from agent_engine.bench.stress import STRESS, full_names, nicknames, short_messages
from agent_engine.bench.synthetic import MAX_PINNED, generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem
from agent_engine.retrieval.text import analyze
from agent_engine.tokens import DEFAULT_COUNTER

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a grey cat"},
        ],
        "session_2_date_time": "9:00 am on 9 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "I started painting sunsets."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Show me one!"},
        ],
        "session_3_date_time": "9:00 am on 10 May, 2023",
    },
    "qa": [
        {
            "question": "What is Ann's cat called?",
            "answer": "Miso",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What does Bob paint?",
            "answer": "sunsets",
            "evidence": ["D2:1; D1:2"],
            "category": 1,
        },
        {
            "question": "Broken ids",
            "answer": "x",
            "evidence": ["D:2:2", "D", "D9:9"],
            "category": 2,
        },
        {"question": "No evidence", "answer": "x", "evidence": [], "category": 3},
        {"question": "Only missing", "answer": "x", "evidence": ["D7:1"], "category": 5},
    ],
}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


class TestLocomo:
    def test_turns_become_items(self, data):
        """Turns become ordered items: speaker as source, session date as time, caption kept."""
        (conversation,) = locomo.load(data)
        first, second, third, _ = conversation.items
        assert first.text == "Ann: I adopted a cat named Miso."
        assert second.text == "Bob: Lovely! [shares image: a grey cat]"
        assert (first.source, first.session) == ("Ann", "session 1")
        assert first.timestamp.isoformat() == "2023-05-08T13:56:00+00:00"
        assert second.timestamp > first.timestamp
        assert third.session == "session 2"

    def test_evidence_is_repaired(self, data):
        """Multi-id strings split, D:2:2 is D2:2, unknown ids drop, empty questions go."""
        (conversation,) = locomo.load(data)
        evidence = {q.text: q.evidence for q in conversation.questions}
        assert evidence == {
            "What is Ann's cat called?": ("conv-x:D1:1",),
            "What does Bob paint?": ("conv-x:D2:1", "conv-x:D1:2"),
            "Broken ids": ("conv-x:D2:2",),
        }

    def test_answers_are_kept(self, data):
        """Each question keeps its gold answer, as text."""
        (conversation,) = locomo.load(data)
        answers = {q.text: q.answer for q in conversation.questions}
        assert answers["What is Ann's cat called?"] == "Miso"
        assert answers["What does Bob paint?"] == "sunsets"

    def test_folder_and_missing_file(self, data, tmp_path):
        """A folder holding the file works; a missing file is a clear error."""
        assert len(locomo.load(data.parent)) == 1
        with pytest.raises(ValidationError, match="AGENT_ENGINE_LOCOMO"):
            locomo.load(tmp_path / "nowhere.json")

    def test_quality_runs_on_tiny_data(self, data):
        """The quality run scores every question for every policy and budget."""
        conversations = locomo.load(data)
        result = run_quality(
            conversations,
            HashingEmbedder(dim=64),
            config=QualityConfig(budgets=(64, 4096), policies=("recency", "hybrid"), live_turns=1),
        )
        assert len(result["records"]) == 3 * 2
        hybrid = result["summary"]["tuning (0-4)"]["hybrid"]["overall"]
        assert hybrid["recall"]["4096"] == 1.0
        assert split_of(4) != split_of(5)

    def test_a_small_working_set_pages_the_archive_back_in(self, data):
        """Limited to one item, the store archives the rest, and builds still find it all;
        deleting what was archived (eviction before the archive) loses evidence."""
        conversations = locomo.load(data)
        base = QualityConfig(budgets=(4096,), policies=("hybrid",), live_turns=1)

        def recall(**fields):
            config = attrs.evolve(base, **fields)
            result = run_quality(conversations, HashingEmbedder(dim=64), config=config)
            return result["summary"]["tuning (0-4)"]["hybrid"]["overall"]["recall"]["4096"]

        assert recall() == recall(working_set=1) == 1.0
        assert recall(working_set=1, drop_archive=True) < 1.0

    def test_stable_prefix_reaches_the_assembler(self, data):
        """``--stable-prefix`` builds the quality part's stores with a stable prefix."""
        (conversation, *_) = locomo.load(data)
        config = parse_options(["quality", "--stable-prefix"]).quality
        assembler, _task = conversation_stores(
            conversation, HashingEmbedder(dim=16), DEFAULT_COUNTER, config, DEFAULT_POLICIES
        )
        assert assembler.config.stable_prefix
        assert not parse_options(["quality"]).quality.stable_prefix


class TestSummaryRows:
    TEXTS = {  # noqa: RUF012 - read only
        "D1:1": "Ann: I adopted a cat named Miso.",
        "D2:1": "Bob: I started painting sunsets.",
    }

    @staticmethod
    def package(text: str) -> ContextPackage:
        summary = Summary(text=text, tokens=1, allowance=1, sources=(), summarizer="x")
        return ContextPackage("p", "t", 100, "hybrid", Layout(), (), (), (), summary=summary)

    def test_a_fragment_of_a_turn_counts_with_the_share_it_shows(self):
        """A summary line that is a part of the turn (label and cut mark aside) credits it."""
        shown = summarized(self.package("Ann: I adopted a cat …"), ["D1:1", "D2:1"], self.TEXTS)
        assert shown == {"D1:1": pytest.approx(4 / 6)}

    def test_short_fragments_and_paraphrases_do_not_count(self):
        """Under three words, or words the turn does not have in that order: no credit."""
        text = "Bob: I started …\nAnn has a cat called Miso.\nBob paints sunsets."
        assert summarized(self.package(text), ["D1:1", "D2:1"], self.TEXTS) == {}
        assert summarized(self.package(""), ["D1:1"], self.TEXTS) == {}

    def test_an_answer_counts_where_the_render_shows_it(self):
        """The gold answer is looked for in the whole render, summary included, case aside."""
        package = self.package("Ann: the cat is called  MISO …")
        assert answered(package, "miso")
        assert answered(package, "is called Miso")
        assert not answered(package, "Mochi")
        assert not answered(package, "  ")

    def test_the_rows_with_a_summary(self, data, tmp_path):
        """Each policy is measured again with a summary; its row says what it held whole."""
        conversations = locomo.load(data)
        config = QualityConfig(
            budgets=(40, 4096),
            policies=("hybrid",),
            live_turns=1,
            summary=SummaryConfig(share=0.5, min_tokens=4),
        )
        result = run_quality(conversations, HashingEmbedder(dim=64), config=config)
        rows = result["summary"]["tuning (0-4)"]
        assert set(rows) == {"hybrid", "hybrid+summary"}
        plain, summary = rows["hybrid"]["overall"], rows["hybrid+summary"]["overall"]
        assert summary["items"]["40"] <= summary["recall"]["40"]
        assert summary["items"]["40"] < plain["recall"]["40"]  # the share came from the items
        assert summary["recall"]["40"] > summary["items"]["40"]  # and fragments were credited
        assert 0 < summary["coverage"]["40"] <= 1
        assert summary["recall"]["4096"] == plain["recall"]["4096"] == 1.0
        report = write_report({"meta": {}, "quality": result}, tmp_path / "out").read_text()
        held = f"| hybrid+summary | whole | {summary['items']['40']:.3f} | 1.000 |"
        assert held in report


class TestRerankRows:
    class Evidence:
        """A reranker that knows the answers: the turn that answers the question first."""

        ANSWERS = {"cat": "Miso", "paint": "sunsets"}  # noqa: RUF012 - read only

        def rerank(self, query, items):
            marks = [answer for word, answer in self.ANSWERS.items() if word in query]
            return [float(any(mark in item.text for mark in marks)) for item in items]

    def test_each_policy_is_measured_again_reranked(self, data, tmp_path):
        config = QualityConfig(
            budgets=(30, 4096),
            policies=("recency",),
            live_turns=0,
            rerank=RerankConfig(self.Evidence()),
        )
        result = run_quality(locomo.load(data), HashingEmbedder(dim=64), config=config)
        rows = result["summary"]["tuning (0-4)"]
        assert set(rows) == {"recency", "recency+rerank"}
        plain, reranked = rows["recency"]["overall"], rows["recency+rerank"]["overall"]
        assert reranked["recall"]["30"] > plain["recall"]["30"]
        assert reranked["recall"]["4096"] == plain["recall"]["4096"] == 1.0
        report = write_report({"meta": {}, "quality": result}, tmp_path / "out").read_text()
        assert "| recency+rerank |" in report


class TestDiverseRows:
    THREAD: ClassVar = {
        "sample_id": "conv-thread",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": f"D1:{n}", "text": f"My cat sleeps, cat nap {n}."}
                for n in range(1, 5)
            ],
            "session_2_date_time": "9:00 am on 9 May, 2023",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "Her cat is Miso."}],
        },
        "qa": [{"question": "Cat name?", "answer": "Miso", "evidence": ["D2:1"], "category": 4}],
    }

    def test_a_cap_per_session_lets_another_session_in(self, tmp_path):
        """One session's four cat turns outrank the answer; capped at one, the answer comes in."""
        path = tmp_path / "locomo10.json"
        path.write_text(json.dumps([self.THREAD]), encoding="utf-8")
        config = QualityConfig(
            budgets=(40, 4096),
            policies=("lexical",),
            live_turns=0,
            diversity=Diversity(per_session=1),
        )
        result = run_quality(locomo.load(path), HashingEmbedder(dim=64), config=config)
        rows = result["summary"]["tuning (0-4)"]
        assert set(rows) == {"lexical", "lexical+diverse"}
        plain, diverse = rows["lexical"]["overall"], rows["lexical+diverse"]["overall"]
        assert plain["recall"]["40"] == 0.0
        assert diverse["recall"]["40"] == 1.0
        assert diverse["recall"]["4096"] == plain["recall"]["4096"] == 1.0

    def test_the_option(self):
        options = parse_options(["quality", "--diversity", "3"])
        assert options.quality.diversity == Diversity(per_session=3)
        assert parse_options(["quality"]).quality.diversity is None


class TestLowOverlap:
    def test_the_share_of_the_questions_terms_its_evidence_holds(self):
        """BM25's analysis: stopwords out, light stems, the speaker's label counted."""
        evidence = ["Ann: I adopted a cat named Miso."]
        assert overlap("What is Ann's cat called?", evidence) == pytest.approx(2 / 3)
        assert overlap("Which pet did she adopt?", evidence) == pytest.approx(1 / 2)
        assert overlap("How does she feel?", evidence) == 0.0
        assert overlap("Is it?", evidence) == 1.0  # no terms: nothing to miss

    def test_questions_sharing_few_words_are_a_group_of_their_own(self, data):
        config = QualityConfig(budgets=(4096,), policies=("hybrid",), live_turns=0)
        result = run_quality(locomo.load(data), HashingEmbedder(dim=64), config=config)
        assert all(0 <= r["overlap"] <= 1 for r in result["records"])
        low = [r for r in result["records"] if r["overlap"] <= LOW_OVERLAP_SHARE]
        row = result["summary"]["tuning (0-4)"]["hybrid"]
        if low:
            assert row[LOW_OVERLAP]["n"] == len([r for r in low if r["category"] in OVERALL])
        else:
            assert LOW_OVERLAP not in row


class TestAblationRows:
    def test_each_signal_taken_out_in_turn_and_the_default_left_alone(self):
        policies = with_ablations(DEFAULT_POLICIES)
        hybrid = DEFAULT_POLICIES["hybrid"]
        no_lexical, no_dense = policies["hybrid-no-lexical"], policies["hybrid-no-dense"]
        assert LEXICAL not in no_lexical.sources
        assert no_lexical.scorer.lexical_weight == 0.0
        assert DENSE not in no_dense.sources
        assert no_dense.scorer.dense_weight == 0.0
        assert policies["hybrid-no-neighbours"].scorer.smoothing == 0.0
        assert policies["hybrid-no-names"].strip_sources is False
        assert policies["hybrid-no-importance"].scorer.importance_weight == 0.0
        assert policies["hybrid-adaptive"].scorer.lexical_confidence is True
        assert policies["hybrid-fixed-smoothing"].scorer.smoothing_words is None
        # The default policy itself is untouched.
        assert hybrid.scorer.lexical_weight > 0
        assert hybrid.scorer.smoothing > 0
        assert hybrid.scorer.lexical_confidence is False
        assert hybrid.scorer.smoothing_words is not None
        assert hybrid.sources == frozenset({DENSE, LEXICAL, NEIGHBOURS})

    def test_one_row_named_without_the_rest(self, data):
        config = QualityConfig(
            budgets=(4096,), policies=("hybrid", "hybrid-fixed-smoothing"), live_turns=0
        )
        result = run_quality(locomo.load(data), HashingEmbedder(dim=64), config=config)
        assert set(result["summary"]["tuning (0-4)"]) == {"hybrid", "hybrid-fixed-smoothing"}

    def test_the_rows(self, data):
        config = QualityConfig(budgets=(4096,), policies=("hybrid",), live_turns=0, ablations=True)
        result = run_quality(locomo.load(data), HashingEmbedder(dim=64), config=config)
        rows = result["summary"]["tuning (0-4)"]
        assert set(rows) == {"hybrid", *ABLATIONS}
        for row in rows.values():
            assert 0 <= row["overall"]["recall"]["4096"] <= 1


class TestSynthetic:
    def test_deterministic_and_shaped(self):
        """The same seed gives the same items; kinds, tags and sizes follow their distributions."""
        first = list(generate(2000, seed=3))
        assert first == list(generate(2000, seed=3))
        kinds = Counter(item.kind for item in first)
        assert kinds.most_common(1)[0][0] == "note"
        assert 0 < sum(item.pinned for item in first) <= MAX_PINNED
        assert sum(item.pinned for item in generate(20_000, seed=3)) == MAX_PINNED
        tags = Counter(tag for item in first for tag in item.tags)
        assert tags.most_common(1)[0][1] > 10 * tags.most_common()[-1][1]
        lengths = sorted(len(item.text.split()) for item in first)
        assert 15 <= lengths[len(lengths) // 2] <= 60
        assert lengths[-1] > 150


class TestReport:
    def test_writes_markdown_json_and_plots(self, data, tmp_path):
        """The report holds the tables, the raw JSON and one plot per split."""
        quality = run_quality(
            locomo.load(data),
            HashingEmbedder(dim=64),
            config=QualityConfig(budgets=(64, 1024), policies=("recency", "hybrid"), live_turns=1),
        )
        report = write_report(
            {"meta": {"embedder": "hashing"}, "quality": quality}, tmp_path / "out"
        )
        text = report.read_text(encoding="utf-8")
        assert "| hybrid |" in text
        assert "hybrid / best baseline" in text
        assert (
            json.loads((tmp_path / "out" / "results.json").read_text())["meta"]["embedder"]
            == "hashing"
        )
        assert (tmp_path / "out" / "quality-tuning-0-4.png").stat().st_size > 1000

    def test_parse_ints(self):
        """Ranges and lists of numbers parse as the CLI documents."""
        assert parse_ints("0-2,5") == (0, 1, 2, 5)


class TestRunnerArguments:
    def test_unknown_backend_is_a_usage_error(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["cost", "--backends", "memory,nope"])
        assert exit_info.value.code == 2
        assert "unknown backend(s): nope" in capsys.readouterr().err

    def test_parts_default_to_the_whole_suite(self, tmp_path):
        """With no part named all run, so the quality part asks for its data first."""
        with pytest.raises(ValidationError, match="LoCoMo data not found"):
            main(["--data", str(tmp_path / "missing.json"), "--out", str(tmp_path / "out")])

    def test_unknown_part_is_a_usage_error(self, capsys):
        """A part that is not in the suite is refused with the parts that are."""
        with pytest.raises(SystemExit) as exit_info:
            main(["quality", "speed"])
        assert exit_info.value.code == 2
        message = f"'speed' is not a part of the suite ({', '.join(PARTS)})"
        assert message in capsys.readouterr().err

    def test_every_default_backend_has_a_factory(self):
        assert set(SuiteOptions().backends) <= set(backend_names())


class TestCostCell:
    def test_a_small_cell_reports_builds_against_both_baselines(self):
        """The cost figures are consistent: every read a build issues includes its searches."""
        cell = run_cell("memory", 400, queries=5, budget=512)
        assert cell["size"] == 400
        assert cell["build_p95_ms"] >= cell["build_p50_ms"] > 0
        assert cell["raw_reads_p95_ms"] >= cell["raw_search_p95_ms"] > 0
        assert cell["build_over_reads_p95"] == pytest.approx(
            cell["build_p95_ms"] / cell["raw_reads_p95_ms"]
        )
        assert cell["build_after_write_p50_ms"] > 0
        assert cell["unwidened_build_p95_ms"] >= cell["unwidened_build_p50_ms"] > 0
        assert cell["build_over_raw_p95"] == pytest.approx(
            cell["build_p95_ms"] / cell["raw_search_p95_ms"]
        )

    def test_a_bulk_load_makes_no_write_time_searches(self):
        """``--bulk`` loads as an import does: no near-duplicate or conflict search per item."""
        searched: list[int] = []

        class Counting(InMemoryBackend):
            def search_many(self, queries, *args, **kwargs):
                searched.append(len(queries))
                return super().search_many(queries, *args, **kwargs)

        embedder = HashingEmbedder(dim=64)
        checked, bulk = Counting(embedder=embedder), Counting(embedder=embedder)
        _load(checked, InMemoryBackend(embedder=embedder), 300, bulk=False)
        assert searched
        searched.clear()
        _load(bulk, InMemoryBackend(embedder=embedder), 300, bulk=True)
        assert searched == []
        assert bulk.count() == checked.count() == 300

    def test_a_timed_query_is_not_embedded_again_by_its_build(self):
        """The target excludes the query embedding: the build reuses the vector timed apart."""
        embedded: list[str] = []

        class Recording(HashingEmbedder):
            def embed(self, texts):
                embedded.extend(texts)
                return super().embed(texts)

        primed = _PrimedEmbedder(Recording(dim=16))
        vector = primed.prime("deploy logs")
        assert primed.embed(["deploy logs"])[0].tolist() == vector.tolist()
        assert embedded == ["deploy logs"]
        primed.embed(["retry config"])
        assert embedded == ["deploy logs", "retry config"]
        assert (primed.name, primed.dim) == ("hashing-16-bigrams", 16)


class TestConflictsPart:
    def test_the_part_writes_its_table(self, tmp_path):
        """``bench conflicts`` runs alone on the named backends, hashing embedder by default."""
        out = tmp_path / "out"
        argv = ["conflicts", "--fillers", "10", "--backends", "memory", "--out", str(out)]
        assert main(argv) == 0
        report = (out / "report.md").read_text(encoding="utf-8")
        assert "## Conflicts: detection on add" in report
        assert "| memory | default |" in report
        assert "| memory | kind and tags only |" in report
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert set(results) == {"meta", "conflicts"}
        rows = results["conflicts"]["rows"]
        assert [row["mode"] for row in rows] == ["default", "kind and tags only", "meaning only"]
        assert results["conflicts"]["set"]["positives"] == 40
        assert results["conflicts"]["classifier_only"]["true_positives"] == 30
        assert all(row["add_cost_ratio"] > 0 for row in rows)


def _chat(lines: list[tuple[str, str]], question: locomo.Question) -> locomo.Conversation:
    """A one-session conversation of ``(speaker, words)`` turns ``c:D1:1``... a second apart."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    turns = tuple(
        ContextItem(
            id=f"c:D1:{n}",
            kind="turn",
            text=f"{speaker}: {words}",
            source=speaker,
            timestamp=start + timedelta(seconds=n - 1),
        )
        for n, (speaker, words) in enumerate(lines, 1)
    )
    return locomo.Conversation("c", 0, turns, (question,), start)


class TestStress:
    def test_full_names_relabel_the_speakers_and_keep_the_questions(self, data):
        (conversation,) = locomo.load(data)
        renamed = full_names(conversation)
        assert [item.source for item in renamed.items[:2]] == ["Ann Ellis", "Bob Moreno"]
        assert renamed.items[0].text == "Ann Ellis: I adopted a cat named Miso."
        assert [i.id for i in renamed.items] == [i.id for i in conversation.items]
        assert renamed.questions == conversation.questions

    def test_nicknames_cut_long_names_and_keep_the_questions(self):
        """A long name is labelled by its first four letters; a short one stays as it is."""
        conversation = _chat(
            [("Caroline", "Hello"), ("Maria", "Hello"), ("Andrew", "Hello")],
            locomo.Question("Who greeted Caroline?", 1, ("c:D1:2",)),
        )
        cut = nicknames(conversation)
        assert [(i.source, i.text) for i in cut.items] == [
            ("Caro", "Caro: Hello"),
            ("Maria", "Maria: Hello"),
            ("Andr", "Andr: Hello"),
        ]
        assert cut.questions == conversation.questions

    def test_short_messages_split_turns_and_their_evidence(self):
        """A turn of two sentences is two messages, both evidence; one sentence stays whole."""
        conversation = _chat(
            [("Ann", "Hi. I moved to Oslo!"), ("Bob", "Nice")],
            locomo.Question("Where did Ann move?", 4, ("c:D1:1",)),
        )
        split = short_messages(conversation)
        assert [(i.id, i.text) for i in split.items] == [
            ("c:D1:1", "Ann: Hi."),
            ("c:D1:1#1", "Ann: I moved to Oslo!"),
            ("c:D1:2", "Bob: Nice"),
        ]
        assert [i.timestamp for i in split.items] == sorted(i.timestamp for i in split.items)
        assert split.questions[0].evidence == ("c:D1:1", "c:D1:1#1")

    def test_stressed_copies_are_groups_of_their_own(self, data):
        """The overall group stays the plain conversations'; each stress is reported apart."""
        config = QualityConfig(
            budgets=(4096,), policies=("hybrid",), live_turns=0, stress=tuple(STRESS)
        )
        ticks: list[int] = []
        conversations = locomo.load(data)
        result = run_quality(
            conversations, HashingEmbedder(dim=64), config=config, progress=ticks.append
        )
        # The progress bar advances per question asked, of every copy.
        assert len(ticks) == (1 + len(STRESS)) * sum(len(c.questions) for c in conversations)
        row = result["summary"]["tuning (0-4)"]["hybrid"]
        plain = [r for r in result["records"] if not r["stress"] and r["category"] in OVERALL]
        assert row["overall"]["n"] == len(plain)
        for stress in STRESS:
            assert row[stress]["n"] == len(plain)

    def test_an_unknown_stress_is_refused(self):
        with pytest.raises(ValidationError) as info:
            QualityConfig(stress=("typos",))
        assert info.value.field == "stress"


class TestParaphraseSet:
    """The bundled set is what its docstring says: words shared only with distractors."""

    def test_each_question_shares_no_word_with_its_evidence_but_the_speaker(self):
        (conversation,) = locomo.load(PARAPHRASE_DATA)
        turns = {item.id: item for item in conversation.items}
        assert len(conversation.questions) == 30
        for question in conversation.questions:
            (evidence,) = (turns[turn] for turn in question.evidence)
            shared = set(analyze(question.text)) & set(analyze(evidence.text))
            assert shared <= set(analyze(evidence.source or "")), question.text
            assert question.answer
            assert question.answer in evidence.text

    def test_lexical_matches_are_distractors_out_of_the_evidences_reach(self):
        """BM25 has something to match for nearly every question, and never a turn near the
        evidence in its session: a distractor cannot lift the evidence as its neighbour."""
        (conversation,) = locomo.load(PARAPHRASE_DATA)
        items = list(conversation.items)
        at = {item.id: place for place, item in enumerate(items)}
        names = {term for item in items for term in analyze(item.source or "")}
        distracted = 0
        for question in conversation.questions:
            (evidence,) = question.evidence
            asked = set(analyze(question.text)) - names
            matching = {i.id for i in items if asked & set(analyze(i.text))}
            distracted += bool(matching)
            here = at[evidence]
            reach = items[max(0, here - NEIGHBOUR_RADIUS) : here + NEIGHBOUR_RADIUS + 1]
            near = {i.id for i in reach if i.session == items[here].session}
            assert not matching & near, question.text
        assert distracted >= 25

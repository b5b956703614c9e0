"""Summaries of what a build paged out: fitted to their allowance, inside the budget, contained."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent_engine import (
    DEFAULT_COUNTER,
    AssemblerConfig,
    ContextAssembler,
    ContextItem,
    ContextRequest,
    GatherLimits,
    HashingEmbedder,
    InMemoryBackend,
    Layout,
    OmissionReason,
    RenderFormat,
    SummaryError,
    Task,
    Tier,
    ValidationError,
)
from agent_engine.assembler import (
    DEFAULT_SUMMARY_PROMPT,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryConfig,
    SummaryRequest,
    SummarySource,
)
from agent_engine.assembler._cut import CUT_MARK, cut
from agent_engine.assembler.package import LACK_OF_ROOM
from agent_engine.assembler.summary import READ_CHARACTERS
from tests.assembler.test_budget_properties import WORDS, build, scenarios

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
TASK = Task(id="t", project_id="shop", user_id="ada")
QUERY = "why did the deploy fail"
count = DEFAULT_COUNTER.count

PLAIN = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()  # noqa: SIM905
)


def item(text: str, *, number: int = 0, kind: str = "note") -> ContextItem:
    return ContextItem(
        id=f"i{number:03d}", kind=kind, text=text, timestamp=NOW - timedelta(hours=number)
    )


def request(texts: list[str], allowance: int, query: str = QUERY) -> SummaryRequest:
    sources = tuple(
        SummarySource(item(text, number=n), Tier.PROJECT, 1.0 - n / 100)
        for n, text in enumerate(texts)
    )
    return SummaryRequest(query, sources, allowance, DEFAULT_COUNTER)


def notes(count_: int) -> list[str]:
    """Plain notes of one sentence each, all different, each about 12 tokens."""
    return [
        " ".join(PLAIN[(n + k) % len(PLAIN)] for k in range(10)) + f" {n}" for n in range(count_)
    ]


class Answer:
    """A stand-in for a model: answers ``reply`` (or raises it) and keeps the prompts it got."""

    def __init__(self, reply: object) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply  # type: ignore[return-value]


# ----------------------------------------------------------------------------- cutting


class TestCut:
    def test_a_text_that_fits_is_kept_whole(self):
        """No mark is added to a text within the limit."""
        assert count("alpha bravo charlie") == 4
        assert cut("alpha bravo charlie", 4, count) == "alpha bravo charlie"
        assert cut("alpha bravo charlie", 3, count) == "alpha" + CUT_MARK

    @pytest.mark.parametrize("limit", range(1, 40))
    def test_the_longest_word_prefix_that_fits(self, limit):
        """A cut ends at a word, with the mark, and one more word would not fit."""
        text = " ".join(PLAIN * 3)
        cut_text = cut(text, limit, count)
        assert count(cut_text) <= limit
        if not cut_text:  # not even a letter of the first word fits beside the mark
            assert count(text[0] + CUT_MARK) > limit
            return
        kept = cut_text.removesuffix(CUT_MARK)
        assert cut_text.endswith(CUT_MARK)
        assert text.startswith(kept)
        words = text.split()
        shown = len(kept.split())
        if 0 < shown < len(words) - 1:
            assert kept == " ".join(words[:shown])
            assert count(" ".join(words[: shown + 1]) + CUT_MARK) > limit

    def test_a_first_word_too_long_is_cut_inside(self):
        """Text without spaces (a URL, a hash) still gives what fits of it."""
        text = "x" * 400  # one piece, but many tokens: a long letter run counts per 4 letters
        assert count(text) > 10
        cut_text = cut(text, 10, count)
        assert cut_text.startswith("xxx")
        assert cut_text.endswith(CUT_MARK)
        assert count(cut_text) <= 10

    def test_nothing_fits_nothing(self):
        """A limit no character fits gives the empty string."""
        assert cut("alpha bravo", 0, count) == ""


# ----------------------------------------------------------------------------- extractive


class TestExtractiveSummarizer:
    @pytest.mark.parametrize("allowance", [*range(1, 60), 97, 150, 333])
    def test_fills_its_allowance_exactly(self, allowance):
        """Within the allowance, and not one more word of the next fragment would fit."""
        texts = notes(30)
        summarizer = ExtractiveSummarizer(fragment_tokens=1000)
        summary = summarizer.summarize(request(texts, allowance))
        assert count(summary) <= allowance
        lines = summary.splitlines()
        last = lines[-1] if lines else ""
        if last.endswith(CUT_MARK):  # the last fragment was cut to fill: one more word won't fit
            kept = last.removesuffix(CUT_MARK)
            words = texts[len(lines) - 1].split()
            more = " ".join(words[: len(kept.split()) + 1]) + CUT_MARK
            assert count("\n".join([*lines[:-1], more])) > allowance
        else:  # every line whole: the next fragment's first word does not fit
            assert len(lines) < len(texts)
            nothing_more = "\n".join([*lines, texts[len(lines)].split()[0] + CUT_MARK])
            assert count(nothing_more) > allowance

    @settings(max_examples=60, deadline=None)
    @given(
        texts=st.lists(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join),
            min_size=1,
            max_size=12,
        ),
        allowance=st.integers(1, 300),
        fragment_tokens=st.integers(1, 60),
    )
    def test_never_past_its_allowance(self, texts, allowance, fragment_tokens):
        """Whatever the memories (symbols, scripts, long runs), the text fits the allowance."""
        summarizer = ExtractiveSummarizer(fragment_tokens=fragment_tokens)
        summary = summarizer.summarize(request(texts, allowance))
        assert count(summary) <= allowance
        assert all(count(line) <= fragment_tokens for line in summary.splitlines())

    def test_deterministic(self):
        """The same request gives the same text, from any instance."""
        texts = notes(20)
        first = ExtractiveSummarizer().summarize(request(texts, 80))
        assert first
        assert ExtractiveSummarizer().summarize(request(texts, 80)) == first

    def test_fragments_follow_the_builds_scores(self):
        """Lines come in the order the sources are given (best score first), not by time."""
        texts = ["zulu one two three", "yankee four five six", "xray seven eight nine"]
        sources = tuple(
            SummarySource(item(text, number=n), Tier.PROJECT, score)
            for n, (text, score) in enumerate(zip(texts, [0.2, 0.9, 0.5], strict=True))
        )
        ranked = tuple(sorted(sources, key=lambda s: -s.score))
        summary = ExtractiveSummarizer().summarize(
            SummaryRequest(QUERY, ranked, 100, DEFAULT_COUNTER)
        )
        assert summary.splitlines() == [texts[1], texts[2], texts[0]]

    def test_the_sentence_nearest_the_query_is_kept(self):
        """Of a long item, the sentence sharing most words with the query; its speaker kept."""
        text = (
            "Caroline: Hey Mel, good to see you! I painted a lake last week. "
            "The deploy failed because the cache was cold."
        )
        summary = ExtractiveSummarizer().summarize(request([text], 100))
        assert summary == "Caroline: The deploy failed because the cache was cold."
        no_query = ExtractiveSummarizer().summarize(request([text], 100, query=""))
        assert no_query == "Caroline: Hey Mel, good to see you!"

    def test_a_long_item_is_read_from_its_start(self):
        """Only the first READ_CHARACTERS of a huge output are read: it costs a page at most."""
        filler = "Line of build output. " * (READ_CHARACTERS // 20)
        text = filler + "The deploy failed because the cache was cold."
        summary = ExtractiveSummarizer().summarize(request([text], 100))
        assert summary == "Line of build output."

    def test_repeats_are_dropped(self):
        """A fragment equal to one taken (up to case and spacing) is not said twice."""
        texts = ["The cache was cold.", "the  CACHE was cold.", "The disk was full."]
        summary = ExtractiveSummarizer().summarize(request(texts, 100))
        assert summary.splitlines() == ["The cache was cold.", "The disk was full."]

    def test_fragments_are_cut_to_their_size(self):
        """No fragment costs more than ``fragment_tokens``, so more sources get a line."""
        texts = [" ".join(reversed(PLAIN * 2)), *notes(5)]
        summary = ExtractiveSummarizer(fragment_tokens=8).summarize(request(texts, 200))
        lines = summary.splitlines()
        assert lines[0].endswith(CUT_MARK)
        assert all(count(line) <= 8 for line in lines)
        assert len(lines) == 6

    def test_a_summarizer(self):
        """Both shipped summarizers meet the protocol the config checks."""
        assert isinstance(ExtractiveSummarizer(), Summarizer)
        assert isinstance(LLMSummarizer(str), Summarizer)


# ----------------------------------------------------------------------------- LLM adapter


class TestLLMSummarizer:
    def test_the_prompt_lists_the_memories_best_first(self):
        """The model gets the query, the allowance and every source with its date, in order."""
        model = Answer("  The cache was cold.  ")
        summarizer = LLMSummarizer(model)
        texts = ["first memory", "second\nmemory", "third memory"]
        assert summarizer.summarize(request(texts, 42)) == "The cache was cold."
        (prompt,) = model.prompts
        assert QUERY in prompt
        assert "at most 42 tokens" in prompt
        listed = [line for line in prompt.splitlines() if line.startswith("- (")]
        assert listed == [
            "- (1 Jun 2024) first memory",
            "- (1 Jun 2024) second memory",
            "- (1 Jun 2024) third memory",
        ]

    def test_a_prompt_limit_lists_only_what_fits(self):
        """With ``max_prompt_tokens`` the best memories that keep the prompt within it."""
        texts = notes(40)
        everything = LLMSummarizer(str).prompt_for(request(texts, 50))
        limit = count(everything) // 3
        prompt = LLMSummarizer(str, max_prompt_tokens=limit).prompt_for(request(texts, 50))
        assert count(prompt) <= limit
        listed = [line for line in prompt.splitlines() if line.startswith("- (")]
        assert 0 < len(listed) < len(texts)
        assert listed[0].endswith(texts[0])
        with pytest.raises(SummaryError, match="max_prompt_tokens"):
            LLMSummarizer(str, max_prompt_tokens=5).prompt_for(request(texts, 50))

    def test_an_answer_that_is_not_text_is_refused(self):
        """A model answering something other than text raises a typed error naming it."""
        with pytest.raises(SummaryError, match="answered int, not text") as caught:
            LLMSummarizer(Answer(42)).summarize(request(["a memory"], 20))
        assert caught.value.summarizer == "llm"

    def test_a_prompt_with_unknown_fields_is_refused(self):
        """A template naming a field the adapter does not fill fails at construction."""
        with pytest.raises(ValidationError) as caught:
            LLMSummarizer(str, prompt="Summarize {memories} for {user}")
        assert caught.value.field == "prompt"
        assert LLMSummarizer(str, prompt="{memories} {{as JSON}}").prompt == (
            "{memories} {{as JSON}}"
        )
        assert "{memories}" in DEFAULT_SUMMARY_PROMPT


# ----------------------------------------------------------------------------- settings


class TestSummaryConfig:
    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"share": 0}, "share"),
            ({"share": 1}, "share"),
            ({"share": True}, "share"),
            ({"share": "0.1"}, "share"),
            ({"max_tokens": 0}, "max_tokens"),
            ({"min_tokens": 0}, "min_tokens"),
            ({"max_tokens": 10, "min_tokens": 11}, "min_tokens"),
            ({"max_sources": 0}, "max_sources"),
            ({"summarizer": None}, "summarizer"),
            ({"summarizer": lambda request: "text"}, "summarizer"),
            ({"fallback": "extractive"}, "fallback"),
        ],
    )
    def test_bad_settings_are_refused(self, fields, field):
        """Each bad setting raises a ValidationError naming it."""
        with pytest.raises(ValidationError) as caught:
            SummaryConfig(**fields)
        assert caught.value.field == field

    def test_the_assembler_config_takes_only_a_summary_config(self):
        """``AssemblerConfig(summary=...)`` refuses anything else."""
        with pytest.raises(ValidationError) as caught:
            AssemblerConfig(summary=0.1)  # type: ignore[arg-type]
        assert caught.value.field == "summary"

    def test_the_reserve(self):
        """The share of the budget, at most ``max_tokens``, or none below ``min_tokens``."""
        config = SummaryConfig(share=0.1, max_tokens=40, min_tokens=16)
        assert config.reserve(300, header=8) == 30
        assert config.reserve(1000, header=8) == 40
        assert config.reserve(239, header=8) == 0  # 23 - 8 < 16
        assert config.reserve(240, header=8) == 24

    def test_off_by_default(self):
        """An assembler summarizes only when configured to (see docs/benchmarks.md)."""
        assert AssemblerConfig().summary is None


# ----------------------------------------------------------------------------- builds


def assembler_with(count_: int = 40, **summary) -> tuple[ContextAssembler, ContextAssembler]:
    """Two assemblers over one store of ``count_`` notes: one summarizes, one does not."""
    backend = InMemoryBackend(embedder=HashingEmbedder(dim=64))
    plain = ContextAssembler(backend, config=AssemblerConfig(track_access=False), clock=lambda: NOW)
    project = plain.project_store("shop")
    project.add_many(
        project.new_item(
            "note",
            f"Deploy {n} of service {n} failed because the cache was cold. "
            f"Then we retried it and it worked after {n} minutes.",
            timestamp=NOW - timedelta(hours=n),
        )
        for n in range(count_)
    )
    config = AssemblerConfig(track_access=False, summary=SummaryConfig(**summary))
    return ContextAssembler(backend, config=config, clock=lambda: NOW), plain


def ask(assembler: ContextAssembler, budget: int, **kwargs) -> object:
    return assembler.build_context(
        TASK, ContextRequest(budget_tokens=budget, query=QUERY), **kwargs
    )


class TestBuilds:
    def test_what_was_paged_out_is_summarized_inside_the_budget(self):
        """Under pressure the summary section follows the project's, and the whole fits."""
        summarizing, _ = assembler_with(share=0.2)
        package = ask(summarizing, 300)
        summary = package.summary
        rendered = package.render()
        assert summary is not None
        assert summary.summarizer == "extractive"
        assert summary.error is None
        assert rendered.startswith("## Project memory\n")
        assert rendered.endswith(f"\n## Summary of memories left out\n{summary.text}")
        assert count(rendered) == package.tokens_used <= 300
        assert summary.tokens > 0
        assert package.tokens_used == sum(u.used for u in package.usage) + summary.tokens
        paged_out = {o.item_id for o in package.omissions if o.reason in LACK_OF_ROOM}
        assert summary.sources
        assert set(summary.sources) <= paged_out
        texts = {i.id: i.text for i in summarizing.project_store("shop").list_all()}
        for line in summary.text.splitlines():  # fragments of left-out items only
            fragment = line.removesuffix(CUT_MARK)
            assert any(fragment in texts[source] for source in summary.sources)
            assert not any(fragment in s.item.text for s in package.selections)

    def test_the_share_is_taken_from_the_items(self):
        """The items are packed into the budget less the kept share; the summary uses the rest."""
        summarizing, plain = assembler_with(share=0.2)
        package, without = ask(summarizing, 300), ask(plain, 300)
        items = sum(u.used for u in package.usage)
        assert items <= 300 - 60
        assert len(package.selections) < len(without.selections)
        assert package.summary.allowance >= 60 - 8  # the share less the section's header
        assert package.budget_tokens == 300

    def test_nothing_paged_out_no_summary_and_the_same_package(self):
        """With room for every candidate, the share goes back: the render is byte for byte
        the one an assembler without summaries gives."""
        summarizing, plain = assembler_with(count_=5, share=0.2)
        package, without = ask(summarizing, 2000), ask(plain, 2000)
        assert package.summary is None
        assert not package.pressure.under_pressure
        assert package.render() == without.render()
        assert [u.allocated for u in package.usage] == [u.allocated for u in without.usage]

    def test_too_small_a_budget_no_summary(self):
        """A share under ``min_tokens`` keeps no room: the package is the plain one."""
        summarizing, plain = assembler_with(share=0.1, min_tokens=16)
        package, without = ask(summarizing, 150), ask(plain, 150)
        assert package.summary is None
        assert package.pressure.under_pressure
        assert package.render() == without.render()

    def test_render_is_stable(self):
        """The same inputs render the same text, summary included, build after build."""
        summarizing, _ = assembler_with(share=0.2)
        first, second = ask(summarizing, 300), ask(summarizing, 300)
        assert first.summary.text
        assert first.render() == first.render() == second.render()

    @pytest.mark.parametrize("format_", list(RenderFormat))
    def test_every_format(self, format_):
        """Each format labels the section; XML escapes it and parses; the budget holds."""
        backend = InMemoryBackend(embedder=HashingEmbedder(dim=64))
        config = AssemblerConfig(
            layout=Layout(format=format_), summary=SummaryConfig(share=0.3), track_access=False
        )
        assembler = ContextAssembler(backend, config=config, clock=lambda: NOW)
        project = assembler.project_store("shop")
        project.add_many(
            project.new_item("note", f"deploy {n} failed: <timeout> & retry {n} " * 3)
            for n in range(30)
        )
        package = ask(assembler, 250)
        rendered = package.render()
        assert package.summary.text
        assert count(rendered) == package.tokens_used <= 250
        lines = rendered.splitlines()
        opening = {
            RenderFormat.MARKDOWN: "## Project memory",
            RenderFormat.TEXT: "[Project memory]",
            RenderFormat.XML: "<project_memory>",
        }[format_]
        assert lines[0] == opening
        assert (
            lines[lines.index(package.layout.summary()[0])]
            == {
                RenderFormat.MARKDOWN: "## Summary of memories left out",
                RenderFormat.TEXT: "[Summary of memories left out]",
                RenderFormat.XML: "<left_out_summary>",
            }[format_]
        )
        if format_ is RenderFormat.XML:
            root = ET.fromstring(f"<context>{rendered}</context>")  # noqa: S314 - our own output
            assert root.find("left_out_summary").text.strip() == package.summary.text

    def test_the_summary_sits_before_the_task_section(self):
        """Most stable first: global and project, then the summary, the task's steps last."""
        summarizing, _ = assembler_with(share=0.2)
        steps = summarizing.task_store(TASK)
        steps.add_reasoning("retry the deploy with a warm cache", "deploy")
        lines = ask(summarizing, 300).render().splitlines()
        order = [
            lines.index(header)
            for header in ("## Project memory", "## Summary of memories left out", "## Task memory")
        ]
        assert order == sorted(order)

    def test_a_summary_given_back_leaves_the_package_as_without(self):
        """Nothing left out for lack of room: the items, render and scores are as without
        summaries, though the pools were widened and scored once more before."""
        backend = InMemoryBackend(embedder=HashingEmbedder(dim=64))

        def assembler(**config):
            limits = GatherLimits(per_source=5)
            return ContextAssembler(
                backend,
                config=AssemblerConfig(track_access=False, limits=limits, **config),
                clock=lambda: NOW,
            )

        plain, summarizing = assembler(), assembler(summary=SummaryConfig())
        project = plain.project_store("shop")
        project.add_many(
            project.new_item("note", f"deploy rule {n}: tag the release before the deploy")
            for n in range(40)
        )
        without, given_back = ask(plain, 4000), ask(summarizing, 4000)
        assert given_back.summary is None
        assert given_back.render() == without.render()
        assert [(s.item.id, s.score) for s in given_back.selections] == [
            (s.item.id, s.score) for s in without.selections
        ]

    def test_pressure_still_says_what_was_paged_out(self):
        """A summary does not hide the omissions: they stay in the package and its pressure."""
        summarizing, _ = assembler_with(share=0.2)
        package = ask(summarizing, 300)
        assert package.summary.text
        assert package.pressure.paged_out == sum(
            1 for o in package.omissions if o.reason in LACK_OF_ROOM
        )


class TestBudgetProperty:
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        scenario=scenarios,
        share=st.floats(0.05, 0.6),
        max_tokens=st.integers(16, 400),
        fragment_tokens=st.integers(1, 64),
    )
    def test_the_whole_render_fits_the_budget(self, scenario, share, max_tokens, fragment_tokens):
        """Summary included, the render never costs more than the budget, whatever the input;
        every candidate is still accounted for once; a summary draws on left-out items only."""
        summary = SummaryConfig(
            share=share,
            max_tokens=max_tokens,
            min_tokens=min(16, max_tokens),
            summarizer=ExtractiveSummarizer(fragment_tokens=fragment_tokens),
        )
        package, _ = build(scenario, summary=summary)
        rendered = package.render()
        assert count(rendered) == package.tokens_used <= scenario["budget"]
        ids = [s.item.id for s in package.selections]
        accounted = ids + [o.item_id for o in package.omissions]
        assert len(accounted) == len(set(accounted)) == sum(u.candidates for u in package.usage)
        if package.summary is not None:
            paged_out = {o.item_id for o in package.omissions if o.reason in LACK_OF_ROOM}
            assert set(package.summary.sources) <= paged_out
            assert bool(package.summary.text) == (package.summary.tokens > 0)
        if scenario["format"] is RenderFormat.XML:
            ET.fromstring(f"<context>{rendered}</context>")  # noqa: S314 - our own output

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        scenario=scenarios,
        answer=st.one_of(
            st.text(max_size=300),
            st.lists(st.sampled_from(WORDS), max_size=3000).map(" ".join),
        ),
    )
    def test_any_answer_fits(self, scenario, answer):
        """Whatever a model answers (markup, control characters, ten thousand words), the
        render fits the budget: the answer is cut by the assembler's counter."""
        summary = SummaryConfig(share=0.3, summarizer=LLMSummarizer(Answer(answer)))
        package, _ = build(scenario, summary=summary)
        rendered = package.render()
        assert count(rendered) == package.tokens_used <= scenario["budget"]
        if package.summary is not None and package.summary.summarizer == "llm":
            assert answer.strip().startswith(package.summary.text.removesuffix(CUT_MARK))
            assert package.summary.truncated == (package.summary.text != answer.strip())
        if scenario["format"] is RenderFormat.XML:
            ET.fromstring(f"<context>{rendered}</context>")  # noqa: S314 - our own output


class NewlineCounter:
    """A counter whose line breaks cost a token each: a whole counts more than its parts.

    The protocol asks counters not to do that; a tokenizer might. The assembler counts the
    whole render with it, and must still fit.
    """

    name = "words-and-newlines"

    def count(self, text: str) -> int:
        return len(text.split()) + text.count("\n")


class TestOtherCounters:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(budget=st.integers(1, 600), share=st.floats(0.05, 0.5))
    def test_a_counter_that_counts_the_whole_above_its_parts(self, budget, share):
        """The summary is cut until the whole render, counted whole, fits."""
        counter = NewlineCounter()
        backend = InMemoryBackend(embedder=HashingEmbedder(dim=64))
        config = AssemblerConfig(summary=SummaryConfig(share=share, min_tokens=4))
        assembler = ContextAssembler(backend, config=config, counter=counter, clock=lambda: NOW)
        project = assembler.project_store("shop")
        project.add_many(
            project.new_item("note", f"deploy {n} failed. The cache was cold {n} times.")
            for n in range(40)
        )
        package = ask(assembler, budget)
        assert counter.count(package.render()) <= budget
        assert counter.count(package.render()) == package.tokens_used


# ----------------------------------------------------------------------------- failures


class TestFailures:
    def test_a_summarizer_that_raises_falls_back(self):
        """The extractive fallback writes the summary; the package names the failure."""
        model = Answer(ConnectionError("model unreachable"))
        summarizing, _ = assembler_with(share=0.2, summarizer=LLMSummarizer(model))
        with capture_logs() as logs:
            package = ask(summarizing, 300)
        assert model.prompts
        assert package.summary.text
        assert package.summary.summarizer == "extractive"
        assert package.summary.error == "llm: ConnectionError: model unreachable"
        assert [log["summarizer"] for log in logs if log["event"] == "summarizer_failed"] == ["llm"]

    @pytest.mark.parametrize(
        ("reply", "why"),
        [(42, "answered int, not text"), ("   \n ", "answered no text"), (None, "NoneType")],
    )
    def test_an_answer_that_is_no_summary_falls_back(self, reply, why):
        """Not text, or blank: a typed failure, named, and the fallback's summary instead."""

        class Odd:
            name = "odd"

            def summarize(self, request: SummaryRequest) -> str:
                return reply  # type: ignore[return-value]

        summarizing, _ = assembler_with(share=0.2, summarizer=Odd())
        package = ask(summarizing, 300)
        assert package.summary.summarizer == "extractive"
        assert package.summary.error.startswith("odd: SummaryError: ")
        assert why in package.summary.error
        assert count(package.render()) <= 300

    def test_without_a_fallback_no_summary_and_the_room_goes_back(self):
        """The failure is named, nothing is rendered for it, and the items get the whole budget."""
        model = Answer(RuntimeError("quota"))
        summarizing, plain = assembler_with(
            share=0.2, summarizer=LLMSummarizer(model), fallback=None
        )
        package, without = ask(summarizing, 300), ask(plain, 300)
        assert package.summary.text == ""
        assert package.summary.tokens == 0
        assert package.summary.error == "llm: RuntimeError: quota"
        assert package.render() == without.render()
        assert package.tokens_used == without.tokens_used

    def test_an_overlong_answer_is_cut_to_fit(self):
        """A model that says far more than asked costs the budget nothing more."""
        model = Answer(" ".join(["the cache was cold"] * 2000))
        summarizing, _ = assembler_with(share=0.2, summarizer=LLMSummarizer(model))
        package = ask(summarizing, 300)
        assert package.summary.summarizer == "llm"
        assert package.summary.truncated
        assert package.summary.text.endswith(CUT_MARK)
        assert package.summary.error is None
        assert count(package.render()) == package.tokens_used <= 300

    def test_a_model_answer_is_used_as_given(self):
        """An answer within the room is the section's text, untouched."""
        model = Answer("Deploys failed on a cold cache; retries worked.")
        summarizing, _ = assembler_with(share=0.2, summarizer=LLMSummarizer(model))
        package = ask(summarizing, 300)
        assert package.summary.text == "Deploys failed on a cold cache; retries worked."
        assert not package.summary.truncated
        (prompt,) = model.prompts
        assert len(re.findall(r"^- \(", prompt, flags=re.MULTILINE)) == len(package.summary.sources)

    def test_strict_raises(self):
        """``strict=True`` raises the summarizer's error instead of falling back."""
        summarizing, _ = assembler_with(
            share=0.2, summarizer=LLMSummarizer(Answer(ConnectionError("down")))
        )
        with pytest.raises(ConnectionError, match="down"):
            ask(summarizing, 300, strict=True)
        odd, _ = assembler_with(share=0.2, summarizer=LLMSummarizer(Answer(42)))
        with pytest.raises(SummaryError, match="not text"):
            ask(odd, 300, strict=True)

    def test_a_failed_access_write_is_named_beside_the_summary(self):
        """The access write follows the summary step; its failure still reaches the package."""

        class NoTouch(InMemoryBackend):
            def touch(self, *args, **kwargs):
                raise ConnectionError("database is locked")

        backend = NoTouch(embedder=HashingEmbedder(dim=64))
        config = AssemblerConfig(summary=SummaryConfig(share=0.2))
        assembler = ContextAssembler(backend, config=config, clock=lambda: NOW)
        project = assembler.project_store("shop")
        project.add_many(
            project.new_item("note", f"Deploy {n} failed because the cache was cold.")
            for n in range(40)
        )
        package = ask(assembler, 300)
        assert package.summary.text
        assert [(f.tier, f.phase) for f in package.failures] == [(Tier.PROJECT, "access")]

    def test_only_what_more_room_would_bring_in_is_summarized(self):
        """Expired candidates, however relevant, are no summary's sources."""
        summarizing, _ = assembler_with(share=0.2)
        project = summarizing.project_store("shop")
        expired = project.add_many(
            project.new_item(
                "note",
                f"Why the deploy failed, {n}: the cache was cold.",
                expires_at=NOW - timedelta(minutes=1),
            )
            for n in range(5)
        )
        package = ask(summarizing, 300)
        reasons = {o.item_id: o.reason for o in package.omissions}
        assert {reasons[i.id] for i in expired} == {OmissionReason.EXPIRED}
        assert package.summary.sources
        assert not {i.id for i in expired} & set(package.summary.sources)
        assert "Why the deploy failed" not in package.summary.text

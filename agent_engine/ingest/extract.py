"""Extraction: turning a conversation's turns into the memories worth keeping (seed 004, §6).

A conversation stored turn by turn keeps everything and says little: "I moved to Lisbon in
May" sits between "haha" and "see you!". An :class:`Extractor` reads a window of turns and
returns the memories in them, each of a kind:

- ``semantic``: facts and preferences ("Caroline moved to Lisbon in May");
- ``procedural``: how things are done ("To release, tag main and run make publish");
- ``episodic``: what happened, as a summary of a stretch of conversation.

:class:`RuleExtractor`, the default, works offline with patterns: first-person statements of
fact or preference, instructions and rules, and at a task's end one episodic summary of who
talked about what. :class:`LLMExtractor` hands the turns to a callable of the user's (any LLM
client: prompt in, text out) and reads the JSON it answers. :class:`ExtractionHook` runs an
extractor every ``every`` turns and at a task's end and writes what it finds to the task's
project, through the ingestion queue when given one (redacted, decided, merged with what is
held) or straight into the store. An extractor that raises, or answers something that is not
a list of memories, is contained: nothing of that call is written, the error is reported.
Entries that are malformed are dropped one by one, each with its reason; the rest is written.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from agent_engine._log import get_logger
from agent_engine.errors import ExtractionError, ValidationError
from agent_engine.ingest._stored import stored_ids
from agent_engine.ingest.events import IngestEvent
from agent_engine.ingest.queue import IngestQueue
from agent_engine.models import ContextItem, Task, Tier
from agent_engine.retrieval.text import STOPWORDS, words
from agent_engine.tiers.stores import MemoryStores

__all__ = [
    "DEFAULT_EXTRACTOR",
    "ExtractionHook",
    "ExtractionReport",
    "Extracted",
    "Extractor",
    "LLMExtractor",
    "MemoryKind",
    "RuleExtractor",
    "TURN_KINDS",
]

TURN_KINDS = frozenset({"turn", "message", "chat", "utterance"})
"""The item kinds an extraction reads: a conversation's turns."""


class MemoryKind:
    """The kinds of memory extraction produces (the item's ``kind``)."""

    SEMANTIC = "semantic"
    """Facts and preferences."""
    PROCEDURAL = "procedural"
    """How things are done: instructions, rules, steps."""
    EPISODIC = "episodic"
    """What happened: a summary of a stretch of conversation."""

    ALL = frozenset({SEMANTIC, PROCEDURAL, EPISODIC})


def _ids(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class Extracted:
    """One memory an extractor found: its kind, its text (with its context), where from."""

    kind: str
    text: str
    importance: float = 0.5
    sources: tuple[str, ...] = attrs.field(default=(), converter=_ids)
    """The ids of the turns it was found in."""


@runtime_checkable
class Extractor(Protocol):
    """**Protocol:** reads turns (oldest first), returns the memories in them.

    ``final`` is true at the task's end: the last chance to summarise what happened.
    """

    def extract(self, turns: Sequence[ContextItem], *, final: bool = False) -> Sequence[Extracted]:
        """The memories in ``turns``."""
        ...


# ----------------------------------------------------------------------------- rules

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FACT = re.compile(
    r"^\s*(?:i|we)\s*(?:'m|'ve|'d|am|was|were|have|had|live|lived|work|worked|moved|"
    r"adopted|started|bought|got|use|prefer|love|like|hate|enjoy|decided|chose|"
    r"graduated|joined|left|married|visited|volunteer|own|run|play|study|studied|"
    r"teach|plan|planned|will)\b"
    r"|^\s*(?:my|our)\s+\w+(?:\s+\w+)?\s+(?:is|are|was|were|has|have)\b",
    re.IGNORECASE,
)
_RULE = re.compile(
    r"^\s*(?:(?:always|never|make sure|remember to|don't forget to|do not|don't|please|"
    r"first|then|run|use|avoid|prefer)\b|to \w+(?:\s+\w+){0,4},)",
    re.IGNORECASE,
)
_FILLER = frozenset(
    {"really", "like", "know", "think", "thing", "things", "much", "many", "going", "okay"}
    | {"sure", "great", "good", "lol", "haha", "thanks", "well", "one", "see", "time"}
)
"""Chat words that carry no topic, beyond the stopwords (for the episodic summary)."""
_SHORTEST = 3
"""Words shorter than this name nothing on their own ("go", "do", "of")."""


@attrs.frozen
class RuleExtractor:
    """The default :class:`Extractor`: patterns, no model, nothing leaves the process.

    A sentence of a turn is kept as ``semantic`` when it states a first-person fact or
    preference ("I moved...", "We use...", "My sister is..."), as ``procedural`` when it is
    an instruction or a rule ("Always...", "To deploy, ...", "Never..."), with the speaker
    named so it keeps its context ("Caroline: I moved to Lisbon in May."). Sentences under
    ``min_words`` words are skipped. At the task's end (``final``) one ``episodic`` memory
    sums up the turns: who talked, and the words they used most.
    """

    min_words: int = 4
    summary_words: int = 6

    def extract(self, turns: Sequence[ContextItem], *, final: bool = False) -> list[Extracted]:
        """Facts, rules, and at the end a summary, from ``turns``."""
        found: list[Extracted] = []
        for turn in turns:
            speaker, said = _split_speaker(turn)
            for sentence in (m.group(0).strip() for m in _SENTENCE.finditer(said)):
                if len(sentence.split()) < self.min_words:
                    continue
                kind = (
                    MemoryKind.PROCEDURAL
                    if _RULE.match(sentence)
                    else MemoryKind.SEMANTIC
                    if _FACT.match(sentence)
                    else None
                )
                if kind is not None:
                    text = f"{speaker}: {sentence}" if speaker else sentence
                    found.append(Extracted(kind, text, 0.6, (turn.id,)))
        if final and turns:
            found.append(self._summary(turns))
        return found

    def _summary(self, turns: Sequence[ContextItem]) -> Extracted:
        speakers = list(dict.fromkeys(_split_speaker(t)[0] or t.source for t in turns if t.source))
        counts = Counter(
            word
            for turn in turns
            for word in words(_split_speaker(turn)[1])
            if len(word) >= _SHORTEST and word not in STOPWORDS and word not in _FILLER
        )
        topics = ", ".join(word for word, _ in counts.most_common(self.summary_words))
        who = " and ".join(speakers) if speakers else "the conversation"
        day = turns[0].timestamp.date().isoformat()
        text = f"On {day}, {who} talked about {topics or 'nothing in particular'}."
        return Extracted(MemoryKind.EPISODIC, text, 0.4, tuple(t.id for t in turns))


def _split_speaker(turn: ContextItem) -> tuple[str, str]:
    """``(speaker, what was said)``: a leading ``"<source>: "`` is the speaker."""
    if turn.source and turn.text.startswith(f"{turn.source}:"):
        return turn.source, turn.text[len(turn.source) + 1 :].strip()
    return turn.source, turn.text


DEFAULT_EXTRACTOR = RuleExtractor()
"""The extractor an :class:`ExtractionHook` uses unless given another."""


# ----------------------------------------------------------------------------- LLM

DEFAULT_PROMPT = """Extract the information worth remembering from these messages.

Give each memory its context: not "budget is $10,000" but "budget for the Hawaii trip is
$10,000". Types: "semantic" (facts, preferences), "procedural" (instructions, how things are
done){episodic}.

Messages:
{messages}

Answer with a JSON array only (empty if nothing is worth remembering):
[{{"type": "semantic|procedural{episodic_type}", "content": "the memory, with its context"}}]"""
"""The prompt :class:`LLMExtractor` sends: ``{messages}`` and the episodic parts filled in."""


@attrs.frozen
class LLMExtractor:
    """An :class:`Extractor` that asks a user-supplied LLM: ``complete(prompt) -> text``.

    The prompt (:data:`DEFAULT_PROMPT`, or ``prompt`` with the same fields) lists the turns
    and asks for a JSON array of ``{"type", "content"}``; at the task's end it asks for an
    ``episodic`` summary too. The answer may wrap the array in prose or a code fence. An
    answer with no JSON array raises :class:`ExtractionError`; an entry with an unknown type
    or no content is dropped and logged, and the rest kept. Nothing here makes a network
    call: ``complete`` is the caller's.
    """

    complete: Callable[[str], str]
    prompt: str = DEFAULT_PROMPT
    kinds: frozenset[str] = MemoryKind.ALL
    importance: float = 0.6

    def extract(self, turns: Sequence[ContextItem], *, final: bool = False) -> list[Extracted]:
        """The memories the model finds in ``turns``."""
        if not turns:
            return []
        messages = "\n".join(f"- {turn.text}" for turn in turns)
        episodic = ', "episodic" (a one-sentence summary of what happened)' if final else ""
        prompt = self.prompt.format(
            messages=messages, episodic=episodic, episodic_type="|episodic" if final else ""
        )
        answer = self.complete(prompt)
        entries = _json_array(answer)
        sources = tuple(turn.id for turn in turns)
        found: list[Extracted] = []
        rejected: list[str] = []
        for entry in entries:
            kind = entry.get("type") if isinstance(entry, Mapping) else None
            content = entry.get("content") if isinstance(entry, Mapping) else None
            if kind not in self.kinds:
                rejected.append(f"unknown type {kind!r} in {entry!r}")
            elif not isinstance(content, str) or not content.strip():
                rejected.append(f"no content in {entry!r}")
            else:
                found.append(Extracted(str(kind), content.strip(), self.importance, sources))
        if rejected:
            get_logger(component="extraction").warning("llm_entries_rejected", rejected=rejected)
        return found


def _json_array(answer: object) -> list[Any]:
    """The JSON array in a model's answer (prose or a code fence around it allowed)."""
    if not isinstance(answer, str):
        raise ExtractionError(f"the model answered {type(answer).__name__}, not text")
    start, end = answer.find("["), answer.rfind("]")
    if start < 0 or end < start:
        raise ExtractionError(f"no JSON array in the model's answer: {answer[:200]!r}")
    try:
        data = json.loads(answer[start : end + 1])
    except ValueError as error:
        raise ExtractionError(
            f"the model's array is not JSON ({error}): {answer[:200]!r}"
        ) from None
    if not isinstance(data, list):  # pragma: no cover - a "[...]" slice parses to a list
        raise ExtractionError("the model's answer is not a JSON array")
    return data


# ----------------------------------------------------------------------------- the hook


@attrs.frozen
class ExtractionReport:
    """What one extraction did: the memories found and written, what was dropped and why.

    ``written``: the ids of the memories (queued, or stored or merged into). ``rejected``:
    entries dropped, each with the reason. ``error``: why the extractor's whole answer was
    dropped (it raised, or answered something other than memories); nothing was written.
    """

    turns: int
    extracted: list[Extracted] = attrs.field(factory=list)
    written: list[str] = attrs.field(factory=list)
    rejected: list[str] = attrs.field(factory=list)
    error: str | None = None


class ExtractionHook:
    """Runs an extractor over a task's turns every ``every`` turns and at the task's end.

    The executor calls :meth:`turn_added` after it adds a turn to the task's memory, and
    :meth:`task_ended` before it finishes the task (which clears the task's memory). Each
    extraction reads the last ``window`` turns (at the end: those since the last extraction,
    at most ``window``) and writes what it finds to the task's project memory: through
    ``queue`` when given (fire-and-forget; the worker redacts, decides and merges), else into
    the project store at once (which redacts and merges too). A memory found again later is
    the same memory: its idempotency key is its task, kind and text.
    """

    def __init__(
        self,
        stores: MemoryStores,
        extractor: Extractor = DEFAULT_EXTRACTOR,
        *,
        queue: IngestQueue | None = None,
        every: int = 10,
        window: int = 15,
    ) -> None:
        for name, value in (("every", every), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive integer", field=name)
        self.stores = stores
        self.extractor = extractor
        self.queue = queue
        self.every = every
        self.window = window
        self._seen: dict[str, int] = {}
        self._since: dict[str, int] = {}
        self._lock = threading.Lock()
        self._log = get_logger(component="extraction")

    def turn_added(self, task: Task) -> ExtractionReport | None:
        """Count a turn of ``task``; every ``every``-th, extract (else ``None``)."""
        key = self.stores.task_store(task).namespace
        with self._lock:
            self._seen[key] = self._seen.get(key, 0) + 1
            self._since[key] = self._since.get(key, 0) + 1
            due = self._seen[key] % self.every == 0
            if due:
                self._since[key] = 0
        return self._run(task, self.window, final=False) if due else None

    def task_ended(self, task: Task) -> ExtractionReport:
        """Extract from the turns since the last extraction, with the task's summary."""
        key = self.stores.task_store(task).namespace
        with self._lock:
            pending = self._since.pop(key, None)
            self._seen.pop(key, None)
        count = self.window if pending is None else min(max(pending, 1), self.window)
        return self._run(task, count, final=True)

    def _run(self, task: Task, count: int, *, final: bool) -> ExtractionReport:
        store = self.stores.task_store(task)
        newest = store.query({"kind": {"$in": sorted(TURN_KINDS)}}, limit=count)
        turns = list(reversed(newest))
        try:
            answer = self.extractor.extract(turns, final=final)
        except Exception as error:  # noqa: BLE001 - the user's extractor; contained
            return self._failed(len(turns), f"{type(error).__name__}: {error}")
        if not isinstance(answer, list | tuple):
            return self._failed(len(turns), f"the extractor answered {answer!r:.200}, not a list")
        entries = list(answer)
        good = [entry for entry in entries if isinstance(entry, Extracted)]
        rejected = [f"not an Extracted: {entry!r}" for entry in entries if entry not in good]
        events = []
        for entry in good:
            if not isinstance(entry.text, str) or not entry.text.strip():
                rejected.append(f"no text in {entry!r}")
                continue
            try:
                events.append(_event(task, entry))
            except (ValidationError, ValueError, TypeError) as error:
                rejected.append(f"{error} in {entry!r}")
        written = self._write(task, events)
        if rejected:
            self._log.warning("extraction_rejected", task=task.id, rejected=rejected[:3])
        return ExtractionReport(len(turns), good, written, rejected)

    def _failed(self, turns: int, error: str) -> ExtractionReport:
        self._log.warning("extraction_failed", error=error)
        return ExtractionReport(turns, error=error)

    def _write(self, task: Task, events: list[IngestEvent]) -> list[str]:
        if not events:
            return []
        if self.queue is not None:
            return [r.item_id for r in self.queue.enqueue_many(events) if r.item_id is not None]
        project = self.stores.project_store(task.project_id)
        items = [event.item() for event in events]
        held = stored_ids(project, items)
        fresh = [item for item in items if project.scoped_id(item.id) not in held]
        outcomes = project.add_outcomes(fresh) if fresh else []
        return [*sorted(held), *(outcome.item.id for outcome in outcomes)]


def _event(task: Task, entry: Extracted) -> IngestEvent:
    basis = f"{entry.kind}\0{entry.text}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(basis).hexdigest()[:24]
    return IngestEvent(
        entry.text,
        kind=entry.kind,
        tier=Tier.PROJECT,
        project=task.project_id,
        user=task.user_id,
        idempotency_key=f"extract:{task.id}:{digest}"[:255],
        importance=entry.importance,
        tags=("extracted",),
        payload={"from_turns": list(entry.sources)[:50]} if entry.sources else {},
        source="extractor",
        session=task.id,
    )

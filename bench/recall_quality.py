"""Recall quality on LoCoMo against a plain BM25 reference. Prints tables; not a test.

Run from the repository root (``bench/README.md``)::

    make bench-recall-quality
    PYTHONPATH=.:local .venv/bin/python bench/recall_quality.py [--limit-questions N] [--json PATH]
        [--structured]

Reads the five LoCoMo development conversations from ``../shared/eval/locomo/locomo-dev.json``
(relative to the repository root; ``--data PATH`` to point elsewhere; the data is never copied into
the repository) and, in this process against the local emulator (moto's server on loopback, tables
from template.yaml):

1. remembers every turn as a ``message`` event through ``RememberService`` (one project; stream =
   conversation; ``occurredAt`` = the session's date plus the turn's index in seconds; idempotency
   key ``<conversation>:<dia_id>``; one request per session, at most ``MAX_EVENTS_PER_BATCH``);
2. recalls every question at each budget through ``RecallService`` with the frozen
   ``RecallParams()`` (strategy ``smallest``) and with the same parameters but ``strategy="fill"``;
3. ranks the same turns with plain BM25 (``bm25s`` 0.3.16, the reference configuration pinned
   below, one index over all five conversations) and packs them greedily in rank order with
   ``kaibo_core.core.tokens.count_tokens``;

then reports, per budget and system, evidence recall (share of the gold evidence turns cited),
cited-turn precision, citations per item, mean ``usedTokens`` and abstain rate, on categories 1-4
(questions that should be answered) and separately on category 5 (adversarial: abstaining is right),
and checks the targets of the recall issue.

With ``--structured``, remember also creates each call's structuring job (``DynamoJobStore``; the
queue only records the job ids), and every job is structured in remember order with
``StructuringService`` and the ``RuleStructurer`` (``DynamoStructuringStore``, ``DynamoTermIndex``)
before any question is asked: recall then sees the structured memories, as a few seconds after
remember, instead of the provisional ones. A structured memory cites its source event, so evidence is
still read from the citations. The BM25 reference is the same in both modes.

Speed (about 5 minutes on 2 cores instead of hours): the emulator's moto speed-ups
(``kaibo_local.moto_speedups``: a Query reads only its partition, Query and BatchGetItem results are
written in one ``json.dumps``; same answers as moto's) and the four recalls of a question share one
read of the term index and one fetch of each memory item (``CachedIndex``, ``CachedMemories``;
``--no-read-cache`` reads afresh every time and gives the same figures).
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
# The local stack lives in local/: make the script run from a clean checkout without PYTHONPATH too
# (kaibo_core is installed in the venv).
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

import snowballstemmer

from bench.common import emulator_speedups, local_tables, machine, markdown_table, progress, semantic_params
from kaibo_core.adapters.dynamodb_events import DynamoEventLocator, DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.api.mapping import new_events, recall_body, recall_query
from kaibo_core.api.models import RecallRequest, RememberRequest
from kaibo_core.core.clock import format_instant
from kaibo_core.core.ids import project_id
from kaibo_core.core.limits import MAX_EVENTS_PER_BATCH
from kaibo_core.core.models.memories import CorpusStats, MemoryRecord, TermRead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.tokens import count_tokens
from kaibo_core.ports import MemoryReader, TermIndex
from kaibo_core.runtime.embedded import RecordingQueue
from kaibo_core.runtime.wiring import SEMANTIC_MODELS, build_semantic_channel
from kaibo_core.services.recall import RecallParams, RecallService
from kaibo_core.services.remember import RememberService
from kaibo_core.services.semantic import SemanticChannel
from kaibo_core.services.structuring import StructuringService, StructuringStats

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEFAULT_DATA: Final = ROOT.parent / "shared" / "eval" / "locomo" / "locomo-dev.json"
DEFAULT_BUDGETS: Final = (300, 1000)
#: Category numbers of the data (not the paper's order); 5 is adversarial.
CATEGORY_NAMES: Final = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERABLE: Final = (1, 2, 3, 4)
ADVERSARIAL: Final = 5
SESSION_DATE_FORMAT: Final = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"

# The BM25 reference configuration (the recall issue): pinned, not tuned.
BM25S_VERSION: Final = "0.3.16"
BM25_TOKEN_PATTERN: Final = r"(?u)\b\w\w+\b"
BM25_STOPWORDS: Final = "en"  # bm25s' English list
BM25_STEMMER: Final = "english"  # snowballstemmer
BM25_K1: Final = 1.5
BM25_B: Final = 0.75
BM25_METHOD: Final = "lucene"  # bm25s' default, stated explicitly

# Targets of the recall issue, in points of evidence recall (categories 1-4).
TARGET_MARGIN_OVER_BM25: Final = 3.0
TARGET_CATEGORY_SLACK: Final = 1.0
TARGET_CATEGORY_MIN_QUESTIONS: Final = 100
TARGET_SMALLEST_COST: Final = 1.0

KAIBO_SMALLEST: Final = "Kaibo smallest"
KAIBO_FILL: Final = "Kaibo fill"
BM25_REFERENCE: Final = "BM25 reference"
SYSTEMS: Final = (KAIBO_SMALLEST, KAIBO_FILL, BM25_REFERENCE)
#: The packages whose versions the report names.
PACKAGES: Final = ("moto", "bm25s", "numpy", "snowballstemmer")


# --- The data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    conversation: str
    session: int
    index: int  # position in its session, from 0
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    image_url: str | None
    occurred_at: str

    @property
    def key(self) -> str:
        """The turn's id across conversations, and its idempotency key."""
        return f"{self.conversation}:{self.dia_id}"

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"role": "user", "name": self.speaker, "text": self.text}
        if self.caption is not None:
            attachment = {"caption": self.caption}
            if self.image_url is not None:
                attachment["url"] = self.image_url
            payload["attachments"] = [attachment]
        return payload

    def bm25_text(self) -> str:
        """The reference's document: ``speaker: text``, the image caption appended."""
        text = f"{self.speaker}: {self.text}"
        return text + (f" [image: {self.caption}]" if self.caption is not None else "")


@dataclass(frozen=True)
class Question:
    conversation: str
    position: int  # in its conversation's qa list
    text: str
    category: int
    evidence: frozenset[str]  # turn keys (``<conversation>:<dia_id>``), normalised and known


@dataclass
class Locomo:
    turns: list[Turn]
    questions: list[Question]
    sessions: list[tuple[str, int, list[Turn]]]  # conversation, session number, its turns in order
    #: Evidence ids dropped while normalising: malformed or naming no turn (README quirks).
    dropped_evidence: list[str] = field(default_factory=list)


_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(raw: str) -> tuple[list[str], list[str]]:
    """``"D8:6; D9:17"`` -> D8:6, D9:17; ``"D:11:26"`` -> D11:26; ``"D30:05"`` -> D30:5.

    Returns the normalised ids and the malformed parts (``"D"``).
    """
    found: list[str] = []
    bad: list[str] = []
    for part in re.split(r"[;\s]+", raw):
        if not part:
            continue
        match = _EVIDENCE_ID.fullmatch(part)
        if match is None:
            bad.append(part)
        else:
            found.append(f"D{int(match[1])}:{int(match[2])}")
    return found, bad


def session_start(text: str) -> datetime:
    return datetime.strptime(text.strip(), SESSION_DATE_FORMAT).replace(tzinfo=UTC)


def _image_url(value: object) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) and value else None


def load_locomo(path: Path) -> Locomo:
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    data = Locomo(turns=[], questions=[], sessions=[])
    for sample in samples:
        conversation = str(sample["sample_id"])
        dialogue: dict[str, Any] = sample["conversation"]
        numbers = sorted(
            int(match[1]) for name in dialogue if (match := re.fullmatch(r"session_(\d+)", name)) is not None
        )
        known: set[str] = set()
        for number in numbers:
            start = session_start(dialogue[f"session_{number}_date_time"])
            turns: list[Turn] = []
            for index, raw in enumerate(dialogue[f"session_{number}"]):
                caption = raw.get("blip_caption")
                turn = Turn(
                    conversation=conversation,
                    session=number,
                    index=index,
                    dia_id=str(raw["dia_id"]),
                    speaker=str(raw["speaker"]),
                    text=str(raw["text"]),
                    caption=caption.strip() if isinstance(caption, str) and caption.strip() else None,
                    image_url=_image_url(raw.get("img_url")),
                    occurred_at=format_instant(start + timedelta(seconds=index)),
                )
                turns.append(turn)
                known.add(turn.dia_id)
            data.turns.extend(turns)
            data.sessions.append((conversation, number, turns))
        for position, qa in enumerate(sample["qa"]):
            evidence: set[str] = set()
            for raw_id in qa.get("evidence") or []:
                ids, bad = normalise_evidence(str(raw_id))
                data.dropped_evidence.extend(f"{conversation} {part!r} (malformed)" for part in bad)
                for dia_id in ids:
                    if dia_id in known:
                        evidence.add(f"{conversation}:{dia_id}")
                    else:
                        data.dropped_evidence.append(f"{conversation} {dia_id} (no such turn)")
            data.questions.append(
                Question(
                    conversation, position, str(qa["question"]), int(qa["category"]), frozenset(evidence)
                )
            )
    return data


def sample_questions(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """At most ``limit`` questions, taken evenly over the whole list (every conversation and category)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


# --- Kaibo in-process against the emulator --------------------------------------------------------


class CachedIndex:
    """The term index, read once per question: the four recalls of a question (two budgets, two
    strategies) make the same read, and nothing is written while the questions run."""

    def __init__(self, index: TermIndex) -> None:
        self._index = index
        self._last: tuple[tuple[object, ...], tuple[Sequence[TermRead], CorpusStats]] | None = None

    def read(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        history: bool,
        *,
        cells: Sequence[str] = (),
        cell_limit: int = 0,
    ) -> tuple[Sequence[TermRead], CorpusStats]:
        key = (project, tuple(terms), limit, history, tuple(cells), cell_limit)
        if self._last is None or self._last[0] != key:
            self._last = (
                key,
                self._index.read(project, terms, limit, history, cells=cells, cell_limit=cell_limit),
            )
        return self._last[1]


class CachedMemories:
    """Memory items fetched once each (nothing changes them while the questions run)."""

    def __init__(self, memories: MemoryReader) -> None:
        self._memories = memories
        self._found: dict[str, MemoryRecord] = {}

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        wanted = list(dict.fromkeys(memory_ids))
        missing = [memory_id for memory_id in wanted if memory_id not in self._found]
        if missing:
            self._found.update(self._memories.get_many(project, missing))
        return {memory_id: self._found[memory_id] for memory_id in wanted if memory_id in self._found}


@dataclass(frozen=True)
class Answer:
    """One system's answer to one question at one budget."""

    cited: frozenset[str]  # turn keys
    items: int
    citations: int  # summed over items (a turn cited by two items counts twice)
    used_tokens: int
    abstained: bool
    reason: str | None = None


class Kaibo:
    """Remember and recall through the services, against tables in the running emulator."""

    def __init__(
        self,
        client: DynamoDBClient,
        tables: dict[str, str],
        cache_reads: bool,
        structured: bool = False,
        semantic: SemanticChannel | None = None,
    ) -> None:
        self.project = ProjectId(project_id())
        self.semantic = semantic
        memories = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        self.structured = structured
        self._jobs: DynamoJobStore | None = None
        self._queue: RecordingQueue | None = None
        if structured:
            self._jobs = DynamoJobStore(client, tables["JobsTable"])
            self._queue = RecordingQueue()
            self._events = DynamoEventStore(
                client, tables["EventsTable"], tables["IdempotencyTable"], jobs=self._jobs
            )
            self._remember = RememberService(
                self._events, memories=memories, jobs=self._queue, semantic=semantic
            )
            self._structuring = StructuringService(
                self._events,
                DynamoStructuringStore(client, tables["MemoriesTable"], tables["TermIndexTable"]),
                DynamoTermIndex(client, tables["TermIndexTable"]),
                RuleStructurer(),
                semantic=semantic,
            )
        else:
            self._remember = RememberService(
                DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]),
                memories=memories,
                semantic=semantic,
            )
        index = DynamoTermIndex(client, tables["TermIndexTable"])
        self.index: TermIndex = CachedIndex(index) if cache_reads else index
        #: Recall's context reads its neighbours' event ids afresh in every recall.
        self.events = DynamoEventLocator(client, tables["EventsTable"])
        self.memories: MemoryReader = CachedMemories(memories) if cache_reads else memories
        #: event id -> turn key
        self.turn_of_event: dict[str, str] = {}
        self.index_failures = 0
        #: ``--structured``: the provisional memories remember made, and how often recall served one
        #: (none once every job is structured: each is replaced by its structured memories).
        self.provisional_ids: set[str] = set()
        self.provisional_served = 0
        #: ``--structured``: job ids in remember order (one per remember call), and what structuring did.
        self.job_ids: list[str] = []
        self.structuring = StructuringStats()

    def structure_all(self) -> float:
        """``--structured``: every job, in remember order, structured as the structure function does.

        Returns the seconds it took."""
        assert self._jobs is not None
        assert self._queue is not None
        queued = [job_id for _project, job_id in self._queue.sent]
        if queued != self.job_ids:
            raise RuntimeError(f"{len(self.job_ids)} jobs created but {len(queued)} announced")
        started = time.perf_counter()
        for done, job_id in enumerate(self.job_ids, start=1):
            self.structuring.add(self._structuring.structure_job(self.project, job_id, self._jobs))
            if done % 50 == 0 or done == len(self.job_ids):
                elapsed = time.perf_counter() - started
                progress(f"  structured {done}/{len(self.job_ids)} jobs ({elapsed:.0f} s)")
        unfinished = [
            job_id
            for job_id in self.job_ids
            if (job := self._jobs.get(self.project, job_id)) is None or job.status != "done"
        ]
        if unfinished:
            raise RuntimeError(f"{len(unfinished)} jobs not done after structuring: {unfinished[:3]}")
        return time.perf_counter() - started

    def service(self, params: RecallParams, meaning: bool = True) -> RecallService:
        """Recall over this run's tables; ``meaning=False``: words only, even with a model."""
        return RecallService(
            self.index,
            self.memories,
            params=params,
            semantic=self.semantic if meaning else None,
            events=self.events,
        )

    def remember_session(self, stream: str, turns: Sequence[Turn]) -> None:
        for start in range(0, len(turns), MAX_EVENTS_PER_BATCH):
            batch = turns[start : start + MAX_EVENTS_PER_BATCH]
            request = RememberRequest.model_validate(
                {
                    "stream": stream,
                    "events": [
                        {
                            "kind": "message",
                            "idempotencyKey": turn.key,
                            "occurredAt": turn.occurred_at,
                            "payload": turn.payload(),
                        }
                        for turn in batch
                    ],
                }
            )
            outcome = self._remember.remember(self.project, request.stream, new_events(request))
            if self.structured:
                if outcome.job_id is None or not outcome.job_created:
                    raise RuntimeError(f"remember created no structuring job in {stream}")
                self.job_ids.append(outcome.job_id)
                self.provisional_ids.update(memory.id for memory in outcome.memories)
            self.index_failures += len(outcome.index_failures)
            for failure in outcome.index_failures:
                progress(f"  indexing failure in {stream}: {failure!r}")
            for event in outcome.events:
                self.turn_of_event[event.record.id] = event.record.idempotency_key

    def answer(self, service: RecallService, question: str, budget: int) -> Answer:
        query = recall_query(RecallRequest.model_validate({"question": question, "budget": budget}))
        answer, _stats = service.recall(self.project, query)
        body = recall_body(answer)
        items: list[dict[str, Any]] = body["items"]
        citations = [c["eventId"] for item in items for c in item["citations"]]
        unknown = [event for event in citations if event not in self.turn_of_event]
        if unknown:
            raise RuntimeError(f"recall cited events this benchmark did not remember: {unknown[:3]}")
        self.provisional_served += sum(item["memoryId"] in self.provisional_ids for item in items)
        abstain: dict[str, Any] = body["abstain"]
        return Answer(
            cited=frozenset(self.turn_of_event[event] for event in citations),
            items=len(items),
            citations=len(citations),
            used_tokens=int(body["usedTokens"]),
            abstained=bool(abstain["abstained"]),
            reason=abstain.get("reason"),
        )


#: One question's answers: system -> budget -> answer.
QuestionAnswers = dict[str, dict[int, Answer]]


def recall_all(
    kaibo: Kaibo, services: dict[str, RecallService], questions: Sequence[Question], budgets: Sequence[int]
) -> list[QuestionAnswers]:
    """Kaibo's answers to every question at every budget, for each system, in order."""
    found: list[QuestionAnswers] = []
    started = time.perf_counter()
    for done, question in enumerate(questions, start=1):
        found.append(
            {
                system: {budget: kaibo.answer(service, question.text, budget) for budget in budgets}
                for system, service in services.items()
            }
        )
        if done % 50 == 0 or done == len(questions):
            elapsed = time.perf_counter() - started
            progress(f"  recalled {done}/{len(questions)} questions ({elapsed:.0f} s)")
    return found


# --- The BM25 reference ---------------------------------------------------------------------------


def _bm25s() -> Any:
    """bm25s, untyped and outside CI's environment: imported here, typed as Any."""
    try:
        module = importlib.import_module("bm25s")
    except ImportError as exc:
        raise SystemExit(
            "bm25s is not installed: `make bench-recall-quality` installs requirements-bench.txt, or run "
            "`.venv/bin/pip install -r requirements-bench.txt`."
        ) from exc
    version = str(module.__version__)
    if version != BM25S_VERSION:
        raise SystemExit(f"bm25s {version} is installed; the reference is pinned to {BM25S_VERSION}.")
    return module


class Bm25Reference:
    """Plain BM25 over every turn (one index for all conversations), packed greedily in rank order."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self._bm25s = _bm25s()
        self._stemmer = snowballstemmer.stemmer(BM25_STEMMER)
        self._turns = list(turns)
        self._texts = [turn.bm25_text() for turn in self._turns]
        self._tokens = [count_tokens(text) for text in self._texts]
        corpus = self._tokenize(self._texts, return_ids=True)
        self._retriever = self._bm25s.BM25(k1=BM25_K1, b=BM25_B, method=BM25_METHOD, csc_backend="numpy")
        self._retriever.index(corpus, show_progress=False)

    def _tokenize(self, texts: list[str], return_ids: bool) -> Any:
        return self._bm25s.tokenize(
            texts,
            lower=True,
            token_pattern=BM25_TOKEN_PATTERN,
            stopwords=BM25_STOPWORDS,
            stemmer=self._stemmer.stemWords,
            return_ids=return_ids,
            show_progress=False,
        )

    def scores(self, question: str) -> list[float]:
        """Every turn's BM25 score for the question, in corpus order (0 where no term matches)."""
        terms: list[str] = self._tokenize([question], return_ids=False)[0]
        ids = self._retriever.get_tokens_ids(terms)
        if not ids:
            return [0.0] * len(self._turns)
        return [float(score) for score in self._retriever.get_scores_from_ids(ids)]

    def ranked(self, question: str) -> list[int]:
        """Indexes of the turns with a positive score, best first (ties: corpus order)."""
        scores = self.scores(question)
        return sorted((i for i, score in enumerate(scores) if score > 0), key=lambda i: (-scores[i], i))

    def answer(self, ranked: Sequence[int], budget: int) -> Answer:
        left = budget
        chosen: list[int] = []
        for i in ranked:
            if self._tokens[i] <= left:
                chosen.append(i)
                left -= self._tokens[i]
            if left <= 0:
                break
        return Answer(
            cited=frozenset(self._turns[i].key for i in chosen),
            items=len(chosen),
            citations=len(chosen),
            used_tokens=budget - left,
            abstained=not chosen,
            reason="no_match" if not chosen else None,
        )


# --- Metrics --------------------------------------------------------------------------------------


def _mean(values: Iterable[float]) -> float | None:
    listed = list(values)
    return sum(listed) / len(listed) if listed else None


@dataclass(frozen=True)
class Metrics:
    questions: int
    with_evidence: int
    evidence_recall: float | None  # ×100, over questions with evidence (abstentions count 0)
    precision: float | None  # ×100, over questions with evidence and ≥1 cited turn
    citations_per_item: float | None
    items_per_question: float
    mean_used_tokens: float  # over all questions (abstentions count 0)
    abstain_rate: float  # ×100
    abstain_reasons: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "withEvidence": self.with_evidence,
            "evidenceRecall": self.evidence_recall,
            "precision": self.precision,
            "citationsPerItem": self.citations_per_item,
            "itemsPerQuestion": self.items_per_question,
            "meanUsedTokens": self.mean_used_tokens,
            "abstainRate": self.abstain_rate,
            "abstainReasons": self.abstain_reasons,
        }


def metrics(pairs: Sequence[tuple[Question, Answer]]) -> Metrics:
    scored = [(q, a) for q, a in pairs if q.evidence]
    recall = _mean(100 * len(q.evidence & a.cited) / len(q.evidence) for q, a in scored)
    precision = _mean(100 * len(q.evidence & a.cited) / len(a.cited) for q, a in scored if a.cited)
    items = sum(a.items for _, a in pairs)
    return Metrics(
        questions=len(pairs),
        with_evidence=len(scored),
        evidence_recall=recall,
        precision=precision,
        citations_per_item=sum(a.citations for _, a in pairs) / items if items else None,
        items_per_question=items / len(pairs) if pairs else 0.0,
        mean_used_tokens=_mean(a.used_tokens for _, a in pairs) or 0.0,
        abstain_rate=100 * sum(a.abstained for _, a in pairs) / len(pairs) if pairs else 0.0,
        abstain_reasons=dict(Counter(a.reason for _, a in pairs if a.abstained and a.reason)),
    )


def group_metrics(pairs: Sequence[tuple[Question, Answer]]) -> dict[str, Metrics]:
    """By group: "1-4" (should answer), "1".."4" per category, "5" (adversarial)."""
    found = {"1-4": metrics([(q, a) for q, a in pairs if q.category in ANSWERABLE])}
    for category in (*ANSWERABLE, ADVERSARIAL):
        found[str(category)] = metrics([(q, a) for q, a in pairs if q.category == category])
    return found


# --- Output ---------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def budget_tables(budget: int, results: dict[str, dict[str, Metrics]]) -> list[str]:
    reference = results[BM25_REFERENCE]
    headers = [
        "system",
        f"ev. recall 1-4 (n={reference['1-4'].with_evidence})",
        *(f"cat {c} {CATEGORY_NAMES[c]} (n={reference[str(c)].with_evidence})" for c in ANSWERABLE),
        "precision",
        "cit./item",
        "items/q",
        "mean usedTokens",
        f"abstain 1-4 (n={reference['1-4'].questions})",
        f"abstain cat 5 (n={reference['5'].questions})",
    ]
    rows = [
        [
            system,
            _fmt(results[system]["1-4"].evidence_recall),
            *(_fmt(results[system][str(c)].evidence_recall) for c in ANSWERABLE),
            _fmt(results[system]["1-4"].precision),
            _fmt(results[system]["1-4"].citations_per_item, 2),
            _fmt(results[system]["1-4"].items_per_question, 2),
            _fmt(results[system]["1-4"].mean_used_tokens, 0),
            _fmt(results[system]["1-4"].abstain_rate),
            _fmt(results[system]["5"].abstain_rate),
        ]
        for system in SYSTEMS
    ]
    adversarial_headers = [
        "system",
        f"abstain rate (n={reference['5'].questions})",
        f"ev. recall (n={reference['5'].with_evidence})",
        "precision",
        "items/q",
        "mean usedTokens",
        "abstain reasons",
    ]
    adversarial_rows = [
        [
            system,
            _fmt(results[system]["5"].abstain_rate),
            _fmt(results[system]["5"].evidence_recall),
            _fmt(results[system]["5"].precision),
            _fmt(results[system]["5"].items_per_question, 2),
            _fmt(results[system]["5"].mean_used_tokens, 0),
            _reasons(results[system]["5"].abstain_reasons),
        ]
        for system in SYSTEMS
    ]
    return [
        f"### Budget {budget}",
        "",
        "Categories 1-4 (should answer): evidence recall, overall and per category; precision, citations",
        "and items over the same questions.",
        "",
        *markdown_table(headers, rows),
        "",
        "Abstentions on categories 1-4 by reason: "
        + "; ".join(f"{system}: {_reasons(results[system]['1-4'].abstain_reasons)}" for system in SYSTEMS),
        "",
        "Category 5 (adversarial: the event never happened; abstaining is right):",
        "",
        *markdown_table(adversarial_headers, adversarial_rows),
        "",
    ]


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(reasons.items())) or "none"


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def _mark(met: bool) -> str:
    return "met" if met else "MISSED"


def checks(results: dict[int, dict[str, dict[str, Metrics]]]) -> list[Check]:
    """The recall issue's targets, each at every budget."""
    found: list[Check] = []
    margin_parts: list[str] = []
    margin_ok = True
    category_parts: list[str] = []
    adversarial_parts: list[str] = []
    category_ok = True
    cost_parts: list[str] = []
    cost_ok = True
    for budget, by_system in results.items():
        ours, fill, bm25 = by_system[KAIBO_SMALLEST], by_system[KAIBO_FILL], by_system[BM25_REFERENCE]
        margin = (ours["1-4"].evidence_recall or 0.0) - (bm25["1-4"].evidence_recall or 0.0)
        margin_ok &= margin >= TARGET_MARGIN_OVER_BM25
        margin_parts.append(
            f"{budget}: {_fmt(ours['1-4'].evidence_recall, 2)} vs {_fmt(bm25['1-4'].evidence_recall, 2)} "
            f"({margin:+.2f}, {_mark(margin >= TARGET_MARGIN_OVER_BM25)})"
        )
        for category in ANSWERABLE:
            key = str(category)
            if bm25[key].with_evidence < TARGET_CATEGORY_MIN_QUESTIONS:
                continue
            gap = (ours[key].evidence_recall or 0.0) - (bm25[key].evidence_recall or 0.0)
            category_ok &= gap >= -TARGET_CATEGORY_SLACK
            category_parts.append(
                f"{budget}/cat {category}: {gap:+.2f} ({_mark(gap >= -TARGET_CATEGORY_SLACK)})"
            )
        adversarial_gap = (ours["5"].evidence_recall or 0.0) - (bm25["5"].evidence_recall or 0.0)
        adversarial_parts.append(f"{budget}/cat 5: {adversarial_gap:+.2f}")
        cost = (fill["1-4"].evidence_recall or 0.0) - (ours["1-4"].evidence_recall or 0.0)
        cost_ok &= cost <= TARGET_SMALLEST_COST
        cost_parts.append(
            f"{budget}: fill {_fmt(fill['1-4'].evidence_recall, 2)} - smallest "
            f"{_fmt(ours['1-4'].evidence_recall, 2)} = {cost:+.2f} ({_mark(cost <= TARGET_SMALLEST_COST)})"
        )
    found.append(
        Check(
            f">= {TARGET_MARGIN_OVER_BM25:g} points over BM25 (evidence recall, categories 1-4), "
            "every budget",
            margin_ok,
            "; ".join(margin_parts),
        )
    )
    found.append(
        Check(
            f"no category with >= {TARGET_CATEGORY_MIN_QUESTIONS} questions (of 1-4) more than "
            f"{TARGET_CATEGORY_SLACK:g} point below BM25, every budget",
            category_ok,
            ("; ".join(category_parts) or "no category that large")
            + f" (category 5 not counted: abstaining is right there; {'; '.join(adversarial_parts)})",
        )
    )
    found.append(
        Check(
            f"smallest-set rule costs <= {TARGET_SMALLEST_COST:g} point against filling the budget, "
            "every budget",
            cost_ok,
            "; ".join(cost_parts),
        )
    )
    return found


def per_question(
    answers: dict[int, dict[str, list[tuple[Question, Answer]]]], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    """Every question's answers, for diagnosis: ids and counts only (no text of the data set, which
    must not land in the repository): the question's place in its conversation's ``qa`` list, its
    category and number of gold turns; per system and budget the cited turn keys, how many of them
    are gold, ``usedTokens`` and the abstain reason."""
    rows: list[dict[str, Any]] = []
    for number, (question, _answer) in enumerate(answers[budgets[0]][SYSTEMS[0]]):
        by_system: dict[str, dict[str, Any]] = {}
        for system in SYSTEMS:
            by_system[system] = {}
            for budget in budgets:
                answer = answers[budget][system][number][1]
                by_system[system][str(budget)] = {
                    "cited": sorted(answer.cited),
                    "goldCited": len(answer.cited & question.evidence),
                    "usedTokens": answer.used_tokens,
                    "abstain": answer.reason if answer.abstained else None,
                }
        rows.append(
            {
                "conversation": question.conversation,
                "qaIndex": question.position,
                "category": question.category,
                "gold": len(question.evidence),
                "answers": by_system,
            }
        )
    return rows


# --- Main -----------------------------------------------------------------------------------------


def structuring_header(kaibo: Kaibo) -> str:
    """The header line of ``--structured``: what structuring did before the questions."""
    stats = kaibo.structuring
    return (
        "Mode: STRUCTURED (--structured). Each remember call also created its structuring job "
        f"({len(kaibo.job_ids)} jobs); after every turn was remembered, each job was structured in "
        "remember order with StructuringService(DynamoEventStore, DynamoStructuringStore, "
        "DynamoTermIndex, RuleStructurer()).structure_job, then the questions were recalled: "
        f"{stats.events} events, {stats.memories} structured memories made "
        f"({len(stats.memory_ids)} ids over the jobs), {stats.superseded} superseded, "
        f"{stats.canceled} canceled, {stats.filed_as_history} filed as history, {stats.refused} "
        f"refused, {stats.conflicts} commit conflicts, {stats.links_dropped} links dropped; "
        f"provisional memories served by recall afterwards: {kaibo.provisional_served}. "
        "Evidence is read from the citations as in the provisional mode (a structured memory cites "
        "its source event); the BM25 reference is unchanged."
    )


def structuring_json(kaibo: Kaibo) -> dict[str, Any]:
    stats = kaibo.structuring
    return {
        "mode": "structured",
        "structuring": {
            "jobs": len(kaibo.job_ids),
            **stats.counts(),
            "memoryIds": len(stats.memory_ids),
            "provisionalServed": kaibo.provisional_served,
        },
    }


def parse_budgets(text: str) -> tuple[int, ...]:
    try:
        budgets = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from exc
    if not budgets or any(b < 1 for b in budgets):
        raise argparse.ArgumentTypeError(f"budgets must be positive integers: {text!r}")
    return budgets


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json (default: %(default)s)"
    )
    parser.add_argument(
        "--limit-questions", type=int, default=None, metavar="N", help="N questions, spread evenly"
    )
    parser.add_argument("--budgets", type=parse_budgets, default=DEFAULT_BUDGETS, help="e.g. 300,1000")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write every figure as JSON")
    parser.add_argument(
        "--no-read-cache",
        action="store_true",
        help="read the index and the memory items afresh in every recall (same figures, slower)",
    )
    parser.add_argument(
        "--structured",
        action="store_true",
        help="structure every remember's job (RuleStructurer) before recalling: recall sees structured "
        "memories instead of provisional ones",
    )
    parser.add_argument(
        "--semantic",
        choices=["off", *SEMANTIC_MODELS],
        default="off",
        help="recall by meaning with this model (docs/recall.md); off: words only (default)",
    )
    parser.add_argument(
        "--semantic-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a SemanticParams field (experiments on tuning sets; frozen values by default)",
    )
    parser.add_argument(
        "--cosine-margin",
        type=float,
        default=None,
        metavar="X",
        help="override SelectionParams.cosine_margin (experiments; the frozen value is the default)",
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="recall without context (RecallParams.context=None): the best memories' neighbours unread",
    )
    parser.add_argument(
        "--no-recency",
        action="store_true",
        help="recall without the recency rule (RecallParams.recency=None): rank order only, no olderThan",
    )
    parser.add_argument(
        "--postings-per-term",
        type=int,
        default=None,
        metavar="N",
        help="override RecallParams.postings_per_term (experiments; the frozen value is the default)",
    )
    return parser


#: Every system's answers per budget: budget -> system -> (question, answer) in question order.
Answers = dict[int, dict[str, list[tuple[Question, Answer]]]]


@dataclass
class Evaluation:
    """One run: what was asked, of what, with which settings, what came back, and how long it took."""

    data_path: Path
    data: Locomo
    questions: list[Question]
    limit_questions: int | None
    budgets: tuple[int, ...]
    params: RecallParams  # Kaibo smallest; Kaibo fill is the same with strategy="fill"
    cache_reads: bool
    structured: bool
    kaibo: Kaibo
    answers: Answers
    results: dict[int, dict[str, dict[str, Metrics]]]
    verdicts: list[Check]
    seconds: dict[str, float]  # wall, remember, recall (and structure with --structured)


@dataclass
class KaiboRun:
    kaibo: Kaibo
    answers: list[QuestionAnswers]
    seconds: dict[str, float]


def run_kaibo(
    data: Locomo,
    questions: Sequence[Question],
    budgets: Sequence[int],
    params: RecallParams,
    *,
    cache_reads: bool,
    structured: bool,
    semantic: SemanticChannel | None = None,
) -> KaiboRun:
    """Remember every turn (and structure, with ``structured``), then recall every question with
    ``params`` and with the same but ``strategy="fill"``, against the emulator in this process."""
    with local_tables() as local:
        kaibo = Kaibo(local.client, local.tables, cache_reads, structured, semantic)
        loaded = time.perf_counter()
        for done, (conversation, _number, turns) in enumerate(data.sessions, start=1):
            kaibo.remember_session(conversation, turns)
            if done % 20 == 0 or done == len(data.sessions):
                elapsed = time.perf_counter() - loaded
                progress(f"  remembered {done}/{len(data.sessions)} sessions ({elapsed:.0f} s)")
        remember_seconds = time.perf_counter() - loaded
        structure_seconds = kaibo.structure_all() if structured else 0.0
        fill = replace(params, strategy="fill")
        services = {KAIBO_SMALLEST: kaibo.service(params), KAIBO_FILL: kaibo.service(fill)}
        recalling = time.perf_counter()
        answers = recall_all(kaibo, services, questions, budgets)
        recall_seconds = time.perf_counter() - recalling
    seconds = {"remember": remember_seconds, "recall": recall_seconds}
    return KaiboRun(kaibo, answers, seconds | ({"structure": structure_seconds} if structured else {}))


def with_reference(
    questions: Sequence[Question],
    kaibo_answers: Sequence[QuestionAnswers],
    bm25: Bm25Reference,
    budgets: Sequence[int],
) -> Answers:
    """Kaibo's answers next to the BM25 reference's, per budget and system."""
    answers: Answers = {budget: {system: [] for system in SYSTEMS} for budget in budgets}
    for question, by_system in zip(questions, kaibo_answers, strict=True):
        ranked = bm25.ranked(question.text)
        for budget in budgets:
            for system in (KAIBO_SMALLEST, KAIBO_FILL):
                answers[budget][system].append((question, by_system[system][budget]))
            answers[budget][BM25_REFERENCE].append((question, bm25.answer(ranked, budget)))
    return answers


def report_lines(run: Evaluation) -> list[str]:
    """The report (markdown): settings, the tables per budget, the targets, the time taken."""
    data, kaibo, seconds = run.data, run.kaibo, run.seconds
    out: list[str] = [
        "# Kaibo recall quality on LoCoMo (development conversations)"
        + (", structured memories" if run.structured else ""),
        "",
        f"Data: {run.data_path} — {len({t.conversation for t in data.turns})} conversations, "
        f"{len(data.turns)} turns, "
        f"{len(run.questions)} of {len(data.questions)} questions"
        + (f" (--limit-questions {run.limit_questions})" if len(run.questions) < len(data.questions) else "")
        + ".",
        f"Machine: {machine(*PACKAGES)}.",
        f"Kaibo: one project, stream = conversation, RecallParams() = {run.params!r}; "
        "'Kaibo fill' = the same with strategy='fill'. Recall by meaning: "
        + (
            "off (words only)."
            if run.kaibo.semantic is None
            else f"{run.kaibo.semantic.version}, {run.kaibo.semantic.params!r}."
        ),
        f"BM25 reference: bm25s {BM25S_VERSION}, method={BM25_METHOD!r}, k1={BM25_K1}, b={BM25_B}, "
        f"tokens {BM25_TOKEN_PATTERN!r} lower-cased, bm25s' English stopwords, Snowball English stems; "
        "ONE index over all five conversations' turns (as Kaibo's one project); documents 'speaker: text' "
        "+ ' [image: caption]'; turns with a positive score packed in rank order while "
        "count_tokens(text) fits what is left of the budget (no abstain: an empty answer only when no "
        "turn shares a term with the question).",
        "Emulator: moto's server on loopback in this process, sped up ("
        + emulator_speedups()
        + "); "
        + (
            "the term index read once per question and each memory item fetched once (nothing is "
            "written while the questions run: the same answers as reading afresh)."
            if run.cache_reads
            else "every recall reads the index and the memory items afresh (--no-read-cache)."
        ),
        "Evidence recall: share of a question's gold evidence turns cited, averaged over the questions "
        "with evidence (abstentions count 0); precision: cited gold / cited turns over the questions "
        "citing >= 1 turn; mean usedTokens over all questions (abstentions count 0).",
    ]
    out[2:2] = [structuring_header(kaibo)] if run.structured else []
    if data.dropped_evidence:
        out.append(
            f"Evidence ids dropped while normalising ({len(data.dropped_evidence)}): "
            + ", ".join(data.dropped_evidence)
            + "."
        )
    if kaibo.index_failures:
        out.append(f"WARNING: {kaibo.index_failures} provisional memories failed to index (see stderr).")
    out.append("")
    for budget in run.budgets:
        out.extend(budget_tables(budget, run.results[budget]))
    out.extend(["## Targets", ""])
    out.extend(f"- {'PASS' if c.passed else 'FAIL'}: {c.name} — {c.detail}" for c in run.verdicts)
    out.extend(
        [
            "",
            f"Wall time {seconds['wall']:.0f} s "
            f"(remember {len(data.turns)} turns {seconds['remember']:.0f} s; "
            + (
                f"structure {len(kaibo.job_ids)} jobs {seconds['structure']:.0f} s; "
                if run.structured
                else ""
            )
            + f"Kaibo recall {len(run.questions)} questions x {len(run.budgets)} budgets x 2 strategies "
            f"{seconds['recall']:.0f} s).",
        ]
    )
    return out


def results_json(run: Evaluation) -> dict[str, Any]:
    """Every figure of the run, for ``--json``."""
    return {
        "data": str(run.data_path),
        "turns": len(run.data.turns),
        "questions": len(run.questions),
        "recallParams": repr(run.params),
        "bm25": {
            "bm25s": BM25S_VERSION,
            "method": BM25_METHOD,
            "k1": BM25_K1,
            "b": BM25_B,
            "tokenPattern": BM25_TOKEN_PATTERN,
            "stopwords": BM25_STOPWORDS,
            "stemmer": f"snowball {BM25_STEMMER}",
            "index": "one over all conversations",
        },
        "droppedEvidence": run.data.dropped_evidence,
        "results": {
            str(budget): {
                system: {group: m.as_json() for group, m in by_group.items()}
                for system, by_group in by_system.items()
            }
            for budget, by_system in run.results.items()
        },
        "targets": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in run.verdicts],
        "perQuestion": per_question(run.answers, run.budgets),
        "seconds": run.seconds,
    } | (structuring_json(run.kaibo) if run.structured else {})


def main(argv: Sequence[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    data_path: Path = args.data
    budgets: tuple[int, ...] = args.budgets
    if not data_path.is_file():
        print(
            f"recall_quality: no LoCoMo data at {data_path} (pass --data PATH); nothing to measure, skipped."
        )
        return 0
    started = time.perf_counter()
    data = load_locomo(data_path)
    questions = sample_questions(data.questions, args.limit_questions)
    bm25 = Bm25Reference(data.turns)  # fails early (before the slow part) when bm25s is missing
    progress(f"{len(data.turns)} turns in {len(data.sessions)} sessions, {len(questions)} questions")
    params = RecallParams()
    if args.postings_per_term is not None:
        params = replace(params, postings_per_term=args.postings_per_term)
    if args.no_context:
        params = replace(params, context=None)
    if args.no_recency:
        params = replace(params, recency=None)
    if args.cosine_margin is not None:
        params = replace(params, selection=replace(params.selection, cosine_margin=args.cosine_margin))
    cache_reads = not args.no_read_cache
    semantic = build_semantic_channel(args.semantic, semantic_params(args.semantic_param))
    kaibo_run = run_kaibo(
        data,
        questions,
        budgets,
        params,
        cache_reads=cache_reads,
        structured=args.structured,
        semantic=semantic,
    )
    answers = with_reference(questions, kaibo_run.answers, bm25, budgets)
    results = {
        budget: {system: group_metrics(pairs) for system, pairs in by_system.items()}
        for budget, by_system in answers.items()
    }
    verdicts = checks(results)
    seconds = {"wall": time.perf_counter() - started} | kaibo_run.seconds
    run = Evaluation(
        data_path,
        data,
        questions,
        args.limit_questions,
        budgets,
        params,
        cache_reads,
        args.structured,
        kaibo_run.kaibo,
        answers,
        results,
        verdicts,
        seconds,
    )
    print("\n".join(report_lines(run)))
    if args.json is not None:
        args.json.write_text(json.dumps(results_json(run), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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
   ``kaibo_core.tokens.count_tokens``;

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

Speed (about 5 minutes on 2 cores instead of hours): two patches make moto 5.2.5 answer the same
responses much faster while this script runs (``faster_moto``), and the four recalls of a question
share one read of the term index and one fetch of each memory item (``CachedIndex``,
``CachedMemories``; ``--no-read-cache`` reads afresh every time and gives the same figures).
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import secrets
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
# The local stack lives in local/: make the script run from a clean checkout without PYTHONPATH too
# (kaibo_core is installed in the venv).
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

import snowballstemmer
from moto.core.serialize import BaseJSONSerializer
from moto.dynamodb.models.table import Table as MotoTable

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.clock import format_instant
from kaibo_core.embedded import RecordingQueue
from kaibo_core.ids import project_id
from kaibo_core.limits import MAX_EVENTS_PER_BATCH
from kaibo_core.models.api import RecallRequest, RememberRequest
from kaibo_core.models.memories import CorpusStats, MemoryRecord
from kaibo_core.services.recall import (
    MemoryReader,
    RecallParams,
    RecallService,
    TermIndex,
    TermReadLike,
)
from kaibo_core.services.remember import RememberService
from kaibo_core.services.structuring import StructuringService, StructuringStats
from kaibo_core.storage_keys import ProjectId
from kaibo_core.structuring.rules import RuleStructurer
from kaibo_core.tokens import count_tokens
from kaibo_local.emulator import start_emulator
from kaibo_local.template import create_tables, load_template

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


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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

#: The moto release the two emulator speed-ups below were written for and checked against.
MOTO_PATCHED_FOR: Final = "5.2.5"
#: Attribute values whose fast serialization is compared with moto's own before it is trusted.
SERIALIZER_CHECKS: Final = 20_000


class _Partition:
    """A moto table seen through one partition: ``all_items()`` holds only that partition's items."""

    def __init__(self, table: Any, items: list[Any]) -> None:
        self._table = table
        self._items = items

    def all_items(self) -> list[Any]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


_SCALAR_TYPES: Final = {"S": str, "N": str, "BOOL": bool, "NULL": bool}


def _plain_attribute_value(value: object) -> bool:
    """Is ``value`` an AttributeValue already in wire form (``{"S": "x"}``, ``{"L": [...]}``; no blobs)?"""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind in _SCALAR_TYPES:
        return isinstance(inner, _SCALAR_TYPES[kind])
    if kind in ("SS", "NS"):
        return isinstance(inner, list) and all(isinstance(v, str) for v in inner)
    if kind == "L":
        return isinstance(inner, list) and all(_plain_attribute_value(v) for v in inner)
    if kind == "M":
        return isinstance(inner, dict) and all(_plain_attribute_value(v) for v in inner.values())
    return False


@contextlib.contextmanager
def faster_moto() -> Iterator[list[str]]:
    """Two speed-ups of the emulator in this process, while the benchmark runs; same responses.

    moto 5.2.5 spends nearly all of a recall's time in two places:

    1. ``Table.query`` sorts *all* items of the table (``Table.all_items``) and keeps those of the
       queried partition: O(table) per Query, about a third of a second per term once the term index
       holds the postings of 2,760 turns. The patch hands moto's own ``Table.query`` a view of the
       table whose ``all_items()`` is just the partition, sorted as ``all_items`` sorts: same items,
       limits and ``LastEvaluatedKey``, O(partition). Index queries and tables without a sort key
       are left alone.
    2. Its generic response serializer walks every member of the ``AttributeValue`` shape for every
       attribute of every item (~2.5 ms per item: 87 % of the server's time in recall). Items are
       already in wire form (``{"S": "x"}``), so such values are copied through as they are. The
       first ``SERIALIZER_CHECKS`` values are also serialized moto's way and compared; a difference
       stops the benchmark.

    Applied only for moto ``MOTO_PATCHED_FOR`` (otherwise nothing is patched: slow, still correct).
    Yields what was patched.
    """
    version = importlib.metadata.version("moto")
    if version != MOTO_PATCHED_FOR:
        progress(f"moto {version}, not {MOTO_PATCHED_FOR}: the emulator is not sped up (recall will be slow)")
        yield []
        return
    original_query = MotoTable.query
    original_structure = BaseJSONSerializer._serialize_type_structure
    checks_left = [SERIALIZER_CHECKS]

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name is None and hash_key is not None and self.range_key_attr:
            partition = self.items.get(hash_key, {})
            self = _Partition(self, sorted(partition.values(), key=lambda item: item.range_key))
        return original_query(self, hash_key, *args, **kwargs)

    def structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue" and _plain_attribute_value(value):
            name = self.get_serialized_name(shape, key)
            if checks_left[0] > 0:
                checks_left[0] -= 1
                expected: dict[str, Any] = {}
                original_structure(self, expected, value, shape, key)
                if expected.get(name) != value:
                    raise RuntimeError(
                        f"fast AttributeValue serialization differs: {value!r} vs {expected!r}"
                    )
            serialized[name] = value
            return
        original_structure(self, serialized, value, shape, key)

    MotoTable.query = query  # type: ignore[method-assign]
    BaseJSONSerializer._serialize_type_structure = structure  # type: ignore[method-assign]
    try:
        yield ["Query reads only its partition", "wire-form AttributeValues copied through (checked)"]
    finally:
        MotoTable.query = original_query  # type: ignore[method-assign]
        BaseJSONSerializer._serialize_type_structure = original_structure  # type: ignore[method-assign]


class CachedIndex:
    """The term index, read once per question: the four recalls of a question (two budgets, two
    strategies) make the same read, and nothing is written while the questions run."""

    def __init__(self, index: TermIndex) -> None:
        self._index = index
        self._last: tuple[tuple[object, ...], tuple[Sequence[TermReadLike], CorpusStats]] | None = None

    def read(
        self, project: ProjectId, terms: Sequence[str], limit: int, history: bool
    ) -> tuple[Sequence[TermReadLike], CorpusStats]:
        key = (project, tuple(terms), limit, history)
        if self._last is None or self._last[0] != key:
            self._last = (key, self._index.read(project, terms, limit, history))
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


FAKE_AWS_ENV: Final = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}


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
        self, client: DynamoDBClient, tables: dict[str, str], cache_reads: bool, structured: bool = False
    ) -> None:
        self.project = ProjectId(project_id())
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
            self._remember = RememberService(self._events, memories=memories, jobs=self._queue)
            self._structuring = StructuringService(
                self._events,
                DynamoStructuringStore(client, tables["MemoriesTable"], tables["TermIndexTable"]),
                DynamoTermIndex(client, tables["TermIndexTable"]),
                RuleStructurer(),
            )
        else:
            self._remember = RememberService(
                DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]), memories=memories
            )
        index = DynamoTermIndex(client, tables["TermIndexTable"])
        self._index: TermIndex = CachedIndex(index) if cache_reads else index
        self._memories: MemoryReader = CachedMemories(memories) if cache_reads else memories
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

    def service(self, params: RecallParams) -> RecallService:
        return RecallService(self._index, self._memories, params=params)

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
            outcome = self._remember.remember(self.project, request)
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
        body, _stats = service.recall(
            self.project, RecallRequest.model_validate({"question": question, "budget": budget})
        )
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

    def ranked(self, question: str) -> list[int]:
        """Indexes of the turns with a positive score, best first (ties: corpus order)."""
        terms: list[str] = self._tokenize([question], return_ids=False)[0]
        ids = self._retriever.get_tokens_ids(terms)
        if not ids:
            return []
        scores = [float(score) for score in self._retriever.get_scores_from_ids(ids)]
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


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return [line(headers), rule, *(line(row) for row in rows)]


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


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with Path("/proc/cpuinfo").open() as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("moto", "bm25s", "numpy", "snowballstemmer")
    )
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {versions}"


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


def main(argv: Sequence[str] | None = None) -> int:
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
        "--postings-per-term",
        type=int,
        default=None,
        metavar="N",
        help="override RecallParams.postings_per_term (experiments; the frozen value is the default)",
    )
    args = parser.parse_args(argv)
    structured: bool = args.structured
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

    # Fake credentials, always: requests go to the local emulator only, and no real ones are needed.
    os.environ.update(FAKE_AWS_ENV)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    smallest_params = RecallParams()
    if args.postings_per_term is not None:
        smallest_params = replace(smallest_params, postings_per_term=args.postings_per_term)
    fill_params = replace(smallest_params, strategy="fill")
    cache_reads = not args.no_read_cache
    with faster_moto() as patched, start_emulator() as emulator:
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
        dynamodb_client.cache_clear()
        client = dynamodb_client()
        tables = create_tables(client, load_template(), secrets.token_hex(4))
        kaibo = Kaibo(client, tables, cache_reads, structured)
        loaded = time.perf_counter()
        for done, (conversation, _number, turns) in enumerate(data.sessions, start=1):
            kaibo.remember_session(conversation, turns)
            if done % 20 == 0 or done == len(data.sessions):
                elapsed = time.perf_counter() - loaded
                progress(f"  remembered {done}/{len(data.sessions)} sessions ({elapsed:.0f} s)")
        remember_seconds = time.perf_counter() - loaded
        structure_seconds = kaibo.structure_all() if structured else 0.0
        services = {KAIBO_SMALLEST: kaibo.service(smallest_params), KAIBO_FILL: kaibo.service(fill_params)}
        recalling = time.perf_counter()
        kaibo_answers = recall_all(kaibo, services, questions, budgets)
        recall_seconds = time.perf_counter() - recalling
    answers: dict[int, dict[str, list[tuple[Question, Answer]]]] = {
        budget: {system: [] for system in SYSTEMS} for budget in budgets
    }
    for question, by_system in zip(questions, kaibo_answers, strict=True):
        ranked = bm25.ranked(question.text)
        for budget in budgets:
            for system in (KAIBO_SMALLEST, KAIBO_FILL):
                answers[budget][system].append((question, by_system[system][budget]))
            answers[budget][BM25_REFERENCE].append((question, bm25.answer(ranked, budget)))
    results = {
        budget: {system: group_metrics(pairs) for system, pairs in by_system.items()}
        for budget, by_system in answers.items()
    }
    verdicts = checks(results)
    wall = time.perf_counter() - started

    out: list[str] = [
        "# Kaibo recall quality on LoCoMo (development conversations)"
        + (", structured memories" if structured else ""),
        "",
        f"Data: {data_path} — {len({t.conversation for t in data.turns})} conversations, "
        f"{len(data.turns)} turns, "
        f"{len(questions)} of {len(data.questions)} questions"
        + (f" (--limit-questions {args.limit_questions})" if len(questions) < len(data.questions) else "")
        + ".",
        f"Machine: {machine()}.",
        f"Kaibo: one project, stream = conversation, RecallParams() = {smallest_params!r}; "
        "'Kaibo fill' = the same with strategy='fill'.",
        f"BM25 reference: bm25s {BM25S_VERSION}, method={BM25_METHOD!r}, k1={BM25_K1}, b={BM25_B}, "
        f"tokens {BM25_TOKEN_PATTERN!r} lower-cased, bm25s' English stopwords, Snowball English stems; "
        "ONE index over all five conversations' turns (as Kaibo's one project); documents 'speaker: text' "
        "+ ' [image: caption]'; turns with a positive score packed in rank order while "
        "count_tokens(text) fits what is left of the budget (no abstain: an empty answer only when no "
        "turn shares a term with the question).",
        "Emulator: moto's server on loopback in this process, "
        + ("sped up in this process (" + "; ".join(patched) + ")" if patched else "moto unpatched")
        + "; "
        + (
            "the term index read once per question and each memory item fetched once (nothing is "
            "written while the questions run: the same answers as reading afresh)."
            if cache_reads
            else "every recall reads the index and the memory items afresh (--no-read-cache)."
        ),
        "Evidence recall: share of a question's gold evidence turns cited, averaged over the questions "
        "with evidence (abstentions count 0); precision: cited gold / cited turns over the questions "
        "citing >= 1 turn; mean usedTokens over all questions (abstentions count 0).",
    ]
    out[2:2] = [structuring_header(kaibo)] if structured else []
    if data.dropped_evidence:
        out.append(
            f"Evidence ids dropped while normalising ({len(data.dropped_evidence)}): "
            + ", ".join(data.dropped_evidence)
            + "."
        )
    if kaibo.index_failures:
        out.append(f"WARNING: {kaibo.index_failures} provisional memories failed to index (see stderr).")
    out.append("")
    for budget in budgets:
        out.extend(budget_tables(budget, results[budget]))
    out.extend(["## Targets", ""])
    out.extend(f"- {'PASS' if c.passed else 'FAIL'}: {c.name} — {c.detail}" for c in verdicts)
    out.extend(
        [
            "",
            f"Wall time {wall:.0f} s (remember {len(data.turns)} turns {remember_seconds:.0f} s; "
            + (f"structure {len(kaibo.job_ids)} jobs {structure_seconds:.0f} s; " if structured else "")
            + f"Kaibo recall {len(questions)} questions x {len(budgets)} budgets x 2 strategies "
            f"{recall_seconds:.0f} s).",
        ]
    )
    print("\n".join(out))
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "data": str(data_path),
                    "turns": len(data.turns),
                    "questions": len(questions),
                    "recallParams": repr(smallest_params),
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
                    "droppedEvidence": data.dropped_evidence,
                    "results": {
                        str(budget): {
                            system: {group: m.as_json() for group, m in by_group.items()}
                            for system, by_group in by_system.items()
                        }
                        for budget, by_system in results.items()
                    },
                    "targets": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in verdicts],
                    "perQuestion": per_question(answers, budgets),
                    "seconds": {"wall": wall, "remember": remember_seconds, "recall": recall_seconds}
                    | ({"structure": structure_seconds} if structured else {}),
                }
                | (structuring_json(kaibo) if structured else {}),
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

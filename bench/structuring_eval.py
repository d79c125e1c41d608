"""Structuring quality and cost: scenarios, LoCoMo, CPU, write units, wait. Prints tables; not a test.

Run from the repository root (``bench/README.md``)::

    make bench-structuring              # the full run, ~10 minutes on 2 cores
    make bench-structuring QUICK=1      # --quick, < 2 minutes
    PYTHONPATH=.:local .venv/bin/python bench/structuring_eval.py [--quick] [--data PATH] [--json PATH]

1. **Scenarios** (``tests/data/structuring_scenarios.json``) through the real pipeline:
   ``EmbeddedKaibo(RuleStructurer())``, one per scenario, each event remembered on its own in the
   scenario's arrival order and structured right after; recall at asOf = now (the latest event + 1 h).
   Type accuracy, supersession precision/recall (links read back from the stored memories),
   current-answer accuracy and stale answers, per category, against the issue's targets.
2. **LoCoMo** (``../shared/eval/locomo/locomo-dev.json``; skipped when absent): every turn a ``message``
   event, one project per conversation, structured in order; what the structurer made of it, and 30
   links sampled with a fixed seed for a manual audit. ``--quick``: the first conversation only.
3. **Cost**: (a) CPU per event of ``RuleStructurer.structure`` (with the real candidate search) and of
   the whole structure step, in memory; (b) DynamoDB write units per event of remember and of
   structuring, against the emulator in this process; (c) Bedrock calls and an *estimate* of the
   input tokens per event; (d) remember → structured with ``wait: true`` on the local stack.

Progress goes to stderr; the tables (markdown) to stdout.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
# The local stack lives in local/: make the script run from a clean checkout without PYTHONPATH too.
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

from bench.common import (
    CellStyle,
    Report,
    emulator_speedups,
    local_tables,
    machine,
    percentile,
    progress,
    real_stdout_only,
    total,
    update_size,
    write_units,
)
from bench.recall_cost import DynamoMeter
from bench.recall_quality import DEFAULT_DATA, PACKAGES, Turn, load_locomo
from kaibo.client import KaiboClient
from kaibo_core.adapters.bedrock_structurer import MAX_QUERY_CHARS
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore, PlanClaim
from kaibo_core.adapters.dynamodb_values import item_size
from kaibo_core.api.mapping import new_events
from kaibo_core.api.models import RememberRequest
from kaibo_core.core.clock import format_instant, instant_ms
from kaibo_core.core.ids import project_id
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.models.memories import CorpusStats, MemoryRecord, SourceEventRef, TermRead
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import (
    MAX_CANDIDATES,
    CandidateSearch,
    EventToStructure,
    MemoryDraft,
)
from kaibo_core.core.structuring.model_output import (
    OUTPUT_SCHEMA,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    build_user_message,
    new_nonce,
)
from kaibo_core.core.structuring.plan import CommitOutcome, StructuringCommit, structured_memory_id
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.tokens import count_tokens
from kaibo_core.core.webhooks import Notification
from kaibo_core.ports import Structurer
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.runtime.wiring import build_semantic_channel
from kaibo_core.services.remember import RememberService
from kaibo_core.services.structuring import StructuringService, StructuringStats
from kaibo_local.containers import DEFAULT_CONTAINERS
from kaibo_local.stack import start_stack

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from kaibo_core.services.semantic import SemanticChannel

SCENARIOS_PATH: Final = ROOT / "tests" / "data" / "structuring_scenarios.json"
#: Written by a helper who never read the structurer, frozen before any change to the rules, never
#: tuned on (#15): only its figures and per-category tallies are printed, not its misses.
HELDOUT_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout.json"
#: A second held-out set, written the same way after the rules changed (#15: confirms the figures).
HELDOUT2_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout2.json"
#: A third, written the same way while the rules changed again in session 14 (never read before its
#: one measurement): confirms the figures with the model on and off.
HELDOUT3_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout3.json"
#: A fourth, written the same way in session 23 after eight tuning sets and four rounds of rules
#: (sessions 20–23), by two helpers in one or two sentences per event: measured once on session 22's
#: code and once on session 23's.
HELDOUT4_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout4.json"
#: A fifth, written the same way at the start of session 26 before any change of that session (two
#: helpers, workplaces and personal life, asked for updates told without change words): measured on
#: session 25's code and at the end of session 26.
HELDOUT5_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout5.json"
#: A sixth, written the same way at the start of session 28 before any change of that session (two
#: helpers: organisations that are no software companies, and a person's life told to their assistant):
#: measured on session 27's code and at the end of session 28.
HELDOUT6_PATH: Final = ROOT / "tests" / "data" / "structuring_heldout6.json"
RECALL_BUDGET: Final = 300
DEFAULT_STREAM: Final = "s"
#: The issue's targets on the scenario set.
TARGET_PRECISION: Final = 0.95
TARGET_RECALL: Final = 0.85
TARGET_ANSWERS: Final = 0.9
TARGET_STALE: Final = 0
#: The unit guard's bar for types (tests/unit/test_structuring_scenarios.py), shown for reference.
GUARD_TYPES: Final = 0.8
AUDIT_LINKS: Final = 30
AUDIT_SEED: Final = 7
AUDIT_CHARS: Final = 160
MEMORY_TYPES: Final = ("fact", "decision", "task", "preference", "procedure", "episode")
#: Bedrock structurer: attempts per event (BedrockStructurer's default max_attempts).
BEDROCK_ATTEMPTS: Final = 2
#: remember calls with wait: true made before the measured ones (the stack's containers start cold).
WAIT_WARMUP: Final = 4


@dataclass(frozen=True)
class Sizes:
    conversations: int | None  # LoCoMo conversations (None: all)
    write_events: int  # events remembered and structured against the emulator
    wait_calls: int  # remember calls with wait: true on the local stack


FULL: Final = Sizes(conversations=None, write_events=200, wait_calls=30)
QUICK: Final = Sizes(conversations=1, write_events=50, wait_calls=10)

#: How this report writes values in its tables.
CELLS: Final = CellStyle(small_below=10, small=".3f", large=",.1f", none="-")


class Output(Report):
    """Markdown lines on stdout (flushed as they come), kept for the JSON dump's ``text``; a blank
    line after each table."""

    def __init__(self) -> None:
        super().__init__(layout="padded markdown", cells=CELLS)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        super().table(headers, rows)
        self.line()


def ratio(numerator: float, denominator: float, empty: float = 1.0) -> float:
    return numerator / denominator if denominator else empty


def short(text: str | None, limit: int = AUDIT_CHARS) -> str:
    flat = " ".join((text or "").split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def ms(seconds: float) -> float:
    return seconds * 1000.0


# --- The structurer, measured ---------------------------------------------------------------------


def fixed_prompt_tokens() -> int:
    """Tokens of what every Bedrock request carries besides the user message: the system prompt and
    the tool (name, description, JSON schema of the output)."""
    tool = json.dumps(
        {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "inputSchema": {"json": OUTPUT_SCHEMA}}
    )
    return count_tokens(SYSTEM_PROMPT) + count_tokens(tool)


class MeasuredStructurer:
    """``RuleStructurer`` with its CPU per event recorded (the candidate searches it makes included)
    and, after that and apart from it, an estimate of the prompt the Bedrock structurer would send
    for the same event (its search, then ``build_user_message``): CPU counted in ``overhead`` so the
    caller can take it out of its own measurement."""

    def __init__(self, estimate_prompts: bool, inner: Structurer | None = None) -> None:
        meaning = None if MEANING.channel is None else MEANING.channel.meaning
        self._rules: Structurer = inner if inner is not None else RuleStructurer(meaning)
        self.name = self._rules.name
        self._estimate = estimate_prompts
        self._fixed = fixed_prompt_tokens()
        self.cpu: list[float] = []
        self.prompt_tokens: list[int] = []
        self.candidates: list[int] = []
        self.overhead = 0.0

    def structure(self, event: EventToStructure, search: CandidateSearch) -> list[MemoryDraft]:
        started = time.process_time()
        drafts = self._rules.structure(event, search)
        self.cpu.append(time.process_time() - started)
        if self._estimate:
            started = time.process_time()
            # What BedrockStructurer.structure sends: its own search with the event's text.
            candidates = list(search(event.text.strip()[:MAX_QUERY_CHARS]))[:MAX_CANDIDATES]
            message = build_user_message(event, candidates, new_nonce(event.text))
            self.prompt_tokens.append(self._fixed + count_tokens(message))
            self.candidates.append(len(candidates))
            self.overhead += time.process_time() - started
        return drafts


@dataclass
class CpuSamples:
    structurer: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    source: str = ""

    def take(self, structurer: MeasuredStructurer) -> None:
        self.structurer.extend(structurer.cpu)
        self.prompt_tokens.extend(structurer.prompt_tokens)
        self.candidates.extend(structurer.candidates)


def structure_each(
    kaibo: EmbeddedKaibo, structurer: MeasuredStructurer, steps: list[float]
) -> StructuringStats:
    """Structure every job sent so far, one at a time, timing each (the prompt estimate taken out)."""
    pending, kaibo.queue.sent = kaibo.queue.sent, []
    total = StructuringStats()
    for project, job_id in pending:
        overhead = structurer.overhead
        started = time.process_time()
        stats = kaibo.structure(project, job_id)
        steps.append(time.process_time() - started - (structurer.overhead - overhead))
        total.add(stats)
    return total


def structured_memories(kaibo: EmbeddedKaibo, project: ProjectId) -> list[MemoryRecord]:
    """The project's structured memories that are switched on (not staged, not tombstoned)."""
    return [
        memory
        for (owner, _), memory in sorted(kaibo.memories.memories.items())
        if owner == project
        and memory.replaces is not None
        and memory.status in ("active", "superseded", "canceled")
    ]


# --- 1. Scenarios ---------------------------------------------------------------------------------

Link = tuple[str, str, str]  # (newer event key, older event key, kind)


@dataclass
class ScenarioResult:
    id: str
    category: str
    expected_links: set[Link]
    actual_links: set[Link]
    types: list[tuple[str, str, str, str]]  # key, expected, got, content of the first memory
    questions: list[dict[str, Any]]
    dates: list[tuple[str, str, bool]]  # key, wanted, found
    notes: list[str]

    @property
    def true_links(self) -> int:
        return len(self.expected_links & self.actual_links)


def repo_path(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def load_scenarios(path: Path = SCENARIOS_PATH) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != 1:
        raise SystemExit(f"{path}: unknown version {data.get('version')!r}")
    return list(data["scenarios"])


#: Background memories a scenario's project holds in the realistic variant: the first turns of
#: LoCoMo, as provisional memories valid months before the scenarios (so never linked: a
#: structurer's candidates are active memories), there to give the project a real vocabulary.
BACKGROUND_TURNS: Final = 300
BACKGROUND_START: Final = datetime(2026, 1, 1, tzinfo=UTC)


def background_memories(data_path: Path) -> list[MemoryRecord]:
    """The background corpus (empty without LoCoMo data)."""
    if not data_path.exists():
        return []
    turns = load_locomo(data_path).turns[:BACKGROUND_TURNS]
    return [
        MemoryRecord(
            project_id="",
            id=f"mem_BG{number:024d}",
            status="provisional",
            type="episode",
            content=f"{turn.speaker}: {turn.text}",
            valid_from=format_instant(BACKGROUND_START + timedelta(minutes=number)),
            valid_to=None,
            confidence=0.5,
            stream="background",
            source_events=(SourceEventRef(f"evt_BG{number:024d}", "background", number + 1, "0" * 64),),
            created_at=format_instant(BACKGROUND_START),
        )
        for number, turn in enumerate(turns)
    ]


@dataclass
class ScenarioRun:
    """A scenario remembered and structured, event by event, in its own ``EmbeddedKaibo``."""

    kaibo: EmbeddedKaibo
    project: ProjectId
    now: datetime
    memory_ids: dict[str, list[str]] = field(default_factory=dict)  # event key -> its job's memory ids
    first_memory: dict[str, str] = field(default_factory=dict)  # event key -> its first memory's id
    key_of_event: dict[str, str] = field(default_factory=dict)  # event id -> event key
    notes: list[str] = field(default_factory=list)


#: Makes the structurer of one scenario's ``EmbeddedKaibo`` (None: the rules, with the Bedrock
#: prompt estimate); ``bench/structuring_bedrock.py`` passes the Bedrock structurer's.
StructurerFactory = Callable[[], Structurer]


@dataclass
class _Meaning:
    """``--semantic``: recall by meaning's channel for every scenario's Kaibo (memories placed, the
    rules reading updates by meaning too), as the structure function runs with the model on."""

    channel: SemanticChannel | None = None


MEANING = _Meaning()


def remember_scenario(
    scenario: dict[str, Any],
    cpu: CpuSamples,
    background: Sequence[MemoryRecord] = (),
    make_structurer: StructurerFactory | None = None,
) -> ScenarioRun:
    """Remember every event in the scenario's arrival order, each structured right after."""
    events = {event["key"]: event for event in scenario["events"]}
    arrival: list[str] = scenario.get("arrival") or [event["key"] for event in scenario["events"]]
    latest = max(datetime.fromisoformat(event["occurredAt"]) for event in scenario["events"])
    now = (latest + timedelta(hours=1)).astimezone(UTC)
    structurer = (
        MeasuredStructurer(estimate_prompts=True)
        if make_structurer is None
        else MeasuredStructurer(estimate_prompts=False, inner=make_structurer())
    )
    run = ScenarioRun(
        EmbeddedKaibo(structurer, clock=lambda: now, semantic=MEANING.channel), ProjectId(project_id()), now
    )
    for memory in background:
        run.kaibo.memories.index_new(replace(memory, project_id=run.project))
    for key in arrival:
        raw = events[key]
        body = scenario_event_body(run, f"{scenario['id']}:{key}", key, raw)
        outcome = run.kaibo.remember(
            run.project, {"stream": raw.get("stream", DEFAULT_STREAM), "events": [body]}
        )
        event_id = outcome.events[0].record.id
        run.key_of_event[event_id] = key
        stats = structure_each(run.kaibo, structurer, cpu.step)
        run.memory_ids[key] = list(stats.memory_ids)
        run.first_memory[key] = structured_memory_id(provisional_memory_id(event_id), 1)
    cpu.take(structurer)
    return run


def scenario_event_body(
    run: ScenarioRun, idempotency_key: str, key: str, raw: dict[str, Any]
) -> dict[str, Any]:
    """A scenario event as remember takes it; ``supersedes``/``cancels`` name the structured
    memories of the events they name (an event not structured yet is dropped, with a note)."""
    body: dict[str, Any] = {
        "kind": "message",
        "idempotencyKey": idempotency_key,
        "occurredAt": raw["occurredAt"],
        "payload": {"role": "user", "text": raw["text"]},
    }
    if raw.get("timeZone"):
        body["timeZone"] = raw["timeZone"]
    for field_name in ("supersedes", "cancels"):
        if raw.get(field_name):
            ids: list[str] = []
            for old in raw.get(field_name, []):
                if old not in run.memory_ids:
                    run.notes.append(f"{key}.{field_name} names {old}, not structured yet: dropped")
                    continue
                ids.extend(run.memory_ids[old])
            body[field_name] = ids
    return body


def made_links(stored: Sequence[MemoryRecord], key_of_event: dict[str, str]) -> set[Link]:
    """The links the stored memories record: (newer event key, older event key, kind)."""
    by_id = {memory.id: memory for memory in stored}

    def event_key(memory: MemoryRecord) -> str:
        return key_of_event.get(memory.source_event_ids[0], "?")

    actual: set[Link] = set()
    for memory in stored:
        if memory.status not in ("superseded", "canceled"):
            continue
        kind = "cancels" if memory.status == "canceled" else "supersedes"
        for newer_id in memory.superseded_by:
            newer = by_id.get(newer_id)
            if newer is not None:
                actual.add((event_key(newer), event_key(memory), kind))
    return actual


def ask_questions(run: ScenarioRun, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recall each question at its ``asOf`` (default: now); the top item, whether it holds the
    answer, stale items (at a past asOf: items holding a value that came later)."""
    questions = []
    for item in items:
        as_of = item.get("asOf") or format_instant(run.now)
        answer = run.kaibo.recall(
            run.project, {"question": item["question"], "budget": RECALL_BUDGET, "asOf": as_of}
        )
        texts = [str(returned["text"]) for returned in answer["items"]]
        top = texts[0] if texts else None
        # An old value is a leak when presented as current: an item recall marks ``olderThan`` (a
        # newer item of the same answer answers the question too) is cited as older (#15, item 3).
        holding = [
            returned
            for returned in answer["items"]
            if any(s.lower() in str(returned["text"]).lower() for s in item["stale"])
        ]
        stale = [str(returned["text"]) for returned in holding if not returned.get("olderThan")]
        marked = [str(returned["text"]) for returned in holding if returned.get("olderThan")]
        questions.append(
            {
                "question": item["question"],
                "answer": item["answer"],
                "past": "asOf" in item,
                "top": top,
                "correct": top is not None and item["answer"].lower() in top.lower(),
                "stale": stale,
                "staleMarked": marked,
                "items": len(texts),
                "abstained": (answer["abstain"].get("reason") or "yes")
                if answer["abstain"]["abstained"]
                else None,
            }
        )
    return questions


def run_scenario(
    scenario: dict[str, Any],
    cpu: CpuSamples,
    background: Sequence[MemoryRecord] = (),
    make_structurer: StructurerFactory | None = None,
) -> ScenarioResult:
    run = remember_scenario(scenario, cpu, background, make_structurer)
    stored = structured_memories(run.kaibo, run.project)
    by_id = {memory.id: memory for memory in stored}
    actual = made_links(stored, run.key_of_event)
    expect = scenario["expect"]
    types: list[tuple[str, str, str, str]] = []
    for key, wanted in expect.get("types", {}).items():
        first = run.kaibo.memories.get(run.project, run.first_memory[key])
        types.append((key, wanted, first.type if first else "(none)", (first.content or "") if first else ""))
    contents = {
        key: " | ".join(by_id[m].content or "" for m in ids if m in by_id)
        for key, ids in run.memory_ids.items()
    }
    dates = [
        (key, wanted, wanted in contents.get(key, ""))
        for key, wanted_dates in expect.get("dates", {}).items()
        for wanted in wanted_dates
    ]
    questions = ask_questions(run, expect.get("questions", []))
    expected = {(str(n), str(o), str(k)) for n, o, k in expect["links"]}
    if "task" in scenario["category"] or scenario["category"] == "meeting_cancelled":
        actual = either_kind_closes(actual, expected)
    return ScenarioResult(
        scenario["id"], scenario["category"], expected, actual, types, questions, dates, run.notes
    )


def either_kind_closes(actual: set[Link], expected: set[Link]) -> set[Link]:
    """A completed task's or a cancelled meeting's link counted right whichever kind it has: the
    issue lets a completed task cancel *or close* its open task, and the sets' writers labelled
    either way (held-out 1 ``supersedes``, held-out 2 ``cancels``; held-out 5 and 6 label a
    cancelled meeting ``supersedes``, the kind their writers were told of, where the structurer
    links it ``cancels``, as API.md has it). Only the pair of events must match."""
    labelled = {(new, old): kind for new, old, kind in expected}
    return {(new, old, labelled.get((new, old), kind)) for new, old, kind in actual}


@dataclass
class Tally:
    scenarios: int = 0
    expected: int = 0
    predicted: int = 0
    true: int = 0
    types: int = 0
    types_right: int = 0
    questions: int = 0
    answered: int = 0
    stale: int = 0
    abstained: int = 0
    dates: int = 0
    dates_right: int = 0
    updates: int = 0  # scenarios that expect a link
    chains_right: int = 0  # of which every expected link was made, and no other
    distractors: int = 0
    falsely_linked: int = 0  # distractors in which any link was made
    questions_now: int = 0
    answered_now: int = 0
    leaked_now: int = 0  # questions at asOf = now with an item holding only a superseded value
    cited_old_now: int = 0  # of which, or with such an item marked olderThan
    questions_past: int = 0
    answered_past: int = 0
    leaked_future: int = 0  # questions at a past asOf with an item holding a later value

    def add(self, result: ScenarioResult) -> None:
        self.scenarios += 1
        if result.category.startswith("distractor"):
            self.distractors += 1
            self.falsely_linked += bool(result.actual_links)
        elif result.expected_links:
            self.updates += 1
            self.chains_right += result.actual_links == result.expected_links
        for question in result.questions:
            if question.get("past"):
                self.questions_past += 1
                self.answered_past += bool(question["correct"])
                self.leaked_future += bool(question["stale"])
            else:
                self.questions_now += 1
                self.answered_now += bool(question["correct"])
                self.leaked_now += bool(question["stale"])
                self.cited_old_now += bool(question["stale"] or question.get("staleMarked"))
        self.expected += len(result.expected_links)
        self.predicted += len(result.actual_links)
        self.true += result.true_links
        self.types += len(result.types)
        self.types_right += sum(1 for _, wanted, got, _ in result.types if wanted == got)
        self.questions += len(result.questions)
        self.answered += sum(1 for q in result.questions if q["correct"])
        self.stale += sum(1 for q in result.questions if q["stale"])
        self.abstained += sum(1 for q in result.questions if q["abstained"])
        self.dates += len(result.dates)
        self.dates_right += sum(1 for _, _, found in result.dates if found)

    @property
    def precision(self) -> float:
        return ratio(self.true, self.predicted)

    @property
    def recall(self) -> float:
        return ratio(self.true, self.expected)

    def row(self, name: str) -> list[object]:
        return [
            name,
            self.scenarios,
            self.expected,
            self.predicted,
            self.true,
            self.precision if self.predicted else None,
            self.recall if self.expected else None,
            f"{self.types_right}/{self.types}",
            f"{self.answered}/{self.questions}" if self.questions else "-",
            self.stale if self.questions else "-",
            self.abstained if self.questions else "-",
            f"{self.dates_right}/{self.dates}" if self.dates else "-",
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "precision": self.precision,
            "recall": self.recall,
            "typeAccuracy": ratio(self.types_right, self.types),
            "answerAccuracy": ratio(self.answered, self.questions),
        }


def link_text(link: Link) -> str:
    newer, older, kind = link
    return f"{newer} {kind} {older}"


def misses(result: ScenarioResult) -> list[str]:
    found: list[str] = []
    missing = sorted(result.expected_links - result.actual_links)
    extra = sorted(result.actual_links - result.expected_links)
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(link_text(link) for link in missing))
        if extra:
            parts.append("unexpected " + ", ".join(link_text(link) for link in extra))
        found.append(f"links: {'; '.join(parts)}")
    for key, wanted, got, content in result.types:
        if wanted != got:
            found.append(f"type of {key}: expected {wanted}, got {got} ({short(content, 100)!r})")
    for question in result.questions:
        if not question["correct"]:
            found.append(
                f"question {question['question']!r}: expected {question['answer']!r} in the top item, "
                f"got {short(question['top'], 120)!r}"
                if question["top"] is not None
                else f"question {question['question']!r}: expected {question['answer']!r}, recall abstained "
                f"({question['abstained']}) and returned no item"
            )
        for text in question["stale"]:
            found.append(f"stale answer to {question['question']!r}: {short(text, 120)!r}")
    for key, wanted, ok in result.dates:
        if not ok:
            found.append(f"date of {key}: {wanted!r} not in its memories")
    found.extend(f"note: {note}" for note in result.notes)
    return found


def section_scenarios(
    out: Output,
    cpu: CpuSamples,
    data_path: Path,
    path: Path = SCENARIOS_PATH,
    *,
    held_out: bool = False,
    make_structurer: StructurerFactory | None = None,
    structurer_label: str = "RuleStructurer()",
    limit: int | None = None,
) -> dict[str, Any]:
    """Section 1 on one scenario file. With ``make_structurer`` (a model's structurer) the
    scenarios run once, with the background when there is one: the empty-project run is skipped,
    as every run costs model calls."""
    scenarios = load_scenarios(path)[:limit]
    background = background_memories(data_path)
    progress(f"{path.name}: {len(scenarios)} scenarios through EmbeddedKaibo({structurer_label}) ...")
    isolated: list[ScenarioResult] = []
    if make_structurer is None or not background:
        isolated = [run_scenario(scenario, CpuSamples(), (), make_structurer) for scenario in scenarios]
    results = (
        [run_scenario(scenario, cpu, background, make_structurer) for scenario in scenarios]
        if background
        else isolated
    )
    overall, by_category = tally_results(results)
    scenarios_intro(out, scenarios, background, path, held_out=held_out, structurer_label=structurer_label)
    out.table(SCENARIO_HEADERS, [overall.row("**all**")])
    out("Per category (`distractor_*`: no link should be made):", "")
    out.table(SCENARIO_HEADERS, [tally.row(name) for name, tally in sorted(by_category.items())])
    targets = scenario_targets(overall)
    out("Targets (the issue's):", "")
    out.table(
        ["figure", "target", "measured", "verdict"],
        [[name, target, value, "met" if met else "MISSED"] for name, target, value, met in targets]
        + [
            [
                "type accuracy",
                f"(unit guard: >= {GUARD_TYPES})",
                ratio(overall.types_right, overall.types),
                "-",
            ]
        ],
    )
    alone, _ = tally_results(isolated)
    if background and isolated:
        out(
            "The same scenarios in empty projects (no background memories): "
            f"precision {alone.precision:.3f}, recall {alone.recall:.3f}, current-answer accuracy "
            f"{ratio(alone.answered, alone.questions):.3f} ({alone.answered} of {alone.questions}; recall "
            f"abstained on {alone.abstained}), stale {alone.stale}.",
            "",
        )
    answered = overall.questions - overall.abstained
    out(
        f"Recall abstained on {overall.abstained} of {overall.questions} questions (no item returned); "
        f"on the {answered} it answered, the top item held the answer {overall.answered} times "
        f"({ratio(overall.answered, answered):.3f}).",
        "",
    )
    listed = [(result.id, line) for result in results for line in misses(result)]
    if held_out:
        out(
            f"Misses: {len(listed)}, not listed here (held-out: read them for the report, never to tune).", ""
        )
    else:
        out(f"Misses ({len(listed)}):", "")
        out(*(f"- `{sid}`: {line}" for sid, line in listed) if listed else ["- none"])
        out("")
    return {
        "figures": figures(overall),
        "overall": overall.as_json(),
        "emptyProjects": alone.as_json(),
        "backgroundMemories": len(background),
        "categories": {name: tally.as_json() for name, tally in sorted(by_category.items())},
        "targets": [{"name": n, "target": t, "value": v, "met": m} for n, t, v, m in targets],
        "misses": [{"scenario": sid, "miss": line} for sid, line in listed],
        "scenarios": [scenario_json(result) for result in results],
    }


#: The issue's figures (#15) and their targets on the held-out set: (name, key, target, higher is better).
FIGURES: Final = (
    ("current-answer accuracy (top item, asOf = now)", "currentAnswer", 0.90, True),
    ("stale-answer leak rate (asOf = now; an old value not marked olderThan)", "staleLeaks", 0.05, False),
    ("old value cited at all, marked olderThan or not (asOf = now)", "oldCited", None, False),
    ("explain-chain accuracy (every version linked, nothing else)", "chains", 0.85, True),
    ("false-supersession rate (distractors linked)", "falseSupersessions", 0.05, False),
    ("link precision", "linkPrecision", None, True),
    ("link recall", "linkRecall", None, True),
    ("past-asOf accuracy", "pastAnswer", None, True),
    ("future leaks at a past asOf", "futureLeaks", None, False),
    ("dates resolved (year added, relative dates)", "dates", None, True),
)


def figures(tally: Tally) -> dict[str, float | None]:
    """The FIGURES of one set (None where the set has nothing to measure it on)."""

    def share(part: int, whole: int) -> float | None:
        return part / whole if whole else None

    return {
        "currentAnswer": share(tally.answered_now, tally.questions_now),
        "staleLeaks": share(tally.leaked_now, tally.questions_now),
        "oldCited": share(tally.cited_old_now, tally.questions_now),
        "chains": share(tally.chains_right, tally.updates),
        "falseSupersessions": share(tally.falsely_linked, tally.distractors),
        "linkPrecision": share(tally.true, tally.predicted),
        "linkRecall": share(tally.true, tally.expected),
        "pastAnswer": share(tally.answered_past, tally.questions_past),
        "futureLeaks": share(tally.leaked_future, tally.questions_past),
        "dates": share(tally.dates_right, tally.dates),
    }


def section_side_by_side(
    out: Output, own: dict[str, Any], held_out: dict[str, Any], label: str = "held-out set"
) -> None:
    out(
        "## 1c. Own set and held-out set side by side",
        "",
        "The own set was written with the rules (consistency); the held-out set without them "
        "(generalisation). Targets apply to the held-out set.",
        "",
    )

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = []
    for name, key, target, higher in FIGURES:
        value = held_out["figures"][key]
        verdict = "-"
        if target is not None and value is not None:
            verdict = "met" if (value >= target if higher else value <= target) else "MISSED"
        goal = "-" if target is None else f"{'>=' if higher else '<='} {target:.2f}"
        rows.append([name, shown(own["figures"][key]), shown(value), goal, verdict])
    out.table(["figure", "own set", label, f"target ({label})", "verdict"], rows)


def tally_results(results: Iterable[ScenarioResult]) -> tuple[Tally, dict[str, Tally]]:
    """The results summed, over all and per category."""
    overall = Tally()
    by_category: dict[str, Tally] = defaultdict(Tally)
    for result in results:
        overall.add(result)
        by_category[result.category].add(result)
    return overall, by_category


def scenarios_intro(
    out: Output,
    scenarios: Sequence[dict[str, Any]],
    background: Sequence[MemoryRecord],
    path: Path,
    *,
    held_out: bool,
    structurer_label: str = "RuleStructurer()",
) -> None:
    events = sum(len(s["events"]) for s in scenarios)
    out(
        "## 1b. Held-out scenarios (written without the rules, never tuned on)"
        if held_out
        else "## 1. Labelled scenarios through the real pipeline (written with the rules)",
        "",
        f"{len(scenarios)} scenarios, {events} events ({repo_path(path)}). Each scenario: a "
        f"fresh `EmbeddedKaibo({structurer_label})`, every event remembered on its own in the scenario's "
        "arrival order and structured at once; explicit `supersedes`/`cancels` name the earlier event's "
        "structured memories. Links are read back from the stored memories (a superseded or canceled "
        f"memory and its `supersededBy`), one per event pair. Questions: recall at asOf = now (the latest "
        f"event + 1 h), budget {RECALL_BUDGET}; correct when the top item contains the answer; stale when "
        "any returned item contains a phrase only the old memory says.",
        "",
        f"Each scenario's project also holds {len(background)} background memories (the first LoCoMo "
        "turns, provisional, valid months earlier), so that its vocabulary is a real project's: in a "
        "project of three memories every question word that no memory says holds nearly all of the "
        "question's idf weight, and recall's coverage threshold abstains. The same run in empty "
        "projects is reported below the targets."
        if background
        else "No LoCoMo data: each scenario runs in an empty project (recall abstains more there).",
        "",
    )


SCENARIO_HEADERS: Final = (
    "",
    "scenarios",
    "links expected",
    "links made",
    "right",
    "precision",
    "recall",
    "types",
    "answers",
    "stale",
    "abstained",
    "dates",
)


def scenario_targets(overall: Tally) -> list[tuple[str, str, float, bool]]:
    """The issue's targets: (figure, target, measured, met)."""
    answer_accuracy = ratio(overall.answered, overall.questions)
    return [
        (
            "supersession precision",
            f">= {TARGET_PRECISION}",
            overall.precision,
            overall.precision >= TARGET_PRECISION,
        ),
        ("supersession recall", f">= {TARGET_RECALL}", overall.recall, overall.recall >= TARGET_RECALL),
        (
            "current-answer accuracy",
            f">= {TARGET_ANSWERS}",
            answer_accuracy,
            answer_accuracy >= TARGET_ANSWERS,
        ),
        ("stale answers", f"= {TARGET_STALE}", overall.stale, overall.stale <= TARGET_STALE),
    ]


def scenario_json(result: ScenarioResult) -> dict[str, Any]:
    return {
        "id": result.id,
        "category": result.category,
        "expectedLinks": sorted(result.expected_links),
        "actualLinks": sorted(result.actual_links),
        "types": result.types,
        "questions": result.questions,
        "dates": result.dates,
    }


# --- 2. LoCoMo ------------------------------------------------------------------------------------


@dataclass
class ConversationResult:
    conversation: str
    turns: int
    stats: StructuringStats
    types: Counter[str]
    #: (sort key, kind, old memory's content, new memory's content, the new memory's turn)
    links: list[tuple[tuple[int, int, int, int], str, str, str, str]]

    def row(self) -> list[object]:
        return [
            self.conversation,
            self.turns,
            self.stats.memories,
            *(self.types.get(name, 0) for name in MEMORY_TYPES),
            self.stats.superseded,
            self.stats.canceled,
            self.stats.filed_as_history,
        ]


def event_body(turn: Turn) -> dict[str, Any]:
    return {
        "kind": "message",
        "idempotencyKey": turn.key,
        "occurredAt": turn.occurred_at,
        "payload": turn.payload(),
    }


def run_conversation(conversation: str, turns: Sequence[Turn], cpu: CpuSamples) -> ConversationResult:
    structurer = MeasuredStructurer(estimate_prompts=True)
    kaibo = EmbeddedKaibo(structurer, semantic=MEANING.channel)
    project = ProjectId(project_id())
    total = StructuringStats()
    order: dict[str, int] = {}  # event id -> position of its turn
    for position, turn in enumerate(turns):
        outcome = kaibo.remember(project, {"stream": conversation, "events": [event_body(turn)]})
        order[outcome.events[0].record.id] = position
        total.add(structure_each(kaibo, structurer, cpu.step))
    cpu.take(structurer)
    stored = structured_memories(kaibo, project)
    by_id = {memory.id: memory for memory in stored}

    def place(memory: MemoryRecord) -> tuple[int, int]:
        return order.get(memory.source_event_ids[0], -1), int(memory.id.rsplit("-", 1)[1])

    links = []
    for memory in stored:
        if memory.status not in ("superseded", "canceled"):
            continue
        for newer_id in memory.superseded_by:
            newer = by_id.get(newer_id)
            if newer is None:
                continue
            kind = "cancels" if memory.status == "canceled" else "supersedes"
            if instant_ms(memory.valid_from) > instant_ms(newer.valid_from):
                kind += " (filed as history)"
            turn = turns[place(newer)[0]]
            links.append(
                (
                    (*place(memory), *place(newer)),
                    kind,
                    memory.content or "",
                    newer.content or "",
                    f"{turn.speaker}: {turn.text}",
                )
            )
    links.sort()
    return ConversationResult(conversation, len(turns), total, Counter(m.type for m in stored), links)


def section_locomo(out: Output, data_path: Path, sizes: Sizes, cpu: CpuSamples) -> dict[str, Any] | None:
    out("## 2. LoCoMo: what the rules make of real conversations", "")
    if not data_path.is_file():
        out(f"skipped: LoCoMo data not found at {data_path} (pass --data PATH).", "")
        progress(f"2. skipped: no LoCoMo data at {data_path}")
        return None
    data = load_locomo(data_path)
    by_conversation: dict[str, list[Turn]] = {}
    for turn in data.turns:
        by_conversation.setdefault(turn.conversation, []).append(turn)
    names = list(by_conversation)[: sizes.conversations]
    results = []
    for name in names:
        progress(f"2. LoCoMo {name}: {len(by_conversation[name])} turns ...")
        results.append(run_conversation(name, by_conversation[name], cpu))
    cpu.source = f"LoCoMo turns ({', '.join(names)})"
    total = ConversationResult("**total**", 0, StructuringStats(), Counter(), [])
    for result in results:
        total.turns += result.turns
        total.stats.add(result.stats)
        total.types.update(result.types)
    out(
        f"{data_path}: {len(names)} of {len(by_conversation)} conversations"
        + (" (--quick: the first only)" if len(names) < len(by_conversation) else "")
        + ". Every turn a `message` event (`Turn.payload()`: speaker as `name`, image captions as "
        "attachments), stream = conversation, `occurredAt` = the session's date + the turn's index in "
        "seconds, one remember call per turn and structured right after it, one project per "
        "conversation. *structured*: the memories the structurer made (each turn's provisional memory "
        "replaced by them); *superseded/canceled*: older memories the conversation's later turns retired; "
        "*filed as history*: statements older than the memory they link to (none expected: turns arrive "
        "in order).",
        "",
    )
    out.table(
        ["conversation", "turns", "structured", *MEMORY_TYPES, "superseded", "canceled", "filed as history"],
        [result.row() for result in results] + [total.row()],
    )
    all_links = [(result.conversation, *link) for result in results for link in result.links]
    sample = random.Random(AUDIT_SEED).sample(all_links, min(AUDIT_LINKS, len(all_links)))
    sample.sort(key=lambda link: (link[0], link[1]))
    out(
        f"{len(sample)} of the {len(all_links)} links, sampled with random.Random({AUDIT_SEED}) (links "
        f"sorted by conversation and turn first), for a manual audit; texts cut at {AUDIT_CHARS} characters:",
        "",
    )
    if sample:
        out.table(
            ["#", "conversation", "kind", "old memory", "new memory", "the new memory's turn"],
            [
                [i, conv, kind, short(old), short(new), short(said)]
                for i, (conv, _, kind, old, new, said) in enumerate(sample, 1)
            ],
        )
    else:
        out("(no link was made: nothing to audit)", "")
    return {
        "data": str(data_path),
        "conversations": [
            {
                "conversation": r.conversation,
                "turns": r.turns,
                "structured": r.stats.memories,
                "types": dict(r.types),
                "superseded": r.stats.superseded,
                "canceled": r.stats.canceled,
                "filedAsHistory": r.stats.filed_as_history,
                "refused": r.stats.refused,
                "conflicts": r.stats.conflicts,
            }
            for r in results
        ],
        "links": len(all_links),
        "auditSample": [
            {"conversation": conv, "kind": kind, "old": old, "new": new, "newTurn": said}
            for conv, _, kind, old, new, said in sample
        ],
    }


# --- 3a. CPU and 3c. Bedrock estimate -------------------------------------------------------------


def distribution(values: Sequence[float]) -> list[float]:
    return [percentile(values, 0.5), percentile(values, 0.95), sum(values) / len(values) if values else 0.0]


def section_cpu(out: Output, cpu: CpuSamples) -> dict[str, Any]:
    out(
        "## 3. Cost",
        "",
        "### 3a. CPU per event, in memory",
        "",
        f"Over {len(cpu.step)} events ({cpu.source}), `time.process_time()` deltas in this process. "
        "*structurer*: `RuleStructurer.structure` with the real candidate search (`CandidateFinder` over the "
        "in-memory term index: postings read, BM25, memory items checked); *structure step*: "
        "`StructuringService.structure_job` of a one-event job (job start, provisional memory, plan, "
        "link resolution, staging with indexing, commit, unindexing, postings moved, job finish) on the "
        "in-memory stores: no I/O, so this is the Python work a worker does besides its DynamoDB calls.",
        "",
    )
    rows = [
        ["structurer (RuleStructurer.structure + search)", *(ms(v) for v in distribution(cpu.structurer))],
        ["whole structure step (structure_job)", *(ms(v) for v in distribution(cpu.step))],
    ]
    out.table(["", "p50 ms", "p95 ms", "mean ms"], rows)
    return {
        "source": cpu.source,
        "events": len(cpu.step),
        "structurerMs": dict(
            zip(("p50", "p95", "mean"), (ms(v) for v in distribution(cpu.structurer)), strict=True)
        ),
        "stepMs": dict(zip(("p50", "p95", "mean"), (ms(v) for v in distribution(cpu.step)), strict=True)),
    }


def section_bedrock(out: Output, cpu: CpuSamples) -> dict[str, Any]:
    tokens = [float(t) for t in cpu.prompt_tokens]
    fixed = fixed_prompt_tokens()
    p50, p95, mean = distribution(tokens)
    out(
        "### 3c. Bedrock structurer (not run: no network here)",
        "",
        f"Model calls per event: **1** (+ retries: at most {BEDROCK_ATTEMPTS} attempts; after that, or on a "
        "non-retryable error, the rules answer instead). Input tokens per event: **an estimate**, "
        "`kaibo_core.core.tokens.count_tokens` (a conservative upper count for common BPE tokenizers) over "
        "the exact request text: `SYSTEM_PROMPT` + the tool (name, description, JSON schema) = "
        f"{fixed} tokens on every call, + `build_user_message(event, candidates, nonce)` with the "
        f"candidates the Bedrock structurer's own search (the event's text, at most {MAX_QUERY_CHARS} "
        f"characters) finds among the memories the rules made, over {len(tokens)} events ({cpu.source}). "
        "Not counted: the provider's own tool-use preamble and the output tokens (the model's JSON: "
        "depends on the model).",
        "",
    )
    out.table(
        ["", "p50", "p95", "mean"],
        [
            ["estimated input tokens per call", p50, p95, mean],
            ["  of which the user message", p50 - fixed, p95 - fixed, mean - fixed],
            ["candidates in the prompt", *distribution([float(c) for c in cpu.candidates])],
        ],
    )
    return {
        "callsPerEvent": 1,
        "maxAttempts": BEDROCK_ATTEMPTS,
        "fixedTokens": fixed,
        "estimatedInputTokens": {"p50": p50, "p95": p95, "mean": mean},
        "events": len(tokens),
    }


# --- 3b. DynamoDB write units per event ----------------------------------------------------------


#: Counter names of the updates of memory and job items, to re-price them at the item's size.
UPDATE_PREFIX: Final = "update|"


def item_key(table: str, key: dict[str, Any]) -> str:
    return f"{table}|{json.dumps(key, sort_keys=True)}"


class StructuringMeter(DynamoMeter):
    """DynamoMeter with the Jobs table named, single-item UpdateItems estimated like the
    transactional ones (the key plus the attributes they set) instead of the key alone, and every
    update of a memory or job item also counted by item (``update|<txn>|<units>|<table>|<key>``), so
    that it can be priced again at the item's stored size once the run is over (DynamoDB bills an
    update at the larger of the item's sizes before and after it)."""

    def __init__(self, client: DynamoDBClient, tables: dict[str, str]) -> None:
        super().__init__(client, tables)
        self._part[tables["JobsTable"]] = "jobs"
        self._priced_again = {tables["MemoriesTable"], tables["JobsTable"]}

    def _writes(self, operation: str, body: dict[str, Any]) -> defaultdict[str, float]:
        writes = super()._writes(operation, body)
        updates: list[tuple[dict[str, Any], bool]] = [
            (action["Update"], True) for action in body.get("TransactItems", []) if "Update" in action
        ]
        if operation == "UpdateItem":
            part = self._part.get(body.get("TableName", ""), "other")
            estimate = write_units(update_size(body), False)
            writes[f"wcu:{part}"] += estimate - write_units(item_size(body["Key"]), False)
            updates.append((body, False))
        for spec, transactional in updates:
            if spec["TableName"] in self._priced_again:
                units = write_units(update_size(spec), transactional)
                name = (
                    f"{UPDATE_PREFIX}{int(transactional)}|{units}|{item_key(spec['TableName'], spec['Key'])}"
                )
                writes[name] += 1
        return writes


def repriced_units(counts: dict[str, float], sizes: dict[str, int]) -> float:
    """Write units to add to ``counts`` when its memory and job updates are billed at the item's
    stored size (at least the estimate: the stored size stands for the larger of before and after)."""
    extra = 0.0
    for name, times in counts.items():
        if not name.startswith(UPDATE_PREFIX) or not times:
            continue
        transactional, units, key = name[len(UPDATE_PREFIX) :].split("|", 2)
        stored = write_units(sizes.get(key, 0), transactional == "1")
        extra += times * max(0, stored - int(units))
    return extra


def stored_sizes(client: DynamoDBClient, tables: Iterable[str]) -> dict[str, int]:
    """Every item's size by ``item_key``, read with a paginated Scan (after the measured run)."""
    sizes: dict[str, int] = {}
    for table in tables:
        key_names = [k["AttributeName"] for k in client.describe_table(TableName=table)["Table"]["KeySchema"]]
        for page in client.get_paginator("scan").paginate(TableName=table):
            for item in page["Items"]:
                sizes[item_key(table, {name: item[name] for name in key_names})] = item_size(item)
    return sizes


class Phases:
    """What the meter counted while each named step ran (the outermost step only)."""

    def __init__(self, meter: DynamoMeter) -> None:
        self._meter = meter
        self._active: str | None = None
        self.totals: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self._active is not None:
            yield
            return
        self._active = name
        before = self._meter.snapshot()
        try:
            yield
        finally:
            for counter, value in self._meter.since(before).items():
                self.totals[name][counter] += value
            self._active = None


class PhasedStructuringStore(DynamoStructuringStore):
    phases: Phases

    def claim_plan(self, project: ProjectId, provisional_id: str, plan: str) -> tuple[PlanClaim, str | None]:
        with self.phases("plan"):
            return super().claim_plan(project, provisional_id, plan)

    def stage(self, memory: MemoryRecord) -> bool:
        with self.phases("stage"):
            return super().stage(memory)

    def commit(
        self,
        project: ProjectId,
        change: StructuringCommit,
        notifications: Sequence[Notification] = (),
        now: str = "",
    ) -> CommitOutcome:
        with self.phases("commit"):
            return super().commit(project, change, notifications, now)

    def unindex(self, memory: MemoryRecord) -> None:
        with self.phases("unindex"):
            super().unindex(memory)

    def move_postings(self, memory: MemoryRecord, from_side: str, to_side: str) -> None:
        with self.phases("history"):
            super().move_postings(memory, from_side, to_side)

    def restate_postings(self, memory: MemoryRecord, side: str) -> None:
        with self.phases("history"):
            super().restate_postings(memory, side)

    def posted_records(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str | None]:
        with self.phases("reads"):
            return super().posted_records(project, memory_ids)

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None:
        with self.phases("reads"):
            return super().get(project, memory_id)

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        with self.phases("reads"):
            return super().get_many(project, memory_ids)

    def index_new(self, memory: MemoryRecord) -> bool:
        with self.phases("provisional"):  # only when remember failed to index it
            return super().index_new(memory)


class PhasedTermIndex(DynamoTermIndex):
    phases: Phases

    def read(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        history: bool,
        *,
        cells: Sequence[str] = (),
        cell_limit: int = 0,
    ) -> tuple[list[TermRead], CorpusStats]:
        with self.phases("search"):
            return super().read(project, terms, limit, history, cells=cells, cell_limit=cell_limit)


class PhasedJobStore(DynamoJobStore):
    phases: Phases

    def start(self, project: ProjectId, job_id: str, now: str) -> JobRecord | None:
        with self.phases("job"):
            return super().start(project, job_id, now)

    def finish(self, project: ProjectId, job_id: str, memory_ids: list[str], now: str) -> None:
        with self.phases("job"):
            super().finish(project, job_id, memory_ids, now)


class NoQueue:
    """The job queue: remember announces each job here; this benchmark structures it itself."""

    def send(self, project: ProjectId, job_id: str) -> None:
        pass


#: Structuring steps, in order, with what the table calls them.
STEPS: Final = (
    ("job", "job start + finish (Jobs)"),
    ("reads", "memory item reads (provisional, candidates, link targets)"),
    ("search", "candidate search (term index Queries)"),
    ("plan", "plan (conditional UpdateItem of the provisional memory)"),
    ("stage", "stage: index the structured memories"),
    ("commit", "commit (one transaction)"),
    ("unindex", "unindex the provisional memory"),
    ("history", "move retired memories' postings to history"),
    ("provisional", "index a missing provisional memory"),
    ("other", "other (event reads)"),
)


@dataclass
class Pipeline:
    """remember and structuring on the DynamoDB stores, with the meter and the steps it attributes."""

    meter: StructuringMeter
    phases: Phases
    jobs: PhasedJobStore
    remember: RememberService
    structuring: StructuringService


def structuring_pipeline(client: DynamoDBClient, tables: dict[str, str]) -> Pipeline:
    meter = StructuringMeter(client, tables)
    phases = Phases(meter)
    jobs = PhasedJobStore(client, tables["JobsTable"])
    jobs.phases = phases
    events = DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"], jobs=jobs)
    remember = RememberService(
        events,
        DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"]),
        jobs=NoQueue(),
    )
    store = PhasedStructuringStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
    store.phases = phases
    index = PhasedTermIndex(client, tables["TermIndexTable"])
    index.phases = phases
    structuring = StructuringService(events, store, index, RuleStructurer())
    return Pipeline(meter, phases, jobs, remember, structuring)


@dataclass
class WritesRun:
    """What remembering and structuring the events sent to DynamoDB, and the items stored at the end."""

    remembered: dict[str, float]
    structured: dict[str, float]
    steps: dict[str, dict[str, float]]  # structuring's counters per step (``STEPS``)
    stats: StructuringStats
    sizes: dict[str, int]  # every memory and job item's size by ``item_key``
    memory_sizes: list[int]  # the memory items' sizes


def measure_writes(texts: Sequence[tuple[str, dict[str, Any]]]) -> WritesRun:
    """Each event remembered on its own into one project, its job structured right after, against
    the emulator in this process; the counters of each part."""
    with local_tables() as local:
        tables = local.tables
        pipeline = structuring_pipeline(local.client, tables)
        meter, jobs = pipeline.meter, pipeline.jobs
        project = ProjectId(project_id())
        remembered: defaultdict[str, float] = defaultdict(float)
        structured: defaultdict[str, float] = defaultdict(float)
        stats = StructuringStats()
        for done, (stream, body) in enumerate(texts, 1):
            before = meter.snapshot()
            request = RememberRequest.model_validate({"stream": stream, "events": [body]})
            outcome = pipeline.remember.remember(project, stream, new_events(request))
            if outcome.appended != 1 or outcome.index_failures or outcome.job_id is None:
                raise RuntimeError(f"unexpected remember outcome: {outcome}")
            for name, value in meter.since(before).items():
                remembered[name] += value
            before = meter.snapshot()
            stats.add(pipeline.structuring.structure_job(project, outcome.job_id, jobs))
            for name, value in meter.since(before).items():
                structured[name] += value
            if done % 50 == 0:
                progress(f"  {done}/{len(texts)}")
        sizes = stored_sizes(local.client, (tables["MemoriesTable"], tables["JobsTable"]))
    memory_sizes = [size for name, size in sizes.items() if name.startswith(tables["MemoriesTable"] + "|")]
    steps = step_totals(pipeline.phases, structured)
    return WritesRun(dict(remembered), dict(structured), steps, stats, sizes, memory_sizes)


def step_totals(phases: Phases, structured: dict[str, float]) -> dict[str, dict[str, float]]:
    """Structuring's counters per step; ``other``: what no step's wrapper saw."""
    steps = {name: dict(phases.totals.get(name, {})) for name, _ in STEPS if name != "other"}
    steps["other"] = {
        counter: structured.get(counter, 0.0) - sum(t.get(counter, 0.0) for t in steps.values())
        for counter in structured
    }
    return steps


def units_row(name: str, counts: dict[str, float], events: float, sizes: dict[str, int]) -> list[object]:
    """Requests, transactions, write units (estimated, and updates at item size), read units per event."""
    wcu = total(counts, "wcu:")
    return [
        name,
        total(counts, "requests:") / events,
        total(counts, "transactions:") / events,
        wcu / events,
        (wcu + repriced_units(counts, sizes)) / events,
        total(counts, "rcu:") / events,
    ]


#: The events part of remember's write units, by counter.
REMEMBER_PARTS: Final = (
    ("events part (events, idempotency keys, stream head)", "wcu:events"),
    ("job item (in the same transaction)", "wcu:jobs"),
    ("provisional memory's index", "wcu:index"),
)


def section_writes(out: Output, texts: Sequence[tuple[str, dict[str, Any]]], source: str) -> dict[str, Any]:
    progress(f"3b. {len(texts)} events remembered and structured against the emulator ...")
    run = measure_writes(texts)
    remembered, structured, steps, sizes = run.remembered, run.structured, run.steps, run.sizes
    n = float(len(texts))
    out(
        "### 3b. DynamoDB requests and write units per event",
        "",
        f"{len(texts)} events ({source}), one per remember call into one project, each job structured "
        "right after (`RememberService` with `DynamoEventStore(jobs=DynamoJobStore)`, `DynamoMemoryStore`; "
        "`StructuringService` with `DynamoStructuringStore`, `DynamoTermIndex`, `RuleStructurer`), in this "
        "process against the emulator (moto sped up: "
        + emulator_speedups()
        + "). Requests and units from botocore hooks (bench/recall_cost.py's `DynamoMeter`): 2 WCU per "
        "started KB of each item in a transaction, 1 per KB outside one; an update's item estimated as "
        "its key plus the attributes it sets (*WCU/event*). DynamoDB bills an update at the larger of "
        "the item's sizes before and after it: *WCU, updates at item size* prices every update of a "
        "memory or job item again at that item's size as stored at the end of the run (items only grow "
        "here, but for a `becomes` marker), at least the estimate; the df and corpus counters are tiny "
        "either way. RCU: 1 per 4 KB, strongly consistent. Steps are attributed by wrapping the stores' "
        "methods.",
        "",
    )
    both = {k: remembered.get(k, 0.0) + structured.get(k, 0.0) for k in {*remembered, *structured}}
    out.table(
        ["", "requests/event", "transactions/event", "WCU/event", "WCU, updates at item size", "RCU/event"],
        [units_row("**remember** (total)", remembered, n, sizes)]
        + [
            [f"  {name}", "", "", remembered.get(counter, 0.0) / n, "", ""]
            for name, counter in REMEMBER_PARTS
        ]
        + [units_row("**structuring** (total)", structured, n, sizes)]
        + [
            units_row(f"  {label}", steps[name], n, sizes)
            for name, label in STEPS
            if any(steps[name].values())
        ]
        + [units_row("**remember + structuring**", both, n, sizes)],
    )
    per_event = write_counts_per_event(run, n)
    out.table(["per event", "value"], [[name, value] for name, value in per_event.items()])
    large = sum(1 for size in run.memory_sizes if size > 1024)
    out(
        f"Memory items over 1 KB at the end: {large} of {len(run.memory_sizes)} (mostly replaced provisional "
        "memories, which keep their text and carry the stored plan).",
        "",
    )

    def plain(counts: dict[str, float]) -> dict[str, float]:
        return {k: v / n for k, v in sorted(counts.items()) if v and not k.startswith(UPDATE_PREFIX)}

    return {
        "events": len(texts),
        "source": source,
        "rememberPerEvent": plain(remembered),
        "structuringPerEvent": plain(structured),
        "steps": {name: plain(counts) for name, counts in steps.items()},
        "rememberWcuPerEvent": total(remembered, "wcu:") / n,
        "structuringWcuPerEvent": total(structured, "wcu:") / n,
        "structuringWcuPerEventAtItemSize": (total(structured, "wcu:") + repriced_units(structured, sizes))
        / n,
        "perEvent": per_event,
        "memoryItemsOver1KB": large,
        "memoryItems": len(run.memory_sizes),
    }


def write_counts_per_event(run: WritesRun, events: float) -> dict[str, float]:
    """What structuring did per event: memories made, postings written, deleted and moved."""
    stats, steps = run.stats, run.steps
    return {
        "structured memories": stats.memories / events,
        "postings written by staging": (steps["stage"].get("actions:index:Put", 0.0) - stats.memories)
        / events,
        "postings deleted by unindexing the provisional memory": steps["unindex"].get(
            "actions:index:Delete", 0.0
        )
        / events,
        "postings moved to history": steps["history"].get("actions:index:Put", 0.0) / events,
        "memories retired": (stats.superseded + stats.canceled) / events,
        "cancelled transactions (whole run)": total(run.structured, "errors:")
        + total(run.remembered, "errors:"),
    }


# --- 3d. remember -> structured with wait: true ----------------------------------------------------


def section_wait(out: Output, texts: Sequence[tuple[str, dict[str, Any]]], source: str) -> dict[str, Any]:
    progress(f"3d. starting the local stack for {len(texts)} remember calls with wait: true ...")
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    warmup: list[float] = []
    containers = int(os.environ.get("KAIBO_LOCAL_CONTAINERS", DEFAULT_CONTAINERS))
    started = time.perf_counter()
    with real_stdout_only():
        stack = start_stack(port=0)
        try:
            startup = time.perf_counter() - started
            client = KaiboClient(stack.endpoint, stack.api_key, timeout=60)
            for position, (stream, body) in enumerate(texts):
                begun = time.perf_counter()
                answer = client.remember(stream, [body], wait=True)
                spent = time.perf_counter() - begun
                status = str((answer.get("job") or {}).get("status", "none"))
                if position < WAIT_WARMUP:
                    warmup.append(spent)  # the containers' first invocations: reported apart
                    continue
                statuses[status] += 1
                latencies.append(spent)
        finally:
            stack.stop()
    done = statuses.get("done", 0)
    p50, p95, mean = distribution(latencies)
    out(
        "### 3d. remember → structured with `wait: true` (local stack)",
        "",
        f"`kaibo_local.stack.start_stack(port=0)` in this process (started in {startup:.1f} s), "
        f"`KaiboClient.remember(stream, [event], wait=True)` {len(latencies)} times, one event each "
        f"({source}), timed with `time.perf_counter()` around the call. The remember handler "
        "polls the job (50 ms, doubling to 500 ms) until the structure function, fed by the stack's SQS "
        f"poller, marks it done. The first {len(warmup)} calls warmed the {containers} containers "
        f"(worker processes importing the handlers) up: {', '.join(f'{ms(w):.0f}' for w in warmup)} ms, not "
        "counted. Everything (emulator, front, workers) shares this machine's "
        "cores: this is the local stack, not AWS.",
        "",
    )
    out.table(
        ["", "calls", "job done", "p50 ms", "p95 ms", "mean ms", "max ms"],
        [
            [
                "remember, wait: true",
                len(latencies),
                done,
                ms(p50),
                ms(p95),
                ms(mean),
                ms(max(latencies, default=0.0)),
            ]
        ],
    )
    if done != len(latencies):
        out(f"WARNING: not every job was done when remember answered: {dict(statuses)}.", "")
    return {
        "calls": len(latencies),
        "statuses": dict(statuses),
        "warmupMs": [ms(w) for w in warmup],
        "ms": {"p50": ms(p50), "p95": ms(p95), "mean": ms(mean), "max": ms(max(latencies, default=0.0))},
        "stackStartSeconds": startup,
    }


# --- Main -----------------------------------------------------------------------------------------


def cost_events(data_path: Path, count: int, prefix: str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """``count`` events for the cost sections: LoCoMo turns in order, else the scenarios' texts."""
    if data_path.is_file():
        turns = load_locomo(data_path).turns[:count]
        events = []
        for turn in turns:
            body = event_body(turn)
            body["idempotencyKey"] = f"{prefix}:{turn.key}"
            events.append((turn.conversation, body))
        return events, f"the first {len(turns)} LoCoMo turns"
    scenario_events = [event for scenario in load_scenarios() for event in scenario["events"]][:count]
    return [
        (
            DEFAULT_STREAM,
            {
                "kind": "message",
                "idempotencyKey": f"{prefix}:{position}",  # occurredAt: when received (2026 dates
                # may lie ahead of the clock, which remember refuses)
                "payload": {"role": "user", "text": event["text"]},
            },
        )
        for position, event in enumerate(scenario_events)
    ], f"{len(scenario_events)} scenario texts"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="one LoCoMo conversation, fewer events (< 2 minutes)"
    )
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json (default: %(default)s)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON"
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        metavar="PATH",
        help="with --scenarios-only: this scenario file instead of the held-out set (for tuning sets: "
        "whoever changes the rules must not see the held-out figures while tuning)",
    )
    parser.add_argument(
        "--semantic",
        choices=("off", "mini6"),
        default="off",
        help="recall by meaning's model on, as KAIBO_SEMANTIC_MODEL (default off): in sections 1 and 2 "
        "(the cost sections measure words only)",
    )
    parser.add_argument(
        "--scenarios-only",
        action="store_true",
        help="section 1 only: the own and the held-out scenario sets side by side (~1 minute)",
    )
    args = parser.parse_args(argv)
    MEANING.channel = build_semantic_channel(args.semantic)
    sizes = QUICK if args.quick else FULL
    data_path: Path = args.data
    started = time.perf_counter()
    out = Output()
    out(
        f"# Kaibo structuring evaluation ({'quick' if args.quick else 'full'} run)",
        "",
        f"Run {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {machine(*PACKAGES)}.",
        "",
        "How to read: section 1 is quality on hand-labelled scenarios (written alongside the rules, so it "
        "shows consistency more than generalisation); section 2 shows what the rules do on real chat, with "
        "a sample of links to audit by hand (there are no gold labels); section 3 is cost per event: CPU "
        "in memory, DynamoDB writes against the emulator (what the same code sends to DynamoDB), an "
        "estimate of Bedrock prompt tokens, and `wait: true` latency on the local stack (not AWS).",
        "",
    )
    results: dict[str, Any] = {"machine": machine(*PACKAGES), "quick": args.quick}
    cpu = CpuSamples(source="the scenarios' events")
    scenario_cpu = CpuSamples()
    results["scenarios"] = section_scenarios(out, scenario_cpu, data_path)
    second = args.scenarios.resolve() if args.scenarios is not None else HELDOUT_PATH
    if second.is_file():
        held_out = args.scenarios is None
        results["heldOut"] = section_scenarios(out, CpuSamples(), data_path, second, held_out=held_out)
        section_side_by_side(
            out, results["scenarios"], results["heldOut"], "held-out set" if held_out else second.name
        )
    else:
        out(f"No held-out set at {HELDOUT_PATH.relative_to(ROOT)}: only the own set is measured.", "")
    for key, path, name in (
        ("heldOut2", HELDOUT2_PATH, "second held-out set"),
        ("heldOut3", HELDOUT3_PATH, "third held-out set"),
        ("heldOut4", HELDOUT4_PATH, "fourth held-out set"),
        ("heldOut5", HELDOUT5_PATH, "fifth held-out set"),
        ("heldOut6", HELDOUT6_PATH, "sixth held-out set"),
    ):
        if args.scenarios is None and path.is_file():
            results[key] = section_scenarios(out, CpuSamples(), data_path, path, held_out=True)
            section_side_by_side(out, results["scenarios"], results[key], name)
    if args.scenarios_only:
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        return 0
    results["locomo"] = section_locomo(out, data_path, sizes, cpu)
    if not cpu.step:
        cpu = scenario_cpu
        cpu.source = "the scenarios' events (no LoCoMo data)"
    results["cpu"] = section_cpu(out, cpu)
    texts, source = cost_events(data_path, sizes.write_events, "writes")
    results["writes"] = section_writes(out, texts, source)
    results["bedrock"] = section_bedrock(out, cpu)
    wait_texts, wait_source = cost_events(data_path, sizes.wait_calls + WAIT_WARMUP, "wait")
    results["wait"] = section_wait(out, wait_texts, wait_source)
    elapsed = time.perf_counter() - started
    out(f"Done in {elapsed:.0f} s.")
    results["seconds"] = elapsed
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    progress(f"done in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

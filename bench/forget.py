"""What forget and the purge cost, and whether recall notices a tombstoned tenth. Prints tables;
not a test.

Run from the repository root (``make bench-forget``)::

    PYTHONPATH=.:local .venv/bin/python bench/forget.py [--quick]

In this process: the emulator (``kaibo_local.emulator``, the one ``make run`` serves) with the
template's tables, and the real services over the real DynamoDB adapters:

1. **forget latency by set size** (1 / 100 / 1,000 memories): a project whose memories all say
   one rare word, forgotten by that word: the dry run and the real call (``ForgetService``), wall
   time and DynamoDB requests;
2. **purge cost per forgotten message** (``Purger``, grace 0): DynamoDB write requests and the
   write actions inside them per memory, and an estimate of write units (DynamoDB bills 1 WCU per
   KB written, 2 inside a transaction; every item the purge writes is under 1 KB except memory
   items, counted at their stored size);
3. **recall with a tenth tombstoned**: p50 / p95 of ``RecallService.recall`` over the same
   questions before and after a tenth of a project's memories is forgotten.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

import boto3

from bench.common import LocalTables, Report, local_tables, machine, percentile, progress
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.adapters.kms_secrets import KmsSaltCipher
from kaibo_core.core.clock import format_instant
from kaibo_core.core.forgetting import ForgetRequest
from kaibo_core.core.ids import new_id
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.models.recall import RecallQuery
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.forgetting import ForgetService
from kaibo_core.services.purging import Purger
from kaibo_core.services.recall import RecallService

WORDS: Final = [
    f"{a}{b}"
    for a in ("pla", "sto", "mer", "vin", "dra", "kol", "fen", "tur")
    for b in ("nix", "bor", "tal", "quin", "dex", "mor", "vel", "sar", "lun", "gat")
]
WRITES: Final = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class Meter:
    """DynamoDB requests and write actions sent through a client, counted by its event hooks."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.actions = 0
        self.transactional = 0
        # before-parameter-build: ``params`` are the call's own (before-call's are the HTTP request's).
        client.meta.events.register("before-parameter-build.dynamodb.*", self._count)

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.requests[model.name] += 1
        if model.name == "TransactWriteItems":
            self.transactional += len(params.get("TransactItems", []))
        elif model.name in WRITES:
            self.actions += 1

    def reset(self) -> None:
        self.requests.clear()
        self.actions = self.transactional = 0


def _a_second_ago() -> datetime:
    """The forget's clock: grace 0 and a second back, so that the purge finds it due at once."""
    return datetime.now(UTC) - timedelta(seconds=1)


def chat_memory(project: ProjectId, text: str, now: str) -> MemoryRecord:
    event_id = new_id("evt")
    return MemoryRecord(
        project_id=project,
        id=provisional_memory_id(event_id),
        status="provisional",
        type="episode",
        content=text,
        valid_from=now,
        valid_to=None,
        confidence=0.5,
        stream="chat",
        source_events=(SourceEventRef(event_id, "chat", 1, "0" * 64),),
        created_at=now,
    )


def sentence(rng: random.Random, extra: str = "") -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 20))
    return " ".join(words).capitalize() + (f" {extra}" if extra else "") + "."


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = call()
    return (time.perf_counter() - began) * 1000, result


class Bench:
    def __init__(self, tables: LocalTables) -> None:
        self.client = tables.client
        self.meter = Meter(self.client)
        t = tables.tables
        self.store = DynamoForgetStore(self.client, t["MemoriesTable"], t["TermIndexTable"], t["EventsTable"])
        self.ledger = DynamoLedgerStore(self.client, t["LedgerTable"])
        events = DynamoEventStore(self.client, t["EventsTable"], t["IdempotencyTable"])
        self.purger = Purger(self.ledger, self.store, lambda: datetime.now(UTC))
        kms: Any = boto3.client("kms")  # the emulator's (AWS_ENDPOINT_URL); the bench's forgets carry no key
        self.forget = ForgetService(
            self.store,
            events,
            self.ledger,
            timedelta(0),
            _a_second_ago,
            finish=self.purger.apply,
            salts=KmsSaltCipher(kms, kms.create_key(Description="kaibo bench")["KeyMetadata"]["KeyId"]),
        )
        self.recall = RecallService(DynamoTermIndex(self.client, t["TermIndexTable"]), self.store)
        self.rng = random.Random(8)

    def seed(self, project: ProjectId, texts: Sequence[str]) -> list[MemoryRecord]:
        now = format_instant(datetime.now(UTC))
        memories = [chat_memory(project, text, now) for text in texts]
        for start in range(0, len(memories), 200):
            results = self.store.index_many(memories[start : start + 200])
            failures = [r for r in results if isinstance(r, Exception)]
            if failures:
                raise failures[0]
        return memories


def section_forget(
    report: Report, bench: Bench, sizes: Sequence[int]
) -> Iterator[tuple[int, dict[str, float]]]:
    report.title("1. forget latency by set size")
    rows = []
    for size in sizes:
        project = ProjectId(new_id("prj"))
        marker = f"zyxquor{size}"
        progress(f"forget: seeding {size} memories")
        bench.seed(project, [sentence(bench.rng, marker) for _ in range(size)])
        request = ForgetRequest(reason="bench", query=marker, max_memories=max(size, 1))
        dry_run = replace(request, dry_run=True)
        bench.meter.reset()
        dry_ms, dry = timed(partial(bench.forget.forget, project, dry_run))
        dry_requests = sum(bench.meter.requests.values())
        bench.meter.reset()
        real_ms, real = timed(partial(bench.forget.forget, project, request))
        real_requests = sum(bench.meter.requests.values())
        assert len(dry.found.members) == len(real.found.members) == size, (size, len(real.found.members))
        rows.append([size, f"{dry_ms:.0f}", dry_requests, f"{real_ms:.0f}", real_requests])
        bench.meter.reset()
        purge_ms, result = timed(lambda: bench.purger.run(has_time=lambda: True))
        yield (
            size,
            {
                "purge_ms": purge_ms,
                "memories": result.memories,
                "requests": sum(v for k, v in bench.meter.requests.items() if k in WRITES),
                "actions": bench.meter.actions,
                "transactional": bench.meter.transactional,
            },
        )
    report.table(["memories", "dry run ms", "dry run requests", "forget ms", "forget requests"], rows)


def report_purge(report: Report, purges: Sequence[tuple[int, dict[str, float]]]) -> None:
    report.title("2. purge cost per forgotten chat message")
    report.line(
        "Write units estimated as 1 per write outside a transaction and 2 per action inside one "
        "(every item the purge writes is under 1 KB here: postings, counters, a memory item without "
        "its text); grace 0, one purge run per set."
    )
    rows = []
    for size, p in purges:
        memories = max(p["memories"], 1)
        units = p["actions"] + 2 * p["transactional"]
        rows.append(
            [
                size,
                f"{p['purge_ms']:.0f}",
                f"{p['requests'] / memories:.1f}",
                f"{(p['actions'] + p['transactional']) / memories:.1f}",
                f"{units / memories:.1f}",
            ]
        )
    report.table(
        ["memories", "purge ms", "write requests / memory", "write actions / memory", "≈ WCU / memory"], rows
    )


def section_recall(report: Report, bench: Bench, size: int, questions: int) -> None:
    report.title(f"3. recall before and after a tenth of {size:,} memories is forgotten")
    project = ProjectId(new_id("prj"))
    progress(f"recall: seeding {size} memories")
    texts = [sentence(bench.rng, "gone" if n % 10 == 0 else "") for n in range(size)]
    bench.seed(project, texts)
    asks = [" ".join(bench.rng.sample(WORDS, 3)) for _ in range(questions)]

    def latencies() -> list[float]:
        out = []
        for question in asks:
            ms, _ = timed(partial(bench.recall.recall, project, RecallQuery(question=question, budget=300)))
            out.append(ms)
        return sorted(out)

    latencies()  # warm
    before = latencies()
    forgotten = bench.forget.forget(project, ForgetRequest(reason="bench", query="gone", max_memories=1000))
    after = latencies()
    report.table(
        ["", "memories served", "recall p50 ms", "recall p95 ms"],
        [
            ["before", size, f"{percentile(before, 0.5):.1f}", f"{percentile(before, 0.95):.1f}"],
            [
                f"after forgetting {len(forgotten.found.members)}",
                size - len(forgotten.found.members),
                f"{percentile(after, 0.5):.1f}",
                f"{percentile(after, 0.95):.1f}",
            ],
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="sizes 1 and 100, a smaller recall stage")
    args = parser.parse_args(argv)
    sizes = [1, 100] if args.quick else [1, 100, 1000]
    recall_size, questions = (1000, 50) if args.quick else (5000, 200)
    report = Report()
    report.line(f"# Forget and purge ({machine()})")
    with local_tables() as tables:
        bench = Bench(tables)
        purges = list(section_forget(report, bench, sizes))
        report_purge(report, purges)
        section_recall(report, bench, recall_size, questions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

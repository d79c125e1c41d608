"""Benchmark of ``POST /v1/remember`` against the local stack. Prints tables; not a test.

Run from the repository root (``bench/README.md``, ``docs/performance.md``)::

    PYTHONPATH=.:local .venv/bin/python bench/remember.py [--quick]

It starts the local stack in this process (``start_stack(port=0)``: the emulator, tables from
template.yaml, the HTTP front; the handlers run in its worker processes, the "containers") and
measures, over HTTP with ``KaiboClient``:

1. DynamoDB requests, items, bytes and capacity units per remembered event, for a batch of 1 and
   of ``MAX_EVENTS_PER_BATCH``, counted with botocore event hooks on the client the handlers use
   (moto reports no consumed capacity for transactions). The hooks must live in the process that
   runs the handlers, so this section goes through a second front on the same gateway code whose
   handlers run in this process (``kaibo_local.gateway.load_handler``);
2. appends/s with 8 concurrent clients, into one stream and into 8 streams, with the clients as
   threads of this process and as separate processes; lost races counted at the emulator;
3. remember latency p50/p95 with 1k and with 100k events already stored in the same tables and
   project, the measured stream included (seeded in-process straight into moto's backend with the
   real chain code), the time inside each DynamoDB call, and the emulator process's memory;
4. cold start: a fresh process importing the remember handler and serving its first request,
   next to a fresh process importing boto3 and creating a DynamoDB client.

``--quick`` runs small sizes (1k stage only, fewer samples and runs) in under a minute.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

ROOT: Final = Path(__file__).resolve().parents[1]
# The handlers live in functions/ (repo root) and the local stack in local/: make the script run
# from a clean checkout without PYTHONPATH too (kaibo_core and kaibo are installed in the venv).
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

from moto.dynamodb.exceptions import TransactionCanceledException
from moto.dynamodb.models.dynamo_type import Item as MotoItem

from bench.common import (
    Report,
    heads_index_units,
    machine,
    moto_dynamodb_backend,
    percentile,
    process_memory_mb,
    read_units,
    real_stdout_only,
    total,
    write_units,
)
from kaibo.client import KaiboClient
from kaibo_core.adapters.aws import dynamodb_client, sqs_client
from kaibo_core.adapters.dynamodb_events import DynamoEventStore, item_size
from kaibo_core.api.mapping import new_events
from kaibo_core.api.models import RememberRequest
from kaibo_core.core.clock import format_instant, utc_now
from kaibo_core.core.limits import MAX_EVENTS_PER_BATCH
from kaibo_core.core.models.events import StreamHead
from kaibo_core.core.storage_keys import ProjectId, events_pk, head_key
from kaibo_core.services.remember import chain_records, plan_batch
from kaibo_local.containers import DEFAULT_CONTAINERS
from kaibo_local.emulator import dynamodb_lock
from kaibo_local.gateway import LocalGateway, load_handler
from kaibo_local.http_front import HttpFront
from kaibo_local.stack import LocalStack, start_stack
from kaibo_local.template import load_template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

CLIENTS: Final = 8
LATENCY_TARGET: Final = 1.5  # p(100k) / p(1k)
#: Clients' timeout: under 8 concurrent clients, a remember waits for the emulator (DynamoDB
#: serialized) behind the structuring workers; a slow answer is a figure, not a failure.
CLIENT_TIMEOUT: Final = 120.0
COLD_START_TARGET: Final = 1.6  # handler cold start / (import boto3 + DynamoDB client)
#: A typical chat message: ~300 bytes of text.
MESSAGE_TEXT: Final = (
    "Remember that the staging deploy needs the new database password from the vault, "
    "that the release is planned for Thursday after the design review, and that Maria "
    "owns the migration scripts; ask her before changing the schema. The customer asked "
    "for the export in CSV, not Excel, and wants it by the end of the month."
)
RESULT_PREFIX: Final = "BENCH_RESULT "
#: The packages whose versions the report names.
PACKAGES: Final = ("moto", "boto3", "aws-lambda-powertools", "pydantic")


@dataclass(frozen=True)
class Sizes:
    """Sizes of one run: ``--quick`` or the full one."""

    single_calls: int
    max_batch_calls: int
    calls_per_client: int
    latency_samples: int
    split_samples: int
    warmup: int
    stages: tuple[int, ...]
    cold_runs: int


QUICK: Final = Sizes(
    single_calls=20,
    max_batch_calls=3,
    calls_per_client=10,
    latency_samples=100,
    split_samples=30,
    warmup=10,
    stages=(1_000,),
    cold_runs=5,
)
FULL: Final = Sizes(
    single_calls=100,
    max_batch_calls=10,
    calls_per_client=50,
    latency_samples=300,
    split_samples=100,
    warmup=20,
    stages=(1_000, 100_000),
    cold_runs=21,
)


# --- Output --------------------------------------------------------------------------------------


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x (target <= {target}x: {'met' if ratio <= target else 'MISSED'})"


# --- 1. Counting DynamoDB requests with botocore event hooks --------------------------------------


class DynamoMeter:
    """Counts what the handlers' DynamoDB client sends, from botocore's event hooks.

    Every figure is a named counter; ``snapshot()`` and ``since()`` give the difference over a run.
    Requests are attributed to the authorizer (GetItem on the projects table) or to remember.
    Capacity units are computed as DynamoDB bills them: a transactional write costs 2 WCU per KB
    of each item (rounded up per item); the StreamHeads index entry of a head write is a standard
    write (1 WCU per KB); a strongly consistent read costs 1 RCU per 4 KB.
    """

    def __init__(self, client: DynamoDBClient, tables: dict[str, str]) -> None:
        self._kinds = {tables["idempotency"]: "idempotency", tables["projects"]: "projects"}
        self._events_table = tables["events"]
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        events = client.meta.events
        events.register("before-call.dynamodb.*", self._before_call)
        events.register("before-send.dynamodb.*", self._before_send)
        events.register("after-call.dynamodb.*", self._after_call)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._counts)

    def since(self, before: dict[str, float]) -> dict[str, float]:
        now = self.snapshot()
        return {name: now.get(name, 0.0) - before.get(name, 0.0) for name in now.keys() | before.keys()}

    def _add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._counts[name] = self._counts.get(name, 0.0) + amount

    def _role(self, operation: str, body: dict[str, Any]) -> str:
        if operation == "GetItem" and self._kinds.get(body.get("TableName", "")) == "projects":
            return "authorizer"
        return "remember"

    def _item_kind(self, table: str, item: dict[str, Any]) -> str:
        if table == self._events_table:
            return "head" if item.get("seq", {}).get("N") == "0" else "event"
        return self._kinds.get(table, "other")

    def _before_call(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        raw = params.get("body") or b"{}"
        body: dict[str, Any] = json.loads(raw)
        operation = str(model.name)
        role = self._role(operation, body)
        context["bench_role"] = role
        context["bench_started"] = time.perf_counter()
        amounts: dict[str, float] = {f"calls:{role}:{operation}": 1, "request_bytes": len(raw)}
        for action in body.get("TransactItems", []):
            put = action.get("Put")
            if put is None:
                amounts["other_actions"] = amounts.get("other_actions", 0) + 1
                continue
            item: dict[str, Any] = put["Item"]
            kind = self._item_kind(put["TableName"], item)
            size = item_size(item)
            amounts[f"items:{kind}"] = amounts.get(f"items:{kind}", 0) + 1
            amounts[f"bytes:{kind}"] = amounts.get(f"bytes:{kind}", 0) + size
            amounts["wcu:transactional"] = amounts.get("wcu:transactional", 0) + write_units(size, True)
            if kind == "head":
                amounts["wcu:index"] = amounts.get("wcu:index", 0) + heads_index_units(item)
        self._add(**amounts)

    def _before_send(self, **_: Any) -> None:
        self._add(attempts=1)

    def _after_call(
        self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        role = context.get("bench_role", "remember")
        amounts: dict[str, float] = {
            f"seconds:{role}:{model.name}": time.perf_counter()
            - context.get("bench_started", time.perf_counter())
        }
        code = (parsed.get("Error") or {}).get("Code")
        if code:
            amounts[f"errors:{code}"] = 1
        if model.name == "GetItem" and http_response.status_code == 200:
            # Items here are far below 4 KB: 1 RCU per strongly consistent GetItem.
            amounts["rcu"] = read_units(item_size(parsed.get("Item") or {}), consistent=True)
        self._add(**amounts)


# --- Driving remember over HTTP -------------------------------------------------------------------


class Keys:
    """Unique idempotency keys for this run."""

    def __init__(self) -> None:
        self._prefix = f"bench-{secrets.token_hex(4)}"
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> str:
        with self._lock:
            self._next += 1
            return f"{self._prefix}-{self._next}"


def message(key: str) -> dict[str, Any]:
    return {"kind": "message", "idempotencyKey": key, "payload": {"role": "user", "text": MESSAGE_TEXT}}


def remember(client: KaiboClient, keys: Keys, stream: str, batch: int = 1) -> dict[str, Any]:
    answer = client.remember(stream, [message(keys.take()) for _ in range(batch)])
    if len(answer.get("events", [])) != batch or any(e["replayed"] for e in answer["events"]):
        raise RuntimeError(f"unexpected remember answer: {answer}")
    return answer


def timed_remembers(client: KaiboClient, keys: Keys, stream: str, count: int) -> list[float]:
    latencies: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        remember(client, keys, stream)
        latencies.append(time.perf_counter() - started)
    return latencies


@dataclass
class Bench:
    """The running stack, the in-process front (for the hooks) and what the sections share."""

    stack: LocalStack
    front: HttpFront
    meter: DynamoMeter
    keys: Keys
    report: Report
    sizes: Sizes
    tables: dict[str, str]

    def client(self, api_key: str | None = None) -> KaiboClient:
        """A client of the local stack (handlers in its worker processes)."""
        return KaiboClient(self.stack.endpoint, api_key or self.stack.api_key, timeout=CLIENT_TIMEOUT)

    def inprocess_client(self, api_key: str | None = None) -> KaiboClient:
        """A client of the in-process front (handlers in this process, seen by the hooks)."""
        return KaiboClient(self.front.url, api_key or self.stack.api_key, timeout=CLIENT_TIMEOUT)


def containers() -> int:
    return int(os.environ.get("KAIBO_LOCAL_CONTAINERS", DEFAULT_CONTAINERS))


# --- 1. Requests and bytes per event --------------------------------------------------------------


def bench_requests(bench: Bench) -> None:
    report = bench.report
    report.title("1. DynamoDB requests and writes per remembered event (counted with botocore hooks)")
    client = bench.inprocess_client()
    runs = [(1, bench.sizes.single_calls), (MAX_EVENTS_PER_BATCH, bench.sizes.max_batch_calls)]
    counted = [(batch, calls, count_remembers(bench, client, batch, calls)) for batch, calls in runs]
    report.line(
        f"Sequential remembers into one existing stream; each event a message of {len(MESSAGE_TEXT)} "
        "characters. Through"
    )
    report.line("an in-process front (the stack's gateway code, authorizer and handlers loaded in this")
    report.line(
        "process) so that botocore hooks on kaibo_core.adapters.aws.dynamodb_client() see every call."
    )
    report.line()
    report.table(REQUEST_HEADERS, [request_row(batch, calls, c) for batch, calls, c in counted])
    report.line()
    report.table(WRITE_HEADERS, [write_row(batch, batch * calls, c) for batch, calls, c in counted])
    report.line()
    report.line(
        "Item bytes: attribute names + values (kaibo_core item_size). txn WCU: 2 per started KB of each"
    )
    report.line(
        "item in TransactWriteItems. index WCU: the StreamHeads entry of the head write, a standard write"
    )
    report.line("(1 per KB; an estimate). RCU: 1 per strongly consistent GetItem (items < 4 KB), authorizer")
    report.line(
        "included; API Gateway caches the authorizer's answer for 60 s on AWS, the local stack never does."
    )
    report.line("request B: JSON bodies sent to DynamoDB. retries: HTTP attempts beyond one per request.")


def count_remembers(bench: Bench, client: KaiboClient, batch: int, calls: int) -> dict[str, float]:
    """What ``calls`` remembers of ``batch`` events into an existing stream sent to DynamoDB."""
    stream = f"bench-requests-{batch}"
    remember(client, bench.keys, stream, batch)  # creates the stream: measure appends only
    before = bench.meter.snapshot()
    for _ in range(calls):
        remember(client, bench.keys, stream, batch)
    return bench.meter.since(before)


REQUEST_HEADERS: Final = (
    "batch",
    "calls",
    "auth GetItem/call",
    "head GetItem/call",
    "TransactWrite/call",
    "other/call",
    "requests/call",
    "requests/event",
    "retries",
    "errors",
)


def request_row(batch: int, calls: int, c: dict[str, float]) -> list[object]:
    """Requests per call by kind, per event, retries and errors (``REQUEST_HEADERS``)."""
    requests = total(c, "calls:")
    known = (
        c.get("calls:authorizer:GetItem", 0)
        + c.get("calls:remember:GetItem", 0)
        + c.get("calls:remember:TransactWriteItems", 0)
    )
    return [
        batch,
        calls,
        c.get("calls:authorizer:GetItem", 0) / calls,
        c.get("calls:remember:GetItem", 0) / calls,
        c.get("calls:remember:TransactWriteItems", 0) / calls,
        (requests - known) / calls,
        requests / calls,
        requests / (batch * calls),
        int(c.get("attempts", 0) - requests),
        int(total(c, "errors:")),
    ]


WRITE_HEADERS: Final = (
    "batch",
    "items/event",
    "item B/event",
    "idempotency item B",
    "event item B",
    "head item B",
    "txn WCU/event",
    "index WCU/event",
    "RCU/event",
    "request B/event",
)


def write_row(batch: int, events: int, c: dict[str, float]) -> list[object]:
    """Items, bytes and capacity units per event (``WRITE_HEADERS``)."""
    return [
        batch,
        total(c, "items:") / events,
        total(c, "bytes:") / events,
        c.get("bytes:idempotency", 0) / max(1, c.get("items:idempotency", 0)),
        c.get("bytes:event", 0) / max(1, c.get("items:event", 0)),
        c.get("bytes:head", 0) / max(1, c.get("items:head", 0)),
        c.get("wcu:transactional", 0) / events,
        c.get("wcu:index", 0) / events,
        c.get("rcu", 0) / events,
        c.get("request_bytes", 0) / events,
    ]


# --- 2. Throughput with 8 concurrent clients ------------------------------------------------------


@contextlib.contextmanager
def emulator_transactions() -> Iterator[dict[str, int]]:
    """Count the TransactWriteItems the emulator runs, and those it cancels, meanwhile.

    The handlers run in the stack's worker processes, out of reach of botocore hooks here; the
    emulator runs in this process. The count wraps the backend instance's method (an instance
    attribute: the class-level patch of kaibo_local.emulator and its pin stay untouched).
    """
    backend = moto_dynamodb_backend()
    counts = {"transactions": 0, "cancelled": 0}
    patched = backend.transact_write_items

    def counting(transact_items: list[dict[str, Any]]) -> None:
        counts["transactions"] += 1  # requests are serialized: no lock needed
        try:
            patched(transact_items)
        except TransactionCanceledException:
            counts["cancelled"] += 1
            raise

    backend.transact_write_items = counting  # type: ignore[method-assign]  # counted, then removed
    try:
        yield counts
    finally:
        del backend.transact_write_items


CLIENT_SCRIPT: Final = r"""
import json, sys, time
from kaibo.client import KaiboClient
endpoint, api_key, stream, prefix, count, text = sys.argv[1:7]
client = KaiboClient(endpoint, api_key, timeout=120)
print("READY", flush=True)
sys.stdin.readline()
latencies = []
for i in range(int(count)):
    started = time.perf_counter()
    event = {"kind": "message", "idempotencyKey": f"{prefix}-{i}", "payload": {"role": "user", "text": text}}
    answer = client.remember(stream, [event])
    assert not answer["events"][0]["replayed"], answer
    latencies.append(time.perf_counter() - started)
print(json.dumps(latencies), flush=True)
"""


def _streams_for(scenario: str, run: str) -> list[str]:
    if scenario == "one stream":
        return [f"bench-tput-{run}"] * CLIENTS
    return [f"bench-tput-{run}-{i}" for i in range(CLIENTS)]


def run_threads(bench: Bench, streams: Sequence[str], count: int) -> tuple[float, list[float]]:
    clients = [bench.client() for _ in streams]
    gate = threading.Barrier(len(streams) + 1)
    latencies: list[list[float]] = [[] for _ in streams]
    failures: list[BaseException] = []

    def work(index: int) -> None:
        gate.wait()
        try:
            latencies[index] = timed_remembers(clients[index], bench.keys, streams[index], count)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(streams))]
    for thread in threads:
        thread.start()
    gate.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return elapsed, [value for values in latencies for value in values]


def run_processes(bench: Bench, streams: Sequence[str], count: int) -> tuple[float, list[float]]:
    children = []
    for stream in streams:
        arguments = [bench.stack.endpoint, bench.stack.api_key, stream, bench.keys.take(), str(count)]
        child = subprocess.Popen(
            [sys.executable, "-c", CLIENT_SCRIPT, *arguments, MESSAGE_TEXT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "READY":
            raise RuntimeError("a client process did not start")
    started = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("GO\n")
        child.stdin.flush()
    outputs = [child.stdout.readline() for child in children if child.stdout is not None]
    elapsed = time.perf_counter() - started
    latencies: list[float] = []
    for child, output in zip(children, outputs, strict=True):
        if child.wait() != 0 or not output:
            raise RuntimeError(f"a client process failed (exit {child.returncode})")
        latencies.extend(json.loads(output))
    return elapsed, latencies


def warm_containers(bench: Bench) -> None:
    """Two concurrent rounds of remembers, so that every worker process has served requests."""
    streams = [f"bench-warm-{i}" for i in range(2 * containers())]
    run_threads(bench, streams, 2)


def bench_throughput(bench: Bench) -> None:
    report = bench.report
    count = bench.sizes.calls_per_client
    report.title(
        f"2. Appends/s with {CLIENTS} concurrent clients "
        f"({CLIENTS} x {count} single-event remembers over HTTP, {containers()} containers)"
    )
    rows: list[list[object]] = []
    runners: dict[str, Callable[[Bench, Sequence[str], int], tuple[float, list[float]]]] = {
        "threads": run_threads,
        "processes": run_processes,
    }
    for clients, runner in runners.items():
        for scenario in ("one stream", f"{CLIENTS} streams"):
            streams = _streams_for(scenario, secrets.token_hex(3))
            warm = bench.client()
            for stream in sorted(set(streams)):
                remember(warm, bench.keys, stream)  # the streams exist: measure appends only
            with emulator_transactions() as counted:
                elapsed, latencies = runner(bench, streams, count)
            appended = CLIENTS * count
            rows.append(
                [
                    scenario,
                    clients,
                    appended,
                    elapsed,
                    appended / elapsed,
                    percentile(latencies, 0.5) * 1000,
                    percentile(latencies, 0.95) * 1000,
                    counted["transactions"],
                    counted["cancelled"],
                    counted["cancelled"] / appended,
                ]
            )
    report.table(
        [
            "streams",
            "clients as",
            "events",
            "seconds",
            "appends/s",
            "p50 ms",
            "p95 ms",
            "transactions",
            "cancelled",
            "retries/event",
        ],
        rows,
    )
    report.line()
    report.line(
        f"The stack runs its handlers in {containers()} worker processes (KAIBO_LOCAL_CONTAINERS), one"
    )
    report.line(
        "invocation each at a time, as Lambda containers do; the HTTP front and the emulator (DynamoDB"
    )
    report.line(
        "requests serialized) run in this process. All share 2 cores. Client threads run in this process"
    )
    report.line(
        "too; client processes do not. transactions / cancelled: TransactWriteItems run by the emulator,"
    )
    report.line("and those cancelled because another append took the stream head first (each is retried).")


# --- 3. Latency with 1k and 100k stored events -----------------------------------------------------


class CapturingClient:
    """Stands in for the DynamoDB client: keeps the TransactItems the event store would send."""

    def __init__(self) -> None:
        self.actions: list[dict[str, Any]] = []

    def transact_write_items(self, TransactItems: list[dict[str, Any]], **_: Any) -> None:  # noqa: N803 - boto3's name
        self.actions = TransactItems


class Seeder:
    """Appends events straight into moto's backend, built by the real planning and chain code.

    Each batch goes through ``plan_batch`` and ``chain_records`` onto the stream's stored head, and
    ``DynamoEventStore.append`` builds the transaction (idempotency items, events, head); its Puts are
    applied with moto's ``put_item`` and their conditions (``attribute_not_exists``, ``headSeq =
    :expected``), under ``dynamodb_lock()``. That is the transaction without its HTTP round trip.
    """

    def __init__(self, project: ProjectId, tables: dict[str, str]) -> None:
        self._backend = moto_dynamodb_backend()
        self._tables = tables
        self._project = project
        self._capture = CapturingClient()
        self._store = DynamoEventStore(
            cast("DynamoDBClient", self._capture), tables["events"], tables["idempotency"]
        )
        self._serial = 0

    def head(self, stream: str) -> StreamHead:
        key = {
            name: ({"N": str(value)} if isinstance(value, int) else {"S": value})
            for name, value in head_key(self._project, stream).items()
        }
        with dynamodb_lock():
            item = self._backend.get_item(self._tables["events"], key)
        if item is None:
            return StreamHead.genesis()
        attributes = item.to_json()["Attributes"]
        return StreamHead(seq=int(attributes["headSeq"]["N"]), hash=attributes["headHash"]["S"])

    def append(self, stream: str, count: int) -> None:
        head = self.head(stream)
        while count > 0:
            batch = min(count, MAX_EVENTS_PER_BATCH)
            received = utc_now()
            keys = [f"seed-{stream}-{head.seq + i + 1}-{self._serial}" for i in range(batch)]
            self._serial += 1
            request = RememberRequest.model_validate(
                {"stream": stream, "events": [message(key) for key in keys]}
            )
            records = chain_records(
                self._project,
                stream,
                head,
                plan_batch(new_events(request), received),
                format_instant(received),
            )
            self._store.append(self._project, stream, head, records, format_instant(received))
            with dynamodb_lock():
                for action in self._capture.actions:
                    put = action["Put"]
                    self._backend.put_item(
                        put["TableName"],
                        put["Item"],
                        condition_expression=put.get("ConditionExpression"),
                        expression_attribute_values=put.get("ExpressionAttributeValues"),
                    )
            head = StreamHead(seq=records[-1].seq, hash=records[-1].hash)
            count -= batch

    def stored(self) -> tuple[int, dict[str, int]]:
        """Events stored in the project (head items excluded), and per stream."""
        prefix = events_pk(self._project, "")
        per_stream: dict[str, int] = {}
        with dynamodb_lock():
            table = self._backend.get_table(self._tables["events"])
            for hash_key, by_range in table.items.items():
                pk = str(hash_key.value)
                if pk.startswith(prefix):
                    per_stream[pk[len(prefix) :]] = sum(1 for r in by_range if str(r.value) != "0")
        return sum(per_stream.values()), per_stream

    def live_items(self) -> int:
        with dynamodb_lock():
            return sum(
                sum(len(by_range) if isinstance(by_range, dict) else 1 for by_range in table.items.values())
                for table in self._backend.tables.values()
            )


@contextlib.contextmanager
def gc_watch() -> Iterator[dict[str, float]]:
    """Count the full (generation 2) garbage collections meanwhile and the time they took."""
    found = {"collections": 0.0, "seconds": 0.0}
    started = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            found["collections"] += 1
            found["seconds"] += time.perf_counter() - started[0]

    gc.callbacks.append(callback)
    try:
        yield found
    finally:
        gc.callbacks.remove(callback)


def tracked_items() -> int:
    """moto's model tracker: every ``Item`` instance ever created stays in this list."""
    return len(getattr(MotoItem, "instances_tracked", []))


def deep_size(root: object) -> int:
    """Bytes of an object and of the dicts, lists and objects it holds (each counted once)."""
    seen: set[int] = set()
    pending = [root]
    total = 0
    while pending:
        obj = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            pending.extend(obj.keys())
            pending.extend(obj.values())
        elif isinstance(obj, list | tuple | set):
            pending.extend(obj)
        elif hasattr(obj, "__dict__"):
            pending.append(vars(obj))
    return total


def dead_items_mb(backend: Any) -> float:
    """Memory held by Items that only moto's tracker still references (an estimate from a sample:
    each Item with its attributes, without the key values a projection shares with the live item)."""
    with dynamodb_lock():
        live: set[int] = set()
        for table in backend.tables.values():
            for by_range in table.items.values():
                if isinstance(by_range, dict):
                    live.update(id(item) for item in by_range.values())
                else:
                    live.add(id(by_range))
        dead = [item for item in getattr(MotoItem, "instances_tracked", []) if id(item) not in live]
    if not dead:
        return 0.0
    sample = dead[:: max(1, len(dead) // 500)]
    per_item = statistics.fmean(sys.getsizeof(item) + deep_size(vars(item)["attrs"]) for item in sample)
    return per_item * len(dead) / 2**20


def calibration_ms() -> float:
    """A fixed CPU-bound workload (JSON and hashing, like a remember's own work), in ms.

    Timed between latency samples: if it slows down too, the machine (shared, 2 cores) was busier,
    not the stack slower.
    """
    started = time.perf_counter()
    for i in range(300):
        text = json.dumps({"i": i, "role": "user", "text": MESSAGE_TEXT}, sort_keys=True)
        hashlib.sha256(json.loads(text)["text"].encode()).hexdigest()
    return (time.perf_counter() - started) * 1000


def load_average() -> float:
    """The 1-minute load average (other processes on the machine included)."""
    return os.getloadavg()[0]


@dataclass
class Stage:
    """One latency stage: what was stored, the samples, and the process's memory."""

    stored: int
    in_stream: int
    items: int
    seeded: int
    seeding_s: float
    rss_seeding_mb: float
    rss_mb: float
    peak_mb: float
    tracked: int
    latencies: list[float]  # through the stack (handlers in its containers)
    calibrations: list[float]
    loads: list[float]
    split_latencies: list[float]  # through the in-process front, with the hooks' timings
    split_counts: dict[str, float]
    gc_collections: float
    gc_seconds: float
    dead_per_call: float
    dead_mb: float
    rss_kb_per_call: float

    def split_ms(self, name: str) -> float:
        return self.split_counts.get(name, 0.0) / len(self.split_latencies) * 1000

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 0.5) * 1000

    @property
    def p95(self) -> float:
        return percentile(self.latencies, 0.95) * 1000


def seed_stage(seeder: Seeder, stream: str, target: int) -> tuple[int, float]:
    """Seed the project up to ``target`` events: a quarter in ``stream``, the rest in streams of
    1,000. Returns the events seeded and the seconds it took."""
    stored, per_stream = seeder.stored()
    in_stream = max(0, target // 4 - per_stream.get(stream, 0))
    rest = max(0, target - stored - in_stream)
    started = time.perf_counter()
    seeder.append(stream, in_stream)
    index = len(per_stream)
    while rest > 0:
        seeder.append(f"bench-seed-{index:04d}", min(rest, 1_000))
        rest -= 1_000
        index += 1
    return seeder.stored()[0] - stored, time.perf_counter() - started


def measure_stage(bench: Bench, seeder: Seeder, api_key: str, stream: str, target: int) -> Stage:
    sizes = bench.sizes
    client, inprocess = bench.client(api_key), bench.inprocess_client(api_key)
    rss_seeding = process_memory_mb()[0]
    seeded, seeding_s = seed_stage(seeder, stream, target)
    gc.collect()
    stored, per_stream = seeder.stored()
    rss, peak = process_memory_mb()
    tracked, items = tracked_items(), seeder.live_items()
    # The first remember must chain onto the seeded head: proof that the seeded chain is real.
    head = seeder.head(stream)
    first = remember(client, bench.keys, stream)["events"][0]
    if (first["seq"], first["prevHash"]) != (head.seq + 1, head.hash):
        raise RuntimeError(f"remember did not chain onto the seeded head {head}: {first}")
    timed_remembers(client, bench.keys, stream, sizes.warmup - 1)
    rss_before, dead_before = process_memory_mb()[0], tracked_items() - seeder.live_items()
    latencies: list[float] = []
    calibrations: list[float] = []
    loads: list[float] = []
    with gc_watch() as collections:
        while len(latencies) < sizes.latency_samples:
            calibrations.append(calibration_ms())
            loads.append(load_average())
            latencies += timed_remembers(
                client, bench.keys, stream, min(10, sizes.latency_samples - len(latencies))
            )
    samples = len(latencies)
    dead_per_call = (tracked_items() - seeder.live_items() - dead_before) / samples
    rss_kb_per_call = (process_memory_mb()[0] - rss_before) * 1024 / samples
    timed_remembers(inprocess, bench.keys, stream, 3)  # warm the in-process handlers
    before = bench.meter.snapshot()
    split_latencies = timed_remembers(inprocess, bench.keys, stream, sizes.split_samples)
    return Stage(
        stored=stored,
        in_stream=per_stream.get(stream, 0),
        items=items,
        seeded=seeded,
        seeding_s=seeding_s,
        rss_seeding_mb=rss_seeding,
        rss_mb=rss,
        peak_mb=peak,
        tracked=tracked,
        latencies=latencies,
        calibrations=calibrations,
        loads=loads,
        split_latencies=split_latencies,
        split_counts=bench.meter.since(before),
        gc_collections=collections["collections"],
        gc_seconds=collections["seconds"],
        dead_per_call=dead_per_call,
        dead_mb=dead_items_mb(moto_dynamodb_backend()),
        rss_kb_per_call=rss_kb_per_call,
    )


#: The DynamoDB calls of one remember, as DynamoMeter names their time.
SPLIT_CALLS: Final = (
    "seconds:authorizer:GetItem",
    "seconds:remember:GetItem",
    "seconds:remember:TransactWriteItems",
)


def bench_latency(bench: Bench) -> None:
    report = bench.report
    sizes = bench.sizes
    report.title(
        "3. remember latency with events already stored (same tables and project, measured stream too)"
    )
    # A project of its own, so that its event count is exactly the stage's (the tables also hold
    # the events of the other sections, in other projects).
    project = KaiboClient(bench.stack.endpoint, bench.stack.admin_key).create_project("bench-latency")
    seeder = Seeder(ProjectId(project["projectId"]), bench.tables)
    stream = "bench-latency"
    stages = [measure_stage(bench, seeder, project["apiKey"], stream, target) for target in sizes.stages]
    report_latency(report, sizes, stages)
    report_split(report, sizes, stages)
    report_stage_memory(report, stages)
    report_latency_target(report, stages)


def report_latency(report: Report, sizes: Sizes, stages: Sequence[Stage]) -> None:
    """Latency through the stack per stage, with how busy the machine was meanwhile."""
    report.line(
        f"Sequential single-event remembers over HTTP into one stream through the stack: "
        f"{sizes.latency_samples} samples after"
    )
    report.line(f"{sizes.warmup} warm-up calls, in runs of 10 with a CPU calibration between runs.")
    report.line()
    report.table(
        [
            "events in project",
            "in stream",
            "items in tables",
            "p50 ms",
            "p95 ms",
            "mean ms",
            "max ms",
            "calibration ms",
            "load avg",
        ],
        [
            [
                s.stored,
                s.in_stream,
                s.items,
                s.p50,
                s.p95,
                statistics.fmean(s.latencies) * 1000,
                max(s.latencies) * 1000,
                statistics.median(s.calibrations),
                statistics.fmean(s.loads),
            ]
            for s in stages
        ],
    )
    report.line()
    report.line(
        "calibration: median ms of a fixed CPU-bound workload timed between runs (how busy the shared"
    )
    report.line("2-core machine was); load avg: the 1-minute load average meanwhile.")
    report.line()


def report_split(report: Report, sizes: Sizes, stages: Sequence[Stage]) -> None:
    """Where a remember's time goes: inside each DynamoDB call, and the rest."""
    report.line(
        f"Where the time goes: {sizes.split_samples} more remembers through the in-process front (hooks),"
    )
    report.line(
        "mean ms per call inside each DynamoDB call (botocore before-call to after-call: the HTTP round"
    )
    report.line("trip to the emulator in this process, moto's work, the serialization lock):")
    report.line()
    report.table(
        [
            "events in project",
            "p50 ms",
            "mean ms",
            "authorizer GetItem",
            "head GetItem",
            "TransactWrite",
            "rest",
        ],
        [
            [
                s.stored,
                percentile(s.split_latencies, 0.5) * 1000,
                statistics.fmean(s.split_latencies) * 1000,
                *(s.split_ms(name) for name in SPLIT_CALLS),
                statistics.fmean(s.split_latencies) * 1000 - sum(s.split_ms(n) for n in SPLIT_CALLS),
            ]
            for s in stages
        ],
    )
    report.line()
    report.line("rest: the HTTP front, the gateway, authorizer and handler code, and the client.")
    report.line()


def report_stage_memory(report: Report, stages: Sequence[Stage]) -> None:
    """Seeding and this process's memory per stage, moto's tracker leak included."""
    report.table(
        [
            "events in project",
            "seeded",
            "seeding s",
            "us/event",
            "RSS MB",
            "peak MB",
            "KB/seeded event",
            "Items tracked",
            "items live",
            "dead Items/call",
            "dead Items MB",
            "RSS KB/call",
            "gen-2 GC",
        ],
        [
            [
                s.stored,
                s.seeded,
                s.seeding_s,
                s.seeding_s / max(1, s.seeded) * 1e6,
                s.rss_mb,
                s.peak_mb,
                (s.rss_mb - s.rss_seeding_mb) * 1024 / max(1, s.seeded),
                s.tracked,
                s.items,
                s.dead_per_call,
                s.dead_mb,
                s.rss_kb_per_call,
                f"{s.gc_collections:.0f} / {s.gc_seconds * 1000:.0f} ms",
            ]
            for s in stages
        ],
    )
    report.line()
    report.line(
        "Memory of this process, which holds the emulator (and the HTTP front; the handlers run in the"
    )
    report.line("worker processes), after seeding: RSS, peak = VmHWM. Items tracked: moto's")
    report.line("Item.instances_tracked, which keeps every Item ever created; items live: the items in all")
    report.line(
        "tables. dead Items/call: Items no table holds but the tracker keeps, added per remember call (a"
    )
    report.line(
        "leak growing with traffic, not with stored data); dead Items MB: what all of them hold at the"
    )
    report.line(
        "end of the stage (estimated from a sample). RSS KB/call: growth during the samples, stored events"
    )
    report.line("included. gen-2 GC: full collections in this process during the samples.")
    report.line()


def report_latency_target(report: Report, stages: Sequence[Stage]) -> None:
    """The 100k stage's latency against the 1k stage's, per unit of machine speed too."""
    if len(stages) < 2:
        report.line(
            f"Target: 100k latency within {LATENCY_TARGET}x of 1k: not measured "
            "(--quick seeds 1k only; run without --quick)."
        )
        return
    small, large = stages[0], stages[-1]
    machine_ratio = statistics.median(large.calibrations) / statistics.median(small.calibrations)
    report.line(
        f"Target: 100k latency within {LATENCY_TARGET}x of 1k. "
        f"p50 ratio {verdict(large.p50 / small.p50, LATENCY_TARGET)}; "
        f"p95 ratio {verdict(large.p95 / small.p95, LATENCY_TARGET)}."
    )
    report.line(
        f"Calibration ratio {machine_ratio:.2f}x: p50 ratio per unit of machine speed "
        f"{large.p50 / small.p50 / machine_ratio:.2f}x."
    )


# --- 4. Cold start --------------------------------------------------------------------------------

HANDLER_SCRIPT: Final = r"""
import time
started = time.perf_counter()
from functions.remember.app import lambda_handler
imported = time.perf_counter()
import json, os, secrets
from kaibo_local.apigw_events import rest_proxy_event

class Context:
    function_name = "RememberFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:RememberFunction"
    aws_request_id = secrets.token_hex(16)
    def get_remaining_time_in_millis(self):
        return 30000

def proxy_event():
    payload = {"role": "user", "text": "x"}
    event = {"kind": "message", "idempotencyKey": secrets.token_hex(8), "payload": payload}
    body = {"stream": os.environ["BENCH_STREAM"], "events": [event]}
    authorizer = {
        "role": "project", "keyId": "key_bench", "projectId": os.environ["BENCH_PROJECT"],
        "scopes": "read write",
    }
    return rest_proxy_event(
        "POST", "/v1/remember", headers=[("Content-Type", "application/json")], body=json.dumps(body),
        authorizer=authorizer,
    )

jobs = []

def invoke():
    event = proxy_event()
    began = time.perf_counter()
    response = lambda_handler(event, Context())
    elapsed = time.perf_counter() - began
    jobs.append(json.loads(response["body"]).get("jobId"))
    return elapsed, response["statusCode"]

# BENCH_BREAKDOWN=1 (a diagnostic run): create the client first, then time a second request.
breakdown = os.environ.get("BENCH_BREAKDOWN") == "1"
client = 0.0
if breakdown:
    began = time.perf_counter()
    from kaibo_core.adapters.aws import dynamodb_client
    dynamodb_client()
    client = time.perf_counter() - began
request, status = invoke()
second, second_status = invoke() if breakdown else (0.0, status)
result = {
    "import": imported - started, "client": client, "request": request, "second": second,
    "status": max(status, second_status), "jobs": [job for job in jobs if job],
}
print("BENCH_RESULT " + json.dumps(result), flush=True)
"""

BOTO3_SCRIPT: Final = r"""
import time
started = time.perf_counter()
import boto3
imported = time.perf_counter()
client = boto3.client("dynamodb")
created = time.perf_counter()
import json
result = {"import": imported - started, "client": created - imported, "request": 0.0, "second": 0.0}
result["status"] = 0
result["jobs"] = []
print("BENCH_RESULT " + json.dumps(result), flush=True)
"""


@dataclass(frozen=True)
class ColdRun:
    """One fresh process; seconds. For the handler, the client is created inside the first request."""

    imported: float
    client: float
    request: float
    second: float
    wall: float

    @property
    def total(self) -> float:
        return self.imported + self.client + self.request


def child_environment(bench: Bench, stream: str, **extra: str) -> dict[str, str]:
    """A Lambda-like environment: the stack's table names, fake credentials, region, endpoint."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "local")])
    env["AWS_ENDPOINT_URL"] = bench.stack.emulator.endpoint_url
    env["BENCH_STREAM"] = stream
    env["BENCH_PROJECT"] = bench.stack.project_id
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def structuring_queue_empty() -> bool:
    """No message waiting or in flight on the structuring queue (a worker deletes a message once
    the structure function has returned)."""
    counts: list[QueueAttributeNameType] = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    queue = os.environ["KAIBO_STRUCTURING_QUEUE_URL"]
    attributes = sqs_client().get_queue_attributes(QueueUrl=queue, AttributeNames=counts)["Attributes"]
    return all(attributes.get(name) == "0" for name in counts)


def wait_until(done: Callable[[], bool], timeout: float, what: str, interval: float) -> float:
    """Poll ``done`` until it holds; the seconds it took. RuntimeError after ``timeout``."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)
    return time.monotonic() - started


def drain_structuring(bench: Bench, before: str) -> None:
    """Wait until the stack's workers have structured every job the earlier sections left, so that
    the next section does not share the emulator and the CPU with that backlog."""
    # Every few seconds only: moto answers GetQueueAttributes by walking every message in the
    # queue, so polling a backlog of thousands often would slow the very drain it waits for.
    waited = wait_until(structuring_queue_empty, 1800.0, "the structuring backlog to drain", 3.0)
    if waited >= 1:
        bench.report.line(f"(waited {waited:.0f} s for the structuring backlog to drain before {before})")


def wait_for_job(bench: Bench, job_id: str) -> None:
    """Until the stack's workers are done with a cold child's job (structured, and its message
    deleted): the next child must not share the CPU with them. Without this, whichever child
    came next (the baseline, as runs alternate) ran slower."""
    wait_until(
        lambda: bench.client().job(job_id)["status"] in {"done", "failed"} and structuring_queue_empty(),
        60.0,
        f"job {job_id} structured",
        0.02,
    )


def cold_run(bench: Bench, script: str, stream: str, *flags: str, **extra: str) -> ColdRun:
    """One child: ``script`` with interpreter ``flags``, in the stack's environment plus ``extra``."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, "-c", script],
        cwd=ROOT,
        env=child_environment(bench, stream, **extra),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"cold-start child failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    if script is not BOTO3_SCRIPT and result["status"] != 202:
        raise RuntimeError(f"the remember handler answered {result['status']}: {done.stdout[-1000:]}")
    for job in result["jobs"]:
        wait_for_job(bench, job)
    return ColdRun(result["import"], result["client"], result["request"], result["second"], wall)


@dataclass(frozen=True)
class ImportProfile:
    """``-X importtime`` of the handler module, in ms."""

    direct: list[tuple[str, float, float]]  # direct imports of functions.remember.app: self, cumulative
    by_package: list[tuple[str, float, int]]  # top-level package: summed self time, modules
    by_module: list[tuple[str, float, float]]  # every module: self, cumulative
    total: float


def importtime_profile(bench: Bench) -> ImportProfile:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import functions.remember.app"],
        cwd=ROOT,
        env=child_environment(bench, "unused"),
        capture_output=True,
        text=True,
        check=True,
    )
    children_at: dict[int, list[tuple[str, float, float]]] = {}
    direct: list[tuple[str, float, float]] = []
    packages: dict[str, tuple[float, int]] = {}
    modules: list[tuple[str, float, float]] = []
    total = 0.0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|")
        depth = (len(name) - len(name.lstrip(" "))) // 2
        entry = (name.strip(), int(self_us) / 1000, int(cumulative_us) / 1000)
        children = children_at.pop(depth + 1, [])
        if entry[0] == "functions.remember.app":
            direct = children
        children_at.setdefault(depth, []).append(entry)
        modules.append(entry)
        package = entry[0].split(".")[0]
        own, count = packages.get(package, (0.0, 0))
        packages[package] = (own + entry[1], count + 1)
        total += entry[1]
    by_package = sorted(((name, own, n) for name, (own, n) in packages.items()), key=lambda e: -e[1])
    return ImportProfile(
        sorted(direct, key=lambda e: -e[2]), by_package, sorted(modules, key=lambda e: -e[1]), total
    )


#: `make build`'s output: the remember function and the layer as they are deployed.
BUILD_DIR: Final = ROOT / ".aws-sam" / "build"
BUILT_HANDLER_SCRIPT: Final = HANDLER_SCRIPT.replace(
    "from functions.remember.app import lambda_handler", "from app import lambda_handler"
)


def bench_built_cold_start(bench: Bench, stream: str) -> None:
    """The remember function as `make build` leaves it, imported the way Lambda does: no site
    packages (``-S``), its code directory and the layer on the path, nothing written (read-only
    /opt); with the layer's bytecode, with it removed (what SAM's python builder shipped), and
    the baseline with the layer's own boto3."""
    report = bench.report
    layer, function = BUILD_DIR / "KaiboCoreLayer" / "python", BUILD_DIR / "RememberFunction"
    report.line()
    if not (layer / "kaibo_core").is_dir() or not (function / "app.py").is_file():
        report.line("As deployed: skipped (no .aws-sam/build; run `make build` first, which needs the")
        report.line("package index).")
        return
    runs = max(3, bench.sizes.cold_runs // 2)
    with tempfile.TemporaryDirectory() as scratch:
        bare = Path(scratch)
        no_bytecode = shutil.ignore_patterns("__pycache__")
        shutil.copytree(layer, bare / "opt", ignore=no_bytecode)
        shutil.copytree(function, bare / "task", ignore=no_bytecode)
        local = ROOT / "local"  # the child builds its event with kaibo_local (stdlib only)
        variants: dict[str, tuple[str, list[Path]]] = {
            "remember, as built (bytecode in the layer)": (BUILT_HANDLER_SCRIPT, [function, layer, local]),
            "remember, without bytecode": (BUILT_HANDLER_SCRIPT, [bare / "task", bare / "opt", local]),
            "import boto3 + DynamoDB client (the layer's)": (BOTO3_SCRIPT, [layer]),
        }
        measured: dict[str, list[ColdRun]] = {name: [] for name in variants}
        for _ in range(runs):
            for name, (script, paths) in variants.items():
                lambda_like = {"PYTHONPATH": os.pathsep.join(map(str, paths)), "PYTHONDONTWRITEBYTECODE": "1"}
                measured[name].append(cold_run(bench, script, stream, "-S", **lambda_like))

    def ms(name: str, field: Callable[[ColdRun], float]) -> float:
        return median_ms(measured[name], field)

    report.line("As deployed: `make build` output imported as on Lambda (-S, nothing written), median")
    report.line(f"of {runs} runs each, alternating:")
    report.line()
    report.table(
        ["process", "import ms", "client ms", "first request ms", "in-child ms"],
        [
            [
                name,
                ms(name, lambda r: r.imported),
                ms(name, lambda r: r.client) if script is BOTO3_SCRIPT else "in request",
                ms(name, lambda r: r.request) if script is not BOTO3_SCRIPT else "-",
                ms(name, lambda r: r.total),
            ]
            for name, (script, _) in variants.items()
        ],
    )
    names = list(variants)
    report.line()
    report.line(
        f"Ratio as built / boto3: {ms(names[0], lambda r: r.total) / ms(names[2], lambda r: r.total):.2f}x; "
        f"without bytecode / boto3: {ms(names[1], lambda r: r.total) / ms(names[2], lambda r: r.total):.2f}x."
    )


def median_ms(runs: Sequence[ColdRun], field: Callable[[ColdRun], float]) -> float:
    """The median of one figure of cold runs, in ms."""
    return statistics.median(field(run) for run in runs) * 1000


def bench_cold_start(bench: Bench) -> None:
    report = bench.report
    runs = bench.sizes.cold_runs
    report.title(f"4. Cold start: a fresh process (median of {runs} runs each, alternating)")
    stream = f"bench-cold-{secrets.token_hex(3)}"
    handler, baseline = alternate_cold_runs(bench, stream, runs)
    ratio = report_cold_start(report, handler, baseline)
    splits = [cold_run(bench, HANDLER_SCRIPT, stream, BENCH_BREAKDOWN="1") for _ in range(3)]
    report.line()
    report.line(
        "Breakdown (3 diagnostic runs, medians; the client created before the first request): import "
        f"{median_ms(splits, lambda r: r.imported):.0f} ms, DynamoDB client "
        f"{median_ms(splits, lambda r: r.client):.0f} ms, "
        f"first request {median_ms(splits, lambda r: r.request):.0f} ms, second request "
        f"{median_ms(splits, lambda r: r.second):.0f} ms."
    )
    bench_built_cold_start(bench, stream)
    if ratio > COLD_START_TARGET:
        report_import_profile(report, importtime_profile(bench))


def alternate_cold_runs(bench: Bench, stream: str, runs: int) -> tuple[list[ColdRun], list[ColdRun]]:
    """``runs`` handler children and as many boto3 ones, alternating, after one of each unmeasured."""
    handler: list[ColdRun] = []
    baseline: list[ColdRun] = []
    cold_run(bench, HANDLER_SCRIPT, stream)  # warms the page and bytecode caches; not counted
    cold_run(bench, BOTO3_SCRIPT, stream)
    for _ in range(runs):
        handler.append(cold_run(bench, HANDLER_SCRIPT, stream))
        baseline.append(cold_run(bench, BOTO3_SCRIPT, stream))
    return handler, baseline


def report_cold_start(report: Report, handler: list[ColdRun], baseline: list[ColdRun]) -> float:
    """The handler's cold start next to boto3's; returns their ratio (in-child medians)."""

    def row(name: str, measured: list[ColdRun], client: object, request: object) -> list[object]:
        totals = [run.total * 1000 for run in measured]
        return [
            name,
            median_ms(measured, lambda r: r.imported),
            client,
            request,
            median_ms(measured, lambda r: r.total),
            min(totals),
            max(totals),
            median_ms(measured, lambda r: r.wall),
        ]

    report.table(
        [
            "process",
            "import ms",
            "client ms",
            "first request ms",
            "in-child ms",
            "min ms",
            "max ms",
            "wall ms",
        ],
        [
            row("remember handler", handler, "in request", median_ms(handler, lambda r: r.request)),
            row("import boto3 + DynamoDB client", baseline, median_ms(baseline, lambda r: r.client), "-"),
        ],
    )
    ratio = median_ms(handler, lambda r: r.total) / median_ms(baseline, lambda r: r.total)
    wall_ratio = median_ms(handler, lambda r: r.wall) / median_ms(baseline, lambda r: r.wall)
    report.line()
    report.line("in-child: from time.perf_counter() on the script's first line: the handler's import, then")
    report.line(
        "lambda_handler on a REST proxy event with an authorizer context against the running emulator"
    )
    report.line(
        "(building the event is not counted); or import boto3 + boto3.client('dynamodb'). wall: spawn to"
    )
    report.line("exit as the parent sees it, with interpreter start-up and shutdown.")
    report.line()
    report.line(
        f"Ratio handler / boto3 (in-child medians): {verdict(ratio, COLD_START_TARGET)}; "
        f"wall: {wall_ratio:.2f}x."
    )
    return ratio


def report_import_profile(report: Report, profile: ImportProfile) -> None:
    """Where the handler's import spends its time (shown when the cold-start target is missed)."""
    report.line()
    report.line(
        f"Target missed. -X importtime of functions.remember.app (one run, {profile.total:.0f} ms in total"
    )
    report.line("under importtime), self time by top-level package:")
    report.line()
    report.table(["package", "self ms", "modules"], [list(entry) for entry in profile.by_package[:10]])
    report.line()
    report.line("Modules by self time (module-level code included, e.g. objects built at import):")
    report.line()
    report.table(["module", "self ms", "cumulative ms"], [list(entry) for entry in profile.by_module[:8]])
    report.line()
    report.line("Direct imports of functions.remember.app (cumulative: a module shared by several is charged")
    report.line("to the first that imports it):")
    report.line()
    report.table(["module", "self ms", "cumulative ms"], [list(entry) for entry in profile.direct[:8]])


# --- Main -----------------------------------------------------------------------------------------


def run(sizes: Sizes, report: Report, cold_start_only: bool = False) -> None:
    stack = start_stack(port=0)
    front: HttpFront | None = None
    try:
        tables = {
            "events": os.environ["KAIBO_EVENTS_TABLE"],
            "idempotency": os.environ["KAIBO_IDEMPOTENCY_TABLE"],
            "projects": os.environ["KAIBO_PROJECTS_TABLE"],
        }
        front = HttpFront(LocalGateway(load_template(), loader=load_handler), port=0).start()
        bench = Bench(stack, front, DynamoMeter(dynamodb_client(), tables), Keys(), report, sizes, tables)
        remember(bench.inprocess_client(), bench.keys, "bench-warmup")  # loads the in-process handlers
        if not cold_start_only:
            warm_containers(bench)
            bench_requests(bench)
            bench_throughput(bench)
            drain_structuring(bench, "section 3")
            bench_latency(bench)
            drain_structuring(bench, "section 4")
        bench_cold_start(bench)
    finally:
        if front is not None:
            front.stop()
        stack.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes (1k stage only); < 1 minute")
    parser.add_argument("--cold-start-only", action="store_true", help="section 4 (cold start) alone")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    with real_stdout_only() as out:
        report = Report(out, layout="text")
        report.line(
            f"Kaibo remember benchmark ({'quick' if args.quick else 'full'} run) on {machine(*PACKAGES)}"
        )
        run(sizes, report, cold_start_only=args.cold_start_only)
        report.line()
        report.line(f"Done in {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

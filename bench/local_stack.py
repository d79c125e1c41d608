"""Benchmark of the local stack as users run it: ``python -m kaibo_local`` (what ``make run``
execs), over HTTP, with structuring running. Prints tables; not a test.

Run from the repository root (``make bench-local-stack``; ``bench/README.md``)::

    PYTHONPATH=.:local .venv/bin/python bench/local_stack.py [--quick] [--sizes 1000,10000]
        [--seeded-sizes 100000]

Every stack is a separate process started exactly as ``make run`` starts it (its own emulator,
its containers, its data folder in a temporary directory), and every figure is taken from the
outside, over HTTP, with ``KaiboClient``:

1. **appends/s**: 8 client threads, each remembering one chat message per request into a stream of
   its own, for a fixed time, structuring running behind (no ``wait``); then how long the
   structuring queue takes to drain, and how busy each kind of the stack's processes was
   meanwhile (the stack's own, the AWS emulator, the containers: which one is the bottleneck);
2. **durability on vs off**: remember latency, one client, on a stack with a data folder and on
   one with ``KAIBO_DATA_DIR=:memory:``, both running, requests alternating between them;
3. per size (1k, 10k memories by default): the stack filled over HTTP (batches of
   ``MAX_EVENTS_PER_BATCH`` LoCoMo turns, cycled; synthetic sentences if the data is absent),
   every job waited for; then **recall** p50/p95 over HTTP while a writer keeps appending (so
   structuring runs), **disk bytes per stored message**, and **start time** with that data (the
   stack stopped and started again on its folder);
4. per seeded size (``--seeded-sizes``, none by default): the same figures at sizes too large to
   fill over HTTP (about 20 events/s: 100k would take hours). A stack is started on a new folder
   (creating its development project) and stopped; then, in a child process, the folder's tables
   are restored into an emulator of its own (``kaibo_local.durability``, as the stack restores
   them), ``size`` memories with their term index (``bench/recall_cost.py``'s validated
   ``CorpusWorld`` and ``Seeder``) and ``size`` events (``bench/remember.py``'s ``Seeder``, the
   real chained items) are written straight into its moto backend, and the folder is compacted
   into one snapshot (timed: the stack compacts the same way, holding the DynamoDB lock, after
   every run of the purge schedule that erased anything). The seeded memories are provisional and cite made-up
   events, not the seeded ones; no structuring job exists for either. Then the stack is started
   on that folder (**start time** with the data), **recall** p50/p95 is measured with
   ``recall_cost.py``'s questions (its 50 needles and organic questions, which hit the seeded
   memories) while a writer appends, the needles' hits are counted, **appends/s** are measured
   as in 1, and the stack is started once more after that load;
5. function timeouts: every ``Task timed out`` line any stack wrote.

The start time of an empty stack is measured in 1.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: This checkout's code first, even where the venv has the packages installed from another one.
CODE_PATHS: Final = [str(ROOT / p) for p in ("", "local", "layers/kaibo_core", "clients/python")]
sys.path[:0] = [p for p in CODE_PATHS if p not in sys.path]

from bench.common import Report, machine, percentile, progress
from kaibo.client import KaiboClient
from kaibo.errors import KaiboAPIError
from kaibo_core.core.limits import MAX_EVENTS_PER_BATCH
from kaibo_local.stack import parse_announcement

DEFAULT_LOCOMO: Final = ROOT.parent / "shared" / "eval" / "locomo" / "locomo-dev.json"
START_TIMEOUT_SECONDS: Final = 600
STOP_TIMEOUT_SECONDS: Final = 30
APPEND_CLIENTS: Final = 8
FILL_CLIENTS: Final = 4
TIMED_OUT: Final = "Task timed out"


# --- the stack, as make run starts it --------------------------------------------------------------


@dataclass
class RunningStack:
    process: subprocess.Popen[bytes]
    stderr: Path
    values: dict[str, str]
    started_seconds: float

    @property
    def endpoint(self) -> str:
        return self.values["KAIBO_ENDPOINT"]

    @property
    def api_key(self) -> str:
        return self.values["KAIBO_API_KEY"]

    def client(self, timeout: float = 60) -> KaiboClient:
        return KaiboClient(self.endpoint, self.api_key, timeout=timeout, max_retries=0)

    def timeouts(self) -> int:
        return self.stderr.read_text(errors="replace").count(TIMED_OUT)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_stack(data_dir: str, logs: Path, name: str) -> RunningStack:
    """``python -m kaibo_local`` with ``PORT=0``, announced (its KAIBO_* lines read)."""
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / f"{name}.out", logs / f"{name}.err"
    environment = {
        **os.environ,
        "PORT": "0",
        "KAIBO_DATA_DIR": data_dir,
        "PYTHONPATH": os.pathsep.join(CODE_PATHS),
    }
    environment.pop("AWS_ENDPOINT_URL", None)
    began = time.monotonic()
    with out.open("wb") as stdout, err.open("ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "kaibo_local"],
            cwd=ROOT,
            env=environment,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = began + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        values = parse_announcement(out.read_text())
        if "KAIBO_DATA_DIR" in values:
            return RunningStack(process, err, values, time.monotonic() - began)
        time.sleep(0.02)  # polling the announcement, bounded by the deadline
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    raise SystemExit(f"the stack did not start:\n{err.read_text()[-3000:]}")


# --- what is remembered and asked --------------------------------------------------------------------


@dataclass
class Corpus:
    messages: list[str]
    questions: list[str]
    source: str


def load_corpus(path: Path) -> Corpus:
    """LoCoMo's development turns and questions, or synthetic sentences if the file is absent."""
    if path.is_file():
        samples = json.loads(path.read_text(encoding="utf-8"))
        messages = [
            f"{turn['speaker']}: {turn['text']}"
            for sample in samples
            for name, session in sorted(sample["conversation"].items())
            if name.startswith("session_") and isinstance(session, list)
            for turn in session
        ]
        questions = [str(qa["question"]) for sample in samples for qa in sample["qa"]]
        return Corpus(messages, questions, f"LoCoMo development turns ({path.name}, cycled)")
    progress(f"{path} is absent: synthetic sentences instead of LoCoMo turns")
    rng = random.Random(7)
    people = ["Alice", "Bob", "Priya", "Chen", "Dana", "Omar", "Lena", "Kofi"]
    things = ["release", "design review", "budget", "offsite", "migration", "invoice", "demo", "audit"]
    words = [f"w{n}" for n in range(3000)]
    messages = [
        f"{rng.choice(people)} says the {rng.choice(things)} moves to week {n % 52} "
        + " ".join(rng.choices(words, k=8))
        for n in range(20_000)
    ]
    questions = [f"When is the {thing}?" for thing in things] + [f"What did {p} say?" for p in people]
    return Corpus(messages, questions, "synthetic sentences (LoCoMo absent)")


def message(key: str, text: str) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}}


# --- 1. appends/s ---------------------------------------------------------------------------------


@dataclass
class Appends:
    acknowledged: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def append_for(stack: RunningStack, corpus: Corpus, seconds: float, clients: int, tag: str) -> Appends:
    result = Appends()
    stop_at = time.monotonic() + seconds

    def client_loop(number: int) -> None:
        client = stack.client()
        for n in itertools.count():
            if time.monotonic() >= stop_at:
                return
            text = corpus.messages[(number * 7919 + n) % len(corpus.messages)]
            began = time.perf_counter()
            try:
                answer = client.remember(f"{tag}-{number}", [message(f"{tag}-{number}-{n}", text)])
            except Exception as error:
                with result.lock:
                    result.errors.append(repr(error)[:200])
                continue
            with result.lock:
                result.latencies.append(time.perf_counter() - began)
                result.acknowledged += 1
                result.job_ids.append(str(answer["jobId"]))

    threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result


def wait_for_jobs(stack: RunningStack, job_ids: Sequence[str], timeout: float) -> float:
    """Seconds until every job is done (checked newest first: jobs finish roughly in order)."""
    client = stack.client()
    began = time.monotonic()
    pending = list(dict.fromkeys(job_ids))
    while pending:
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{len(pending)} jobs unfinished after {timeout:.0f} s")
        try:
            status = client.job(pending[-1])["status"]
        except KaiboAPIError as error:
            if error.status < 500:
                raise
            status = "unknown"  # the stack failed the poll (a function timed out): counted in its log
        if status == "done":
            pending.pop()
        elif status == "failed":
            raise SystemExit(f"job {pending[-1]} failed")
        else:
            time.sleep(0.2)  # polling the job, bounded by the timeout
    return time.monotonic() - began


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop(0))
        todo += sorted(children.get(tree[-1], []))
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def role(pid: int, stack_pid: int) -> str:
    """What a process of the stack's tree is: the stack, the emulator, a container."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if pid == stack_pid:
        return "stack (front, pollers, slots)"
    if "emulator_process" in command:
        return "AWS emulator"
    return "containers" if "spawn_main" in command else "other"


def bench_appends(report: Report, stack: RunningStack, corpus: Corpus, seconds: float) -> None:
    progress(f"appends: {APPEND_CLIENTS} clients for {seconds:.0f} s")
    tree = process_tree(stack.process.pid) if Path("/proc").is_dir() else []
    before = {pid: cpu_seconds(pid) for pid in tree}
    began = time.monotonic()
    appends = append_for(stack, corpus, seconds, APPEND_CLIENTS, "appends")
    busy: dict[str, float] = {}
    for pid in tree:
        name = role(pid, stack.process.pid)
        busy[name] = busy.get(name, 0.0) + cpu_seconds(pid) - before[pid]
    elapsed = time.monotonic() - began
    drain = wait_for_jobs(stack, appends.job_ids, timeout=1800)
    latencies = sorted(appends.latencies)
    report.table(
        [
            "clients",
            "seconds",
            "acknowledged",
            "appends/s",
            "p50 ms",
            "p95 ms",
            "errors",
            "queue drained after",
        ],
        [
            [
                APPEND_CLIENTS,
                f"{seconds:.0f}",
                appends.acknowledged,
                f"{appends.acknowledged / seconds:.1f}",
                f"{percentile(latencies, 0.5) * 1000:.0f}",
                f"{percentile(latencies, 0.95) * 1000:.0f}",
                len(appends.errors),
                f"{drain:.1f} s",
            ]
        ],
    )
    if busy:
        shares = ", ".join(f"{name} {100 * cpu / elapsed:.0f} %" for name, cpu in busy.items() if cpu > 0)
        report.line(f"CPU of the stack's processes while appending (100 % = one core): {shares}.")
    if appends.errors:
        report.line(f"First errors: {appends.errors[:3]}")


# --- 2. durability on vs off ----------------------------------------------------------------------------


def bench_durability(
    report: Report, durable: RunningStack, memory: RunningStack, corpus: Corpus, rounds: int
) -> None:
    progress(f"durability on vs off: {rounds} rounds of 10 remembers on each")
    on: list[float] = []
    off: list[float] = []
    clients = {"on": durable.client(), "off": memory.client()}
    for round_number in range(rounds):
        for name in ("on", "off") if round_number % 2 == 0 else ("off", "on"):
            for n in range(10):
                key = f"durability-{round_number}-{n}"
                began = time.perf_counter()
                clients[name].remember("durability", [message(key, corpus.messages[n])])
                (on if name == "on" else off).append(time.perf_counter() - began)
    p50_on, p50_off = percentile(sorted(on), 0.5), percentile(sorted(off), 0.5)
    report.table(
        ["data folder", "remembers", "p50 ms", "p95 ms"],
        [
            [
                "kept on disk (default)",
                len(on),
                f"{p50_on * 1000:.1f}",
                f"{percentile(sorted(on), 0.95) * 1000:.1f}",
            ],
            ["`:memory:`", len(off), f"{p50_off * 1000:.1f}", f"{percentile(sorted(off), 0.95) * 1000:.1f}"],
        ],
    )
    report.line(f"Durability costs {p50_on / p50_off:.2f}x remember p50 (on / off, same run, alternating).")


# --- 3. per size: fill, recall, disk, restart -------------------------------------------------


def fill(stack: RunningStack, corpus: Corpus, events: int) -> float:
    """Remember ``events`` turns in batches from FILL_CLIENTS threads; seconds until all structured."""
    batches = [
        list(range(start, min(start + MAX_EVENTS_PER_BATCH, events)))
        for start in range(0, events, MAX_EVENTS_PER_BATCH)
    ]
    jobs: list[str] = []
    lock = threading.Lock()
    began = time.monotonic()

    def client_loop(number: int) -> None:
        client = stack.client(timeout=120)
        for batch in batches[number::FILL_CLIENTS]:
            body = [message(f"fill-{i}", corpus.messages[i % len(corpus.messages)]) for i in batch]
            answer = client.remember(f"fill-{batch[0] // 1000}", body)
            with lock:
                jobs.append(str(answer["jobId"]))

    threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(FILL_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_for_jobs(stack, jobs, timeout=7200)
    return time.monotonic() - began


def recall_under_load(stack: RunningStack, corpus: Corpus, questions: int) -> tuple[list[float], int, int]:
    """Recall latencies (one client) while a writer appends; (latencies, abstains, appended)."""
    stop = threading.Event()
    appended = [0]

    def writer() -> None:
        client = stack.client()
        for n in itertools.count():
            if stop.is_set():
                return
            with contextlib.suppress(Exception):
                client.remember(
                    "recall-load", [message(f"load-{time.time_ns()}-{n}", corpus.messages[n % 500])]
                )
                appended[0] += 1
            stop.wait(0.2)  # about 5 appends/s: structuring keeps running during the recalls

    thread = threading.Thread(target=writer)
    thread.start()
    client = stack.client()
    latencies: list[float] = []
    abstains = 0
    try:
        for question in itertools.islice(itertools.cycle(corpus.questions), questions):
            began = time.perf_counter()
            answer = client.recall(question, 300)
            latencies.append(time.perf_counter() - began)
            abstains += bool(answer["abstain"]["abstained"])
    finally:
        stop.set()
        thread.join()
    return latencies, abstains, appended[0]


def folder_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.iterdir() if entry.is_file())


@dataclass
class SizeRow:
    events: int
    fill_seconds: float
    recall: list[float]
    abstains: int
    appended_during: int
    bytes_per_message: float
    restart_seconds: float
    timeouts: int


def bench_size(logs: Path, corpus: Corpus, events: int, questions: int) -> SizeRow:
    folder = Path(tempfile.mkdtemp(prefix=f"kaibo-bench-{events}-"))
    progress(f"{events} events: filling a stack over HTTP")
    stack = start_stack(str(folder), logs, f"size-{events}")
    try:
        fill_seconds = fill(stack, corpus, events)
        progress(f"{events} events: {questions} recalls while appending")
        latencies, abstains, appended = recall_under_load(stack, corpus, questions)
    finally:
        stack.stop()
    progress(f"{events} events: started again on its folder")
    again = start_stack(str(folder), logs, f"size-{events}")
    try:
        stored = events + appended
        return SizeRow(
            events,
            fill_seconds,
            sorted(latencies),
            abstains,
            appended,
            folder_bytes(folder) / stored,  # compacted at start: one snapshot, an empty journal
            again.started_seconds,
            again.timeouts(),  # both stacks append to the same log
        )
    finally:
        again.stop()


def report_sizes(report: Report, rows: Sequence[SizeRow]) -> None:
    report.table(
        [
            "memories",
            "filled + structured in",
            "recall p50 ms",
            "recall p95 ms",
            "abstained",
            "appends during recalls",
            "disk bytes / message",
            "start with this data",
            "function timeouts",
        ],
        [
            [
                f"{row.events:,}",
                f"{row.fill_seconds:.0f} s ({row.events / row.fill_seconds:.0f} events/s)",
                f"{percentile(row.recall, 0.5) * 1000:.0f}",
                f"{percentile(row.recall, 0.95) * 1000:.0f}",
                f"{row.abstains}/{len(row.recall)}",
                row.appended_during,
                f"{row.bytes_per_message:,.0f}",
                f"{row.restart_seconds:.1f} s",
                row.timeouts,
            ]
            for row in rows
        ],
    )


# --- 4. per seeded size: stored straight into the emulator's tables, then measured over HTTP ------------


@dataclass(frozen=True)
class SeededData:
    """What ``seed_folder`` stored, and ``bench/recall_cost.py``'s questions about it."""

    memories: int
    postings: int
    events: int
    seconds: float
    compact_seconds: float  # one compaction of the folder, as after every purge run
    questions: list[str]
    needles: dict[str, str]  # a needle's question -> the id of the memory it must recall


def seed_folder(folder: str, size: int, questions: int) -> dict[str, Any]:
    """In a child process: ``size`` memories and ``size`` events added to a stopped stack's folder.

    The folder's tables are restored into an emulator of this process as the stack restores them,
    seeded straight into its moto backend, and compacted into one snapshot (``SeededData``'s fields).
    """
    # moto, the emulator and the seeders are imported here only, never in the benchmark's process.
    import boto3  # noqa: PLC0415

    from bench.common import REGION, use_fake_aws  # noqa: PLC0415
    from bench.recall_cost import NEEDLES, CorpusWorld  # noqa: PLC0415
    from bench.remember import Seeder as EventSeeder  # noqa: PLC0415
    from bench.remember import seed_stage  # noqa: PLC0415
    from kaibo_core.core.storage_keys import ProjectId  # noqa: PLC0415
    from kaibo_local.data_dir import DataDir  # noqa: PLC0415
    from kaibo_local.durability import DurableTables, read_stored_tables  # noqa: PLC0415
    from kaibo_local.emulator import start_emulator  # noqa: PLC0415
    from kaibo_local.template import create_tables, load_template  # noqa: PLC0415

    began = time.monotonic()
    use_fake_aws()
    data_dir = DataDir.open(Path(folder))
    emulator = start_emulator()
    try:
        manifest = data_dir.manifest()
        if manifest is None:
            raise RuntimeError(f"{folder} holds no stack: start one on it first")
        dynamodb = boto3.client("dynamodb", endpoint_url=emulator.endpoint_url, region_name=REGION)
        tables = create_tables(dynamodb, load_template(), manifest.table_suffix)
        durable = DurableTables(data_dir, emulator, tables.values())
        durable.restore(read_stored_tables(data_dir))
        project = ProjectId(manifest.project_id)
        corpus = CorpusWorld(tables).corpus(project, size, max(0, questions - NEEDLES))
        event_tables = {"events": tables["EventsTable"], "idempotency": tables["IdempotencyTable"]}
        events, _ = seed_stage(EventSeeder(project, event_tables), "seeded", size)
        compacting = time.monotonic()
        durable.compact()  # as the stack does after every purge run, holding the DynamoDB lock
        compact_seconds = time.monotonic() - compacting
        durable.close()
    finally:
        emulator.stop()
        data_dir.close()
    asked = corpus["questions"]
    return {
        "memories": corpus["memories"],
        "postings": corpus["postings"],
        "events": events,
        "seconds": time.monotonic() - began,
        "compact_seconds": compact_seconds,
        "questions": [question["text"] for question in asked],
        "needles": {q["text"]: q["target"] for q in asked if q["kind"] != "organic"},
    }


def needle_hits(stack: RunningStack, needles: dict[str, str]) -> int:
    """How many needle questions recall (budget 300) the memory planted for them."""
    client = stack.client()
    return sum(
        target in {str(item["memoryId"]) for item in client.recall(question, 300)["items"]}
        for question, target in needles.items()
    )


@dataclass
class SeededRow:
    data: SeededData
    disk_bytes: int
    start_seconds: float
    recall: list[float]
    abstains: int
    needle_hits: int
    appends: Appends
    append_seconds: float
    drain_seconds: float
    restart_seconds: float
    timeouts: int


def bench_seeded_size(logs: Path, corpus: Corpus, size: int, questions: int, seconds: float) -> SeededRow:
    folder = Path(tempfile.mkdtemp(prefix=f"kaibo-bench-seeded-{size}-"))
    name = f"seeded-{size}"
    start_stack(str(folder), logs, name).stop()  # a new folder: its tables, development project, keys
    progress(f"{size:,} seeded: memories and events straight into the emulator's tables (child process)")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
        data = SeededData(**child.submit(seed_folder, str(folder), size, questions).result())
    disk_bytes = folder_bytes(folder)
    progress(f"{size:,} seeded in {data.seconds:.0f} s ({disk_bytes / 2**20:.0f} MB): starting the stack")
    stack = start_stack(str(folder), logs, name)
    try:
        progress(f"{size:,} seeded: {questions} recalls while appending, then the needles")
        asked = Corpus(corpus.messages, data.questions, "bench/recall_cost.py's questions")
        latencies, abstains, _ = recall_under_load(stack, asked, questions)
        hits = needle_hits(stack, data.needles)
        progress(f"{size:,} seeded: appends, {APPEND_CLIENTS} clients for {seconds:.0f} s")
        appends = append_for(stack, corpus, seconds, APPEND_CLIENTS, name)
        drain = wait_for_jobs(stack, appends.job_ids, timeout=1800)
    finally:
        stack.stop()
    progress(f"{size:,} seeded: started again on its folder")
    again = start_stack(str(folder), logs, name)
    again.stop()
    shutil.rmtree(folder, ignore_errors=True)  # 600 MB at 100k
    return SeededRow(
        data,
        disk_bytes,
        stack.started_seconds,
        sorted(latencies),
        abstains,
        hits,
        appends,
        seconds,
        drain,
        again.started_seconds,
        again.timeouts(),  # every stack of this size appends to the same log
    )


def report_seeded(report: Report, rows: Sequence[SeededRow]) -> None:
    report.table(
        [
            "stored (seeded, not filled over HTTP)",
            "seeded + compacted in",
            "one compaction",
            "disk",
            "start with this data",
            "recall p50 ms",
            "recall p95 ms",
            "abstained",
            "needles recalled",
            "appends/s",
            "append p50 / p95 ms",
            "queue drained after",
            "start again after the load",
            "function timeouts",
        ],
        [
            [
                f"{row.data.memories:,} memories ({row.data.postings:,} postings) "
                f"+ {row.data.events:,} events",
                f"{row.data.seconds:.0f} s",
                f"{row.data.compact_seconds:.1f} s",
                f"{row.disk_bytes / 2**20:,.0f} MB",
                f"{row.start_seconds:.1f} s",
                f"{percentile(row.recall, 0.5) * 1000:.0f}",
                f"{percentile(row.recall, 0.95) * 1000:.0f}",
                f"{row.abstains}/{len(row.recall)}",
                f"{row.needle_hits}/{len(row.data.needles)}",
                f"{row.appends.acknowledged / row.append_seconds:.1f} ({len(row.appends.errors)} errors)",
                f"{percentile(sorted(row.appends.latencies), 0.5) * 1000:.0f} / "
                f"{percentile(sorted(row.appends.latencies), 0.95) * 1000:.0f}",
                f"{row.drain_seconds:.0f} s",
                f"{row.restart_seconds:.1f} s",
                row.timeouts,
            ]
            for row in rows
        ],
    )
    report.line(
        "Seeded straight into the emulator's tables in a child process (the folder's tables restored as "
        "the stack restores them, then compacted into one snapshot), not filled over HTTP: provisional "
        "memories with their term index (bench/recall_cost.py's validated seeder and its synthetic "
        "corpus) and chained chat events (bench/remember.py's seeder), unrelated to each other; no "
        "structuring job for either. Recall: recall_cost.py's questions (its 50 needles, then organic "
        f"ones), one client, budget 300, a writer appending about 5/s meanwhile; appends: {APPEND_CLIENTS} "
        "clients, one message per request, structuring running; disk: the folder after seeding. One "
        "compaction: the folder rewritten as one snapshot, as the stack does at start after writes and "
        "after every run of the purge schedule that erased anything, holding the DynamoDB lock meanwhile."
    )


# --- main ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def stacks(logs: Path, *names_and_folders: tuple[str, str]) -> Iterator[list[RunningStack]]:
    running: list[RunningStack] = []
    try:
        for name, folder in names_and_folders:
            running.append(start_stack(folder, logs, name))
        yield running
    finally:
        for stack in running:
            stack.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short runs, 1k memories only")
    parser.add_argument(
        "--sizes", default="1000,10000", help="memories per size stage (default: %(default)s)"
    )
    parser.add_argument(
        "--seeded-sizes",
        default="",
        help="memories (and events) per seeded stage, stored straight into the emulator (default: none)",
    )
    parser.add_argument(
        "--seconds", type=float, default=60, help="appends stage length (default: %(default)s)"
    )
    parser.add_argument("--questions", type=int, default=300, help="recalls per size (default: %(default)s)")
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_LOCOMO, help="locomo-dev.json (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(size) for size in args.sizes.split(",") if size.strip()]
    seeded_sizes = [int(size) for size in args.seeded_sizes.split(",") if size.strip()]
    seconds = 15.0 if args.quick else args.seconds
    questions = 60 if args.quick else args.questions
    corpus = load_corpus(args.data)
    logs = Path(tempfile.mkdtemp(prefix="kaibo-bench-logs-"))
    report = Report()
    report.line(f"# The local stack as users run it ({machine()})")
    report.line(
        f"Each stack is `python -m kaibo_local` (what `make run` execs) with its data folder in a temporary "
        f"directory, measured over HTTP from this process. Messages: {corpus.source}. Logs: {logs}."
    )
    timeouts = 0
    folder = tempfile.mkdtemp(prefix="kaibo-bench-appends-")
    with stacks(logs, ("appends", folder), ("memory", ":memory:")) as (durable, memory):
        report.line("")
        report.line(
            f"## Start, empty: {durable.started_seconds:.1f} s (data folder), "
            f"{memory.started_seconds:.1f} s (`:memory:`)"
        )
        report.line("")
        report.line("## Remember sustained, structuring running")
        bench_appends(report, durable, corpus, seconds)
        report.line("")
        report.line("## Durability on vs off")
        bench_durability(report, durable, memory, corpus, rounds=10 if args.quick else 30)
    timeouts += durable.timeouts() + memory.timeouts()
    rows = [bench_size(logs, corpus, size, questions) for size in sizes]
    if rows:
        report.line("")
        report.line("## Per size: recall with structuring running, disk, start")
        report_sizes(report, rows)
        timeouts += sum(row.timeouts for row in rows)
    seeded = [bench_seeded_size(logs, corpus, size, questions, seconds) for size in seeded_sizes]
    if seeded:
        report.line("")
        report.line("## Per seeded size: data seeded into the emulator's tables, not filled over HTTP")
        report_seeded(report, seeded)
        timeouts += sum(row.timeouts for row in seeded)
    report.line("")
    report.line(f"Function timeouts in every stack's log: {timeouts}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

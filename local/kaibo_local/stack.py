"""The whole service on one machine: ``python -m kaibo_local`` (``make run``).

One process tree, no AWS account, no Docker:

- the AWS emulator (moto, DynamoDB serialized) on 127.0.0.1, random port, in a process of its
  own (kaibo_local.emulator_process), which also keeps the data folder's journal;
- every table, queue and schedule created from template.yaml;
- the HTTP front on 127.0.0.1:$PORT (default 3000) running the template's
  authorizer and handlers in worker processes ("containers",
  ``KAIBO_LOCAL_CONTAINERS``, default 4), so requests run concurrently;
- pollers for the template's queue consumers, timers for its schedules, each with a container
  of its own (as each function scales on its own on Lambda);
- a development project and key, printed as ``KAIBO_*=`` lines for scripts;
- the data folder (``KAIBO_DATA_DIR``, kaibo_local.data_dir): the tables kept on disk
  (kaibo_local.durability) and the keys, so a restart, even after ``kill -9``, finds what was
  acknowledged; the unfinished structuring jobs are queued again at start.

The handlers read their settings from the environment exactly as on Lambda: the
stack resolves each function's template environment and sets it in-process
(all functions share one process, so the union of their variables is set).

Starting: the HTTP port is taken first, then the data folder is locked and read, before the
emulator or any worker starts, so a port in use (or a PORT that is not a port), an unusable
folder or a damaged journal ends the start at once with one line on stderr saying what to do
(``StartError``; exit status 1), as does a container that cannot load the handlers.

Stopping (SIGINT — a terminal's Ctrl-C —, SIGTERM or SIGHUP): no new requests, the pollers and
timers told to stop, the containers ended (busy ones killed after a second, see
kaibo_local.containers), the emulator's process stopped. An emulator that ends without being
stopped ends the stack (one line on stderr, status 1): what it acknowledged is on disk.
Whatever state the workers are in, the whole process tree is gone within
``STOP_DEADLINE_SECONDS``: past it (or at a second signal) the workers are killed and the process
exits at once.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import secrets
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final, Literal, TextIO

import boto3
from botocore.config import Config

from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.adapters.sqs_jobs import SqsJobQueue
from kaibo_core.core.api_keys import admin_key_hash, issue_admin_key
from kaibo_core.services.admin import AdminService
from kaibo_local.containers import DEFAULT_CONTAINERS, ContainerPool, ContainerPoolStoppedError
from kaibo_local.data_dir import IN_MEMORY, DataDir, DataDirError, Manifest, configured_data_dir, reset
from kaibo_local.durability import StoredTables, read_stored_tables
from kaibo_local.emulator_process import (
    EmulatorProcess,
    EmulatorProcessError,
    Restored,
    create_kms_keys,
    kill_all,
)
from kaibo_local.gateway import INTEGRATION_TIMEOUT_SECONDS, Handler, LocalGateway
from kaibo_local.http_front import HttpFront
from kaibo_local.kms_keys import KeptKeys
from kaibo_local.template import (
    FunctionSpec,
    create_tables,
    function_specs,
    load_template,
    resolve_environment,
)
from kaibo_local.workers import QueuePoller, ScheduleTimer, ScheduleTrigger, create_queues, triggers

log = logging.getLogger("kaibo_local")

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "kaibo-local",
    "AWS_SECRET_ACCESS_KEY": "kaibo-local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",  # EMF lines would flood stdout; CloudWatch reads them on AWS
    "POWERTOOLS_METRICS_NAMESPACE": "Kaibo",
    "POWERTOOLS_SERVICE_NAME": "kaibo",  # the template's AWS::StackName locally (template.py)
}
#: Environment variables that override a schedule's rate locally, per function logical id.
SCHEDULE_OVERRIDES = {"PurgeFunction": "KAIBO_PURGE_INTERVAL_SECONDS"}
#: Template parameters the local stack takes from its own environment (variable → parameter).
PARAMETERS_FROM_ENVIRONMENT = {
    "KAIBO_PURGE_GRACE_SECONDS": "PurgeGraceSeconds",
    "KAIBO_SWEEP_AFTER_SECONDS": "SweepAfterSeconds",
    "KAIBO_SEMANTIC_MODEL": "SemanticModel",
    "KAIBO_RECALL_CONTEXT": "RecallContext",
}
#: Schedules after whose runs the data folder is compacted (when the run erased anything): what a
#: purge erased must leave the files on disk too, not only the tables in memory.
COMPACT_AFTER = frozenset({"PurgeFunction"})
#: Unfinished jobs queued again at start, per shard of the sweeper's list (the sweeper takes the rest).
REQUEUE_AT_START_LIMIT = 10_000
#: A stop that takes longer than this is cut short: the workers are killed and the process exits.
STOP_DEADLINE_SECONDS = 8.0
#: How long a stop waits for each poller or timer to leave (they are woken by the containers' stop).
LOOP_JOIN_SECONDS = 2.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: A stop signal this long after the first one kills the workers at once (a second Ctrl-C).
SECOND_SIGNAL_AFTER_SECONDS = 1.0

Loop = QueuePoller | ScheduleTimer


class StartError(Exception):
    """The stack cannot start for a reason the user can fix; the message says what and what to do."""


def _stop_all(
    front: HttpFront | None,
    pools: list[ContainerPool],
    loops: list[Loop],
    emulator: EmulatorProcess | None,
    store: Store | None = None,
) -> None:
    """Stop what was started, in an order that never waits on a function: the loops are told to
    stop, the front stops taking requests, the containers end (failing what they ran), then the
    loops are awaited, the emulator stops and the data folder is closed (every write it
    acknowledged is already on disk)."""
    steps: list[Any] = [loop.request_stop for loop in loops]
    if front is not None:
        steps.append(front.stop)
    steps.extend(pool.stop for pool in pools)
    steps.extend(lambda loop=loop: loop.join(LOOP_JOIN_SECONDS) for loop in loops)
    if emulator is not None:
        steps.append(emulator.stop)
    if store is not None:
        steps.append(store.close)
    for step in steps:
        try:
            step()
        except Exception:
            log.exception("while stopping")


@dataclass
class Store:
    """The data folder a stack runs on: locked here, its stored tables read and checked before
    anything starts; the emulator process restores them and keeps them (its journal)."""

    data_dir: DataDir
    manifest: Manifest | None
    stored: StoredTables | None  # as read at start; dropped once the emulator has restored it
    restored: Restored | None = None

    @property
    def path(self) -> Path:
        return self.data_dir.path

    @property
    def restored_items(self) -> int:
        return 0 if self.restored is None else self.restored.items

    def close(self) -> None:
        self.data_dir.close()


def _open_store(path: Path) -> Store:
    """Lock and read the data folder, before anything starts; StartError if it can't be used."""
    try:
        data_dir = DataDir.open(path)
    except DataDirError as error:
        raise StartError(str(error)) from None
    try:
        manifest = data_dir.manifest()
        stored = read_stored_tables(data_dir)
        store = Store(data_dir, manifest, stored)
    except DataDirError as error:
        data_dir.close()
        raise StartError(str(error)) from None
    if stored.torn_bytes:
        sys.stderr.write(
            f"kaibo-local: the journal in {path} ended in a torn write ({stored.torn_bytes} bytes, "
            "never acknowledged: a stop by kill -9 or a crash); recovered up to the last complete "
            f"write ({len(stored.journal)} writes after the snapshot)\n"
        )
    return store


#: How every line of the announcement starts: each is a shell command that sets one KAIBO_ variable.
ANNOUNCE_PREFIX: Final = "export "


def parse_announcement(text: str) -> dict[str, str]:
    """The ``KAIBO_*`` values of ``LocalStack.announce``'s lines in ``text`` (other lines ignored;
    a line still being written, without its newline, is ignored too)."""
    values: dict[str, str] = {}
    for line in text.splitlines(keepends=True):
        if line.startswith(f"{ANNOUNCE_PREFIX}KAIBO_") and line.endswith("\n"):
            name, value = shlex.split(line.removeprefix(ANNOUNCE_PREFIX))[0].split("=", 1)
            values[name] = value
    return values


@dataclass
class LocalStack:
    emulator: EmulatorProcess
    front: HttpFront
    containers: ContainerPool
    admin_key: str
    api_key: str
    project_id: str
    loops: list[Loop] = field(default_factory=list)
    store: Store | None = None
    requeued_jobs: int = 0
    background: ContainerPool | None = None
    _stopped: bool = field(default=False, init=False, repr=False)

    @property
    def data_dir(self) -> Path | None:
        return None if self.store is None else self.store.path

    def compact(self) -> None:
        """Rewrite the data folder as one snapshot of the tables now (no-op in memory)."""
        if self.store is not None:
            self.emulator.compact()

    @property
    def endpoint(self) -> str:
        return self.front.url

    def announce(self, out: TextIO) -> None:
        """One ``export KAIBO_…=…`` line per value, shell-quoted: ``eval "$(… | grep '^export KAIBO_')"``
        sets them (``parse_announcement`` reads them back)."""
        values = {
            "KAIBO_ENDPOINT": self.endpoint,
            "KAIBO_API_KEY": self.api_key,
            "KAIBO_ADMIN_KEY": self.admin_key,
            "KAIBO_AWS_ENDPOINT": self.emulator.endpoint_url,
            "KAIBO_PROJECT_ID": self.project_id,
            "KAIBO_DATA_DIR": str(self.data_dir or IN_MEMORY),
        }
        out.writelines(f"{ANNOUNCE_PREFIX}{name}={shlex.quote(value)}\n" for name, value in values.items())
        out.flush()

    def stop(self) -> None:
        """Stop everything (idempotent); returns within a few seconds whatever the workers do."""
        if self._stopped:
            return
        self._stopped = True
        pools = [self.containers] if self.background is None else [self.containers, self.background]
        _stop_all(self.front, pools, self.loops, self.emulator, self.store)


def _client(service: Literal["dynamodb", "sqs", "kms"], endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, config=Config(retries={"mode": "standard"}))


def _listen(gateway: LocalGateway, host: str, port: int) -> HttpFront:
    """The HTTP front, bound and listening (not serving yet); StartError if the port can't be had."""
    try:
        return HttpFront(gateway, host=host, port=port)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise StartError(
                f"port {port} is in use; set PORT=... (PORT=0 picks a free one) or stop the other process"
            ) from None
        if error.errno == errno.EACCES:
            raise StartError(f"port {port} needs privileges; set PORT=... to a port above 1023") from None
        raise StartError(
            f"cannot listen on {host}:{port} ({error.strerror or error}); set PORT=..."
        ) from None


def _number(name: str, default: int, low: int, high: int) -> int:
    text = os.environ.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise StartError(f"{name} must be a whole number from {low} to {high}, not {text!r}")
    return value


def start_stack(
    port: int = 3000,
    host: str = "127.0.0.1",
    template: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
    data_dir: Path | None = None,
    *,
    on_emulator_death: Callable[[int], None] | None = None,
) -> LocalStack:
    """Start the whole stack (``template``: template.yaml's, unless given) on ``data_dir`` (None:
    in memory only); StartError for a problem the user can fix; ContainerPoolStoppedError if
    ``cancel`` is set while it starts. ``on_emulator_death(status)`` is called if the emulator
    process ends without being stopped (default: an error is logged)."""
    template = load_template() if template is None else template
    started: list[ContainerPool] = []  # the front calls its loader at the first request, after start

    def api_loader(spec: FunctionSpec) -> Handler:
        # API Gateway waits 29 s for a function; queue pollers and schedules wait until it answers.
        return started[0].loader(spec, wait_seconds=INTEGRATION_TIMEOUT_SECONDS)

    front = _listen(LocalGateway(template, loader=api_loader), host, port)  # first: before any worker
    emulator: EmulatorProcess | None = None
    pools: list[ContainerPool] = []
    store: Store | None = None
    loops: list[Loop] = []
    try:
        count = _number("KAIBO_LOCAL_CONTAINERS", DEFAULT_CONTAINERS, 1, 256)
        store = _open_store(data_dir) if data_dir is not None else None
        os.environ.update(FAKE_AWS)
        emulator = _start_emulator(host, cancel, on_emulator_death)
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
        aws = _Resources.create(emulator, template, store)
        specs = function_specs(template)
        for spec in specs:
            os.environ.update(
                resolve_environment(spec.environment, aws.names, _parameters(aws.admin_hash), template)
            )
        # Handlers log JSON to stdout; locally only warnings and errors, unless asked.
        for name in ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL"):
            os.environ[name] = os.environ.get("KAIBO_LOG_LEVEL", "WARNING")
        manifest = aws.development_project(store)

        queue_triggers, schedule_triggers = triggers(template, specs, _parameters(aws.admin_hash))
        containers = ContainerPool(specs, count)
        pools.append(containers)
        started.append(containers)
        # Each queue and schedule gets a container of its own, as each function scales on its own on
        # Lambda: requests holding every API container (remember waiting for its structuring) must
        # never keep the structuring they wait for from running.
        background = ContainerPool(specs, max(1, len(queue_triggers) + len(schedule_triggers)))
        pools.append(background)
        _wait_warm(pools, cancel)
        front.start()
        by_id = {spec.logical_id: spec for spec in specs}
        for trigger in queue_triggers:
            poller = QueuePoller(
                aws.sqs, trigger, aws.names[trigger.queue], background.loader(by_id[trigger.function])
            )
            loops.append(poller.start())
        for schedule in schedule_triggers:
            timer = _schedule(schedule, background.loader(by_id[schedule.function]), emulator, store)
            loops.append(timer.start())
        stored_before = store is not None and store.restored is not None and not store.restored.empty
        requeued = aws.requeue_unfinished_jobs() if stored_before else 0
    except BaseException:
        _stop_all(front, pools, loops, emulator, store)
        raise
    return LocalStack(
        emulator,
        front,
        containers,
        manifest.admin_key,
        manifest.api_key,
        manifest.project_id,
        loops,
        store,
        requeued,
        background,
    )


@dataclass
class _Resources:
    """The emulator's tables and queues for this run, and the keys: kept ones, or new."""

    dynamodb: Any
    sqs: Any
    names: dict[str, str]  # logical id → table name or queue URL
    manifest: Manifest | None
    suffix: str
    admin_key: str
    kms_keys: KeptKeys

    @property
    def admin_hash(self) -> str:
        return admin_key_hash(self.admin_key)

    @classmethod
    def create(cls, emulator: EmulatorProcess, template: dict[str, Any], store: Store | None) -> _Resources:
        """Tables and queues from the template, named as in the data folder's manifest (new names
        in a new folder), the tables restored from the folder and recorded from now on."""
        manifest = store.manifest if store is not None else None
        suffix = manifest.table_suffix if manifest is not None else secrets.token_hex(3)
        dynamodb = _client("dynamodb", emulator.endpoint_url)
        sqs = _client("sqs", emulator.endpoint_url)
        if manifest is not None:
            _remove_leftovers(dynamodb, sqs, suffix)
        tables = create_tables(dynamodb, template, suffix)
        names = {**tables, **create_queues(sqs, template, suffix)}
        # The keys' material is set inside moto's KMS backend: in the emulator's process.
        kms_keys: KeptKeys = emulator.call(
            create_kms_keys, emulator.endpoint_url, template, manifest.kms_keys if manifest else {}
        )
        names |= {logical_id: key_id for logical_id, (key_id, _material) in kms_keys.items()}
        if store is not None:
            _restore(emulator, store, list(tables.values()))
        admin_key = manifest.admin_key if manifest is not None else issue_admin_key()[0]
        return cls(dynamodb, sqs, names, manifest, suffix, admin_key, kms_keys)

    def development_project(self, store: Store | None) -> Manifest:
        """The kept development project and key, or a new one (saved in the folder)."""
        if self.manifest is not None:
            if self.manifest.kms_keys != self.kms_keys and store is not None:
                # a folder from before the stack kept KMS keys
                kept = replace(self.manifest, kms_keys=self.kms_keys)
                store.data_dir.save_manifest(kept)
                return kept
            return self.manifest
        projects = AdminService(DynamoProjectStore(self.dynamodb, self.names["ProjectsTable"]))
        dev = projects.create_project("development")
        manifest = Manifest(self.suffix, self.admin_key, dev.key.project_id, dev.key.api_key, self.kms_keys)
        if store is not None:
            store.data_dir.save_manifest(manifest)
        return manifest

    def requeue_unfinished_jobs(self) -> int:
        """Queue a message for every unfinished structuring job: the last run's queue messages are
        gone (queues are not kept), the jobs table knows which jobs they were. Structuring is
        idempotent, so a job that was done meanwhile costs one read."""
        jobs = DynamoJobStore(self.dynamodb, self.names["JobsTable"])
        pending = jobs.pending_before(datetime(9999, 1, 1, tzinfo=UTC), REQUEUE_AT_START_LIMIT)
        queue = SqsJobQueue(self.sqs, self.names["StructuringQueue"])
        return queue.send_many([(job.project, job.job_id) for job in pending])


def _start_emulator(
    host: str, cancel: threading.Event | None, on_death: Callable[[int], None] | None
) -> EmulatorProcess:
    """The emulator's process, listening; StartError if it cannot start, ContainerPoolStoppedError
    if ``cancel`` is set meanwhile."""

    def died(status: int) -> None:
        log.error("the AWS emulator %s", _how_it_ended(status))

    try:
        return EmulatorProcess.start(host=host, on_death=on_death or died, cancel=cancel)
    except EmulatorProcessError as error:
        if error.kind == "cancelled":
            raise ContainerPoolStoppedError(str(error)) from None
        raise StartError(str(error)) from None


def _how_it_ended(status: int) -> str:
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _restore(emulator: EmulatorProcess, store: Store, table_names: list[str]) -> None:
    """The data folder's tables into the emulator's, journalled from then on (in its process)."""
    try:
        store.restored = emulator.restore(store.path, table_names)
    except EmulatorProcessError as error:
        if error.kind == "DataDirError":
            raise StartError(str(error)) from None
        raise
    store.stored = None  # read and checked at start; the emulator has its own copy now


def _parameters(admin_hash: str) -> dict[str, str]:
    """Template parameters for this run: the admin key's hash, and those set in the environment."""
    given = {"AdminKeyHash": admin_hash}
    for variable, parameter in PARAMETERS_FROM_ENVIRONMENT.items():
        if os.environ.get(variable, "").strip():
            given[parameter] = os.environ[variable].strip()
    return given


def _wait_warm(pools: list[ContainerPool], cancel: threading.Event | None) -> None:
    """Until every container has its handlers (the stack is announced only then)."""
    try:
        for pool in pools:
            pool.wait_warm(cancel=cancel)
    except ContainerPoolStoppedError:
        raise
    except RuntimeError as error:
        raise StartError(str(error)) from None


def _schedule(
    schedule: ScheduleTrigger, handler: Handler, emulator: EmulatorProcess, store: Store | None
) -> ScheduleTimer:
    override = os.environ.get(SCHEDULE_OVERRIDES.get(schedule.function, ""), "")

    def compact_if_erased(result: Any) -> None:
        if erased_anything(result):
            emulator.compact()

    compact = compact_if_erased if store is not None and schedule.function in COMPACT_AFTER else None
    return ScheduleTimer(schedule, handler, float(override) if override else None, after_run=compact)


#: What the purge function's answer counts (functions/purge/app.py): any of them above 0 means
#: text was erased, and the data folder must be rewritten without it.
_ERASED_COUNTS: Final = ("applied", "memories", "events")


def erased_anything(purge_result: Any) -> bool:
    """True unless the purge run says it erased nothing. Compacting the folder rewrites every
    item under the DynamoDB lock (about 23 s at 100k memories): after a run that erased nothing
    there is no erased text to take off the disk, and the stall is skipped."""
    if not isinstance(purge_result, dict):
        return True  # an answer we cannot read: compact, as erased text must never stay on disk
    return any(purge_result.get(name, 1) != 0 for name in _ERASED_COUNTS)


def _remove_leftovers(dynamodb: Any, sqs: Any, suffix: str) -> None:
    """Delete the tables and queues a stack stopped earlier in this same process left in moto's
    state (a new process starts empty): the restart rebuilds them from the data folder alone."""
    for page in dynamodb.get_paginator("list_tables").paginate():
        for name in page.get("TableNames", []):
            if name.endswith(f"-{suffix}"):
                dynamodb.delete_table(TableName=name)
    for url in sqs.list_queues(QueueNamePrefix="kaibo-").get("QueueUrls", []):
        if url.rsplit("/", 1)[-1].removesuffix(".fifo").endswith(f"-{suffix}"):
            sqs.delete_queue(QueueUrl=url)


def _kill_workers() -> None:
    """SIGKILL every child process (the function containers, the emulator) and reap them."""
    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(timeout=1)
    kill_all()


def _emulator_died(status: int) -> None:
    """The emulator process ended without being stopped (a failed journal write says why on its
    own line): every write it acknowledged is on disk; the stack ends too."""
    _exit_now(f"the AWS emulator {_how_it_ended(status)}", 1)


def _exit_now(reason: str, status: int) -> None:
    sys.stderr.write(f"kaibo-local: {reason}; killing the function containers\n")
    sys.stderr.flush()
    _kill_workers()
    os._exit(status)


def _watchdog(stopping: threading.Event, done: threading.Event) -> None:
    """From the stop signal on, give the stop ``STOP_DEADLINE_SECONDS``, then end it the hard way.
    (Started ahead: a signal handler must not start threads, it may interrupt one starting.)"""
    stopping.wait()
    if not done.wait(STOP_DEADLINE_SECONDS):
        _exit_now(f"stopping took over {STOP_DEADLINE_SECONDS:.0f} s", 1)


def _ignore(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler of the stop signals does nothing: see ``_relay_stop_signals``."""


def _relay_stop_signals(stopping: threading.Event) -> None:
    """Turn stop signals into ``stopping``, from a thread of its own.

    CPython writes each signal's number to the wakeup fd from whichever thread the kernel
    delivered it to, without running Python code; a relay thread reads it. A Python-level
    handler that set the event itself could deadlock: it runs in the main thread, possibly
    interrupting that thread inside the same event's ``wait`` (holding its lock), which is how
    a stop was once missed one time in ten. One stop often arrives twice at once (the process
    group's SIGTERM and make's forwarded copy); only a signal ``SECOND_SIGNAL_AFTER_SECONDS``
    after the first (Ctrl-C pressed again) ends the stack the hard way.
    """
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _ignore)

    def relay() -> None:
        first: float | None = None
        while True:
            received = os.read(read_end, 1)
            if not received:
                return
            if received[0] not in STOP_SIGNALS:
                continue
            now = time.monotonic()
            if first is not None and now - first >= SECOND_SIGNAL_AFTER_SECONDS:
                _exit_now(f"{signal.Signals(received[0]).name} while stopping", 1)
            first = now if first is None else first
            stopping.set()

    threading.Thread(target=relay, name="stop-signals", daemon=True).start()


def _data_line(stack: LocalStack) -> str:
    if stack.store is None:
        return "Data is kept in memory only (KAIBO_DATA_DIR=:memory:): it is gone when the stack stops."
    restored = stack.store.restored_items
    found = (
        f"{restored} items restored, {stack.requeued_jobs} unfinished jobs queued again"
        if restored
        else "new"
    )
    return f"Data is kept in {stack.store.path} ({found}); `make reset` empties it."


def reset_command() -> int:
    """``python -m kaibo_local reset``: empty the data folder (``KAIBO_DATA_DIR``)."""
    path = configured_data_dir()
    if path is None:
        sys.stderr.write("kaibo-local: KAIBO_DATA_DIR=:memory: keeps nothing; nothing to reset\n")
        return 0
    try:
        removed = reset(path)
    except DataDirError as error:
        sys.stderr.write(f"kaibo-local: {error}\n")
        return 1
    sys.stderr.write(f"kaibo-local: {path} emptied ({len(removed)} files removed)\n")
    return 0


def main(template: dict[str, Any] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("KAIBO_LOCAL_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    stopping = threading.Event()
    done = threading.Event()

    _relay_stop_signals(stopping)
    threading.Thread(target=_watchdog, args=(stopping, done), name="stop-watchdog", daemon=True).start()
    try:
        stack = start_stack(
            port=_number("PORT", 3000, 0, 65535),
            template=template,
            cancel=stopping,
            data_dir=configured_data_dir(),
            on_emulator_death=_emulator_died,
        )
    except StartError as error:
        sys.stderr.write(f"kaibo-local: {error}\n")
        return 1
    except ContainerPoolStoppedError:
        done.set()
        sys.stderr.write("Kaibo stopped.\n")
        return 0
    try:
        stack.announce(sys.stdout)
        sys.stderr.write(f"Kaibo is running at {stack.endpoint} (Ctrl-C stops it).\n")
        sys.stderr.write(f"{_data_line(stack)}\n")
        stopping.wait()  # set by the signal relay's thread (_relay_stop_signals)
    finally:
        stack.stop()
        done.set()
        sys.stderr.write("Kaibo stopped.\n")
    return 0

"""The whole service on one machine: ``python -m kaibo_local`` (``make run``).

One process tree, no AWS account, no Docker:

- the AWS emulator (moto, DynamoDB serialized) on 127.0.0.1, random port;
- every table, queue and schedule created from template.yaml;
- the HTTP front on 127.0.0.1:$PORT (default 3000) running the template's
  authorizer and handlers in worker processes ("containers",
  ``KAIBO_LOCAL_CONTAINERS``, default 4), so requests run concurrently;
- pollers for the template's queue consumers, timers for its schedules;
- a development project and key, printed as ``KAIBO_*=`` lines for scripts.

The handlers read their settings from the environment exactly as on Lambda: the
stack resolves each function's template environment and sets it in-process
(all functions share one process, so the union of their variables is set).

Starting: the HTTP port is taken first, before the emulator or any worker starts, so a port in
use (or a PORT that is not a port) ends the start at once with one line on stderr saying what
to do (``StartError``; exit status 1), as does a container that cannot load the handlers.

Stopping (SIGINT — a terminal's Ctrl-C —, SIGTERM or SIGHUP): no new requests, the pollers and
timers told to stop, the containers ended (busy ones killed after a second, see
kaibo_local.containers), the emulator stopped. Whatever state the workers are in, the whole
process tree is gone within ``STOP_DEADLINE_SECONDS``: past it (or at a second signal) the
workers are killed and the process exits at once.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal, TextIO

import boto3
from botocore.config import Config

from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core.api_keys import issue_admin_key
from kaibo_core.services.admin import AdminService
from kaibo_local.containers import DEFAULT_CONTAINERS, ContainerPool, ContainerPoolStoppedError
from kaibo_local.emulator import Emulator, start_emulator
from kaibo_local.gateway import INTEGRATION_TIMEOUT_SECONDS, Handler, LocalGateway
from kaibo_local.http_front import HttpFront
from kaibo_local.template import (
    FunctionSpec,
    create_tables,
    function_specs,
    load_template,
    resolve_environment,
)
from kaibo_local.workers import QueuePoller, ScheduleTimer, create_queues, triggers

log = logging.getLogger("kaibo_local")

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "kaibo-local",
    "AWS_SECRET_ACCESS_KEY": "kaibo-local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",  # EMF lines would flood stdout; CloudWatch reads them on AWS
    "POWERTOOLS_METRICS_NAMESPACE": "Kaibo",
    "POWERTOOLS_SERVICE_NAME": "kaibo",
}
#: Environment variables that override a schedule's rate locally, per function logical id.
SCHEDULE_OVERRIDES = {"PurgeFunction": "KAIBO_PURGE_INTERVAL_SECONDS"}
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
    containers: ContainerPool | None,
    loops: list[Loop],
    emulator: Emulator | None,
) -> None:
    """Stop what was started, in an order that never waits on a function: the loops are told to
    stop, the front stops taking requests, the containers end (failing what they ran), then the
    loops are awaited and the emulator goes last."""
    steps: list[Any] = [loop.request_stop for loop in loops]
    if front is not None:
        steps.append(front.stop)
    if containers is not None:
        steps.append(containers.stop)
    steps.extend(lambda loop=loop: loop.join(LOOP_JOIN_SECONDS) for loop in loops)
    if emulator is not None:
        steps.append(emulator.stop)
    for step in steps:
        try:
            step()
        except Exception:
            log.exception("while stopping")


@dataclass
class LocalStack:
    emulator: Emulator
    front: HttpFront
    containers: ContainerPool
    admin_key: str
    api_key: str
    project_id: str
    loops: list[Loop] = field(default_factory=list)
    _stopped: bool = field(default=False, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        return self.front.url

    def announce(self, out: TextIO) -> None:
        out.write(f"KAIBO_ENDPOINT={self.endpoint}\n")
        out.write(f"KAIBO_API_KEY={self.api_key}\n")
        out.write(f"KAIBO_ADMIN_KEY={self.admin_key}\n")
        out.write(f"KAIBO_AWS_ENDPOINT={self.emulator.endpoint_url}\n")
        out.write(f"KAIBO_PROJECT_ID={self.project_id}\n")
        out.flush()

    def stop(self) -> None:
        """Stop everything (idempotent); returns within a few seconds whatever the workers do."""
        if self._stopped:
            return
        self._stopped = True
        _stop_all(self.front, self.containers, self.loops, self.emulator)


def _client(service: Literal["dynamodb", "sqs"], endpoint: str) -> Any:
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
) -> LocalStack:
    """Start the whole stack (``template``: template.yaml's, unless given); StartError for a
    problem the user can fix; ContainerPoolStoppedError if ``cancel`` is set while it starts."""
    template = load_template() if template is None else template
    started: list[ContainerPool] = []  # the front calls its loader at the first request, after start

    def api_loader(spec: FunctionSpec) -> Handler:
        # API Gateway waits 29 s for a function; queue pollers and schedules wait until it answers.
        return started[0].loader(spec, wait_seconds=INTEGRATION_TIMEOUT_SECONDS)

    front = _listen(LocalGateway(template, loader=api_loader), host, port)  # first: before any worker
    emulator: Emulator | None = None
    containers: ContainerPool | None = None
    loops: list[Loop] = []
    try:
        count = _number("KAIBO_LOCAL_CONTAINERS", DEFAULT_CONTAINERS, 1, 256)
        os.environ.update(FAKE_AWS)
        emulator = start_emulator(host=host)
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
        suffix = secrets.token_hex(3)
        dynamodb = _client("dynamodb", emulator.endpoint_url)
        sqs = _client("sqs", emulator.endpoint_url)
        resources = {**create_tables(dynamodb, template, suffix), **create_queues(sqs, template, suffix)}
        admin_key, admin_hash = issue_admin_key()
        specs = function_specs(template)
        for spec in specs:
            os.environ.update(
                resolve_environment(spec.environment, resources, {"AdminKeyHash": admin_hash}, template)
            )
        # Handlers log JSON to stdout; locally only warnings and errors, unless asked.
        for name in ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL"):
            os.environ[name] = os.environ.get("KAIBO_LOG_LEVEL", "WARNING")
        dev = AdminService(DynamoProjectStore(dynamodb, resources["ProjectsTable"])).create_project(
            "development"
        )

        containers = ContainerPool(specs, count)
        started.append(containers)
        try:
            containers.wait_warm(cancel=cancel)  # announced only once every container has its handlers
        except ContainerPoolStoppedError:
            raise
        except RuntimeError as error:
            raise StartError(str(error)) from None
        front.start()
        by_id = {spec.logical_id: spec for spec in specs}
        queue_triggers, schedule_triggers = triggers(template, specs)
        for trigger in queue_triggers:
            poller = QueuePoller(
                sqs, trigger, resources[trigger.queue], containers.loader(by_id[trigger.function])
            )
            loops.append(poller.start())
        for schedule in schedule_triggers:
            override = os.environ.get(SCHEDULE_OVERRIDES.get(schedule.function, ""), "")
            timer = ScheduleTimer(
                schedule, containers.loader(by_id[schedule.function]), float(override) if override else None
            )
            loops.append(timer.start())
    except BaseException:
        _stop_all(front, containers, loops, emulator)
        raise
    return LocalStack(emulator, front, containers, admin_key, dev.key.api_key, dev.key.project_id, loops)


def _kill_workers() -> None:
    """SIGKILL every child process (the function containers) and reap them."""
    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(timeout=1)


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


def main(template: dict[str, Any] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("KAIBO_LOCAL_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    stopping = threading.Event()
    done = threading.Event()

    _relay_stop_signals(stopping)
    threading.Thread(target=_watchdog, args=(stopping, done), name="stop-watchdog", daemon=True).start()
    try:
        stack = start_stack(port=_number("PORT", 3000, 0, 65535), template=template, cancel=stopping)
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
        stopping.wait()  # set by the signal relay's thread (_relay_stop_signals)
    finally:
        stack.stop()
        done.set()
        sys.stderr.write("Kaibo stopped.\n")
    return 0

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
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal, TextIO

import boto3
from botocore.config import Config

from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core.api_keys import issue_admin_key
from kaibo_core.services.admin import AdminService
from kaibo_local.containers import DEFAULT_CONTAINERS, ContainerPool
from kaibo_local.emulator import Emulator, start_emulator
from kaibo_local.gateway import INTEGRATION_TIMEOUT_SECONDS, LocalGateway
from kaibo_local.http_front import HttpFront
from kaibo_local.template import create_tables, function_specs, load_template, resolve_environment
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


@dataclass
class LocalStack:
    emulator: Emulator
    front: HttpFront
    admin_key: str
    api_key: str
    project_id: str
    stoppables: list[Callable[[], None]] = field(default_factory=list)

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
        for stop in reversed(self.stoppables):
            try:
                stop()
            except Exception:
                log.exception("while stopping")
        self.stoppables.clear()


def _client(service: Literal["dynamodb", "sqs"], endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, config=Config(retries={"mode": "standard"}))


def start_stack(port: int = 3000, host: str = "127.0.0.1") -> LocalStack:
    os.environ.update(FAKE_AWS)
    emulator = start_emulator(host=host)
    stoppables: list[Callable[[], None]] = [emulator.stop]
    try:
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
        template = load_template()
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

        containers = ContainerPool(specs, int(os.environ.get("KAIBO_LOCAL_CONTAINERS", DEFAULT_CONTAINERS)))
        stoppables.append(containers.stop)
        containers.wait_warm()  # announced only once every container has its handlers loaded
        # API Gateway waits 29 s for a function; queue pollers and schedules wait until it answers.
        api_loader = functools.partial(containers.loader, wait_seconds=INTEGRATION_TIMEOUT_SECONDS)
        front = HttpFront(LocalGateway(template, loader=api_loader), host=host, port=port).start()
        stoppables.append(front.stop)
        by_id = {spec.logical_id: spec for spec in specs}
        queue_triggers, schedule_triggers = triggers(template, specs)
        for trigger in queue_triggers:
            poller = QueuePoller(
                sqs, trigger, resources[trigger.queue], containers.loader(by_id[trigger.function])
            )
            stoppables.append(poller.start().stop)
        for schedule in schedule_triggers:
            override = os.environ.get(SCHEDULE_OVERRIDES.get(schedule.function, ""), "")
            timer = ScheduleTimer(
                schedule, containers.loader(by_id[schedule.function]), float(override) if override else None
            )
            stoppables.append(timer.start().stop)
    except BaseException:
        for stop in reversed(stoppables):
            stop()
        raise
    return LocalStack(emulator, front, admin_key, dev.key.api_key, dev.key.project_id, stoppables)


def main() -> int:
    logging.basicConfig(level=os.environ.get("KAIBO_LOCAL_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stack = start_stack(port=int(os.environ.get("PORT", "3000")))
    try:
        stack.announce(sys.stdout)
        sys.stderr.write(f"Kaibo is running at {stack.endpoint} (Ctrl-C stops it).\n")
        stop.wait()
    finally:
        stack.stop()
        sys.stderr.write("Kaibo stopped.\n")
    return 0

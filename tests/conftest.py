"""Shared fixtures: the emulator with every table of template.yaml, and handler environments."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config

# A hung test's thread dump (pytest-timeout) reaches the terminal from an xdist worker too.
pytest_plugins = ["tests.fixtures.worker_timeout"]

# A stack a test starts as a process (``python -m kaibo_local``, ``make run``) keeps nothing unless
# the test gives it a data folder of its own: never the repository's .kaibo-data/.
os.environ["KAIBO_DATA_DIR"] = ":memory:"

FAKE_AWS_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "POWERTOOLS_SERVICE_NAME": "kaibo",
    "POWERTOOLS_METRICS_NAMESPACE": "Kaibo",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
# Powertools reads the metrics' service dimension (the stack's name on AWS) when
# kaibo_core.runtime.observability is imported, which test modules do at collection, before any
# fixture sets a function's environment.
os.environ["POWERTOOLS_SERVICE_NAME"] = FAKE_AWS_ENV["POWERTOOLS_SERVICE_NAME"]


def emulator_client(service: str, endpoint_url: str, config: Config | None = None) -> Any:
    """A boto3 client of the emulator, with its fake credentials."""
    return boto3.client(
        service,  # type: ignore[call-overload]  # the service name is a variable
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    )


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table``, page after page: the session's shared tables outgrow one page
    (1 MB) once a test has stored long memories."""
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass(frozen=True)
class AwsStack:
    endpoint_url: str
    tables: dict[str, str]
    dynamodb: Any
    admin_key: str
    admin_key_hash: str
    queues: dict[str, str]
    sqs: Any
    kms_key_id: str

    def function_env(self) -> dict[str, str]:
        return {
            **FAKE_AWS_ENV,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "KAIBO_EVENTS_TABLE": self.tables["EventsTable"],
            "KAIBO_IDEMPOTENCY_TABLE": self.tables["IdempotencyTable"],
            "KAIBO_PROJECTS_TABLE": self.tables["ProjectsTable"],
            "KAIBO_MEMORIES_TABLE": self.tables["MemoriesTable"],
            "KAIBO_INDEX_TABLE": self.tables["TermIndexTable"],
            "KAIBO_JOBS_TABLE": self.tables["JobsTable"],
            "KAIBO_LEDGER_TABLE": self.tables["LedgerTable"],
            "KAIBO_STRUCTURING_QUEUE_URL": self.queues["StructuringQueue"],
            "KAIBO_ADMIN_KEY_HASH": self.admin_key_hash,
            "KAIBO_WEBHOOKS_TABLE": self.tables["WebhooksTable"],
            "KAIBO_WEBHOOK_QUEUE_URL": self.queues["WebhookQueue"],
            "KAIBO_WEBHOOK_DLQ_URL": self.queues["WebhookDeadLetterQueue"],
            "KAIBO_WEBHOOK_KEY_ID": self.kms_key_id,
        }


#: pytest-timeout's budget for a test that starts the local stack (marked ``e2e``), instead of the
#: suite's (``timeout`` in pyproject.toml): its first test also waits for the stack to start (up to
#: 2 minutes, tests/e2e/test_local_stack.py), and its 8-process race takes ~100 s on 2 cores.
E2E_TIMEOUT_SECONDS = 600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))


@pytest.fixture(autouse=True)
def _collector_not_left_paused() -> Iterator[None]:
    """Importing a handler module pauses the garbage collector until a handler's first invocation
    (kaibo_core/runtime/cold_start.py). A test process is no Lambda container: a test that imports a
    handler without invoking one must not leave the rest of the run without collection."""
    yield
    from kaibo_core.runtime import cold_start

    cold_start.resume_collector()


@pytest.fixture(scope="session")
def aws_stack() -> Iterator[AwsStack]:
    """The emulator (DynamoDB serialized) with the template's tables, shared by the session."""
    from kaibo_core.core.api_keys import issue_admin_key
    from kaibo_local.emulator import start_emulator
    from kaibo_local.template import create_tables, load_template
    from kaibo_local.workers import create_queues

    with start_emulator() as emulator:
        client = emulator_client("dynamodb", emulator.endpoint_url, Config(retries={"max_attempts": 1}))
        sqs = emulator_client("sqs", emulator.endpoint_url)
        suffix = secrets.token_hex(4)
        template = load_template()
        tables = create_tables(client, template, suffix)
        queues = create_queues(sqs, template, suffix)
        kms = emulator_client("kms", emulator.endpoint_url)
        key_id = kms.create_key(Description="kaibo tests")["KeyMetadata"]["KeyId"]
        admin_key, admin_hash = issue_admin_key()
        yield AwsStack(emulator.endpoint_url, tables, client, admin_key, admin_hash, queues, sqs, key_id)


@pytest.fixture
def handler_env(aws_stack: AwsStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsStack]:
    """Environment of a deployed function, pointed at the emulator; per-container caches cleared."""
    from kaibo_core.runtime import wiring

    for name, value in aws_stack.function_env().items():
        monkeypatch.setenv(name, value)
    wiring.reset()
    yield aws_stack
    wiring.reset()


@pytest.fixture
def semantic_env(handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsStack]:
    """``handler_env`` with recall by meaning on (all-MiniLM-L6-v2, as ``SemanticModel=mini6``)."""
    from kaibo_core.runtime import wiring

    monkeypatch.setenv("KAIBO_SEMANTIC_MODEL", "mini6")
    wiring.reset()
    yield handler_env
    wiring.reset()

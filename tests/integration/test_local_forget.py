"""Forget on the local stack as users run it (``python -m kaibo_local``): after the purge, a
marker word is in no table, no queue, no log line and no file of the data folder (#16's residue
scan), in any form the pipeline produces, and the chain and the ledger still verify.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import boto3

from kaibo.client import KaiboClient
from kaibo.verify import verify_all
from kaibo_core.core.ledger import LedgerVerifier
from kaibo_core.core.text import analyze
from tests.integration.test_local_lifecycle import (
    StackProcess,
    assert_stops_whole,
    launch,
    run_kaibo_cli,
    wait_for,
)

RUN = ["-m", "kaibo_local"]
MARKER = "Zephyrically"
REASON_WORD = "Quorvanthic"
REASON = f"erase it, ticket {REASON_WORD}-118"


def marker_forms() -> list[str]:
    return sorted({MARKER.casefold(), *analyze(MARKER)})


def holding(text: str) -> list[str]:
    folded = text.casefold()
    return [form for form in marker_forms() if form in folded]


def emulator_residue(endpoint: str) -> list[str]:
    """Every item of every table and every queued message holding a form of the marker."""
    options: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "kaibo-local",
        "aws_secret_access_key": "kaibo-local",
    }
    dynamodb, sqs = boto3.client("dynamodb", **options), boto3.client("sqs", **options)
    found: list[str] = []
    for table in dynamodb.list_tables()["TableNames"]:
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            found.extend(f"{table}: {form}" for item in page["Items"] for form in holding(repr(item)))
    for url in sqs.list_queues().get("QueueUrls", []):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        found.extend(f"{url}: {form}" for m in messages.get("Messages", []) for form in holding(m["Body"]))
    return found


def file_residue(folder: Path) -> list[str]:
    return [
        f"{entry.name}: {form}"
        for entry in folder.iterdir()
        if entry.is_file()
        for form in holding(entry.read_bytes().decode("utf-8", "replace"))
    ]


def cli(stack: StackProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kaibo_cli(stack.values["KAIBO_ENDPOINT"], stack.values["KAIBO_API_KEY"], *args)


def tamper_first_entry(endpoint: str) -> None:
    """Change one stored field of the first ledger entry, as someone with table access could."""
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="kaibo-local",
        aws_secret_access_key="kaibo-local",
    )
    (table,) = [name for name in dynamodb.list_tables()["TableNames"] if "LedgerTable" in name]
    (entry,) = [
        item
        for item in dynamodb.scan(TableName=table)["Items"]
        if item["pk"]["S"].endswith("#ledger") and item["sk"]["S"] != "head"
    ]
    dynamodb.update_item(
        TableName=table,
        Key={"pk": entry["pk"], "sk": entry["sk"]},
        UpdateExpression="SET tombstonedAt = :later",
        ExpressionAttributeValues={":later": {"S": "2099-01-01T00:00:00.000Z"}},
    )


def test_given_a_marker_forgotten_on_the_local_stack_then_after_the_purge_nothing_anywhere_holds_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    stack = launch(
        tmp_path / "stack",
        args=RUN,
        KAIBO_DATA_DIR=str(data),
        KAIBO_PURGE_GRACE_SECONDS="0",
        KAIBO_PURGE_INTERVAL_SECONDS="1",
        KAIBO_LOG_LEVEL="INFO",  # every line the functions write
    )
    try:
        stack.wait_announced()
        endpoint, aws = stack.values["KAIBO_ENDPOINT"], stack.values["KAIBO_AWS_ENDPOINT"]
        client = KaiboClient(endpoint, stack.values["KAIBO_API_KEY"], timeout=60)
        message = {"role": "user", "text": f"The boathouse password is {MARKER} 7781."}
        client.remember("chat", [{"idempotencyKey": "k1", "kind": "message", "payload": message}], wait=True)
        kept = {"role": "user", "text": "The boathouse is painted blue."}
        client.remember("chat", [{"idempotencyKey": "k2", "kind": "message", "payload": kept}], wait=True)
        assert client.recall(f"{MARKER} password")["items"]
        assert emulator_residue(aws)  # the scans find the marker before: they can fail
        assert file_residue(data)

        # Under a key: the stack's forget function encrypts the kept salt with its emulator's KMS key.
        body = {"query": MARKER, "reason": REASON, "idempotencyKey": "erase-boathouse"}
        forgotten = client.request("POST", "/v1/forget", body=body)
        assert forgotten["replayed"] is False
        receipt_id = forgotten["receipt"]["id"]
        wait_for(
            lambda: client.request("GET", f"/v1/receipts/{receipt_id}")["state"] == "purged",
            what="the purge of the receipt",
        )
        wait_for(lambda: not file_residue(data), what="the data folder compacted after the purge")

        assert emulator_residue(aws) == []
        assert verify_all(client)[0].ok  # the chain still verifies, the payload gone
        ledger = LedgerVerifier(stack.values["KAIBO_PROJECT_ID"])
        entries = client.request("GET", "/v1/ledger")["entries"]
        assert [ledger.feed(entry) for entry in entries] == [None]
        assert client.recall("boathouse painted")["items"]  # what was not forgotten stays
        project = stack.values["KAIBO_PROJECT_ID"]
        assert cli(stack, "verify", "--receipt", receipt_id, "--project", project).returncode == 0
        assert cli(stack, "verify", "--ledger", "--project", project).returncode == 0
        tamper_first_entry(aws)  # changing any stored entry makes verify --ledger fail at its seq
        tampered = cli(stack, "verify", "--ledger", "--project", project)
        assert tampered.returncode == 1, tampered.stdout + tampered.stderr
        assert "seq 1" in tampered.stdout + tampered.stderr
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)
    logs = stack.out.read_text() + stack.err.read_text()
    assert "forget" in logs  # the functions' INFO lines are there...
    assert holding(logs) == []  # ...and none holds the marker
    assert REASON_WORD.casefold() not in logs.casefold()  # nor the forget's reason
    secret = stack.values["KAIBO_API_KEY"].split("_", 2)[2]  # kb_<key id>_<secret>
    logged = [line for line in logs.splitlines() if not line.lstrip().startswith(("KAIBO_", "export KAIBO_"))]
    assert not [line for line in logged if secret in line]  # the key only in the announcement

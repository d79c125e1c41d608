"""The emulator in a process of its own (kaibo_local.emulator_process), its keep-alive HTTP server,
and the moto speed-ups that came with it (SQS attributes, update and condition expressions parsed
once): each answers as moto does, and a stack whose emulator dies ends in one line.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

import kaibo_local
from kaibo_local import moto_speedups
from kaibo_local.emulator import Emulator, start_emulator
from kaibo_local.emulator_process import EmulatorProcess, EmulatorProcessError
from tests.integration.test_local_lifecycle import (
    START_SECONDS,
    group_members,
    launch,
    processes,
    wait_for,
)

#: What moto reads to route a request to DynamoDB (the signature's credential scope).
DYNAMODB_AUTHORIZATION = "AWS4-HMAC-SHA256 Credential=testing/20250101/us-east-1/dynamodb/aws4_request"
LIST_TABLES = {
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": DYNAMODB_AUTHORIZATION,
}
CREDENTIALS = {
    "region_name": "us-east-1",
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with start_emulator() as running:
        yield running


def client(endpoint_url: str, service: str) -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint_url,
        config=Config(retries={"max_attempts": 1}),
        **CREDENTIALS,
    )


def without(patch: moto_speedups.MotoPatch) -> Any:
    """A context in which moto's own function is installed instead of ``patch``."""

    class _Without:
        def __enter__(self) -> None:
            moto_speedups.uninstall([patch])

        def __exit__(self, *_exc: object) -> None:
            moto_speedups.install([patch])

    return _Without()


# -- the keep-alive server ---------------------------------------------------------------------------


def test_the_emulator_answers_many_requests_on_one_connection_and_stop_closes_it() -> None:
    running = start_emulator()
    try:
        connection = http.client.HTTPConnection(running.host, running.port, timeout=10)
        for _ in range(3):
            connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
            answer = connection.getresponse()
            assert answer.status == 200
            assert "TableNames" in json.loads(answer.read())
            assert answer.getheader("Connection") != "close"
            assert connection.sock is not None  # still open: the next request goes on it
            assert answer.getheader("Content-Length") is not None
    finally:
        running.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        read_after_stop(connection)


def read_after_stop(connection: http.client.HTTPConnection) -> bytes:
    connection.request("POST", "/", body=b"{}", headers=LIST_TABLES)
    return connection.getresponse().read()


# -- SQS without counting the queue ------------------------------------------------------------------


def test_a_fifo_queue_with_content_based_deduplication_dedups_by_body_as_moto_does(emu: Emulator) -> None:
    sqs = client(emu.endpoint_url, "sqs")
    ids = []
    for patched in (True, False):
        url = sqs.create_queue(
            QueueName=f"q-{uuid.uuid4().hex[:8]}.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        if patched:
            sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
            sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
        else:
            with without(moto_speedups.SQS_SEND_MESSAGE):
                sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
                sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageSystemAttributeNames=["All"]
        )
        ids.append([m["Attributes"].get("MessageDeduplicationId") for m in got["Messages"]])
    assert ids[0] == ids[1] == [hashlib.sha256(b"same").hexdigest()]


def test_a_standard_queue_sends_and_receives_as_moto_does(emu: Emulator) -> None:
    sqs = client(emu.endpoint_url, "sqs")
    url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for n in range(25):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
    with without(moto_speedups.SQS_SEND_MESSAGE):
        sqs.send_message(QueueUrl=url, MessageBody="m25", DelaySeconds=0)
    received: list[str] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        received += [m["Body"] for m in batch]
    assert sorted(received) == sorted(f"m{n}" for n in range(26))
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "26"
    with pytest.raises(ClientError, match="DelaySeconds"):
        sqs.send_message(QueueUrl=url, MessageBody="late", DelaySeconds=901)


def test_a_message_past_its_queue_s_retention_is_not_received_as_in_moto(emu: Emulator) -> None:
    sqs = client(emu.endpoint_url, "sqs")
    from moto.sqs.models import sqs_backends  # the emulator's state, in this process

    results = []
    for patched in (True, False):
        url = sqs.create_queue(
            QueueName=f"q-{uuid.uuid4().hex[:8]}", Attributes={"MessageRetentionPeriod": "60"}
        )["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="old")
        queue = sqs_backends["123456789012"]["us-east-1"].get_queue(url.rsplit("/", 1)[-1])
        queue._messages[0].sent_timestamp -= 120_000  # type: ignore[operator,assignment]  # two minutes ago: past the retention
        if patched:
            results.append(sqs.receive_message(QueueUrl=url).get("Messages", []))
        else:
            with without(moto_speedups.SQS_RETENTION_CHECK):
                results.append(sqs.receive_message(QueueUrl=url).get("Messages", []))
    assert results == [[], []]


# -- update and condition expressions parsed once --------------------------------------------------


def test_an_update_expression_is_parsed_once_and_a_bad_one_raises_every_time() -> None:
    moto_speedups.install(moto_speedups.SPEEDUPS)
    first = UpdateExpressionParser.make("ADD df :one")
    assert UpdateExpressionParser.make("ADD df :one") is first
    assert UpdateExpressionParser.make("ADD docs :one") is not first
    for _ in range(2):
        with pytest.raises(Exception, match=r"(?i)syntax|invalid"):
            UpdateExpressionParser.make("ADD df")


def test_a_condition_is_built_once_per_text_names_and_values() -> None:
    moto_speedups.install(moto_speedups.SPEEDUPS)

    def parse(expression: str, names: Any, values: Any) -> tuple[Any, list[str], list[str]]:
        parser = ConditionExpressionParser(expression, names, values)
        condition = parser.parse()
        return condition, parser.expr_attr_names_found, parser.expr_attr_values_found

    one = parse("#n = :v", {"#n": "a"}, {":v": {"S": "x"}})
    again = parse("#n = :v", {"#n": "a"}, {":v": {"S": "x"}})
    other = parse("#n = :v", {"#n": "a"}, {":v": {"S": "y"}})
    assert again[0] is one[0]
    assert other[0] is not one[0]
    assert again[1:] == one[1:] == (["#n"], [":v"])
    assert (
        parse("attribute_not_exists(pk)", None, None)[0] is parse("attribute_not_exists(pk)", None, None)[0]
    )
    for _ in range(2):
        with pytest.raises(Exception):  # noqa: B017, PT011 - moto's own error, whatever it is
            parse("#missing = :v", {}, {":v": {"S": "x"}})


def test_conditional_transactions_and_counters_answer_as_moto_does(emu: Emulator) -> None:
    ddb = client(emu.endpoint_url, "dynamodb")
    name = f"t-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def index(term: str) -> None:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": name,
                        "Item": {"pk": {"S": f"posting-{term}-{uuid.uuid4().hex}"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": name,
                        "Key": {"pk": {"S": f"term-{term}"}},
                        "UpdateExpression": "ADD df :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ]
        )

    for _ in range(3):
        index("a")
    with without(moto_speedups.UPDATE_EXPRESSIONS), without(moto_speedups.CONDITIONS):
        index("a")
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "term-a"}})["Item"]["df"] == {"N": "4"}
    taken = {"pk": {"S": "term-a"}}
    for _ in range(2):  # the cached condition still fails where it must
        with pytest.raises(ClientError, match="TransactionCanceled"):
            ddb.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": name,
                            "Item": taken,
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                ]
            )
    for _ in range(2):  # a name the expression does not use is refused, as moto refuses it
        with pytest.raises(ClientError, match="unused"):
            ddb.update_item(
                TableName=name,
                Key=taken,
                UpdateExpression="ADD df :one",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#unused": "x"},
                ExpressionAttributeValues={":one": {"N": "1"}},
            )


# -- the emulator's process ------------------------------------------------------------------------


def test_the_emulator_process_serves_calls_and_stops(tmp_path: Path) -> None:
    emulator = EmulatorProcess.start()
    try:
        ddb = client(emulator.endpoint_url, "dynamodb")
        assert ddb.list_tables()["TableNames"] == []
        assert emulator.call(sorted, [3, 1, 2]) == [1, 2, 3]
        with pytest.raises(EmulatorProcessError) as failed:
            emulator.call(int, "not a number")
        assert failed.value.kind == "ValueError"
        (tmp_path / "dynamodb-00000001.snapshot").write_bytes(b"not a snapshot")
        with pytest.raises(EmulatorProcessError) as refused:
            emulator.restore(tmp_path, [])
        assert refused.value.kind == "DataDirError"
    finally:
        emulator.stop()
    assert emulator.process.returncode == 0


def test_an_emulator_whose_stack_vanished_exits_by_itself() -> None:
    died = threading.Event()
    emulator = EmulatorProcess.start(on_death=lambda _status: died.set())
    emulator._channel.close()  # what the stack's death (even by SIGKILL) leaves it
    assert emulator.process.wait(timeout=10) == 0
    assert died.wait(5)  # not asked to stop: reported


def test_a_journal_write_that_fails_ends_the_emulator_before_its_answer() -> None:
    program = (
        "from kaibo_local.emulator_process import _or_exit\n"
        "def fails(target, body):\n"
        "    raise OSError(28, 'No space left on device')\n"
        "_or_exit(fails)('DynamoDB_20120810.PutItem', b'{}')\n"
        "print('answered')\n"
    )
    ended = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(kaibo_local.__file__).resolve().parents[1])},
    )
    assert ended.returncode == 1
    assert "answered" not in ended.stdout
    assert ended.stderr.strip() == (
        "kaibo-local: cannot write to the data folder (No space left on device); "
        "nothing unsaved was acknowledged"
    )


def test_given_the_emulator_killed_then_the_stack_ends_in_one_line_with_its_whole_tree(
    tmp_path: Path,
) -> None:
    stack = launch(tmp_path, args=["-m", "kaibo_local"])
    stack.wait_announced()
    emulators = [
        p.pid for p in processes() if p.ppid == stack.pid and "kaibo_local.emulator_process" in p.cmdline
    ]
    assert len(emulators) == 1, emulators
    os.kill(emulators[0], signal.SIGKILL)
    assert stack.process.wait(timeout=START_SECONDS) == 1
    wait_for(lambda: not group_members(stack.pid), seconds=10, what="the whole tree gone")
    stack.release_guard()
    lines = [line for line in stack.err.read_text().splitlines() if line.startswith("kaibo-local: ")]
    assert lines == ["kaibo-local: the AWS emulator was killed by SIGKILL; killing the function containers"]

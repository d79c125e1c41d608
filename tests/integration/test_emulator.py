"""The local emulator behaves like DynamoDB where Kaibo relies on it (kaibo_local.emulator).

Everything goes over HTTP through boto3 to one emulator started for the module; each test makes
its own small tables, so tests share the (process-wide) moto state without seeing each other.
"""

from __future__ import annotations

import copy
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table
from moto.sqs.models import SQSBackend

from kaibo_local import emulator
from kaibo_local.emulator import Emulator, start_emulator

WRITERS = 8
INCREMENTS_PER_WRITER = 25
DEADLINE_SECONDS = 60


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with start_emulator() as running:
        yield running


def make_client(endpoint_url: str, service: Literal["dynamodb", "dynamodbstreams", "sqs"]) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture(scope="module")
def ddb(emu: Emulator) -> Any:
    return make_client(emu.endpoint_url, "dynamodb")


def create_table(ddb: Any, *, range_key: bool = False, streams: bool = False) -> str:
    name = f"emu-{uuid.uuid4().hex[:10]}"
    keys = [("pk", "HASH"), ("sk", "RANGE")] if range_key else [("pk", "HASH")]
    extra: dict[str, Any] = {}
    if streams:
        extra["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": attr, "KeyType": kind} for attr, kind in keys],
        AttributeDefinitions=[{"AttributeName": attr, "AttributeType": "S"} for attr, _ in keys],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return name


@pytest.fixture
def table(ddb: Any) -> str:
    return create_table(ddb)


def put(ddb: Any, table: str, pk: str, **attrs: Any) -> None:
    ddb.put_item(TableName=table, Item={"pk": {"S": pk}, **attrs})


def contents(ddb: Any, table: str) -> list[dict[str, Any]]:
    pages = ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    items = [item for page in pages for item in page["Items"]]
    return sorted(items, key=lambda item: (item["pk"]["S"], item.get("sk", {}).get("S", "")))


def transact(ddb: Any, *actions: dict[str, Any]) -> None:
    ddb.transact_write_items(TransactItems=list(actions))


def put_action(table: str, pk: str, **attrs: Any) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": {"pk": {"S": pk}, **attrs}}}


def error_of(call: Callable[[], object]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


def stream_records(ddb: Any, table: str) -> list[dict[str, Any]]:
    streams = make_client(ddb.meta.endpoint_url, "dynamodbstreams")
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return records


# --- The pin on the replaced moto function -------------------------------------------------------


def test_the_replaced_moto_function_is_the_pinned_one() -> None:
    emulator.install_patches()
    emulator.install_patches()  # idempotent

    assert DynamoDBBackend.transact_write_items is emulator.transact_write_items
    original = emulator.original_transact_write_items()
    assert emulator.source_sha256(original) == emulator.PATCHED_FUNCTION_SHA256
    assert emulator.TRANSACT_WRITE_ITEMS.sha256 == emulator.PATCHED_FUNCTION_SHA256


def test_install_patches_refuses_a_moto_function_it_was_not_written_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emulator.uninstall_patches()
    try:
        monkeypatch.setattr(emulator.TRANSACT_WRITE_ITEMS, "sha256", "0" * 64)
        with pytest.raises(RuntimeError, match=r"re-check kaibo_local\.emulator\.transact_write_items"):
            emulator.install_patches()
        assert DynamoDBBackend.transact_write_items is not emulator.transact_write_items
    finally:
        monkeypatch.undo()
        emulator.install_patches()
    assert DynamoDBBackend.transact_write_items is emulator.transact_write_items


# --- Transactions: all or nothing, with DynamoDB's cancellation reasons -------------------------


def seed(ddb: Any, table: str, pairs: str) -> None:
    for pk, value in (pair.split("=") for pair in pairs.split()):
        put(ddb, table, pk, n={"N": value})


def test_a_cancelled_transaction_applies_nothing_and_reports_positional_reasons(ddb: Any) -> None:
    table = create_table(ddb, streams=True)
    composite = create_table(ddb, range_key=True)
    seed(ddb, table, "a=1 b=2 c=3 e=5")
    ddb.put_item(TableName=composite, Item={"pk": {"S": "p"}, "sk": {"S": "s"}, "n": {"N": "7"}})
    before = (contents(ddb, table), contents(ddb, composite))
    stream_before = stream_records(ddb, table)

    error = error_of(
        lambda: transact(
            ddb,
            {"Put": {"TableName": table, "Item": {"pk": {"S": "d"}, "n": {"N": "4"}}}},
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = n + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": {"pk": {"S": "b"}},
                    "ConditionExpression": "n = :wrong",
                    "ExpressionAttributeValues": {":wrong": {"N": "99"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {"Delete": {"TableName": table, "Key": {"pk": {"S": "c"}}}},
            {
                "Put": {
                    "TableName": table,
                    "Item": {"pk": {"S": "e"}, "n": {"N": "50"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": composite,
                    "Key": {"pk": {"S": "p"}, "sk": {"S": "s"}},
                    "UpdateExpression": "SET n = :eight",
                    "ConditionExpression": "n = :seven",
                    "ExpressionAttributeValues": {":eight": {"N": "8"}, ":seven": {"N": "7"}},
                }
            },
        )
    )

    assert error.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = error.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == [
        "None",
        "None",
        "ConditionalCheckFailed",
        "None",
        "ConditionalCheckFailed",
        "None",
    ]
    assert reasons[2]["Message"] == "The conditional request failed"
    assert reasons[2]["Item"] == {"pk": {"S": "b"}, "n": {"N": "2"}}
    assert "Item" not in reasons[4]  # ALL_OLD was not asked for
    assert "[None, None, ConditionalCheckFailed, None, ConditionalCheckFailed, None]" in str(error)
    assert (contents(ddb, table), contents(ddb, composite)) == before
    assert stream_records(ddb, table) == stream_before


def test_a_successful_transaction_applies_every_write(ddb: Any) -> None:
    table = create_table(ddb, streams=True)
    composite = create_table(ddb, range_key=True)
    seed(ddb, table, "a=1 b=2 c=3")
    ddb.put_item(TableName=composite, Item={"pk": {"S": "p"}, "sk": {"S": "s"}, "n": {"N": "7"}})
    stream_before = len(stream_records(ddb, table))

    transact(
        ddb,
        {
            "Put": {
                "TableName": table,
                "Item": {"pk": {"S": "d"}, "n": {"N": "4"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "a"}},
                "UpdateExpression": "SET n = n + :one, tag = :tag",
                "ConditionExpression": "n = :n",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":tag": {"S": "x"}, ":n": {"N": "1"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": {"pk": {"S": "b"}},
                "ConditionExpression": "n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        {
            "Delete": {
                "TableName": table,
                "Key": {"pk": {"S": "c"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": composite,
                "Key": {"pk": {"S": "p"}, "sk": {"S": "s"}},
                "UpdateExpression": "SET n = :eight",
                "ExpressionAttributeValues": {":eight": {"N": "8"}},
            }
        },
        {
            "Update": {
                "TableName": composite,
                "Key": {"pk": {"S": "p"}, "sk": {"S": "new"}},
                "UpdateExpression": "SET n = :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    )

    assert contents(ddb, table) == [
        {"pk": {"S": "a"}, "n": {"N": "2"}, "tag": {"S": "x"}},
        {"pk": {"S": "b"}, "n": {"N": "2"}},
        {"pk": {"S": "d"}, "n": {"N": "4"}},
    ]
    assert contents(ddb, composite) == [
        {"pk": {"S": "p"}, "sk": {"S": "new"}, "n": {"N": "1"}},
        {"pk": {"S": "p"}, "sk": {"S": "s"}, "n": {"N": "8"}},
    ]
    new_records = stream_records(ddb, table)[stream_before:]
    assert [record["eventName"] for record in new_records] == ["INSERT", "MODIFY", "REMOVE"]


def test_a_failed_update_expression_rejects_the_whole_transaction(ddb: Any, table: str) -> None:
    seed(ddb, table, "a=1")
    before = contents(ddb, table)

    error = error_of(
        lambda: transact(
            ddb,
            {"Put": {"TableName": table, "Item": {"pk": {"S": "b"}}}},
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "a"}},
                    "UpdateExpression": "SET n = nothere + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        )
    )

    assert error.response["Error"]["Code"] == "ValidationException"
    assert "attribute that does not exist" in error.response["Error"]["Message"]
    assert contents(ddb, table) == before  # the Put before it was not applied


# --- Same behaviour as moto's own transact_write_items, in-process ------------------------------


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def update(table: str, pk: str, expression: str, **extra: Any) -> dict[str, Any]:
    return {"Update": {"TableName": table, "Key": key(pk), "UpdateExpression": expression, **extra}}


def check(table: str, pk: str, condition: str, **extra: Any) -> dict[str, Any]:
    return {"ConditionCheck": {"TableName": table, "Key": key(pk), "ConditionExpression": condition, **extra}}


ONE = {"ExpressionAttributeValues": {":one": n(1)}}
ALL_OLD = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
SAME_AS_MOTO = {
    "writes of every kind": [
        put_action("t", "c", n=n(3)),
        update("t", "a", "SET n = n + :one", **ONE),
        {"Delete": {"TableName": "t", "Key": key("b")}},
        check("t", "s", "attribute_exists(s)"),
        update("t", "new", "SET n = :one", **ONE),
        {"Put": {"TableName": "r", "Item": {**key("p"), "sk": {"S": "2"}}}},
        {
            "Update": {
                "TableName": "r",
                "Key": {**key("p"), "sk": {"S": "1"}},
                "UpdateExpression": "REMOVE n",
                "ConditionExpression": "n = :one",
                **ONE,
            }
        },
    ],
    "failed conditions, with and without ALL_OLD": [
        put_action("t", "c"),
        check("t", "a", "n = :one", ExpressionAttributeValues={":one": n(2)}, **ALL_OLD),
        {"Delete": {"TableName": "t", "Key": key("b"), "ConditionExpression": "attribute_not_exists(pk)"}},
        update("t", "gone", "SET n = :one", ConditionExpression="attribute_exists(pk)", **ONE, **ALL_OLD),
        {
            "Put": {
                "TableName": "r",
                "Item": {**key("p"), "sk": {"S": "1"}},
                "ConditionExpression": "attribute_not_exists(pk)",
                **ALL_OLD,
            }
        },
    ],
    "writes of every kind, then a failed condition": [
        update("t", "new", "SET n = :one", **ONE),
        update("t", "a", "SET n = n + :one", **ONE),
        {"Delete": {"TableName": "t", "Key": key("b")}},
        put_action("t", "s", n=n(5)),
        {"Put": {"TableName": "r", "Item": {**key("p"), "sk": {"S": "2"}}}},
        {"Put": {"TableName": "r", "Item": {**key("q"), "sk": {"S": "1"}}}},
        {"Update": {"TableName": "r", "Key": {**key("p"), "sk": {"S": "1"}}, "UpdateExpression": "REMOVE n"}},
        check("t", "c", "attribute_exists(pk)"),
    ],
    "errors reported as reasons": [
        check("missing-table", "a", "attribute_exists(pk)"),
        {"Put": {"TableName": "t", "Item": {"n": n(1)}}},
        {"Get": {"TableName": "t", "Key": key("a")}},
        update("t", "a", "SET n = :one", **ONE),
    ],
    "an invalid update expression": [put_action("t", "c"), update("t", "a", "SET n = nothere + :one", **ONE)],
    "a string incremented": [put_action("t", "c"), update("t", "s", "SET s = s + :one", **ONE)],
    "a key of the wrong type": [put_action("t", "c"), {"Put": {"TableName": "t", "Item": {"pk": n(1)}}}],
    "a key missing its range part": [put_action("t", "c"), {"Delete": {"TableName": "r", "Key": key("p")}}],
    "an item over moto's size limit": [
        put_action("t", "c"),
        put_action("t", "big", blob={"S": "x" * 405_001}),
    ],
    "an update growing an item too large": [
        put_action("t", "c"),
        update(
            "t",
            "a",
            "SET #big = :big",
            ExpressionAttributeNames={"#big": "big"},
            ExpressionAttributeValues={":big": {"S": "x" * 405_001}},
        ),
    ],
    "one item twice": [put_action("t", "c"), update("t", "a", "SET n = :one", **ONE), put_action("t", "a")],
    "a condition failing before a validation error": [
        check("t", "a", "attribute_not_exists(pk)"),
        {"Put": {"TableName": "t", "Item": {"pk": n(1)}}},
    ],
}


def fresh_backend() -> DynamoDBBackend:
    backend = DynamoDBBackend("us-east-1", "123456789012")
    for name, keys in (("t", ["pk"]), ("r", ["pk", "sk"])):
        backend.create_table(
            name,
            schema=[
                {"AttributeName": k, "KeyType": kind}
                for k, kind in zip(keys, ["HASH", "RANGE"], strict=False)
            ],
            throughput=None,
            attr=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
            global_indexes=None,
            indexes=None,
            streams=None,
            billing_mode="PAY_PER_REQUEST",
            sse_specification=None,
            tags=[],
            deletion_protection_enabled=False,
            warm_throughput=None,
        )
    backend.put_item("t", {**key("a"), "n": n(1)})
    backend.put_item("t", {**key("b"), "n": n(2)})
    backend.put_item("t", {**key("s"), "s": {"S": "text"}})
    backend.put_item("r", {**key("p"), "sk": {"S": "1"}, "n": n(1)})
    return backend


def outcome_of(function: Callable[..., None], actions: list[dict[str, Any]]) -> tuple[str, str, Any]:
    """What a transact_write_items function did: its error (type, body) and the tables after it."""
    backend = fresh_backend()
    try:
        function(backend, copy.deepcopy(actions))
        error = ("none", "")
    except Exception as raised:
        error = (type(raised).__name__, str(getattr(raised, "description", raised)))
    tables = {name: [item.to_json() for item in t.all_items()] for name, t in backend.tables.items()}
    return error[0], error[1], tables


@pytest.mark.parametrize("actions", SAME_AS_MOTO.values(), ids=SAME_AS_MOTO.keys())
def test_the_replacement_does_what_moto_does(actions: list[dict[str, Any]]) -> None:
    assert outcome_of(emulator.transact_write_items, actions) == outcome_of(
        emulator.original_transact_write_items(), actions
    )


def test_one_entry_with_two_operations_is_refused_before_anything_is_written() -> None:
    """moto applies the entries before it, then raises; the replacement writes nothing."""
    actions = [put_action("t", "c"), {**put_action("t", "d"), **check("t", "a", "attribute_exists(pk)")}]
    untouched = outcome_of(lambda backend, items: None, actions)[2]

    error, body, tables = outcome_of(emulator.transact_write_items, actions)

    assert (error, tables) == ("TransactWriteSingleOpException", untouched)
    assert outcome_of(emulator.original_transact_write_items(), actions)[:2] == (error, body)


def tracked() -> tuple[int, int]:
    """How many items and tables moto's model tracker holds."""
    return len(getattr(Item, "instances_tracked")), len(getattr(Table, "instances_tracked"))  # noqa: B009


# --- DynamoDB's transaction limits ---------------------------------------------------------------


def assert_validation_error(ddb: Any, table: str, actions: list[dict[str, Any]], message: str) -> None:
    error = error_of(lambda: transact(ddb, *actions))
    assert error.response["Error"]["Code"] == "ValidationException"
    assert message in error.response["Error"]["Message"]
    assert contents(ddb, table) == []


def test_more_than_100_actions_is_a_validation_error(ddb: Any, table: str) -> None:
    actions = [put_action(table, f"k{i}") for i in range(101)]
    assert_validation_error(ddb, table, actions, "Member must have length less than or equal to 100")

    transact(ddb, *actions[:100])
    assert len(contents(ddb, table)) == 100


def test_the_same_item_twice_is_a_validation_error(ddb: Any, table: str) -> None:
    actions = [
        put_action(table, "a"),
        put_action(table, "b"),
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": {"pk": {"S": "a"}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]
    assert_validation_error(
        ddb, table, actions, "Transaction request cannot include multiple operations on one item"
    )


def test_an_item_over_400_kb_is_a_validation_error(ddb: Any, table: str) -> None:
    over = "x" * (emulator.MAX_ITEM_BYTES + 1 - len("pk") - len("a") - len("blob"))
    actions = [put_action(table, "small"), put_action(table, "a", blob={"S": over})]
    assert_validation_error(ddb, table, actions, "Item size has exceeded the maximum allowed size")


def test_a_request_over_4_mb_is_a_validation_error(ddb: Any, table: str) -> None:
    blob = {"S": "x" * 390_000}  # each item well under 400 KB; eleven of them over 4 MB
    actions = [put_action(table, f"k{i}", blob=blob) for i in range(11)]
    assert_validation_error(ddb, table, actions, emulator.TRANSACTION_TOO_LARGE_MESSAGE)

    transact(ddb, *actions[:10])
    assert len(contents(ddb, table)) == 10


# --- No rollback copy ----------------------------------------------------------------------------


@pytest.fixture
def table_deepcopies_refused(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make moto's ``copy.deepcopy`` refuse to copy a table (items still copy); list the refusals."""
    real_deepcopy = copy.deepcopy
    refused: list[str] = []

    def guarded_deepcopy(value: Any, memo: dict[int, Any] | None = None, _nil: Any = None) -> Any:
        if isinstance(value, Table):
            refused.append(value.name)
            raise AssertionError(f"deep copy of table {value.name}")
        return real_deepcopy(value, memo)

    # The module moto's DynamoDB models call ``copy.deepcopy`` through (the ``copy`` module itself).
    monkeypatch.setattr("moto.dynamodb.models.copy.deepcopy", guarded_deepcopy)
    return refused


def test_transactions_never_deep_copy_a_table(
    ddb: Any, table: str, table_deepcopies_refused: list[str]
) -> None:
    seed(ddb, table, "a=1 b=2 c=3")
    update_a = {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": "a"}},
            "UpdateExpression": "SET n = :ten",
            "ExpressionAttributeValues": {":ten": {"N": "10"}},
        }
    }
    failing_check = {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"pk": {"S": "b"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }

    code = error_of(lambda: transact(ddb, update_a, failing_check)).response["Error"]["Code"]
    transact(
        ddb, update_a, put_action(table, "d"), {"Delete": {"TableName": table, "Key": {"pk": {"S": "c"}}}}
    )

    assert code == "TransactionCanceledException"
    assert [item["pk"]["S"] for item in contents(ddb, table)] == ["a", "b", "d"]
    assert contents(ddb, table)[0]["n"] == {"N": "10"}
    assert table_deepcopies_refused == []


# --- Serialization: DynamoDB linearizable, SQS never blocked -------------------------------------


@dataclass
class Race:
    """What the writers of ``race_increments`` saw."""

    final: int
    committed: list[int]  # every value some writer's transaction set, sorted
    failures: list[BaseException] = field(default_factory=list)
    server_errors: list[int] = field(default_factory=list)  # HTTP 5xx statuses, retried or not


@pytest.fixture
def wide_check_to_write_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand the GIL to another thread between each action's condition check and its write.

    Without it the window is a few microseconds of pure Python and a missing lock goes unnoticed;
    with it, any concurrently running DynamoDB request runs exactly there.
    """
    write = emulator._write

    def yield_then_write(backend: DynamoDBBackend, action: Any) -> None:
        os.sched_yield()
        write(backend, action)

    monkeypatch.setattr(emulator, "_write", yield_then_write)


def race_increments(emu: Emulator, ddb: Any, table: str) -> Race:
    """WRITERS threads each commit INCREMENTS_PER_WRITER conditional increments of one counter.

    Writers stop early at the first failure, the first HTTP 5xx (which botocore would retry and
    hide) or the deadline.
    """
    put(ddb, table, "counter", cnt={"N": "0"})
    deadline = time.monotonic() + DEADLINE_SECONDS
    start, stop = threading.Barrier(WRITERS), threading.Event()
    committed: list[list[int]] = [[] for _ in range(WRITERS)]
    race = Race(final=-1, committed=[])

    def record_server_error(response: Any = None, **_: Any) -> None:
        if response is not None and response[0].status_code >= 500:
            race.server_errors.append(response[0].status_code)
            stop.set()

    clients = [make_client(emu.endpoint_url, "dynamodb") for _ in range(WRITERS)]
    for client in clients:
        client.meta.events.register("needs-retry.dynamodb", record_server_error)

    def writer(index: int) -> None:
        try:
            start.wait(timeout=DEADLINE_SECONDS)
            while len(committed[index]) < INCREMENTS_PER_WRITER and not stop.is_set():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"writer {index} committed {len(committed[index])} in time")
                value = increment(clients[index], table)
                if value is not None:
                    committed[index].append(value)
        except BaseException as error:
            race.failures.append(error)
            stop.set()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
    race.final = int(ddb.get_item(TableName=table, Key={"pk": {"S": "counter"}})["Item"]["cnt"]["N"])
    race.committed = sorted(value for values in committed for value in values)
    return race


def increment(client: Any, table: str) -> int | None:
    """Read the counter, then set it to one more if it still holds what was read; the new value."""
    counter = {"pk": {"S": "counter"}}
    seen = int(client.get_item(TableName=table, Key=counter, ConsistentRead=True)["Item"]["cnt"]["N"])
    try:
        transact(
            client,
            {
                "Put": {
                    "TableName": table,
                    "Item": {**counter, "cnt": {"N": str(seen + 1)}},
                    "ConditionExpression": "cnt = :seen",
                    "ExpressionAttributeValues": {":seen": {"N": str(seen)}},
                }
            },
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        return None
    return seen + 1


@pytest.mark.usefixtures("wide_check_to_write_window")
def test_concurrent_conditional_transactions_lose_no_update(emu: Emulator, ddb: Any, table: str) -> None:
    race = race_increments(emu, ddb, table)

    assert race.failures == []
    assert race.server_errors == []
    total = WRITERS * INCREMENTS_PER_WRITER
    assert race.final == total
    assert race.committed == list(range(1, total + 1))  # every value committed exactly once


@pytest.mark.parametrize("serialized", [True, False], ids=["serialized", "without the lock"])
def test_a_reader_never_sees_half_a_transaction(
    emu: Emulator, ddb: Any, table: str, monkeypatch: pytest.MonkeyPatch, serialized: bool
) -> None:
    """A transaction setting x and y is read while it has written x only. Serialized, the read
    waits and sees both (DynamoDB's transactions are isolated); without the lock, which is what
    makes it so, the read sees x new and y old."""
    monkeypatch.setattr(emulator, "SERIALIZE_DYNAMODB", serialized)
    seed(ddb, table, "x=0 y=0")
    half_written, read_done = threading.Event(), threading.Event()
    write = emulator._write

    def write_then_pause_after_x(backend: DynamoDBBackend, action: Any) -> None:
        write(backend, action)
        if action.key == key("x"):
            half_written.set()
            read_done.wait(timeout=1.0)  # serialized, the read cannot happen until this returns

    monkeypatch.setattr(emulator, "_write", write_then_pause_after_x)
    both = [update(table, "x", "SET n = :one", **ONE), update(table, "y", "SET n = :one", **ONE)]
    writer = threading.Thread(target=transact, args=(make_client(emu.endpoint_url, "dynamodb"), *both))
    writer.start()
    assert half_written.wait(timeout=DEADLINE_SECONDS)
    seen = ddb.transact_get_items(
        TransactItems=[{"Get": {"TableName": table, "Key": key(pk)}} for pk in ("x", "y")]
    )["Responses"]
    read_done.set()
    writer.join(timeout=DEADLINE_SECONDS)

    assert [int(response["Item"]["n"]["N"]) for response in seen] == ([1, 1] if serialized else [1, 0])
    assert [item["n"] for item in contents(ddb, table)] == [n(1), n(1)]


def test_an_sqs_long_poll_does_not_hold_up_dynamodb(
    emu: Emulator, ddb: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = make_client(emu.endpoint_url, "sqs")
    queue_url = sqs.create_queue(QueueName=f"emu-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    polling = threading.Event()
    real_receive = SQSBackend.receive_message

    def receive_and_signal(self: SQSBackend, *args: Any, **kwargs: Any) -> Any:
        polling.set()
        return real_receive(self, *args, **kwargs)

    monkeypatch.setattr(SQSBackend, "receive_message", receive_and_signal)
    finished: list[str] = []

    def long_poll() -> None:
        sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=2)
        finished.append("poll")

    poller = threading.Thread(target=long_poll)
    poller.start()
    assert polling.wait(timeout=DEADLINE_SECONDS)
    put(ddb, table, "during-poll")
    finished.append("put")
    poller.join(timeout=DEADLINE_SECONDS)

    assert finished == ["put", "poll"]
    assert [item["pk"]["S"] for item in contents(ddb, table)] == ["during-poll"]


def test_given_the_patches_then_moto_keeps_no_dynamodb_item_alive_after_it_is_gone() -> None:
    """moto's model tracker would hold every item ever built; the local stack must not grow forever."""
    emulator.install_patches()
    backend = fresh_backend()
    before = tracked()
    for i in range(50):
        backend.put_item("t", {**key("c"), "n": n(i)})  # each put replaces the item
    assert tracked() == before == (0, 0)

"""The emulator's write speed-ups (kaibo_local.moto_speedups 6, 7 and 8) leave every item, stream
record and refusal as moto's own functions leave them.

Each case runs twice over HTTP through one emulator, on two tables holding the same items: once
with the speed-ups, once with moto's own functions, and the items, the errors (code and message)
and the stream records must be the same.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.parsing.validators import UpdateExpressionValidator

from kaibo_local import emulator, moto_speedups
from kaibo_local.emulator import Emulator
from tests.integration.test_emulator import make_client

#: (stored attributes besides the key or None: no item, the UpdateItem arguments besides the key)
CASES: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {
    "new item": (
        None,
        {"UpdateExpression": "ADD df :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "stored number": (
        {"df": {"N": "41"}, "other": {"S": "kept"}},
        {"UpdateExpression": "ADD df :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "two attributes, a #name": (
        {"docs": {"N": "2"}},
        {
            "UpdateExpression": "ADD docs :one, #terms :dl",
            "ExpressionAttributeNames": {"#terms": "terms"},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":dl": {"N": "17"}},
        },
    ),
    "decimals and negatives": (
        {"a": {"N": "1.25"}, "b": {"N": "10"}},
        {
            "UpdateExpression": "ADD a :x,b :y",
            "ExpressionAttributeValues": {":x": {"N": "-0.5"}, ":y": {"N": "-11"}},
        },
    ),
    "a string stored": (
        {"df": {"S": "text"}},
        {"UpdateExpression": "ADD df :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "a string set added": (
        {"tags": {"SS": ["a"]}},
        {"UpdateExpression": "ADD tags :more", "ExpressionAttributeValues": {":more": {"SS": ["b"]}}},
    ),
    "the key": (
        {"df": {"N": "1"}},
        {"UpdateExpression": "ADD pk :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "a reserved word": (
        {"size": {"N": "1"}},
        {"UpdateExpression": "ADD size :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "a missing value": (
        None,
        {"UpdateExpression": "ADD df :two", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
    "a missing name": (
        None,
        {
            "UpdateExpression": "ADD #x :one",
            "ExpressionAttributeNames": {"#y": "y"},
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        },
    ),
    "the same attribute twice": (
        None,
        {
            "UpdateExpression": "ADD df :one, #d :one",
            "ExpressionAttributeNames": {"#d": "df"},
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        },
    ),
    "not a number": (
        None,
        {"UpdateExpression": "ADD df :bad", "ExpressionAttributeValues": {":bad": {"N": "x1"}}},
    ),
    "with a condition": (
        {"df": {"N": "1"}},
        {
            "UpdateExpression": "ADD df :one",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        },
    ),
    "SET, left to moto": (
        {"df": {"N": "1"}},
        {"UpdateExpression": "SET df = df + :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
    ),
}

SPEEDUPS = (moto_speedups.NUMBER_ADD_UPDATE, moto_speedups.VALIDATOR_TREE_COPY, moto_speedups.ITEM_SIZE)


@pytest.fixture(autouse=True)
def _patches_installed() -> Iterator[None]:
    emulator.install_patches()
    yield
    emulator.install_patches()


@contextlib.contextmanager
def moto_alone() -> Iterator[None]:
    moto_speedups.uninstall(SPEEDUPS)
    try:
        yield
    finally:
        moto_speedups.install(SPEEDUPS)


def new_table(ddb: Any, *, stream: bool = False) -> str:
    name = f"update-speedup-{uuid.uuid4().hex[:10]}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **(
            {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}}
            if stream
            else {}
        ),
    )
    return name


KEY = {"pk": {"S": "term"}, "sk": {"N": "3"}}


def outcome(ddb: Any, table: str, stored: dict[str, Any] | None, arguments: dict[str, Any]) -> Any:
    if stored is not None:
        ddb.put_item(TableName=table, Item={**KEY, **stored})
    try:
        answer = ddb.update_item(TableName=table, Key=KEY, ReturnValues="ALL_NEW", **copy.deepcopy(arguments))
        result: Any = ("answered", answer["Attributes"])
    except ClientError as error:
        result = ("refused", error.response["Error"]["Code"], error.response["Error"]["Message"])
    return result, ddb.get_item(TableName=table, Key=KEY).get("Item")


@pytest.mark.parametrize("case", CASES)
def test_an_update_leaves_what_moto_leaves(ddb: Any, case: str) -> None:
    stored, arguments = CASES[case]
    fast = outcome(ddb, new_table(ddb), stored, arguments)
    with moto_alone():
        by_moto = outcome(ddb, new_table(ddb), stored, arguments)
    assert fast == by_moto


def test_an_add_is_taken_by_the_fast_path(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_validation(*_args: Any) -> None:
        raise AssertionError("the fast path validated a tree")

    monkeypatch.setattr(UpdateExpressionValidator, "validate", no_validation)
    table = new_table(ddb)
    for _ in range(3):
        ddb.update_item(
            TableName=table,
            Key=KEY,
            UpdateExpression="ADD df :one",
            ExpressionAttributeValues={":one": {"N": "2"}},
        )
    assert ddb.get_item(TableName=table, Key=KEY)["Item"]["df"] == {"N": "6"}
    with pytest.raises(ClientError):  # what the fast path leaves to moto is validated (here: refused)
        ddb.update_item(
            TableName=table,
            Key=KEY,
            UpdateExpression="SET df = :one",
            ExpressionAttributeValues={":one": {"N": "2"}},
        )


def stream_records(emu: Emulator, table: str) -> list[dict[str, Any]]:
    streams = make_client(emu.endpoint_url, "dynamodbstreams")
    arn = make_client(emu.endpoint_url, "dynamodb").describe_table(TableName=table)["Table"][
        "LatestStreamArn"
    ]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return [
        {"event": r["eventName"], **{k: v for k, v in r["dynamodb"].items() if "Image" in k}} for r in records
    ]


def test_a_table_with_a_stream_gets_the_records_moto_writes(emu: Emulator, ddb: Any) -> None:
    def updates(table: str) -> list[dict[str, Any]]:
        for value in ("1", "2.5"):
            ddb.update_item(
                TableName=table,
                Key=KEY,
                UpdateExpression="ADD df :v",
                ExpressionAttributeValues={":v": {"N": value}},
            )
        return stream_records(emu, table)

    fast = updates(new_table(ddb, stream=True))
    with moto_alone():
        by_moto = updates(new_table(ddb, stream=True))
    assert fast == by_moto
    assert len(fast) >= 2


def test_a_transaction_of_adds_still_rolls_back_as_a_whole(ddb: Any) -> None:
    table = new_table(ddb)
    ddb.put_item(TableName=table, Item={**KEY, "df": {"N": "5"}})
    other = {"pk": {"S": "other"}, "sk": {"N": "1"}}
    with pytest.raises(ClientError, match="TransactionCanceled"):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": KEY,
                        "UpdateExpression": "ADD df :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
                {"Put": {"TableName": table, "Item": KEY | {"sk": {"N": "9"}}}},
                {"Put": {"TableName": table, "Item": other, "ConditionExpression": "attribute_exists(pk)"}},
            ]
        )
    assert ddb.get_item(TableName=table, Key=KEY)["Item"]["df"] == {"N": "5"}
    assert "Item" not in ddb.get_item(TableName=table, Key=other)


def put_outcome(ddb: Any, table: str, attributes: dict[str, Any]) -> Any:
    try:
        ddb.put_item(TableName=table, Item={**KEY, **attributes})
    except ClientError as error:
        return ("refused", error.response["Error"]["Code"], error.response["Error"]["Message"])
    return ("stored", ddb.get_item(TableName=table, Key=KEY)["Item"])


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"a": {"S": "x" * 404_000}}, id="just under moto's limit"),
        pytest.param(
            {"a": {"S": "x" * 300_000}, "b": {"S": "y" * 110_000}}, id="over it at the second attribute"
        ),
        pytest.param({f"k{n}": {"N": str(n)} for n in range(300)}, id="many attributes, order kept"),
        pytest.param({"m": {"M": {"l": {"L": [{"S": "z" * 1000}] * 100}}}}, id="nested"),
    ],
)
def test_an_item_is_built_and_refused_as_moto_does(ddb: Any, attributes: dict[str, Any]) -> None:
    fast = put_outcome(ddb, new_table(ddb), attributes)
    with moto_alone():
        by_moto = put_outcome(ddb, new_table(ddb), attributes)
    assert fast == by_moto
    if fast[0] == "stored":
        assert list(fast[1]) == list(by_moto[1])  # the same attribute order

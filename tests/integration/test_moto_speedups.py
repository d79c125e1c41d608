"""The emulator's moto speed-ups answer exactly as moto does, and refuse a moto they were not written for.

Each speed-up is compared with moto's own function on the same requests, over HTTP through one
emulator started for the module: ``partition_query`` against moto's ``Table.query`` (boto3's parsed
responses, every Query shape Kaibo and the benchmarks use), ``fast_execute_result`` against moto's
serializer (the raw bodies: the same document, key order and number types included, written
without optional spaces; byte for byte where it leaves the work to moto, e.g. a binary attribute).
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from moto.core.responses import ActionContext, ActionResult
from moto.core.serialize import JSONSerializer
from moto.core.utils import get_service_model
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult

from kaibo_local import emulator, moto_speedups
from kaibo_local.emulator import Emulator
from kaibo_local.moto_speedups import FAST_SERIALIZATION, PARTITION_QUERY, MotoPatch

T = TypeVar("T")
TARGET_PREFIX = "DynamoDB_20120810."
#: Unsigned (moto does not check signatures), but naming the region, as boto3's would.
AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host;x-amz-target, Signature=0"
)


@pytest.fixture(autouse=True)
def _patches_installed() -> Iterator[None]:
    """Every test starts and ends with the emulator's patches in place (as the other tests expect)."""
    emulator.install_patches()
    yield
    emulator.install_patches()


def by_moto(patch: MotoPatch, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` with ``patch`` removed (moto's own function), then put back."""
    moto_speedups.uninstall([patch])
    try:
        return call(*args, **kwargs)
    finally:
        moto_speedups.install([patch])


# --- The pins ------------------------------------------------------------------------------------


@pytest.mark.parametrize("patch", emulator.MOTO_PATCHES, ids=lambda p: p.qualname)
def test_each_replaced_moto_function_is_the_pinned_one(patch: MotoPatch) -> None:
    emulator.install_patches()
    emulator.install_patches()  # idempotent

    assert patch.installed
    assert getattr(patch.owner, patch.name) is patch.replacement
    assert patch.source_sha256() == patch.sha256


@pytest.mark.parametrize("patch", moto_speedups.SPEEDUPS, ids=lambda p: p.qualname)
def test_install_refuses_a_moto_it_was_not_written_for_and_patches_nothing(
    patch: MotoPatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator.uninstall_patches()
    monkeypatch.setattr(patch, "sha256", "0" * 64)

    with pytest.raises(RuntimeError) as refused:
        emulator.install_patches()

    message = str(refused.value)
    assert patch.qualname in message
    assert patch.source_sha256() in message
    assert "update the pin" in message
    assert not any(p.installed for p in emulator.MOTO_PATCHES)  # all or nothing
    monkeypatch.undo()
    emulator.install_patches()
    assert all(p.installed for p in emulator.MOTO_PATCHES)


def test_uninstalling_gives_moto_its_own_functions_back() -> None:
    emulator.uninstall_patches()
    try:
        assert Table.query is PARTITION_QUERY.original()
        assert "execute_result" not in DynamoResult.__dict__  # inherited again, as moto has it
        assert DynamoResult.execute_result is ActionResult.execute_result
    finally:
        emulator.install_patches()
    assert DynamoResult.execute_result is moto_speedups.fast_execute_result


# --- 1. Query reads only its partition ----------------------------------------------------------


def create_table(ddb: Any, *, sort_type: str = "S", sort_key: bool = True, index: bool = False) -> str:
    name = f"speedup-{uuid.uuid4().hex[:10]}"
    keys = [("pk", "HASH", "S")] + ([("sk", "RANGE", sort_type)] if sort_key else [])
    attributes = {attr: kind for attr, _, kind in keys}
    extra: dict[str, Any] = {}
    if index:
        attributes |= {"gpk": "S", "gsk": "N"}
        extra["GlobalSecondaryIndexes"] = [
            {
                "IndexName": "ByGroup",
                "KeySchema": [
                    {"AttributeName": "gpk", "KeyType": "HASH"},
                    {"AttributeName": "gsk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ]
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": attr, "KeyType": kind} for attr, kind, _ in keys],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t} for a, t in attributes.items()],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return name


def sort_value(sort_type: str, number: int) -> dict[str, str]:
    return {"N": str(number * 7 % 23 - 5)} if sort_type == "N" else {"S": f"item#{number * 7 % 23:03d}"}


def fill(ddb: Any, table: str, sort_type: str = "S") -> None:
    """Four partitions of different sizes, items written out of sort order, varied attributes."""
    for partition, count in (("a", 3), ("b", 9), ("c", 1), ("d", 6)):
        for number in range(count):
            item: dict[str, Any] = {
                "pk": {"S": partition},
                "sk": sort_value(sort_type, number),
                "n": {"N": str(number)},
                "gpk": {"S": f"group-{number % 2}"},
                "gsk": {"N": str(number * 3 % 5)},
                "text": {"S": f"{partition} number {number} é"},
                "tags": {"SS": [f"t{number}", "all"]},
                "nested": {"M": {"list": {"L": [{"N": str(number)}, {"BOOL": number % 2 == 0}]}}},
            }
            if number % 3 == 0:
                item["flag"] = {"NULL": True}
            ddb.put_item(TableName=table, Item=item)


def query(ddb: Any, table: str, **request: Any) -> dict[str, Any]:
    answer: dict[str, Any] = ddb.query(TableName=table, **request)
    answer.pop("ResponseMetadata")
    return answer


def all_pages(ddb: Any, table: str, **request: Any) -> list[dict[str, Any]]:
    """Every page of a paginated Query, each with its LastEvaluatedKey."""
    pages = [query(ddb, table, **request)]
    while "LastEvaluatedKey" in pages[-1] and len(pages) < 50:
        pages.append(query(ddb, table, **request, ExclusiveStartKey=pages[-1]["LastEvaluatedKey"]))
    return pages


B = {":p": {"S": "b"}}
QUERIES: dict[str, dict[str, Any]] = {
    "the whole partition": {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": B},
    "backwards": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": B,
        "ScanIndexForward": False,
    },
    "a limit": {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": B, "Limit": 4},
    "a limit, backwards": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": B,
        "Limit": 3,
        "ScanIndexForward": False,
    },
    "a filter": {
        "KeyConditionExpression": "pk = :p",
        "FilterExpression": "n >= :two AND attribute_exists(flag)",
        "ExpressionAttributeValues": {**B, ":two": {"N": "2"}},
    },
    "a filter and a limit": {
        "KeyConditionExpression": "pk = :p",
        "FilterExpression": "n <> :two",
        "ExpressionAttributeValues": {**B, ":two": {"N": "2"}},
        "Limit": 2,
    },
    "a sort key condition": {
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :low AND :high",
        "ExpressionAttributeValues": {**B, ":low": {"S": "item#005"}, ":high": {"S": "item#019"}},
    },
    "a projection, consistent, counted capacity": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": B,
        "ProjectionExpression": "sk, #t, nested.list[1]",
        "ExpressionAttributeNames": {"#t": "text"},
        "ConsistentRead": True,
        "ReturnConsumedCapacity": "TOTAL",
    },
    "Select COUNT": {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": B, "Select": "COUNT"},
    "a partition of one": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "c"}},
    },
    "no such partition": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "zz"}},
    },
}


@pytest.mark.parametrize("request_", QUERIES.values(), ids=QUERIES.keys())
@pytest.mark.parametrize("sort_type", ["S", "N"])
def test_a_query_on_one_partition_answers_as_moto_does(
    ddb: Any, request_: dict[str, Any], sort_type: str
) -> None:
    table = create_table(ddb, sort_type=sort_type)
    fill(ddb, table, sort_type)
    if sort_type == "N" and "BETWEEN" in request_.get("KeyConditionExpression", ""):
        request_ = {**request_, "ExpressionAttributeValues": {**B, ":low": {"N": "-2"}, ":high": {"N": "9"}}}

    sped_up = all_pages(ddb, table, **request_)
    answered_by_moto = by_moto(PARTITION_QUERY, all_pages, ddb, table, **request_)

    assert sped_up == answered_by_moto
    assert any(page.get("Count") for page in sped_up) or "zz" in str(request_)


def test_a_query_starting_after_any_item_answers_as_moto_does(ddb: Any) -> None:
    table = create_table(ddb)
    fill(ddb, table)
    request = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": B}
    keys = [{"pk": item["pk"], "sk": item["sk"]} for item in query(ddb, table, **request)["Items"]]
    starts = [*keys, {"pk": {"S": "b"}, "sk": {"S": "item#000a"}}]  # and a key between two items

    for forward in (True, False):
        for start in starts:
            asked = {**request, "ScanIndexForward": forward, "ExclusiveStartKey": start, "Limit": 3}
            sped_up = query(ddb, table, **asked)
            assert sped_up == by_moto(PARTITION_QUERY, query, ddb, table, **asked)


def test_a_query_on_an_index_or_a_table_without_sort_key_answers_as_moto_does(ddb: Any) -> None:
    """The patch leaves these to moto: same answers, whatever moto's own code does."""
    indexed = create_table(ddb, index=True)
    fill(ddb, indexed)
    hash_only = create_table(ddb, sort_key=False)
    for pk in ("a", "b", "c"):
        ddb.put_item(TableName=hash_only, Item={"pk": {"S": pk}, "n": {"N": "1"}})
    requests: list[tuple[str, dict[str, Any]]] = [
        (
            indexed,
            {
                "IndexName": "ByGroup",
                "KeyConditionExpression": "gpk = :g",
                "ExpressionAttributeValues": {":g": {"S": "group-1"}},
            },
        ),
        (
            indexed,
            {
                "IndexName": "ByGroup",
                "KeyConditionExpression": "gpk = :g AND gsk > :z",
                "ExpressionAttributeValues": {":g": {"S": "group-0"}, ":z": {"N": "0"}},
                "ScanIndexForward": False,
                "Limit": 2,
            },
        ),
        (hash_only, {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": B}),
    ]
    for table, request in requests:
        sped_up = all_pages(ddb, table, **request)
        assert sped_up == by_moto(PARTITION_QUERY, all_pages, ddb, table, **request)
        assert sped_up[0]["Count"] > 0


def test_a_query_no_longer_lists_the_whole_table(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(ddb)
    fill(ddb, table)
    listed: list[str] = []
    all_items = Table.all_items

    def counting(self: Table) -> Any:
        listed.append(self.name)
        return all_items(self)

    monkeypatch.setattr(Table, "all_items", counting)
    query(ddb, table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=B)
    assert listed == []
    by_moto(PARTITION_QUERY, query, ddb, table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=B)
    assert listed == [table]


# --- 2. Query and BatchGetItem results in one json.dumps -----------------------------------------


def raw_call(emu: Emulator, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """One DynamoDB request over HTTP, unparsed: status, headers (lower-cased names), body."""
    address = urlsplit(emu.endpoint_url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/",
            body=json.dumps(body),
            headers={
                "X-Amz-Target": TARGET_PREFIX + operation,
                "Content-Type": "application/x-amz-json-1.0",
                "Authorization": AUTHORIZATION,
            },
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def compact(body: bytes) -> bytes:
    """moto's body without its optional spaces: what the fast path writes."""
    return json.dumps(json.loads(body), separators=(",", ":")).encode()


#: Headers that differ between any two answers (the request id, and what depends on the body).
PER_ANSWER_HEADERS = {"x-amzn-requestid", "x-amz-crc32", "content-length", "date"}


def same_headers(fast: dict[str, str], moto: dict[str, str]) -> bool:
    return {k: v for k, v in fast.items() if k not in PER_ANSWER_HEADERS} == {
        k: v for k, v in moto.items() if k not in PER_ANSWER_HEADERS
    }


@pytest.fixture
def filled(ddb: Any) -> str:
    table = create_table(ddb)
    fill(ddb, table)
    ddb.put_item(
        TableName=table,
        Item={
            "pk": {"S": "bin"},
            "sk": {"S": "1"},
            "blob": {"B": b"\x00\x01\xff"},
            "blobs": {"BS": [b"x", b"y"]},
            "deep": {"M": {"inner": {"B": b"\x02"}}},
        },
    )
    ddb.put_item(
        TableName=table, Item={"pk": {"S": "bin"}, "sk": {"S": "2"}, "text": {"S": "no binary here"}}
    )
    return table


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def query_request(table: str, pk: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    condition = {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    return "Query", {"TableName": table, **condition, **extra}


def batch_get_request(
    table: str, keys: list[dict[str, Any]], capacity: str | None = None, **extra: Any
) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"RequestItems": {table: {"Keys": keys, **extra}}}
    if capacity is not None:
        body["ReturnConsumedCapacity"] = capacity
    return "BatchGetItem", body


def serialized_requests(table: str) -> dict[str, tuple[str, dict[str, Any]]]:
    keys = [key("b", "item#007"), key("a", "item#000"), key("zz", "none")]
    return {
        "Query": query_request(table, "b"),
        "Query, a page": query_request(table, "b", Limit=2),
        "Query, capacity by index": query_request(
            table, "b", ReturnConsumedCapacity="INDEXES", ConsistentRead=True
        ),
        "Query, COUNT": query_request(table, "b", Select="COUNT"),
        "Query, nothing found": query_request(table, "zz"),
        "BatchGetItem": batch_get_request(table, keys, "TOTAL", ConsistentRead=True),
        "BatchGetItem, projected": batch_get_request(
            table,
            [key("d", "item#014")],
            ProjectionExpression="sk, nested, #t",
            ExpressionAttributeNames={"#t": "text"},
        ),
    }


def test_query_and_batch_get_bodies_are_moto_s_documents(emu: Emulator, filled: str) -> None:
    for name, (operation, body) in serialized_requests(filled).items():
        fast = raw_call(emu, operation, body)
        moto = by_moto(FAST_SERIALIZATION, raw_call, emu, operation, body)

        assert fast[0] == moto[0] == 200, name
        assert same_headers(fast[1], moto[1]), name
        assert fast[2] == compact(moto[2]), name  # same keys in the same order, same values and types
        assert fast[2] != moto[2], f"{name}: the fast path was not taken"


def item_requests(table: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Single-item reads and writes; each write leaves the same state when repeated."""
    item = {**key("w", "1"), "n": {"N": "2"}, "tags": {"SS": ["a", "b"]}, "m": {"M": {"x": {"L": []}}}}
    update = {"TableName": table, "Key": key("w", "1"), "ReturnValues": "ALL_NEW"}
    return {
        "PutItem": ("PutItem", {"TableName": table, "Item": item}),
        "PutItem, ALL_OLD": ("PutItem", {"TableName": table, "Item": item, "ReturnValues": "ALL_OLD"}),
        "GetItem": ("GetItem", {"TableName": table, "Key": key("w", "1"), "ConsistentRead": True}),
        "GetItem, capacity": (
            "GetItem",
            {"TableName": table, "Key": key("b", "item#007"), "ReturnConsumedCapacity": "TOTAL"},
        ),
        "GetItem, nothing": ("GetItem", {"TableName": table, "Key": key("zz", "none")}),
        "UpdateItem": (
            "UpdateItem",
            {**update, "UpdateExpression": "SET s = :s", "ExpressionAttributeValues": {":s": {"S": "v"}}},
        ),
        "DeleteItem": (
            "DeleteItem",
            {"TableName": table, "Key": key("gone", "1"), "ReturnValues": "ALL_OLD"},
        ),
    }


def test_item_read_and_write_bodies_are_moto_s_documents(emu: Emulator, filled: str) -> None:
    for name, (operation, body) in item_requests(filled).items():
        fast = raw_call(emu, operation, body)
        moto = by_moto(FAST_SERIALIZATION, raw_call, emu, operation, body)

        assert fast[0] == moto[0] == 200, name
        assert same_headers(fast[1], moto[1]), name
        assert fast[2] == compact(moto[2]), name  # same keys in the same order, same values and types
        assert fast[2] != moto[2] or moto[2] == b"{}", f"{name}: the fast path was not taken"


def test_a_binary_attribute_falls_back_to_moto_s_serializer(emu: Emulator, filled: str) -> None:
    requests = [
        query_request(filled, "bin"),
        batch_get_request(filled, [key("bin", "1"), key("b", "item#007")]),
        batch_get_request(
            filled,
            [key("bin", "2")],
            ProjectionExpression="deep, #t",
            ExpressionAttributeNames={"#t": "text"},
        ),
    ]
    for operation, body in requests:
        fast = raw_call(emu, operation, body)
        moto = by_moto(FAST_SERIALIZATION, raw_call, emu, operation, body)

        assert fast[0] == moto[0] == 200
        assert same_headers(fast[1], moto[1])
        if b"blob" in moto[2]:
            assert fast[2] == moto[2]  # moto's own bytes: the base64 of the binary values
        else:
            assert fast[2] == compact(moto[2])


def context(operation: str) -> ActionContext:
    service = get_service_model("dynamodb")
    return ActionContext(service, service.operation_model(operation), JSONSerializer, SimpleNamespace())  # type: ignore[arg-type]


ODD_RESULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "unprocessed keys, members out of the shape's order": (
        "BatchGetItem",
        {
            "UnprocessedKeys": {
                "t": {"ConsistentRead": True, "ProjectionExpression": "a", "Keys": [{"pk": {"S": "x"}}]}
            },
            "Responses": {"t": []},
            "ConsumedCapacity": [{"CapacityUnits": 2, "TableName": "t"}],
        },
    ),
    "capacity by index, integral units": (
        "Query",
        {
            "ConsumedCapacity": {
                "TableName": "t",
                "CapacityUnits": 3,
                "Table": {"CapacityUnits": 1},
                "GlobalSecondaryIndexes": {"g": {"CapacityUnits": 2}},
            },
            "ScannedCount": 0,
            "Count": 0,
            "Items": [],
        },
    ),
    "a number that is no string": ("Query", {"Items": [{"n": {"N": 5}}], "Count": 1, "ScannedCount": 1}),
    "a member the shape does not name": ("Query", {"Items": [], "Count": 0, "ScannedCount": 0, "Extra": 1}),
    "a set holding bytes": ("Query", {"Items": [{"s": {"BS": [b"a"]}}], "Count": 1, "ScannedCount": 1}),
}


@pytest.mark.parametrize(("operation", "result"), ODD_RESULTS.values(), ids=ODD_RESULTS.keys())
def test_unusual_results_are_moto_s_documents_too(operation: str, result: dict[str, Any]) -> None:
    answer = DynamoResult.__new__(DynamoResult)
    answer._result = result  # as DynamoResult.__init__ leaves it, without converting again

    status, headers, body = moto_speedups.fast_execute_result(answer, context(operation))
    moto_status, moto_headers, moto_body = ActionResult.execute_result(answer, context(operation))

    assert (status, headers) == (moto_status, moto_headers)
    assert body in (moto_body, compact(str(moto_body).encode()).decode())
    assert json.loads(body) == json.loads(moto_body)

"""Recall's direct reads (``adapters/sdk_speedups/direct_reads.py``): the same results as botocore, the same
request on the wire, and botocore itself for everything that is not a plain success."""

from __future__ import annotations

import http.client
import http.server
import json
import secrets
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from kaibo_core.adapters.aws import dynamodb_client, sqs_client
from kaibo_core.adapters.dynamodb_values import key, s
from kaibo_core.adapters.sdk_speedups.direct_reads import (
    MAX_CONSECUTIVE_FAILURES,
    MAX_IN_FLIGHT,
    DirectDynamoReads,
)
from kaibo_core.core import storage_keys
from kaibo_core.runtime import wiring
from tests.conftest import AwsStack
from tests.integration.test_memory_index import memory, new_project, stores

CREDENTIALS = Credentials("testing", "testing")


@dataclass
class Seen:
    """What a direct reader's observer saw."""

    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def __call__(self, operation: str, body: bytes, answer: bytes) -> None:
        self.calls.append((operation, json.loads(body), json.loads(answer)))


def without_metadata(response: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in response.items() if name != "ResponseMetadata"}


@pytest.fixture
def indexed(aws_stack: AwsStack) -> tuple[storage_keys.ProjectId, list[str]]:
    project = new_project()
    memory_store, _ = stores(aws_stack)
    records = [memory(project, n, f"Deploy window number {n} moved to Friday") for n in range(1, 8)]
    for record in records:
        memory_store.index_new(record)
    return project, [r.id for r in records]


def test_query_and_batch_get_equal_botocore_and_skip_it(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]]
) -> None:
    project, ids = indexed
    client = aws_stack.dynamodb
    seen = Seen()
    reads = DirectDynamoReads(client, CREDENTIALS, seen)
    assert reads.enabled
    sent_by_botocore: list[str] = []
    client.meta.events.register("before-send.dynamodb.*", lambda **kw: sent_by_botocore.append("x"))
    query = {
        "TableName": aws_stack.tables["TermIndexTable"],
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": s(storage_keys.postings_pk(project, "c", "deploy"))},
        "ScanIndexForward": False,
        "Limit": 5,
        "ConsistentRead": True,
    }
    keys = [key(storage_keys.memory_key(project, memory_id)) for memory_id in ids]
    batch = {"RequestItems": {aws_stack.tables["MemoriesTable"]: {"Keys": keys, "ConsistentRead": True}}}

    direct_query = reads.query(**query)
    direct_batch = reads.batch_get_item(**batch)

    assert sent_by_botocore == []
    assert [operation for operation, _, _ in seen.calls] == ["Query", "BatchGetItem"]
    assert direct_query == without_metadata(client.query(**query))
    assert len(direct_query["Items"]) == 5
    assert "LastEvaluatedKey" in direct_query
    assert direct_batch == without_metadata(client.batch_get_item(**batch))
    assert len(direct_batch["Responses"][aws_stack.tables["MemoriesTable"]]) == len(ids)


def _postings_queries(
    aws_stack: AwsStack, project: storage_keys.ProjectId, terms: list[str]
) -> list[dict[str, Any]]:
    return [
        {
            "TableName": aws_stack.tables["TermIndexTable"],
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(storage_keys.postings_pk(project, "c", term))},
            "ConsistentRead": True,
        }
        for term in terms
    ]


def test_queries_sent_together_answer_in_order_and_one_error_does_not_lose_the_others(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]]
) -> None:
    seen = Seen()
    reads = DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS, seen)
    queries = _postings_queries(aws_stack, indexed[0], ["deploy", "window", "friday", "absent"])

    answers = reads.query_all(queries)

    assert answers == [without_metadata(aws_stack.dynamodb.query(**q)) for q in queries]
    postings = [
        [i for i in a["Items"] if not i["sk"]["S"].startswith(storage_keys.DF_SORT_PREFIX)] for a in answers
    ]
    assert [len(p) for p in postings] == [7, 7, 7, 0]
    assert answers[3]["Items"] == []
    assert len(seen.calls) == 4
    broken = [*queries[:2], {**queries[2], "TableName": "no-such-table"}, queries[3]]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        reads.query_all(broken)
    assert reads.query_all(queries) == answers  # every connection was left clean
    assert reads.enabled


def test_more_queries_than_may_be_in_flight_are_sent_in_waves(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen()
    reads = DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS, seen)
    terms = ["deploy", "window", "friday", *(f"absent{n}" for n in range(MAX_IN_FLIGHT + 3))]
    queries = _postings_queries(aws_stack, indexed[0], terms)

    in_flight = [0, 0]  # now, most
    start, receive = reads._start, reads._receive

    def counted_start(operation: str, params: dict[str, Any]) -> Any:
        flight = start(operation, params)
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        return flight

    def counted_receive(operation: str, flight: Any) -> Any:
        in_flight[0] -= 1
        return receive(operation, flight)

    monkeypatch.setattr(reads, "_start", counted_start)
    monkeypatch.setattr(reads, "_receive", counted_receive)

    answers = reads.query_all(queries)

    assert answers == [without_metadata(aws_stack.dynamodb.query(**q)) for q in queries]
    assert len(seen.calls) == len(terms)
    assert in_flight == [0, MAX_IN_FLIGHT]


def test_errors_are_botocores_own(aws_stack: AwsStack) -> None:
    seen = Seen()
    reads = DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS, seen)
    query = {"TableName": "no-such-table", "KeyConditionExpression": "pk = :pk"}
    query["ExpressionAttributeValues"] = {":pk": s("x")}  # type: ignore[assignment]

    with pytest.raises(ClientError) as direct:
        reads.query(**query)
    with pytest.raises(ClientError) as botocore:
        aws_stack.dynamodb.query(**query)

    assert direct.value.response["Error"] == botocore.value.response["Error"]
    assert direct.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert seen.calls == []


def test_a_binary_value_is_left_to_botocore_and_comes_back_as_bytes(aws_stack: AwsStack) -> None:
    table = aws_stack.tables["MemoriesTable"]
    item_key = key(storage_keys.memory_key(new_project(), "mem_binary"))
    aws_stack.dynamodb.put_item(TableName=table, Item={**item_key, "blob": {"B": b"\x00\xffkaibo"}})
    seen = Seen()
    reads = DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS, seen)

    response = reads.batch_get_item(RequestItems={table: {"Keys": [item_key], "ConsistentRead": True}})

    assert response["Responses"][table][0]["blob"] == {"B": b"\x00\xffkaibo"}
    assert seen.calls == []


def _one_memory_read(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]]
) -> tuple[Seen, DirectDynamoReads, str, dict[str, Any]]:
    """A direct reader with an observer, and a BatchGetItem of one indexed memory."""
    project, ids = indexed
    seen = Seen()
    table = aws_stack.tables["MemoriesTable"]
    batch = {"RequestItems": {table: {"Keys": [key(storage_keys.memory_key(project, ids[0]))]}}}
    return seen, DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS, seen), table, batch


def test_a_dropped_connection_is_retried_by_botocore_then_the_next_read_is_direct_again(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen, reads, table, batch = _one_memory_read(aws_stack, indexed)
    dead = http.client.HTTPConnection("127.0.0.1", _closed_port(), timeout=2)
    monkeypatch.setattr(reads, "_connection", lambda: dead)

    first = reads.batch_get_item(**batch)
    monkeypatch.undo()
    second = reads.batch_get_item(**batch)

    assert without_metadata(first) == second
    assert len(second["Responses"][table]) == 1
    assert [operation for operation, _, _ in seen.calls] == ["BatchGetItem"]  # the second only


def test_repeated_transport_failures_turn_the_direct_path_off(
    aws_stack: AwsStack, indexed: tuple[storage_keys.ProjectId, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen, reads, table, batch = _one_memory_read(aws_stack, indexed)
    port = _closed_port()
    monkeypatch.setattr(
        reads, "_connection", lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    )

    answers = [reads.batch_get_item(**batch) for _ in range(MAX_CONSECUTIVE_FAILURES + 2)]

    assert all(len(answer["Responses"][table]) == 1 for answer in answers)  # botocore answered each
    assert not reads.enabled
    assert seen.calls == []


def test_not_used_through_a_proxy_without_credentials_or_under_a_path(aws_stack: AwsStack) -> None:
    endpoint = aws_stack.endpoint_url
    proxied = _client(endpoint, Config(proxies={"http": "http://127.0.0.1:9"}))
    under_path = _client(endpoint + "/dynamodb")
    assert not DirectDynamoReads(proxied, CREDENTIALS).enabled
    assert not DirectDynamoReads(under_path, CREDENTIALS).enabled
    assert not DirectDynamoReads(_client(endpoint), None).enabled


def test_turned_off_by_the_setting(handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(wiring.dynamodb_reads(), DirectDynamoReads)
    assert wiring.dynamodb() is dynamodb_client()
    monkeypatch.setenv("KAIBO_SDK_SPEEDUPS", "0")
    wiring.reset()
    # One switch turns every speed-up off: plain botocore clients of their own, no direct path.
    plain = wiring.dynamodb()
    assert wiring.dynamodb_reads() is plain
    assert plain is not dynamodb_client()
    assert wiring.sqs() is not sqs_client()
    assert "to_string" in vars(dynamodb_client()._user_agent_creator)  # type: ignore[attr-defined]  # memoized
    assert "to_string" not in vars(plain._user_agent_creator)  # type: ignore[attr-defined]


# -- the wire: the same request as botocore's -------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class RecordingServer:
    """Answers every POST with ``answer`` (and its CRC32, or ``bad_checksums`` wrong ones first)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = json.dumps(answer).encode()
        self.bad_checksums = 0
        self.requests: list[Recorded] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.requests.append(
                    Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                checksum = zlib.crc32(recorder.answer)
                if recorder.bad_checksums:
                    recorder.bad_checksums -= 1
                    checksum ^= 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("x-amz-crc32", str(checksum))
                self.send_header("Content-Length", str(len(recorder.answer)))
                self.end_headers()
                self.wfile.write(recorder.answer)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recording() -> Iterator[RecordingServer]:
    server = RecordingServer({"Items": [{"sk": {"S": "a"}}], "Count": 1, "ScannedCount": 1})
    yield server
    server.close()


def test_the_request_on_the_wire_is_botocores(recording: RecordingServer) -> None:
    client = _client(recording.url, session_token="token-1")
    reads = DirectDynamoReads(client, Credentials("AKIDTEST", "secret", "token-1"))
    query = {
        "TableName": "t",
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": s("x")},
    }

    reads.query(**query)
    client.query(**query)

    direct, botocore = recording.requests
    assert (direct.method, direct.path) == (botocore.method, botocore.path) == ("POST", "/")
    assert json.loads(direct.body) == json.loads(botocore.body)
    for header in ("content-type", "x-amz-target", "x-amz-security-token", "host"):
        assert direct.headers[header] == botocore.headers[header], header
    direct_auth, botocore_auth = (_authorization(r.headers["authorization"]) for r in (direct, botocore))
    assert direct_auth["Credential"] == botocore_auth["Credential"]  # key id, day, region, service
    assert direct_auth["SignedHeaders"] == botocore_auth["SignedHeaders"]
    assert {"host", "x-amz-date", "x-amz-target", "x-amz-security-token"} <= set(
        direct_auth["SignedHeaders"].split(";")
    )


def test_a_checksum_mismatch_is_left_to_botocore(recording: RecordingServer) -> None:
    recording.bad_checksums = 1
    seen = Seen()
    reads = DirectDynamoReads(_client(recording.url), CREDENTIALS, seen)

    response = reads.query(TableName="t", KeyConditionExpression="pk = :pk")

    assert response["Items"] == [{"sk": {"S": "a"}}]
    assert len(recording.requests) == 2  # direct (rejected), then botocore's
    assert seen.calls == []


def _authorization(header: str) -> dict[str, str]:
    algorithm, _, rest = header.partition(" ")
    assert algorithm == "AWS4-HMAC-SHA256"
    return dict(part.strip().split("=", 1) for part in rest.split(","))


def _client(endpoint: str, config: Config | None = None, session_token: str | None = None) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=CREDENTIALS.access_key if session_token is None else "AKIDTEST",
        aws_secret_access_key=CREDENTIALS.secret_key if session_token is None else "secret",
        aws_session_token=session_token,
        config=(config or Config()).merge(Config(retries={"max_attempts": 1})),
    )


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_fresh_project_reads_nothing(aws_stack: AwsStack) -> None:
    reads = DirectDynamoReads(aws_stack.dynamodb, CREDENTIALS)
    response = reads.query(
        TableName=aws_stack.tables["TermIndexTable"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={
            ":pk": s(storage_keys.postings_pk(new_project(), "c", secrets.token_hex(4)))
        },
    )
    assert response["Items"] == []
    assert response["Count"] == 0

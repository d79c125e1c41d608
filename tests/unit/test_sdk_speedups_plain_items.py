"""Plain item reads: the items a before-parse hook takes as sent equal what botocore's parser
builds, for every attribute type Kaibo stores; binary values and errors stay botocore's."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import botocore.session
from botocore import parsers
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.adapters.sdk_speedups import plain_items

MODEL = botocore.session.get_session().get_service_model("dynamodb")

strings = st.text(max_size=20) | st.sampled_from(["B", "BS", '"B"'])
numbers = st.integers(-(10**12), 10**12).map(str)
scalars = st.one_of(
    strings.map(lambda v: {"S": v}),
    numbers.map(lambda v: {"N": v}),
    st.booleans().map(lambda v: {"BOOL": v}),
    st.just({"NULL": True}),
    st.lists(strings, min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    st.lists(numbers, min_size=1, max_size=3, unique=True).map(lambda v: {"NS": v}),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
        st.dictionaries(strings, inner, max_size=3).map(lambda v: {"M": v}),
    ),
    max_leaves=8,
)
items = st.lists(
    st.dictionaries(st.sampled_from(["pk", "sk", "p", "content", "refs"]), values, min_size=1), max_size=5
)


def parse(operation: str, document: dict[str, Any], fast: bool, status: int = 200) -> dict[str, Any]:
    response_dict: dict[str, Any] = {
        "status_code": status,
        "headers": {},
        "body": json.dumps(document).encode(),
        "context": {},
    }
    customized: dict[str, Any] = {}
    if fast:
        hook = plain_items._take_query_items if operation == "Query" else plain_items._take_batch_items
        hook(response_dict=response_dict, customized_response_dict=customized)
    shape = MODEL.operation_model(operation).output_shape
    assert shape is not None
    parsed: dict[str, Any] = parsers.create_parser("json").parse(response_dict, shape)
    parsed.update(customized)
    return parsed


@settings(max_examples=300, deadline=None)
@given(found=items, more=st.booleans())
def test_given_plain_items_then_a_query_parses_exactly_as_botocore_parses_it(
    found: list[dict[str, Any]], more: bool
) -> None:
    document: dict[str, Any] = {"Items": found, "Count": len(found), "ScannedCount": len(found)}
    if more:
        document["LastEvaluatedKey"] = {"pk": {"S": "p#t"}, "sk": {"S": "00012#mem_1"}}
    assert parse("Query", document, fast=True) == parse("Query", document, fast=False)


@settings(max_examples=200, deadline=None)
@given(found=items, unprocessed=st.booleans())
def test_given_plain_items_then_a_batch_get_parses_exactly_as_botocore_parses_it(
    found: list[dict[str, Any]], unprocessed: bool
) -> None:
    document: dict[str, Any] = {"Responses": {"tbl": found}, "UnprocessedKeys": {}}
    if unprocessed:
        document["UnprocessedKeys"] = {"tbl": {"Keys": [{"pk": {"S": "a"}}], "ConsistentRead": True}}
    assert parse("BatchGetItem", document, fast=True) == parse("BatchGetItem", document, fast=False)


def test_given_a_binary_value_then_botocore_parses_the_whole_response() -> None:
    blob = base64.b64encode(b"\x00\x01").decode()
    document = {"Items": [{"pk": {"S": "a"}}, {"pk": {"S": "b"}, "blob": {"L": [{"B": blob}]}}], "Count": 2}
    parsed = parse("Query", document, fast=True)
    assert parsed["Items"][1]["blob"]["L"][0]["B"] == b"\x00\x01"
    assert plain_items.may_hold_binary(json.dumps(document).encode())


def test_given_an_error_then_the_body_is_left_to_botocore() -> None:
    document = {"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException", "message": "gone"}
    response_dict: dict[str, Any] = {"status_code": 400, "headers": {}, "body": json.dumps(document).encode()}
    customized: dict[str, Any] = {}
    plain_items._take_query_items(response_dict=response_dict, customized_response_dict=customized)
    assert customized == {}
    assert json.loads(response_dict["body"]) == document


def test_given_remembered_user_agents_then_every_request_carries_botocores_own_header() -> None:
    """The memoized User-Agent equals the one botocore builds, request after request (answered by
    a before-send hook: nothing leaves the process)."""
    import botocore.session
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    from kaibo_core.adapters.sdk_speedups.user_agents import remember_user_agents

    class Body:
        def stream(self, **_: object) -> Iterator[bytes]:
            yield b"{}"

    session = botocore.session.get_session()
    sent: dict[str, list[str]] = {"plain": [], "memoized": []}
    for name, headers in sent.items():
        client: Any = session.create_client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        if name == "memoized":
            remember_user_agents(client)

        def answer(request: Any, headers: list[str] = headers, **_: object) -> AWSResponse:
            headers.append(request.headers["User-Agent"])
            return AWSResponse(request.url, 200, HTTPHeaders(), Body())

        client.meta.events.register("before-send.dynamodb.*", answer)
        for _ in range(3):
            client.get_item(TableName="t", Key={"pk": {"S": "x"}})
    assert sent["memoized"] == sent["plain"]
    assert len(sent["memoized"]) == 3
    assert len(set(sent["memoized"])) == 1

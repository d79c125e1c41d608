"""Items of Query and BatchGetItem responses taken as DynamoDB sends them, not re-parsed.

botocore parses a response by walking the service model for every value: for a recall
that reads ~500 postings and ~20 memory items, that walk was ~45 % of the recall's CPU
(``docs/performance.md``). Yet for attribute values of the types Kaibo stores (``S``,
``N``, ``BOOL``, ``NULL``, ``L``, ``M``, ``SS``, ``NS``), the parsed form *is* the wire
JSON: strings stay strings, numbers stay decimal strings. Only binary types differ (the
wire holds base64, the parsed form bytes).

So a ``before-parse`` hook (botocore's extension point that runs before its parser)
takes the items out of the body with ``json.loads`` when no value can be binary,
hands them over as the parser's customized response, and leaves the rest of the body
(counts, ``LastEvaluatedKey``, ``UnprocessedKeys``, errors) to botocore. A response with
a binary value anywhere, or any error, is left entirely to botocore. The result is the
same dictionary botocore would build (``tests/unit/test_sdk_speedups_plain_items.py`` checks it
against botocore's own parser).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: A binary value is an object with the key "B" or "BS"; any other "B"/"BS" string (a
#: value, an attribute name) only makes us leave the response to botocore: always correct.
_BINARY_MARKERS: Final = (b'"B"', b'"BS"')


def may_hold_binary(body: bytes) -> bool:
    """Could this response body hold a binary attribute value? (A substring test: fast, and
    never wrong in the unsafe direction.)"""
    return any(marker in body for marker in _BINARY_MARKERS)


def _body(response_dict: dict[str, Any]) -> dict[str, Any] | None:
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes) or may_hold_binary(body):
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _take_query_items(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    document = _body(response_dict)
    if document is None or not isinstance(document.get("Items"), list):
        return
    customized_response_dict["Items"] = document.pop("Items")
    response_dict["body"] = json.dumps(document).encode("utf-8")


def _take_batch_items(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    document = _body(response_dict)
    if document is None:
        return
    if not isinstance(document.get("Responses"), dict):
        return
    customized_response_dict["Responses"] = document.pop("Responses")
    response_dict["body"] = json.dumps(document).encode("utf-8")


def install_plain_item_reads(client: DynamoDBClient) -> None:
    """Take Query and BatchGetItem items as sent (see the module docstring) on this client."""
    events = client.meta.events
    events.register("before-parse.dynamodb.Query", _take_query_items, unique_id="kaibo-plain-query-items")
    events.register(
        "before-parse.dynamodb.BatchGetItem", _take_batch_items, unique_id="kaibo-plain-batch-items"
    )

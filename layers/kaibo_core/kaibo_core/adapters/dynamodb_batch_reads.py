"""BatchGetItem to the end: every store's batch reads go through ``batch_get``.

DynamoDB reads at most 100 keys per BatchGetItem and answers with the keys it did not read this
time (``UnprocessedKeys``: the table or one of its partitions is throttled, or the answer passed
16 MB). Those are asked again with full-jitter backoff, in at most ``BATCH_GET_ROUNDS`` rounds and
before the invocation's deadline (``core/deadline.py``); then ``table_busy`` (a 429 with
``Retry-After``) is raised, or, for a caller that can do without some items (``partial``), what
was read is returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from kaibo_core.adapters.dynamodb_values import Item
from kaibo_core.core import deadline as invocation
from kaibo_core.core.backoff import full_jitter
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.limits import (
    BATCH_GET_BACKOFF_BASE_SECONDS,
    BATCH_GET_BACKOFF_CAP_SECONDS,
    BATCH_GET_RETRY_AFTER_SECONDS,
    BATCH_GET_ROUNDS,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads

#: Keys per BatchGetItem (DynamoDB's limit).
BATCH_GET_KEYS: Final = 100


def table_busy() -> TooManyRequestsError:
    """The 429 of a read DynamoDB kept throttling past its rounds or the invocation's time."""
    return TooManyRequestsError(
        "table_busy",
        "The data this request reads is being throttled right now; retry after the Retry-After seconds.",
        retry_after_seconds=BATCH_GET_RETRY_AFTER_SECONDS,
    )


def batch_get(
    reads: DynamoDBClient | DirectDynamoReads,
    table: str,
    keys: Sequence[Item],
    *,
    options: Mapping[str, Any] | None = None,
    rounds: int = BATCH_GET_ROUNDS,
    partial: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Item]:
    """The items of ``table`` at ``keys`` that exist, in no particular order. ``options`` go with
    every request (``ConsistentRead``, ``ProjectionExpression``, ``ExpressionAttributeNames``).
    Keys still unprocessed after ``rounds`` rounds, or when the next wait would pass the deadline,
    raise ``table_busy()``; with ``partial``, their items are left out instead."""
    items: list[Item] = []
    for start in range(0, len(keys), BATCH_GET_KEYS):
        pending: dict[str, Any] = {
            table: {**(options or {}), "Keys": list(keys[start : start + BATCH_GET_KEYS])}
        }
        for attempt in range(rounds):
            response = reads.batch_get_item(RequestItems=pending)
            items.extend(cast("list[Item]", response.get("Responses", {}).get(table, [])))
            pending = dict(response.get("UnprocessedKeys") or {})
            if not pending:
                break
            wait = full_jitter(attempt, BATCH_GET_BACKOFF_BASE_SECONDS, BATCH_GET_BACKOFF_CAP_SECONDS)
            if attempt + 1 == rounds or not invocation.time_for(wait):
                break
            sleep(wait)
        if pending and not partial:
            raise table_busy()
    return items

"""AWS clients, created lazily once per container.

Endpoint and region come from the environment (``AWS_ENDPOINT_URL``,
``AWS_DEFAULT_REGION``), which botocore reads itself, so the same code runs on
AWS and against the local stack's emulator. Clients come straight from a
botocore session: ``import boto3`` would add boto3 and s3transfer (~60 ms) to
every cold start for nothing we use. ``speedups`` (the deployment's
``KAIBO_SDK_SPEEDUPS``) adds the SDK speed-ups of ``sdk_speedups``; without them the
clients are plain botocore.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, cast

import botocore.session
from botocore.config import Config

from kaibo_core.adapters import sdk_speedups

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads, Observer

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=16,  # recall will query postings in parallel
)


@lru_cache(maxsize=2)
def botocore_session(speedups: bool = True) -> botocore.session.Session:
    """The botocore session of the container (with the lean data loader when ``speedups``)."""
    session = botocore.session.get_session()
    if speedups:
        sdk_speedups.speed_up_session(session)
    return session


@lru_cache(maxsize=2)
def dynamodb_client(speedups: bool = True) -> DynamoDBClient:
    client = cast("DynamoDBClient", botocore_session(speedups).create_client("dynamodb", config=_CONFIG))
    if speedups:
        sdk_speedups.speed_up_dynamodb_client(client)
    return client


def dynamodb_reads(
    speedups: bool = True, observer: Observer | None = None
) -> DynamoDBClient | DirectDynamoReads:
    """What recall's Query and BatchGetItem go through: the direct path in front of the client
    (``sdk_speedups.direct_reads``) with the speed-ups on, else the client itself. Built once
    per container with the service that uses it."""
    client = dynamodb_client(speedups)
    if not speedups:
        return client
    return sdk_speedups.direct_read_path(client, botocore_session(speedups), observer)


@lru_cache(maxsize=2)
def sqs_client(speedups: bool = True) -> SQSClient:
    return cast("SQSClient", botocore_session(speedups).create_client("sqs", config=_CONFIG))


#: Threads for parallel DynamoDB calls of one invocation (postings reads, memory indexing);
#: as many as the client's connection pool.
IO_THREADS = 16


@lru_cache(maxsize=1)
def io_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="kaibo-io")

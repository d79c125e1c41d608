"""AWS clients, created lazily once per container.

Endpoint and region come from the environment (``AWS_ENDPOINT_URL``,
``AWS_DEFAULT_REGION``), which botocore reads itself, so the same code runs on
AWS and against the local stack's emulator. Clients come straight from a
botocore session: ``import boto3`` would add boto3 and s3transfer (~60 ms) to
every cold start for nothing we use. The clients carry the SDK speed-ups of
``sdk_speedups``; the ``plain_`` ones (the deployment's ``KAIBO_SDK_SPEEDUPS=0``, chosen in
``runtime/wiring.py``) are plain botocore.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, TypeAlias, cast

import botocore.session
from botocore.config import Config

from kaibo_core.adapters import sdk_speedups

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayClient
    from kaibo_core.adapters.kms_secrets import KmsClient
    from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads, Observer

    #: What recall reads through: the direct path, or a botocore client.
    DynamoReads: TypeAlias = DynamoDBClient | DirectDynamoReads

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=16,  # recall will query postings in parallel
)


@lru_cache(maxsize=1)
def botocore_session() -> botocore.session.Session:
    """The botocore session of the container, with the lean data loader (``sdk_speedups``)."""
    session = botocore.session.get_session()
    sdk_speedups.speed_up_session(session)
    return session


@lru_cache(maxsize=1)
def dynamodb_client() -> DynamoDBClient:
    """The DynamoDB client, with the SDK speed-ups (plain items, user-agent memo)."""
    client = cast("DynamoDBClient", botocore_session().create_client("dynamodb", config=_CONFIG))
    sdk_speedups.speed_up_dynamodb_client(client)
    return client


@lru_cache(maxsize=1)
def sqs_client() -> SQSClient:
    return cast("SQSClient", botocore_session().create_client("sqs", config=_CONFIG))


@lru_cache(maxsize=1)
def kms_client() -> KmsClient:
    """KMS, for webhook signing secrets (the functions that manage or deliver webhooks) and the
    reason salts keyed forgets keep (forget)."""
    return cast("KmsClient", botocore_session().create_client("kms", config=_CONFIG))


@lru_cache(maxsize=1)
def apigateway_client() -> ApiGatewayClient:
    """API Gateway, for per-project throttles' API keys only (the admin function)."""
    return cast("ApiGatewayClient", botocore_session().create_client("apigateway", config=_CONFIG))


def dynamodb_reads(direct: bool = True, observer: Observer | None = None) -> DynamoReads:
    """What recall's Query and BatchGetItem go through: the direct path in front of the client
    (``sdk_speedups.direct_reads``), or the client itself when ``direct`` is off or the path
    cannot be used. Built once per container with the service that uses it."""
    client = dynamodb_client()
    if not direct:
        return client
    return sdk_speedups.direct_read_path(client, botocore_session(), observer)


# --- Without the SDK speed-ups (KAIBO_SDK_SPEEDUPS=0): plain botocore, a session of its own. ------


@lru_cache(maxsize=1)
def plain_botocore_session() -> botocore.session.Session:
    return botocore.session.get_session()


@lru_cache(maxsize=1)
def plain_dynamodb_client() -> DynamoDBClient:
    return cast("DynamoDBClient", plain_botocore_session().create_client("dynamodb", config=_CONFIG))


@lru_cache(maxsize=1)
def plain_sqs_client() -> SQSClient:
    return cast("SQSClient", plain_botocore_session().create_client("sqs", config=_CONFIG))


#: Threads for parallel DynamoDB calls of one invocation (postings reads, memory indexing);
#: as many as the client's connection pool.
IO_THREADS = 16


@lru_cache(maxsize=1)
def io_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="kaibo-io")

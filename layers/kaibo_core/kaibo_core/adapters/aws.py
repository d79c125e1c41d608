"""AWS clients, created lazily once per container.

Endpoint and region come from the environment (``AWS_ENDPOINT_URL``,
``AWS_DEFAULT_REGION``), which botocore reads itself, so the same code runs on
AWS and against the local stack's emulator. Clients come straight from a
botocore session: ``import boto3`` would add boto3 and s3transfer (~60 ms) to
every cold start for nothing we use.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, cast

import botocore.session
from botocore.config import Config
from botocore.context import get_context

from kaibo_core.adapters.botocore_loader import install_service_loader
from kaibo_core.adapters.dynamodb_wire import install_plain_item_reads

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from kaibo_core.adapters.dynamodb_direct import DirectDynamoReads, Observer

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=16,  # recall will query postings in parallel
)


@lru_cache(maxsize=1)
def botocore_session() -> botocore.session.Session:
    """The one botocore session of the container, with the lean data loader (botocore_loader)."""
    session = botocore.session.get_session()
    install_service_loader(session)
    return session


@lru_cache(maxsize=1)
def dynamodb_client() -> DynamoDBClient:
    client = cast("DynamoDBClient", botocore_session().create_client("dynamodb", config=_CONFIG))
    install_plain_item_reads(client)
    remember_user_agents(client)
    return client


def dynamodb_reads(
    direct: bool = True, observer: Observer | None = None
) -> DynamoDBClient | DirectDynamoReads:
    """What recall's Query and BatchGetItem go through: the direct path in front of the client
    (``dynamodb_direct``), or the client itself when ``direct`` is off or cannot be used. Built
    once per container with the service that uses it."""
    client = dynamodb_client()
    if not direct:
        return client
    from kaibo_core.adapters.dynamodb_direct import DirectDynamoReads  # noqa: PLC0415 - recall's only

    session = botocore_session()
    reads = DirectDynamoReads(
        client, session.get_credentials(), observer, ca_bundle=session.get_config_variable("ca_bundle")
    )
    return reads if reads.enabled else client


def remember_user_agents(client: object) -> None:
    """Build each distinct User-Agent header once instead of twice per request.

    botocore rebuilds the header for every request, sanitizing each of its components character
    by character (~0.2 ms of CPU per request, ~10 % of a recall's). It only changes with the
    request's feature ids (retry mode, paginator, …), so it is memoized on them; the value is
    exactly botocore's own (tested).
    """
    creator = getattr(client, "_user_agent_creator", None)
    if creator is None or not hasattr(creator, "to_string"):
        return  # another botocore: leave it be
    build = creator.to_string
    built: dict[frozenset[str], str] = {}

    def to_string() -> str:
        context = get_context()
        features = frozenset(context.features) if context is not None else frozenset()
        features |= frozenset(getattr(creator, "_client_features", None) or ())
        text = built.get(features)
        if text is None:
            text = built[features] = build()
        return text

    creator.to_string = to_string


@lru_cache(maxsize=1)
def sqs_client() -> SQSClient:
    return cast("SQSClient", botocore_session().create_client("sqs", config=_CONFIG))


#: Threads for parallel DynamoDB calls of one invocation (postings reads, memory indexing);
#: as many as the client's connection pool.
IO_THREADS = 16


@lru_cache(maxsize=1)
def io_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="kaibo-io")

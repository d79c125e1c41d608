"""boto3 clients, created lazily once per container.

Endpoint and region come from the environment (``AWS_ENDPOINT_URL``,
``AWS_REGION``/``AWS_DEFAULT_REGION``), which boto3 reads itself, so the same
code runs on AWS and against the local stack's emulator.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=16,  # recall will query postings in parallel
)


@lru_cache(maxsize=1)
def dynamodb_client() -> DynamoDBClient:
    return boto3.client("dynamodb", config=_CONFIG)

"""SDK speed-ups: everything Kaibo does that relies on botocore's internals, in one place.

Four measured cuts, all behind one switch (``KAIBO_SDK_SPEEDUPS``, default on; ``0``
turns every one of them off and leaves plain botocore):

- ``service_loader``: a data loader that skips botocore's listing of ~430 service
  directories and parses its JSON into plain dicts (~40 ms of each cold start);
- ``plain_items``: Query and BatchGetItem items taken as DynamoDB sends them, through
  botocore's ``before-parse`` hook (~45 % of a recall's CPU was botocore's parser);
- ``user_agents``: each distinct User-Agent header built once (a private attribute of
  the client: ``_user_agent_creator``);
- ``direct_reads``: recall's Query and BatchGetItem sent over kept-alive connections,
  signed by botocore's SigV4Auth, every non-plain answer handed back to botocore.

Each result is botocore's own (tests compare them). What they rely on in botocore is
pinned in ``pins.py`` by the source hash of each function involved;
``tests/contract/test_sdk_speedups.py`` fails when the pinned botocore changes any of it.
The decision to keep them on, with its figures, is in docs/recall.md ("The direct path").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaibo_core.adapters.sdk_speedups.plain_items import install_plain_item_reads
from kaibo_core.adapters.sdk_speedups.service_loader import install_service_loader
from kaibo_core.adapters.sdk_speedups.user_agents import remember_user_agents

if TYPE_CHECKING:
    import botocore.session
    from mypy_boto3_dynamodb import DynamoDBClient

    from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads, Observer


def speed_up_session(session: botocore.session.Session) -> None:
    install_service_loader(session)


def speed_up_dynamodb_client(client: DynamoDBClient) -> None:
    install_plain_item_reads(client)
    remember_user_agents(client)


def direct_read_path(
    client: DynamoDBClient, session: botocore.session.Session, observer: Observer | None = None
) -> DynamoDBClient | DirectDynamoReads:
    """Recall's reads through the direct path, or the client itself where it cannot be used
    (behind a proxy, without credentials): see ``direct_reads.DirectDynamoReads.enabled``."""
    from kaibo_core.adapters.sdk_speedups.direct_reads import (  # noqa: PLC0415 - recall's only
        DirectDynamoReads,
    )

    reads = DirectDynamoReads(
        client, session.get_credentials(), observer, ca_bundle=session.get_config_variable("ca_bundle")
    )
    return reads if reads.enabled else client

"""Wiring: every store and service a function uses, built here once per container.

Handlers ask this module for their service (``wiring.recall_service()``) unless one is
injected (``lambda_handler(event, context, service=...)``), so tests pass in a service
built over fakes or the emulator instead of patching module globals; ``reset()`` drops
everything built (after a test changes the environment).

Each factory imports its adapters when first called, not at import: a function pays at
cold start only for the stores it uses (remember never loads recall's read path, nor the
structurer). Settings come from the environment, validated once (``runtime/settings.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from kaibo_core.runtime.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan
    from kaibo_core.adapters.aws import DynamoReads
    from kaibo_core.adapters.dynamodb_events import DynamoEventStore
    from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
    from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
    from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
    from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore
    from kaibo_core.adapters.kms_secrets import KmsSaltCipher, KmsSecretCipher
    from kaibo_core.adapters.sqs_jobs import SqsJobQueue
    from kaibo_core.adapters.sqs_webhooks import SqsWebhookQueue
    from kaibo_core.adapters.webhook_outbox import WebhookOutbox
    from kaibo_core.core.semantic.scoring import SemanticParams
    from kaibo_core.ports import Embedder, Structurer
    from kaibo_core.services.admin import AdminService
    from kaibo_core.services.authorization import AuthorizationService
    from kaibo_core.services.forgetting import ForgetService
    from kaibo_core.services.jobs import JobsService
    from kaibo_core.services.ledger import LedgerService
    from kaibo_core.services.memories import MemoriesService
    from kaibo_core.services.purging import Purger
    from kaibo_core.services.recall import RecallService
    from kaibo_core.services.remember import RememberService
    from kaibo_core.services.semantic import SemanticChannel
    from kaibo_core.services.streams import StreamsService
    from kaibo_core.services.structuring import StructuringService
    from kaibo_core.services.sweeping import Sweeper
    from kaibo_core.services.webhook_dispatch import WebhookDispatcher
    from kaibo_core.services.webhooks import WebhooksService

# --- clients, stores and queues -----------------------------------------------------------------


def dynamodb() -> DynamoDBClient:
    """The container's DynamoDB client: with the SDK speed-ups unless KAIBO_SDK_SPEEDUPS=0."""
    from kaibo_core.adapters import aws

    return aws.dynamodb_client() if get_settings().sdk_speedups else aws.plain_dynamodb_client()


def sqs() -> SQSClient:
    from kaibo_core.adapters import aws

    return aws.sqs_client() if get_settings().sdk_speedups else aws.plain_sqs_client()


@lru_cache(maxsize=1)
def job_store() -> DynamoJobStore:
    from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore

    return DynamoJobStore(dynamodb(), get_settings().jobs_table)


@lru_cache(maxsize=1)
def event_store() -> DynamoEventStore:
    """The event log; remember writes each batch's job in the same transaction."""
    from kaibo_core.adapters.dynamodb_events import DynamoEventStore

    settings = get_settings()
    return DynamoEventStore(dynamodb(), settings.events_table, settings.idempotency_table, jobs=job_store())


@lru_cache(maxsize=1)
def memory_store() -> DynamoMemoryStore:
    """Memories and their postings (two tables: the items, and the term index)."""
    from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore

    settings = get_settings()
    return DynamoMemoryStore(dynamodb(), settings.memories_table, settings.index_table)


@lru_cache(maxsize=1)
def project_store() -> DynamoProjectStore:
    from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore

    return DynamoProjectStore(dynamodb(), get_settings().projects_table)


@lru_cache(maxsize=1)
def job_queue() -> SqsJobQueue:
    from kaibo_core.adapters.sqs_jobs import SqsJobQueue

    return SqsJobQueue(sqs(), get_settings().structuring_queue_url)


def configured_structurer(settings: Settings, semantic: SemanticChannel | None = None) -> Structurer:
    """The structurer a deployment uses (``KAIBO_STRUCTURER``): rules by default, Bedrock by choice;
    the rules read updates by meaning too when recall by meaning's model is on."""
    from kaibo_core.core.structuring.rules import RuleStructurer

    rules = RuleStructurer(None if semantic is None else semantic.meaning)
    if settings.structurer == "rules":
        return rules
    if settings.structurer == "bedrock":
        from kaibo_core.adapters import bedrock_structurer

        if not settings.bedrock_model_id:
            raise ValueError("KAIBO_STRUCTURER=bedrock needs KAIBO_BEDROCK_MODEL_ID")
        return bedrock_structurer.BedrockStructurer(
            bedrock_structurer.bedrock_runtime_client(),
            settings.bedrock_model_id,
            rules,
            client_with_read_timeout=bedrock_structurer.bedrock_runtime_client,
        )
    raise ValueError(f"KAIBO_STRUCTURER must be rules or bedrock, not {settings.structurer!r}")


# --- recall by meaning ---------------------------------------------------------------------------

#: ``KAIBO_SEMANTIC_MODEL``'s values: a model whose files ship in a wheel (docs/recall.md).
SEMANTIC_MODELS = ("mini6", "wl256")


def build_semantic_channel(model: str, params: SemanticParams | None = None) -> SemanticChannel | None:
    """The model and its cells, loaded once; None for ``off`` (lexical recall only)."""
    from kaibo_core.adapters.semantic_cells import load_cells
    from kaibo_core.services.semantic import SemanticChannel

    embedder: Embedder
    if model in {"", "off"}:
        return None
    if model == "mini6":
        from kaibo_core.adapters.minilm_embedder import MiniLmEmbedder

        embedder = MiniLmEmbedder.from_package()
    elif model == "wl256":
        from kaibo_core.adapters.static_embedder import StaticEmbedder

        embedder = StaticEmbedder.from_package()
    else:
        raise ValueError(
            f"KAIBO_SEMANTIC_MODEL must be off or one of {', '.join(SEMANTIC_MODELS)}, not {model!r}"
        )
    cells = load_cells(embedder.version)
    return SemanticChannel(embedder, cells) if params is None else SemanticChannel(embedder, cells, params)


@lru_cache(maxsize=1)
def semantic_channel() -> SemanticChannel | None:
    """The container's channel (``KAIBO_SEMANTIC_MODEL``), shared by remember, structuring, recall."""
    return build_semantic_channel(get_settings().semantic_model)


# --- services ------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def remember_service() -> RememberService:
    from kaibo_core.services.remember import RememberService

    memories = memory_store()
    return RememberService(
        event_store(),
        memories,
        jobs=job_queue(),
        job_reader=job_store(),
        memory_reader=memories,
        semantic=semantic_channel(),
    )


def dynamodb_reads() -> DynamoReads:
    """Recall's reads: the direct path with the SDK speed-ups on, else the plain client."""
    from kaibo_core.adapters import aws

    return aws.dynamodb_reads() if get_settings().sdk_speedups else aws.plain_dynamodb_client()


@lru_cache(maxsize=1)
def recall_service() -> RecallService:
    """Recall reads through the SDK speed-ups' direct path when they are on (adapters/sdk_speedups)."""
    from kaibo_core.adapters.dynamodb_events import DynamoEventLocator
    from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
    from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
    from kaibo_core.services.recall import RecallService

    settings = get_settings()
    reads = dynamodb_reads()
    return RecallService(
        DynamoTermIndex(reads, settings.index_table),
        DynamoMemoryStore(dynamodb(), settings.memories_table, settings.index_table, reads=reads),
        semantic=semantic_channel(),
        # Without an event locator, recall reads no context (KAIBO_RECALL_CONTEXT=off).
        events=DynamoEventLocator(reads, settings.events_table) if settings.recall_context else None,
    )


@lru_cache(maxsize=1)
def memories_service() -> MemoriesService:
    from kaibo_core.services.memories import MemoriesService

    return MemoriesService(memory_store())


@lru_cache(maxsize=1)
def forget_service() -> ForgetService:
    from datetime import timedelta

    from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
    from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
    from kaibo_core.core.clock import utc_now
    from kaibo_core.services.forgetting import ForgetService
    from kaibo_core.services.purging import Purger

    settings = get_settings()
    # The events table too: a retry that finishes a dead forget writes its events' placeholders.
    store = DynamoForgetStore(
        dynamodb(), settings.memories_table, settings.index_table, settings.events_table
    )
    ledger = DynamoLedgerStore(dynamodb(), settings.ledger_table, outbox=webhook_outbox())
    return ForgetService(
        store,
        event_store(),
        ledger,
        timedelta(seconds=settings.purge_grace_seconds),
        utc_now,
        finish=Purger(ledger, store, utc_now).apply,
        salts=forget_salt_cipher(),
    )


def forget_salt_cipher() -> KmsSaltCipher:
    """The reason salts keyed forgets keep, encrypted with the webhook secrets' KMS key."""
    from kaibo_core.adapters import aws
    from kaibo_core.adapters.kms_secrets import KmsSaltCipher

    return KmsSaltCipher(aws.kms_client(), get_settings().webhook_key_id)


@lru_cache(maxsize=1)
def purger() -> Purger:
    from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
    from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
    from kaibo_core.core.clock import utc_now
    from kaibo_core.services.purging import Purger

    settings = get_settings()
    return Purger(
        DynamoLedgerStore(dynamodb(), settings.ledger_table),
        DynamoForgetStore(dynamodb(), settings.memories_table, settings.index_table, settings.events_table),
        utc_now,
    )


@lru_cache(maxsize=1)
def ledger_service() -> LedgerService:
    from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
    from kaibo_core.services.ledger import LedgerService

    return LedgerService(DynamoLedgerStore(dynamodb(), get_settings().ledger_table))


@lru_cache(maxsize=1)
def jobs_service() -> JobsService:
    from kaibo_core.services.jobs import JobsService

    return JobsService(job_store())


@lru_cache(maxsize=1)
def streams_service() -> StreamsService:
    from kaibo_core.services.streams import StreamsService

    return StreamsService(event_store())


@lru_cache(maxsize=1)
def admin_service() -> AdminService:
    from kaibo_core.services.admin import AdminService

    return AdminService(project_store(), usage_plan=usage_plan())


@lru_cache(maxsize=1)
def usage_plan() -> ApiGatewayUsagePlan | None:
    """Where new projects' API keys go (per-project throttles); None when no plan is configured
    (ProjectThrottles=off, the local stack): no API Gateway call is made."""
    from kaibo_core.adapters import aws
    from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan

    plan_id = get_settings().usage_plan_id
    return ApiGatewayUsagePlan(aws.apigateway_client(), plan_id) if plan_id else None


@lru_cache(maxsize=1)
def authorization_service() -> AuthorizationService:
    from kaibo_core.services.authorization import AuthorizationService

    settings = get_settings()
    return AuthorizationService(project_store(), settings.admin_key_hash, settings.shared_usage_key)


@lru_cache(maxsize=1)
def structuring_service() -> StructuringService:
    return build_structuring_service(configured_structurer(get_settings(), semantic_channel()))


def build_structuring_service(structurer: Structurer) -> StructuringService:
    """The structure function's service around ``structurer`` (tests give a scripted one)."""
    from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
    from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
    from kaibo_core.services.structuring import StructuringService

    settings = get_settings()
    client = dynamodb()
    return StructuringService(
        event_store(),
        DynamoStructuringStore(
            client, settings.memories_table, settings.index_table, outbox=webhook_outbox()
        ),
        DynamoTermIndex(client, settings.index_table),
        structurer,
        # A project's time zone is set at its creation and never changes.
        project_time_zone=lru_cache(maxsize=1024)(project_store().time_zone),
        semantic=semantic_channel(),
    )


@lru_cache(maxsize=1)
def sweeper() -> Sweeper:
    from kaibo_core.services.sweeping import Sweeper

    return Sweeper(job_store(), job_queue())


# --- webhooks (docs/webhooks.md) ------------------------------------------------------------------


@lru_cache(maxsize=1)
def webhook_store() -> DynamoWebhookStore:
    """Subscriptions, the outbox and delivery states (one table)."""
    from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore

    return DynamoWebhookStore(dynamodb(), get_settings().webhooks_table)


@lru_cache(maxsize=1)
def webhook_queue() -> SqsWebhookQueue:
    from kaibo_core.adapters.sqs_webhooks import SqsWebhookQueue

    settings = get_settings()
    return SqsWebhookQueue(sqs(), settings.webhook_queue_url, settings.webhook_dead_letter_queue_url)


def webhook_cipher() -> KmsSecretCipher:
    from kaibo_core.adapters import aws
    from kaibo_core.adapters.kms_secrets import KmsSecretCipher

    return KmsSecretCipher(aws.kms_client(), get_settings().webhook_key_id)


@lru_cache(maxsize=1)
def webhook_outbox() -> WebhookOutbox | None:
    """Where forget and structuring put their webhook events; None where webhooks are not deployed."""
    settings = get_settings()
    if not (settings.webhooks_table and settings.webhook_queue_url):
        return None
    from kaibo_core.adapters.webhook_outbox import WebhookOutbox

    return WebhookOutbox(webhook_store(), webhook_queue())


@lru_cache(maxsize=1)
def webhooks_service() -> WebhooksService:
    from functools import partial

    from kaibo_core.adapters import webhook_http
    from kaibo_core.services.webhooks import WebhooksService

    outbox = webhook_outbox()
    if outbox is None:
        raise ValueError("webhooks need KAIBO_WEBHOOKS_TABLE and KAIBO_WEBHOOK_QUEUE_URL")
    policy = webhook_http.TargetPolicy(allow_local=get_settings().webhook_allow_local)
    return WebhooksService(
        webhook_store(), webhook_cipher(), outbox, partial(webhook_http.check_url, policy=policy)
    )


@lru_cache(maxsize=1)
def webhook_dispatcher() -> WebhookDispatcher:
    from kaibo_core.adapters import webhook_http
    from kaibo_core.services.webhook_dispatch import WebhookDispatcher

    settings = get_settings()
    policy = webhook_http.TargetPolicy(allow_local=settings.webhook_allow_local)

    def send(
        url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> webhook_http.DeliveryResult:
        return webhook_http.deliver(url, body, headers, policy=policy, timeout_seconds=timeout)

    return WebhookDispatcher(
        webhook_store(),
        webhook_queue(),
        webhook_cipher(),
        send,
        retry_scale=settings.webhook_retry_scale,
        timeout_seconds=settings.webhook_timeout_seconds,
    )


# --- tests and the local stack -------------------------------------------------------------------


def reset() -> None:
    """Forget every client, store and service built, and the settings (the environment changed)."""
    from kaibo_core.adapters import aws

    for factory in (
        job_store,
        event_store,
        memory_store,
        project_store,
        job_queue,
        semantic_channel,
        remember_service,
        recall_service,
        memories_service,
        forget_service,
        ledger_service,
        purger,
        jobs_service,
        streams_service,
        admin_service,
        usage_plan,
        authorization_service,
        structuring_service,
        sweeper,
        webhook_store,
        webhook_queue,
        webhook_outbox,
        webhooks_service,
        webhook_dispatcher,
        get_settings,
        aws.dynamodb_client,
        aws.sqs_client,
        aws.plain_dynamodb_client,
        aws.plain_sqs_client,
        aws.kms_client,
        aws.apigateway_client,
    ):
        factory.cache_clear()

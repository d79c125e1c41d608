"""Deployment settings, read from the environment once per container and validated.

Nothing reads ``os.environ`` at import time or in domain logic: handlers call
``get_settings()`` when they build their services.
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, Field

from kaibo_core.core.models.jobs import MAX_RECEIVE_COUNT

_OFF = frozenset({"0", "false", "no", "off"})


class Settings(BaseModel):
    events_table: str = Field(min_length=1)
    idempotency_table: str = Field(min_length=1)
    projects_table: str = Field(min_length=1)
    memories_table: str = ""
    index_table: str = ""
    admin_key_hash: str = ""
    jobs_table: str = ""
    ledger_table: str = ""
    structuring_queue_url: str = ""
    #: ``rules`` (default, offline) or ``bedrock`` (docs/structuring-bedrock.md).
    structurer: str = "rules"
    bedrock_model_id: str = ""
    #: Recall by meaning's model (docs/recall.md): ``off`` (default: words only), ``mini6``, ``wl256``.
    semantic_model: str = "off"
    #: Recall reads the best memories' neighbours in their streams (docs/recall.md, "Context");
    #: ``KAIBO_RECALL_CONTEXT=off`` saves its two reads per recall.
    recall_context: bool = True
    #: remember with ``wait: true`` waits at most this long for its job (then answers 202).
    wait_seconds: float = Field(default=10.0, gt=0, le=25)
    #: The structuring queue's maxReceiveCount: a message failing on this receive goes to the
    #: dead-letter queue, so the structure function marks its job failed (template.yaml sets both).
    structuring_max_receive_count: int = Field(default=MAX_RECEIVE_COUNT, ge=1)
    #: The sweeper re-queues jobs still unfinished this long after remember.
    sweep_after_seconds: int = Field(default=120, ge=1)
    #: A forgotten memory's text is purged this long after forget (the grace window).
    purge_grace_seconds: int = Field(default=86_400, ge=0)
    #: The SDK speed-ups (``adapters/sdk_speedups``: lean loader, plain items, recall's direct
    #: reads); ``KAIBO_SDK_SPEEDUPS=0`` leaves plain botocore.
    sdk_speedups: bool = True
    #: Webhooks (docs/webhooks.md): subscriptions and outbox, the delivery queue and its DLQ, the
    #: KMS key that encrypts signing secrets (and the reason salts of keyed forgets' records,
    #: docs/forget.md). Without a table, nothing emits webhook events.
    webhooks_table: str = ""
    webhook_queue_url: str = ""
    webhook_dead_letter_queue_url: str = ""
    webhook_key_id: str = ""
    #: The local stack's development setting: http:// and loopback targets allowed.
    webhook_allow_local: bool = False
    #: Multiplies the retry schedule's waits (1 on AWS; tests shrink hours to seconds).
    webhook_retry_scale: float = Field(default=1.0, gt=0, le=1)
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=30)
    #: Per-project throttles (docs/deploy.md, "Throttles"): the usage plan new projects' API keys
    #: join (admin; empty: none is made), and the usage key of callers without their own (authorizer).
    usage_plan_id: str = ""
    shared_usage_key: str = ""

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            events_table=env.get("KAIBO_EVENTS_TABLE", ""),
            idempotency_table=env.get("KAIBO_IDEMPOTENCY_TABLE", ""),
            projects_table=env.get("KAIBO_PROJECTS_TABLE", ""),
            memories_table=env.get("KAIBO_MEMORIES_TABLE", ""),
            index_table=env.get("KAIBO_INDEX_TABLE", ""),
            admin_key_hash=env.get("KAIBO_ADMIN_KEY_HASH", ""),
            jobs_table=env.get("KAIBO_JOBS_TABLE", ""),
            ledger_table=env.get("KAIBO_LEDGER_TABLE", ""),
            structuring_queue_url=env.get("KAIBO_STRUCTURING_QUEUE_URL", ""),
            structurer=env.get("KAIBO_STRUCTURER", "rules") or "rules",
            bedrock_model_id=env.get("KAIBO_BEDROCK_MODEL_ID", ""),
            semantic_model=env.get("KAIBO_SEMANTIC_MODEL", "off").strip().lower() or "off",
            recall_context=env.get("KAIBO_RECALL_CONTEXT", "on").strip().lower() not in _OFF,
            wait_seconds=float(env.get("KAIBO_WAIT_SECONDS", "10") or 10),
            structuring_max_receive_count=int(
                env.get("KAIBO_STRUCTURING_MAX_RECEIVE_COUNT", "") or MAX_RECEIVE_COUNT
            ),
            sweep_after_seconds=int(env.get("KAIBO_SWEEP_AFTER_SECONDS", "120") or 120),
            purge_grace_seconds=int(env.get("KAIBO_PURGE_GRACE_SECONDS", "86400") or 86_400),
            sdk_speedups=env.get("KAIBO_SDK_SPEEDUPS", "1").strip().lower() not in _OFF,
            webhooks_table=env.get("KAIBO_WEBHOOKS_TABLE", ""),
            webhook_queue_url=env.get("KAIBO_WEBHOOK_QUEUE_URL", ""),
            webhook_dead_letter_queue_url=env.get("KAIBO_WEBHOOK_DLQ_URL", ""),
            webhook_key_id=env.get("KAIBO_WEBHOOK_KEY_ID", ""),
            webhook_allow_local=env.get("KAIBO_WEBHOOKS_ALLOW_LOCAL", "0").strip().lower() not in _OFF,
            webhook_retry_scale=float(env.get("KAIBO_WEBHOOK_RETRY_SCALE", "1") or 1),
            webhook_timeout_seconds=float(env.get("KAIBO_WEBHOOK_TIMEOUT_SECONDS", "10") or 10),
            usage_plan_id=env.get("KAIBO_USAGE_PLAN_ID", "").strip(),
            shared_usage_key=env.get("KAIBO_SHARED_USAGE_KEY", "").strip(),
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environ()

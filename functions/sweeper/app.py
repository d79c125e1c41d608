"""Scheduled: re-queue structuring jobs still unfinished ``KAIBO_SWEEP_AFTER_SECONDS`` after
remember (a message lost after the commit, a worker that crashed). Structuring is idempotent,
so a job queued twice is structured once."""

from __future__ import annotations

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from datetime import timedelta
from functools import lru_cache
from typing import Any, Final

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client, sqs_client
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.sqs_jobs import SqsJobQueue
from kaibo_core.clock import format_instant, utc_now
from kaibo_core.observability import logger, metrics
from kaibo_core.settings import get_settings

#: Jobs re-queued per shard and run at most (the next run takes the rest).
MAX_PER_SHARD: Final = 500


@lru_cache(maxsize=1)
def stores() -> tuple[DynamoJobStore, SqsJobQueue]:
    settings = get_settings()
    return DynamoJobStore(dynamodb_client(), settings.jobs_table), SqsJobQueue(
        sqs_client(), settings.structuring_queue_url
    )


def sweep() -> tuple[int, int]:
    """(jobs found pending, messages sent)."""
    jobs, queue = stores()
    cutoff = format_instant(utc_now() - timedelta(seconds=get_settings().sweep_after_seconds))
    pending = list(jobs.pending_before(cutoff, MAX_PER_SHARD))
    return len(pending), queue.send_many(pending) if pending else 0


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:  # noqa: ARG001
    found, sent = sweep()
    metrics.add_metric("JobsRequeued", MetricUnit.Count, sent)
    logger.info("swept", extra={"pending": found, "requeued": sent})
    return {"pending": found, "requeued": sent}

"""Scheduled: re-queue structuring jobs still unfinished ``KAIBO_SWEEP_AFTER_SECONDS`` after
remember (a message lost after the commit, a worker that crashed), each at doubling intervals
(kaibo_core.services.sweeping). Structuring is idempotent, so a job queued twice is structured
once."""

from __future__ import annotations

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from datetime import timedelta
from typing import Any, Final

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.core.clock import utc_now
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.observability import log_failure, logger, metrics
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.sweeping import Sweeper, SweepResult

#: Jobs re-queued per shard and run at most (the next run takes the rest).
MAX_PER_SHARD: Final = 500
#: A run stops starting batches when less time than this is left before its timeout.
TIME_MARGIN_MS: Final = 2_000


def sweep(sweeper: Sweeper, context: LambdaContext) -> SweepResult:
    return sweeper.sweep(
        now=utc_now(),
        sweep_after=timedelta(seconds=get_settings().sweep_after_seconds),
        limit=MAX_PER_SHARD,
        has_time=lambda: context.get_remaining_time_in_millis() > TIME_MARGIN_MS,
    )


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any],  # noqa: ARG001
    context: LambdaContext,
    sweeper: Sweeper | None = None,
) -> dict[str, Any]:
    try:
        result = sweep(sweeper or wiring.sweeper(), context)
    except Exception as exc:  # the next run resumes; one line, and no message reaches Lambda's log
        raise log_failure("sweep", exc) from None
    metrics.add_metric("JobsRequeued", MetricUnit.Count, result.sent)
    log = logger.info if result.complete else logger.warning
    log(
        "swept" if result.complete else "sweep stopped before its timeout; the next run goes on",
        extra={"due": result.due, "claimed": result.claimed, "requeued": result.sent},
    )
    return {"pending": result.due, "requeued": result.sent, "complete": result.complete}

"""Scheduled: erase every copy of forgotten text whose grace window has passed
(kaibo_core.services.purging, docs/forget.md). Idempotent and resumable: a run that stops, for
lack of time or a crash, is finished by the next. Logs carry counts only."""

from __future__ import annotations

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Any, Final

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.observability import log_failure, logger, metrics
from kaibo_core.services.purging import Purger

#: A run stops starting entries when less time than this is left before its timeout.
TIME_MARGIN_MS: Final = 5_000


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any],  # noqa: ARG001
    context: LambdaContext,
    purger: Purger | None = None,
) -> dict[str, Any]:
    try:
        result = (purger or wiring.purger()).run(
            has_time=lambda: context.get_remaining_time_in_millis() > TIME_MARGIN_MS
        )
    except Exception as exc:  # the next run resumes; one line, and no message reaches Lambda's log
        raise log_failure("purge", exc) from None
    metrics.add_metric("MemoriesPurged", MetricUnit.Count, result.memories)
    log = logger.info if result.complete else logger.warning
    log(
        "purged" if result.complete else "purge stopped before its timeout; the next run goes on",
        extra={
            "applied": result.applied,
            "entries": result.entries,
            "memories": result.memories,
            "events": result.events,
        },
    )
    if result.searches:
        metrics.add_metric("PurgeLocateReads", MetricUnit.Count, result.locate_reads)
    for project, receipt, searched in result.searches:
        # One line per entry whose events were searched for this run (ids and counts only).
        logger.info(
            "purge searched the project's streams for events its entry does not locate"
            if searched.finished
            else "purge searched the project's streams for events its entry does not locate; "
            "the next run goes on",
            extra={
                "projectId": project,
                "receiptId": receipt,
                "sought": len(searched.sought),
                "found": len(searched.found),
                "reads": searched.reads,
                "finished": searched.finished,
            },
        )
    if result.unlocated:
        # Reported by the one run that finishes each entry (it then leaves the work list): ids only.
        metrics.add_metric(
            "PurgeEventsUnlocated", MetricUnit.Count, sum(count for _, _, count in result.unlocated)
        )
        logger.warning(
            "purge finished entries naming events that no stream of their project holds (no payload "
            "stored to erase; their receipts name them: unlocatedEventIds)",
            extra={
                "unlocated": [
                    {"projectId": project, "receiptId": receipt, "events": count}
                    for project, receipt, count in result.unlocated
                ]
            },
        )
    if result.failures:
        # The other entries went on; failing the run now makes the failure seen (PurgeErrorsAlarm).
        metrics.add_metric("PurgeEntriesFailed", MetricUnit.Count, len(result.failures))
        raise log_failure("purge", result.failures[0], failedEntries=len(result.failures)) from None
    return {
        "applied": result.applied,
        "entries": result.entries,
        "memories": result.memories,
        "events": result.events,
        "complete": result.complete,
    }

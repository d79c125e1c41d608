"""Structuring jobs in DynamoDB (kaibo_core.core.models.jobs).

Jobs table: ``pk = project#jobId``. A job not yet finished also carries
``pendingPk = pending#<shard>`` and ``pendingSk = <since>#<project>#<jobId>``,
the keys of the sparse PendingJobs index the sweeper reads (``since``: the job's
``createdAt``, moved on by each re-queue, kaibo_core.services.sweeping); finishing
a job removes them. The job item is first written inside remember's transaction
(``put_action``), so it exists exactly when its events do.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_values import Item, key, n, s, string_list, strings
from kaibo_core.core import storage_keys
from kaibo_core.core.clock import format_instant
from kaibo_core.core.models.jobs import EventLocation, JobRecord, PendingJob
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

PENDING_JOBS_INDEX: Final = "PendingJobs"


def pending_shard(job_id: str) -> int:
    return zlib.crc32(job_id.encode("utf-8")) % storage_keys.PENDING_JOB_SHARDS


def job_item(job: JobRecord) -> Item:
    item: Item = {
        **key(storage_keys.job_key(ProjectId(job.project_id), job.id)),
        "projectId": s(job.project_id),
        "id": s(job.id),
        "status": s(job.status),
        "events": {
            "L": [
                {"M": {"eventId": s(e.event_id), "stream": s(e.stream), "seq": n(e.seq)}} for e in job.events
            ]
        },
        "memoryIds": strings(job.memory_ids),
        "attempts": n(job.attempts),
        "createdAt": s(job.created_at),
        "updatedAt": s(job.updated_at),
    }
    if job.status in {"queued", "structuring"}:
        item["pendingPk"] = s(storage_keys.pending_jobs_partition(pending_shard(job.id)))
        item["pendingSk"] = s(
            storage_keys.pending_job_sort_key(job.created_at, ProjectId(job.project_id), job.id)
        )
    if job.error is not None:
        item["error"] = s(job.error)
    return item


def job_from_item(item: dict[str, Any]) -> JobRecord:
    return JobRecord(
        project_id=item["projectId"]["S"],
        id=item["id"]["S"],
        status=item["status"]["S"],
        events=tuple(
            EventLocation(
                event_id=e["M"]["eventId"]["S"], stream=e["M"]["stream"]["S"], seq=int(e["M"]["seq"]["N"])
            )
            for e in item.get("events", {}).get("L", [])
        ),
        created_at=item["createdAt"]["S"],
        updated_at=item["updatedAt"]["S"],
        memory_ids=string_list(item.get("memoryIds")),
        attempts=int(item.get("attempts", {}).get("N", "0")),
        error=item["error"]["S"] if "error" in item else None,
    )


class DynamoJobStore:
    def __init__(self, client: DynamoDBClient, jobs_table: str) -> None:
        self._client = client
        self._table = jobs_table

    def put_action(self, job: JobRecord) -> TransactWriteItemTypeDef:
        """The job's creation, as one action of remember's transaction."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": job_item(job),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def get(self, project: ProjectId, job_id: str) -> JobRecord | None:
        response = self._client.get_item(
            TableName=self._table, Key=key(storage_keys.job_key(project, job_id)), ConsistentRead=True
        )
        item = response.get("Item")
        return job_from_item(item) if item else None

    def start(self, project: ProjectId, job_id: str, now: str) -> JobRecord | None:
        """Count an attempt and mark the job ``structuring`` (a ``done`` job stays as it is; a
        ``failed`` one starts again: its dead letter was redriven, or another of its messages came).

        Returns the job after the update, or None when it does not exist or is done.
        """
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.job_key(project, job_id)),
                UpdateExpression="SET #status = :structuring, updatedAt = :now ADD attempts :one "
                "REMOVE #error",
                ConditionExpression="attribute_exists(pk) AND #status <> :done",
                ExpressionAttributeNames={"#status": "status", "#error": "error"},
                ExpressionAttributeValues={
                    ":structuring": s("structuring"),
                    ":done": s("done"),
                    ":now": s(now),
                    ":one": n(1),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise
        return job_from_item(response["Attributes"])

    def finish(self, project: ProjectId, job_id: str, memory_ids: list[str], now: str) -> None:
        """Mark the job done with the memories it made (idempotent)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.job_key(project, job_id)),
            # A concurrent last receive may have marked it failed meanwhile: done wins, error gone.
            UpdateExpression="SET #status = :done, memoryIds = :ids, updatedAt = :now "
            "REMOVE pendingPk, pendingSk, #error",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues={":done": s("done"), ":ids": strings(memory_ids), ":now": s(now)},
        )

    def fail(self, project: ProjectId, job_id: str, error: str, now: str) -> None:
        """Mark the job failed (the message on its last receive goes on to the DLQ); never
        overrides ``done``. Off the sweeper's list: the dead letter is the job's retry now."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.job_key(project, job_id)),
                UpdateExpression="SET #status = :failed, #error = :error, updatedAt = :now "
                "REMOVE pendingPk, pendingSk",
                ConditionExpression="attribute_exists(pk) AND #status <> :done",
                ExpressionAttributeNames={"#status": "status", "#error": "error"},
                ExpressionAttributeValues={
                    ":failed": s("failed"),
                    ":done": s("done"),
                    ":error": s(error),
                    ":now": s(now),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def pending_before(self, cutoff: datetime, limit: int) -> Iterator[PendingJob]:
        """Unfinished jobs whose place in the sweeper's list is before ``cutoff``, oldest first per
        shard, at most ``limit`` per shard."""
        for shard in range(storage_keys.PENDING_JOB_SHARDS):
            response = self._client.query(
                TableName=self._table,
                IndexName=PENDING_JOBS_INDEX,
                KeyConditionExpression="pendingPk = :p AND pendingSk < :cutoff",
                ExpressionAttributeValues={
                    ":p": s(storage_keys.pending_jobs_partition(shard)),
                    ":cutoff": s(format_instant(cutoff)),
                },
                Limit=limit,
            )
            for item in response.get("Items", []):
                since, project, job_id = storage_keys.parse_pending_job_sort_key(item["pendingSk"]["S"])
                yield PendingJob(ProjectId(project), job_id, since)

    def postpone(self, job: PendingJob, since: datetime) -> bool:
        """Move ``job`` to ``since`` in the sweeper's list, only if it is still unfinished and
        still where it was read (finishing removes it; another sweeper may have moved it)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.job_key(job.project, job.job_id)),
                UpdateExpression="SET pendingSk = :next",
                ConditionExpression="pendingSk = :seen",
                ExpressionAttributeValues={
                    ":next": s(
                        storage_keys.pending_job_sort_key(format_instant(since), job.project, job.job_id)
                    ),
                    ":seen": s(storage_keys.pending_job_sort_key(job.since, job.project, job.job_id)),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

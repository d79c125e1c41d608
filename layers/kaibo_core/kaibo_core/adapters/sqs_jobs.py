"""Structuring job messages on SQS: ids only, never text (ARCHITECTURE.md, invariant 6).

The message format itself is ``kaibo_core.core.job_messages`` (the structure function parses it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaibo_core.core.job_messages import job_message
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsJobQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send(self, project: ProjectId, job_id: str) -> None:
        self._client.send_message(QueueUrl=self._queue_url, MessageBody=job_message(project, job_id))

    def send_many(self, jobs: list[tuple[ProjectId, str]]) -> int:
        """Send job messages in batches of 10; returns how many SQS accepted."""
        sent = 0
        for start in range(0, len(jobs), 10):
            batch = jobs[start : start + 10]
            response = self._client.send_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "MessageBody": job_message(project, job_id)}
                    for i, (project, job_id) in enumerate(batch)
                ],
            )
            sent += len(response.get("Successful", []))
        return sent

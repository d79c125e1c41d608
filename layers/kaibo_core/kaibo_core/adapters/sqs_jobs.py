"""Structuring job messages on SQS: ids only, never text (ARCHITECTURE.md, invariant 6)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from kaibo_core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MESSAGE_VERSION: Final = 1


def job_message(project: ProjectId, job_id: str) -> str:
    return json.dumps({"v": MESSAGE_VERSION, "projectId": project, "jobId": job_id}, separators=(",", ":"))


def parse_job_message(body: str) -> tuple[ProjectId, str]:
    """(project, job id) of a message body; ValueError for anything else (a poison message)."""
    try:
        data: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError("job message is not JSON") from exc
    if not isinstance(data, dict) or data.get("v") != MESSAGE_VERSION:
        raise ValueError("job message has an unknown shape")
    project, job_id = data.get("projectId"), data.get("jobId")
    if not isinstance(project, str) or not isinstance(job_id, str) or not project or not job_id:
        raise ValueError("job message lacks projectId or jobId")
    return ProjectId(project), job_id


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

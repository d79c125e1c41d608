"""The structuring queue's message: a job's ids, never text (ARCHITECTURE.md, invariant 6)."""

from __future__ import annotations

import json
from typing import Any, Final

from kaibo_core.core.storage_keys import ProjectId

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

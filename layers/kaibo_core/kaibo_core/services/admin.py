"""Projects and API keys (admin routes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kaibo_core import api_keys, ids
from kaibo_core.api_keys import IssuedKey
from kaibo_core.clock import Clock, format_instant, utc_now
from kaibo_core.errors import UnprocessableError
from kaibo_core.models.api import CreateKeyResponse, CreateProjectResponse, Scope
from kaibo_core.storage_keys import ProjectId
from kaibo_core.structuring.drafts import DEFAULT_TIME_ZONE
from kaibo_core.time_zones import is_time_zone

DEFAULT_SCOPES: list[Scope] = ["forget", "read", "write"]


class ProjectStore(Protocol):
    def create_project(  # noqa: PLR0917 - a project's fields
        self,
        project: ProjectId,
        name: str,
        key: IssuedKey,
        scopes: Sequence[str],
        now: str,
        time_zone: str | None = None,
    ) -> None: ...

    def add_key(self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str) -> None: ...

    def revoke_key(self, key_id: str, now: str) -> None: ...


class AdminService:
    def __init__(self, store: ProjectStore, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock

    def create_project(self, name: str, time_zone: str | None = None) -> CreateProjectResponse:
        if time_zone is not None and not is_time_zone(time_zone):
            raise UnprocessableError(
                "invalid_time_zone",
                f"timeZone {time_zone!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC).",
                {"field": "timeZone", "timeZone": time_zone},
            )
        project = ProjectId(ids.project_id())
        key = api_keys.issue_key()
        now = format_instant(self._clock())
        self._store.create_project(project, name, key, DEFAULT_SCOPES, now, time_zone=time_zone)
        return CreateProjectResponse(
            projectId=project,
            keyId=key.key_id,
            apiKey=key.api_key,
            scopes=DEFAULT_SCOPES,
            timeZone=time_zone or DEFAULT_TIME_ZONE,
        )

    def create_key(self, project: ProjectId, scopes: list[Scope]) -> CreateKeyResponse:
        key = api_keys.issue_key()
        unique: list[Scope] = sorted(set(scopes))
        self._store.add_key(project, key, unique, format_instant(self._clock()))
        return CreateKeyResponse(keyId=key.key_id, apiKey=key.api_key, scopes=unique)

    def revoke_key(self, key_id: str) -> None:
        self._store.revoke_key(key_id, format_instant(self._clock()))

"""Projects and API keys (admin routes)."""

from __future__ import annotations

from collections.abc import Iterable

from kaibo_core.core import api_keys, ids
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.models.keys import CreatedKey, CreatedProject, KeyScope, Scope
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import DEFAULT_TIME_ZONE
from kaibo_core.core.time_zones import is_time_zone
from kaibo_core.ports import ProjectStore

DEFAULT_SCOPES: tuple[Scope, ...] = ("forget", "read", "write")


class AdminService:
    def __init__(self, store: ProjectStore, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock

    def create_project(self, name: str, time_zone: str | None = None) -> CreatedProject:
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
        return CreatedProject(
            CreatedKey(project, key.key_id, key.api_key, DEFAULT_SCOPES), time_zone or DEFAULT_TIME_ZONE
        )

    def create_key(self, project: ProjectId, scopes: Iterable[KeyScope]) -> CreatedKey:
        key = api_keys.issue_key()
        unique: tuple[Scope, ...] = tuple(sorted(set(scopes)))
        self._store.add_key(project, key, unique, format_instant(self._clock()))
        return CreatedKey(project, key.key_id, key.api_key, unique)

    def revoke_key(self, key_id: str) -> None:
        self._store.revoke_key(key_id, format_instant(self._clock()))

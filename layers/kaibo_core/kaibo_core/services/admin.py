"""Projects and API keys (admin routes).

With per-project throttles on (a usage plan configured), a new project first gets its API
Gateway API key in the usage plan, then is stored with that key's value on its item and its first
key's: a Kaibo key never carries a usage key the plan does not hold (API Gateway would refuse its
requests). A creation that fails after the first step leaves an API key no project uses (named
``kaibo-<projectId>``), never a project without its key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kaibo_core.core import api_keys, ids
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.models.keys import CreatedKey, CreatedProject, KeyScope, Scope
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import DEFAULT_TIME_ZONE
from kaibo_core.core.time_zones import is_time_zone
from kaibo_core.ports import ProjectStore, UsageKeyBackfill, UsagePlanEnrollment

DEFAULT_SCOPES: tuple[Scope, ...] = ("forget", "read", "write")


class AdminService:
    def __init__(
        self, store: ProjectStore, clock: Clock = utc_now, usage_plan: UsagePlanEnrollment | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._usage_plan = usage_plan

    def create_project(self, name: str, time_zone: str | None = None) -> CreatedProject:
        if time_zone is not None and not is_time_zone(time_zone):
            raise UnprocessableError(
                "invalid_time_zone",
                f"timeZone {time_zone!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC).",
                {"field": "timeZone", "timeZone": time_zone},
            )
        project = ProjectId(ids.project_id())
        key = api_keys.issue_key()
        usage_key = None
        if self._usage_plan is not None:
            usage_key = api_keys.issue_usage_key()
            self._usage_plan.enroll(project, usage_key)
        now = format_instant(self._clock())
        self._store.create_project(
            project, name, key, DEFAULT_SCOPES, now, time_zone=time_zone, usage_key=usage_key
        )
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


@dataclass
class EnrollStats:
    projects: int = 0  # projects given their usage key by this run
    keys: int = 0  # keys given their project's usage key by this run

    def summary(self) -> str:
        return f"{self.projects} projects given their own API key, {self.keys} keys updated"


def enroll_old_projects(store: UsageKeyBackfill, usage_plan: UsagePlanEnrollment) -> EnrollStats:
    """Projects created before per-project throttles (or while they were off) get their own API key
    in the usage plan, and each of their keys its value; until then they share the fallback key.

    Safe while the service runs and safe to run again: a project's key is created at most once (a
    run that stopped after creating it finds and reuses it), and every write only fills what is
    missing. A key added to a project while a run goes through it may be left without: the next
    run gives it (one that finds nothing to do has covered every key).
    """
    stats = EnrollStats()
    for gap in store.without_usage_keys():
        usage_key = gap.usage_key
        if usage_key is None:
            usage_key = usage_plan.existing_usage_key(gap.project_id) or api_keys.issue_usage_key()
            usage_plan.enroll(gap.project_id, usage_key)
            usage_key = store.give_usage_key(gap.project_id, usage_key)
            stats.projects += 1
        for key_id in gap.key_ids:
            stats.keys += store.give_key_usage_key(key_id, usage_key)
    return stats

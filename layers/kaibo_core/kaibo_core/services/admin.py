"""Projects and API keys (admin routes).

With per-project throttles on (a usage plan configured), a new project first gets its API
Gateway API key in the usage plan, then is stored with that key's value on its item and its first
key's: a Kaibo key never carries a usage key the plan does not hold (API Gateway would refuse its
requests). A creation that fails after the first step leaves an API key no project uses (named
``kaibo-<projectId>``), never a project without its key; ``remove_orphan_usage_keys``
(tools/enroll_projects.py --remove-orphan-keys) deletes such keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kaibo_core.core import api_keys, ids
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.models.keys import CreatedKey, CreatedProject, KeyScope, PlanUsageKey, Scope
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import DEFAULT_TIME_ZONE
from kaibo_core.core.time_zones import is_time_zone
from kaibo_core.ports import (
    ProjectStore,
    UsageKeyBackfill,
    UsageKeyOwners,
    UsagePlanEnrollment,
    UsagePlanKeys,
)

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


#: A key younger than this is never removed: it may be a project's whose creation is under way
#: (the key is made first, the project stored after it, within one request of at most 15 minutes).
ORPHAN_KEY_MIN_AGE = timedelta(hours=1)


@dataclass(frozen=True)
class OrphanKey:
    key: PlanUsageKey
    created_at: datetime
    #: Why no project uses it: ``no_project`` or ``project_uses_another_key``.
    reason: str


@dataclass
class OrphanKeyStats:
    orphans: list[OrphanKey] = field(default_factory=list)  # removed (or to remove, in a dry run)
    in_use: int = 0  # keys a project uses, or will (``enroll_old_projects`` adopts them)
    too_young: int = 0  # no project uses them yet, but they are younger than the minimum age
    left: int = 0  # orphans past ``limit``, for the next run

    def summary(self, removed: bool) -> str:
        verb = "deleted" if removed else "to delete (dry run; --delete deletes them)"
        return (
            f"{len(self.orphans)} unused API keys {verb}, {self.in_use} in use, "
            f"{self.too_young} unused but younger than the minimum age, {self.left} left for the next run"
        )


def remove_orphan_usage_keys(
    owners: UsageKeyOwners,
    usage_plan: UsagePlanKeys,
    *,
    now: datetime,
    remove: bool,
    min_age: timedelta = ORPHAN_KEY_MIN_AGE,
    limit: int = 100,
    report: Callable[[OrphanKey], None] = lambda _orphan: None,
) -> OrphanKeyStats:
    """The usage plan's project keys that no project uses: the project does not exist (its
    creation failed after the key was made) or holds another key (its key was made twice). With
    ``remove``, each is taken out of the plan and deleted; either way ``report`` hears of it.

    Kept: a project's own key; a key named for a project that has none yet (tools/enroll_projects.py
    adopts it); a key younger than ``min_age`` or of unknown age. At most ``limit`` are removed in
    one run. Safe while the service runs: a project's key, once stored, never changes, and a key is
    made before its project is stored, so an unused key older than a creation can take is unused
    for good."""
    stats = OrphanKeyStats()
    for key in usage_plan.project_keys():
        exists, usage_key = owners.project_usage_key(key.project_id)
        if exists and usage_key in {None, key.value}:
            stats.in_use += 1
            continue
        created_at = usage_plan.created_at(key.key_id)
        if created_at is None or created_at > now - min_age:
            stats.too_young += 1
            continue
        if len(stats.orphans) >= limit:
            stats.left += 1
            continue
        orphan = OrphanKey(key, created_at, "project_uses_another_key" if exists else "no_project")
        if remove:
            usage_plan.remove(key.key_id)
        stats.orphans.append(orphan)
        report(orphan)
    return stats

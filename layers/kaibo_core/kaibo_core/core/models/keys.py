"""Domain record of a stored API key (the secret itself is never stored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kaibo_core.core.storage_keys import ProjectId

Scope = Literal["read", "write", "forget", "admin"]
#: What a project key may be granted (``admin`` is the deployment admin key's alone).
KeyScope = Literal["read", "write", "forget"]


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    project_id: ProjectId
    salt: str
    secret_hash: str
    scopes: tuple[str, ...]
    revoked: bool
    #: The project's usage key (``api_keys.issue_usage_key``), stored on each key's item so that the
    #: authorizer needs no second read; None for a project created without one.
    usage_key: str | None = None


@dataclass(frozen=True)
class UsageKeyGap:
    """A project whose keys do not all carry its usage key yet (created before per-project
    throttles): ``usage_key`` is the project's (None: it has none), ``key_ids`` its keys without."""

    project_id: ProjectId
    usage_key: str | None
    key_ids: tuple[str, ...]


@dataclass(frozen=True)
class PlanUsageKey:
    """An API Gateway API key of the usage plan named for a project (``kaibo-<projectId>``)."""

    key_id: str
    project_id: ProjectId
    value: str


@dataclass(frozen=True)
class CreatedKey:
    """A key just issued: the only time its secret is known."""

    project_id: ProjectId
    key_id: str
    api_key: str
    scopes: tuple[Scope, ...]


@dataclass(frozen=True)
class CreatedProject:
    key: CreatedKey
    time_zone: str

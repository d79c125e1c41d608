"""Domain record of a stored API key (the secret itself is never stored)."""

from __future__ import annotations

from dataclasses import dataclass

from kaibo_core.storage_keys import ProjectId


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    project_id: ProjectId
    salt: str
    secret_hash: str
    scopes: tuple[str, ...]
    revoked: bool

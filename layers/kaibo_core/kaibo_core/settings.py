"""Deployment settings, read from the environment once per container and validated.

Nothing reads ``os.environ`` at import time or in domain logic: handlers call
``get_settings()`` when they build their services.
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, Field


class Settings(BaseModel):
    events_table: str = Field(min_length=1)
    idempotency_table: str = Field(min_length=1)
    projects_table: str = Field(min_length=1)
    memories_table: str = ""
    index_table: str = ""
    admin_key_hash: str = ""

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            events_table=env.get("KAIBO_EVENTS_TABLE", ""),
            idempotency_table=env.get("KAIBO_IDEMPOTENCY_TABLE", ""),
            projects_table=env.get("KAIBO_PROJECTS_TABLE", ""),
            memories_table=env.get("KAIBO_MEMORIES_TABLE", ""),
            index_table=env.get("KAIBO_INDEX_TABLE", ""),
            admin_key_hash=env.get("KAIBO_ADMIN_KEY_HASH", ""),
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environ()

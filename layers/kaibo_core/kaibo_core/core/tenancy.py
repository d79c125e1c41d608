"""Who is calling: the principal the authorizer established, and scope checks.

The project id comes only from the authorizer's context (API Gateway puts it in
``requestContext.authorizer``); nothing in a path or body can name a project.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kaibo_core.core.errors import ForbiddenError, UnauthorizedError
from kaibo_core.core.storage_keys import ProjectId

Role = Literal["admin", "project"]


@dataclass(frozen=True)
class Principal:
    role: Role
    key_id: str
    project_id: ProjectId | None
    scopes: frozenset[str]
    #: The API Gateway API key value whose usage plan limit this caller's requests count against
    #: (the authorizer's ``usageIdentifierKey``); never in the context, never logged.
    usage_key: str | None = None

    def context(self) -> dict[str, str]:
        """The authorizer context (API Gateway allows only flat string/number/bool values)."""
        context = {"role": self.role, "keyId": self.key_id, "scopes": " ".join(sorted(self.scopes))}
        if self.project_id:
            context["projectId"] = self.project_id
        return context

    @classmethod
    def from_context(cls, context: Mapping[str, Any] | None) -> Principal:
        if not context or context.get("role") not in ("admin", "project"):
            raise UnauthorizedError("unauthorized", "Missing or invalid API key.")
        project = context.get("projectId") or None
        if context["role"] == "project" and not project:
            raise UnauthorizedError("unauthorized", "Missing or invalid API key.")
        return cls(
            role=context["role"],
            key_id=str(context.get("keyId", "")),
            project_id=ProjectId(project) if project else None,
            scopes=frozenset(str(context.get("scopes", "")).split()),
        )

    def project_with_scope(self, scope: str) -> ProjectId:
        """The caller's project, if the key may do ``scope`` there (403 otherwise)."""
        if self.role != "project" or self.project_id is None:
            raise ForbiddenError("insufficient_scope", "This route needs a project API key.")
        if scope not in self.scopes:
            raise ForbiddenError(
                "insufficient_scope",
                f"This API key lacks the {scope!r} scope "
                f"(it has: {', '.join(sorted(self.scopes)) or 'none'}).",
                {"needed": scope},
            )
        return self.project_id

    def require_admin(self) -> None:
        if self.role != "admin":
            raise ForbiddenError("insufficient_scope", "This route needs the admin key.")

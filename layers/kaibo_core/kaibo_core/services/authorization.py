"""The token authorizer: API key → principal → IAM policy for API Gateway.

API Gateway caches a token's policy (``ReauthorizeEvery``) and applies it to
every route, so the policy covers all the routes the key may call: a project
key is allowed ``/v1/*`` except ``/v1/admin/*``; the admin key only
``/v1/admin/*``. Scopes (read/write/forget) are checked by each handler.
"""

from __future__ import annotations

from typing import Any

from kaibo_core.core import api_keys
from kaibo_core.core.tenancy import Principal
from kaibo_core.ports import KeyLookup

#: Resource suffixes after ``arn:...:apiId``: any stage, any method.
ADMIN_ROUTES = "/*/*/v1/admin/*"
PROJECT_ROUTES = "/*/*/v1/*"


class AuthorizationService:
    def __init__(self, keys: KeyLookup, admin_key_hash: str) -> None:
        self._keys = keys
        self._admin_key_hash = admin_key_hash

    def authenticate(self, authorization: str | None) -> Principal | None:
        token = api_keys.bearer_token(authorization)
        if token is None:
            return None
        if api_keys.is_admin_key(token, self._admin_key_hash):
            return Principal(role="admin", key_id="admin", project_id=None, scopes=frozenset({"admin"}))
        parsed = api_keys.parse_key(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        stored = self._keys.get_key(key_id)
        if (
            stored is None
            or stored.revoked
            or not api_keys.secret_matches(secret, stored.salt, stored.secret_hash)
        ):
            return None
        return Principal(
            role="project", key_id=key_id, project_id=stored.project_id, scopes=frozenset(stored.scopes)
        )


def api_arn_base(method_arn: str) -> str:
    """``arn:aws:execute-api:region:account:apiId/stage/GET/v1/x`` → ``arn:...:apiId``."""
    arn_prefix, _, path = method_arn.partition("/")
    return arn_prefix if path else method_arn


def policy_for(principal: Principal, method_arn: str) -> dict[str, Any]:
    base = api_arn_base(method_arn)
    if principal.role == "admin":
        statements = [_statement("Allow", f"{base}{ADMIN_ROUTES}")]
    else:
        statements = [
            _statement("Allow", f"{base}{PROJECT_ROUTES}"),
            _statement("Deny", f"{base}{ADMIN_ROUTES}"),
        ]
    return {
        "principalId": principal.key_id,
        "policyDocument": {"Version": "2012-10-17", "Statement": statements},
        "context": principal.context(),
    }


def _statement(effect: str, resource: str) -> dict[str, Any]:
    return {"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}

"""The token authorizer: API key → principal → IAM policy for API Gateway.

API Gateway caches a token's policy (``ReauthorizeEvery``) and applies it to
every route, so the policy covers all the routes the key may call: a project
key is allowed ``/v1/*`` except ``/v1/admin/*``; the admin key only
``/v1/admin/*``. Scopes (read/write/forget) are checked by each handler.

With per-project throttles (docs/deploy.md, "Throttles"), the answer also names the usage plan's
API key the request counts against (``usageIdentifierKey``): the project's own, stored on the key's
item, or the deployment's shared one for the admin key and for projects that have none.
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
    def __init__(self, keys: KeyLookup, admin_key_hash: str, shared_usage_key: str = "") -> None:
        self._keys = keys
        self._admin_key_hash = admin_key_hash
        self._shared_usage_key = shared_usage_key or None

    def authenticate(self, authorization: str | None) -> Principal | None:
        token = api_keys.bearer_token(authorization)
        if token is None:
            return None
        if api_keys.is_admin_key(token, self._admin_key_hash):
            return Principal(
                role="admin",
                key_id="admin",
                project_id=None,
                scopes=frozenset({"admin"}),
                usage_key=self._shared_usage_key,
            )
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
            role="project",
            key_id=key_id,
            project_id=stored.project_id,
            scopes=frozenset(stored.scopes),
            usage_key=stored.usage_key or self._shared_usage_key,
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
    policy: dict[str, Any] = {
        "principalId": principal.key_id,
        "policyDocument": {"Version": "2012-10-17", "Statement": statements},
        "context": principal.context(),
    }
    if principal.usage_key:
        policy["usageIdentifierKey"] = principal.usage_key
    return policy


def _statement(effect: str, resource: str) -> dict[str, Any]:
    return {"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}

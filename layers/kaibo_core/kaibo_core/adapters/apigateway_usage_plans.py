"""Per-project throttles: each project's API Gateway API key, in the deployment's usage plan
(template.yaml ``ProjectUsagePlan``; docs/deploy.md, "Throttles").

API Gateway calls are outside any DynamoDB transaction, so ``enroll`` converges instead: the key's
value is chosen by the caller (``api_keys.issue_usage_key``) and API Gateway refuses a second key
of the same value (``ConflictException``). When the SDK retries a CreateApiKey whose answer was
lost, or the caller calls ``enroll`` again, the conflict leads to the key already made (found by its
name, ``kaibo-<projectId>``, and its value), never to a second one. Adding a key the plan already
holds is a conflict too, and means done.

API Gateway's own refusals become answers: throttled (``TooManyRequestsException``, once the SDK's
retries gave up) is ``429 usage_plan_busy`` with ``Retry-After``; the account's quota of API keys
reached (``LimitExceededException``) is ``503 api_key_quota_reached``, for the deployment's
operator to lift (docs/deploy.md, "Throttles"). Either way no project is stored.

A creation that failed after its key was made leaves that key in the plan, unused:
``project_keys``, ``created_at`` and ``remove`` let tools/enroll_projects.py find and delete such
keys (``services/admin.remove_orphan_usage_keys``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Final, Protocol

from botocore.exceptions import ClientError

from kaibo_core.core.errors import KaiboError, ServiceUnavailableError, TooManyRequestsError
from kaibo_core.core.models.keys import PlanUsageKey
from kaibo_core.core.storage_keys import ProjectId

#: Seconds a caller waits before retrying a project creation API Gateway throttled.
USAGE_PLAN_RETRY_AFTER_SECONDS = 2


#: A key named for a project: ``kaibo-`` and a project id (``ids.project_id``). The shared key's
#: name (``<stack>-shared``) never matches, whatever the stack is called.
_PROJECT_KEY_NAME: Final = re.compile(r"kaibo-(prj_[0-9A-HJKMNP-TV-Z]{26})")
#: Most items API Gateway returns in one page of a listing.
_PAGE_LIMIT: Final = 500


class ApiGatewayClient(Protocol):
    def create_api_key(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_api_keys(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_api_key(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_api_key(self, **kwargs: Any) -> dict[str, Any]: ...
    def create_usage_plan_key(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_usage_plan_keys(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_usage_plan_key(self, **kwargs: Any) -> dict[str, Any]: ...


def usage_key_name(project: ProjectId) -> str:
    """The API key's name: the project it meters, for an operator reading the usage plan."""
    return f"kaibo-{project}"


def project_of_usage_key(name: str) -> ProjectId | None:
    """The project a key named ``name`` was made for (None: not a project's key)."""
    match = _PROJECT_KEY_NAME.fullmatch(name)
    return ProjectId(match.group(1)) if match else None


def _pages(list_page: Callable[..., dict[str, Any]], **arguments: Any) -> Iterator[dict[str, Any]]:
    """Every item of an API Gateway listing, page after page (``position``)."""
    position: str | None = None
    while True:
        page = list_page(limit=_PAGE_LIMIT, **arguments, **({"position": position} if position else {}))
        yield from page.get("items", [])
        position = page.get("position")
        if not position:
            return


def _is_not_found(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "NotFoundException"


def _unless_gone(call: Callable[..., dict[str, Any]], **arguments: Any) -> None:
    """``call``; a key or plan key already gone is done too."""
    try:
        call(**arguments)
    except ClientError as error:
        if not _is_not_found(error):
            raise


def _is_conflict(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConflictException"


def _refusal(error: ClientError) -> KaiboError | None:
    """What the caller is answered for API Gateway's refusal ``error``; None: a fault (5xx)."""
    code = error.response.get("Error", {}).get("Code")
    if code == "TooManyRequestsException":
        return TooManyRequestsError(
            "usage_plan_busy",
            "API Gateway is throttling this deployment's API key changes; retry after the "
            "Retry-After seconds.",
            retry_after_seconds=USAGE_PLAN_RETRY_AFTER_SECONDS,
        )
    if code == "LimitExceededException":
        return ServiceUnavailableError(
            "api_key_quota_reached",
            "This deployment's AWS account holds as many API Gateway API keys as its quota allows, "
            "so no project can be created; its operator must raise the quota (or delete unused keys, "
            "see docs/deploy.md) before projects can be created again.",
        )
    return None


class ApiGatewayUsagePlan:
    def __init__(self, client: ApiGatewayClient, usage_plan_id: str) -> None:
        self._client = client
        self._usage_plan_id = usage_plan_id

    def enroll(self, project: ProjectId, usage_key: str) -> None:
        try:
            self._enroll(project, usage_key)
        except ClientError as error:
            refusal = _refusal(error)
            if refusal is None:
                raise
            raise refusal from error

    def _enroll(self, project: ProjectId, usage_key: str) -> None:
        key_id = self._create_key(project, usage_key)
        try:
            self._client.create_usage_plan_key(
                usagePlanId=self._usage_plan_id, keyId=key_id, keyType="API_KEY"
            )
        except ClientError as error:
            if not _is_conflict(error):  # the plan holds it already
                raise

    def existing_usage_key(self, project: ProjectId) -> str | None:
        """The value of an API key made for ``project`` earlier (a run that stopped before it was
        stored), so that enrolling the project again reuses it; None if there is none."""
        name = usage_key_name(project)
        return next((str(key["value"]) for key in self._keys_named(name)), None)

    def _create_key(self, project: ProjectId, usage_key: str) -> str:
        name = usage_key_name(project)
        try:
            created = self._client.create_api_key(
                name=name, description=f"Kaibo project {project}", enabled=True, value=usage_key
            )
            return str(created["id"])
        except ClientError as error:
            if not _is_conflict(error):
                raise
        return self._existing_key_id(name, usage_key)

    def _existing_key_id(self, name: str, usage_key: str) -> str:
        """The id of the key named ``name`` whose value is ``usage_key`` (made by an earlier try)."""
        for key in self._keys_named(name):
            if key.get("value") == usage_key:
                return str(key["id"])
        raise RuntimeError(f"API key {name} conflicts with a key of another name")

    def _keys_named(self, name: str) -> list[dict[str, Any]]:
        keys = _pages(self._client.get_api_keys, nameQuery=name, includeValues=True)
        return [key for key in keys if key.get("name") == name]

    # -- keys no project uses (tools/enroll_projects.py --remove-orphan-keys) ---------------------

    def project_keys(self) -> Iterator[PlanUsageKey]:
        """The plan's keys named for a project, with their values; only this plan's, so only keys
        this deployment made (another stack's plan is never read)."""
        for key in _pages(self._client.get_usage_plan_keys, usagePlanId=self._usage_plan_id):
            project = project_of_usage_key(str(key.get("name", "")))
            if project is not None and key.get("type", "API_KEY") == "API_KEY":
                yield PlanUsageKey(str(key["id"]), project, str(key.get("value", "")))

    def created_at(self, key_id: str) -> datetime | None:
        """When the key was made; None if it is gone (or API Gateway does not say)."""
        try:
            created = self._client.get_api_key(apiKey=key_id)["createdDate"]
        except ClientError as error:
            if _is_not_found(error):
                return None
            raise
        return created if isinstance(created, datetime) else None

    def remove(self, key_id: str) -> None:
        _unless_gone(self._client.delete_usage_plan_key, usagePlanId=self._usage_plan_id, keyId=key_id)
        _unless_gone(self._client.delete_api_key, apiKey=key_id)

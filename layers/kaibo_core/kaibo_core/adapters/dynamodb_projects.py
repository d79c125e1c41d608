"""Projects and their API keys in DynamoDB (the Projects table).

``project#<id>`` holds the project; ``apikey#<keyId>`` holds a key's salted
hash, its project and scopes. Keys are found by key id alone: the authorizer
learns the project from the key, never the other way round. A project with its own usage key
(per-project throttles) has it on its item and on each of its keys' (``usageKey``), so that the
authorizer reads one item; a key is added with the usage key its project had when it was read
(the write checks it is still the project's, and reads again if a migration set one meanwhile).

A write that creates a key is safe to send twice: the key's id and salted hash are made once per
request, so when the SDK retries a transaction that had committed (its answer lost), the key's
failed condition returns the stored item, and finding this request's own hash there means done.
A transaction that lost a race to another one, or met its own first attempt still in progress, is
tried again (``dynamodb_transactions``); after a few, ``429 project_busy``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.core import storage_keys
from kaibo_core.core.api_keys import IssuedKey
from kaibo_core.core.errors import NotFoundError, TooManyRequestsError
from kaibo_core.core.models.keys import StoredKey, UsageKeyGap
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import ConditionCheckTypeDef, TransactWriteItemTypeDef


def _project_busy() -> TooManyRequestsError:
    return TooManyRequestsError(
        "project_busy",
        "The project is receiving too many concurrent changes; retry after the Retry-After seconds.",
        retry_after_seconds=1,
    )


#: add_key reads the project's usage key again this often when it changed under it, then 429.
_USAGE_KEY_READS = 3


class _RefusedError(Exception):
    """A key's transaction failed a condition: ``codes`` are its cancellation reasons, ``old_items``
    the items a failed condition returned (``ALL_OLD``; empty when there was none or none asked)."""

    def __init__(self, codes: list[str | None], old_items: list[dict[str, Any]]) -> None:
        super().__init__(f"transaction cancelled: {codes}")
        self.codes = codes
        self.old_items = old_items


def _is_own_key(reason: dict[str, Any], key: IssuedKey) -> bool:
    """The key's item exists and is the one this request writes (a retry of a committed write)."""
    stored = reason.get("Item") or {}
    return (
        reason.get("Code") == "ConditionalCheckFailed"
        and stored.get("secretHash", {}).get("S") == key.secret_hash
    )


class DynamoProjectStore:
    def __init__(
        self, client: DynamoDBClient, table: str, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._client = client
        self._table = table
        self._sleep = sleep

    def _key_put(
        self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str, usage_key: str | None
    ) -> TransactWriteItemTypeDef:
        item: dict[str, Any] = {
            **{k: {"S": v} for k, v in storage_keys.api_key_key(key.key_id).items()},
            "projectId": {"S": project},
            "salt": {"S": key.salt},
            "secretHash": {"S": key.secret_hash},
            "scopes": {"SS": list(scopes)},
            "createdAt": {"S": now},
        }
        if usage_key is not None:
            item["usageKey"] = {"S": usage_key}
        return {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _commit_with_key(self, actions: list[TransactWriteItemTypeDef], key: IssuedKey) -> None:
        """Apply ``actions``, whose last one puts ``key``; done too when that key is found stored
        by this very request. ``_RefusedError`` when a condition failed, 429 after lost races."""
        try:
            transact_write(self._client, actions, busy=_project_busy, sleep=self._sleep)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons: list[dict[str, Any]] = list(exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]
            if reasons and _is_own_key(reasons[-1], key):
                return
            codes = [reason.get("Code") for reason in reasons]
            if "ConditionalCheckFailed" in codes:
                raise _RefusedError(codes, [dict(reason.get("Item") or {}) for reason in reasons]) from exc
            raise

    def create_project(  # noqa: PLR0917 - a project's fields
        self,
        project: ProjectId,
        name: str,
        key: IssuedKey,
        scopes: Sequence[str],
        now: str,
        time_zone: str | None = None,
        usage_key: str | None = None,
    ) -> None:
        """The project and its first key, together or not at all."""
        item: dict[str, Any] = {
            **{k: {"S": v} for k, v in storage_keys.project_key(project).items()},
            "projectId": {"S": project},
            "name": {"S": name},
            "createdAt": {"S": now},
        }
        if time_zone is not None:
            item["timeZone"] = {"S": time_zone}
        if usage_key is not None:
            item["usageKey"] = {"S": usage_key}
        project_put: TransactWriteItemTypeDef = {
            "Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        }
        try:
            self._commit_with_key([project_put, self._key_put(project, key, scopes, now, usage_key)], key)
        except _RefusedError as exc:
            raise RuntimeError(f"project {project} or key {key.key_id} exists already: {exc.codes}") from exc

    def add_key(self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str) -> None:
        """A new key for an existing project (404 otherwise), with the project's usage key."""
        for _ in range(_USAGE_KEY_READS):
            usage_key = self._usage_key(project)
            unchanged: ConditionCheckTypeDef = {
                "TableName": self._table,
                "Key": {k: {"S": v} for k, v in storage_keys.project_key(project).items()},
                "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(usageKey)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
            if usage_key is not None:
                unchanged["ConditionExpression"] = "attribute_exists(pk) AND usageKey = :usageKey"
                unchanged["ExpressionAttributeValues"] = {":usageKey": {"S": usage_key}}
            project_unchanged: TransactWriteItemTypeDef = {"ConditionCheck": unchanged}
            try:
                self._commit_with_key(
                    [project_unchanged, self._key_put(project, key, scopes, now, usage_key)], key
                )
                return
            except _RefusedError as exc:
                if exc.codes[0] != "ConditionalCheckFailed":
                    raise RuntimeError(f"key {key.key_id} exists already: {exc.codes}") from exc
                if not exc.old_items[0]:
                    raise NotFoundError("project_not_found", f"No project {project!r}.") from exc
                # The project got a usage key since it was read (tools/enroll_projects.py): read again.
        raise _project_busy()

    def _usage_key(self, project: ProjectId) -> str | None:
        """The project's usage key (None: it has none, or there is no such project)."""
        return self.project_usage_key(project)[1]

    def project_usage_key(self, project: ProjectId) -> tuple[bool, str | None]:
        """``(the project exists, its usage key or None)``, strongly consistent."""
        response = self._client.get_item(
            TableName=self._table,
            Key={k: {"S": v} for k, v in storage_keys.project_key(project).items()},
            ProjectionExpression="pk, usageKey",
            ConsistentRead=True,
        )
        item: dict[str, Any] = dict(response.get("Item") or {})
        return bool(item), str(item["usageKey"]["S"]) if "usageKey" in item else None

    def revoke_key(self, key_id: str, now: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={k: {"S": v} for k, v in storage_keys.api_key_key(key_id).items()},
                UpdateExpression="SET revokedAt = if_not_exists(revokedAt, :now)",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":now": {"S": now}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise NotFoundError("key_not_found", f"No API key {key_id!r}.") from exc
            raise

    def time_zone(self, project: ProjectId) -> str | None:
        """The project's default time zone (None: not set, or no such project)."""
        response = self._client.get_item(
            TableName=self._table,
            Key={k: {"S": v} for k, v in storage_keys.project_key(project).items()},
            ProjectionExpression="#tz",
            ExpressionAttributeNames={"#tz": "timeZone"},  # TIMEZONE is a reserved word
        )
        item: dict[str, Any] = dict(response.get("Item") or {})
        return str(item["timeZone"]["S"]) if "timeZone" in item else None

    def get_key(self, key_id: str) -> StoredKey | None:
        response = self._client.get_item(
            TableName=self._table,
            Key={k: {"S": v} for k, v in storage_keys.api_key_key(key_id).items()},
            ConsistentRead=True,
        )
        item: dict[str, Any] | None = response.get("Item")
        if not item:
            return None
        return StoredKey(
            key_id=key_id,
            project_id=ProjectId(item["projectId"]["S"]),
            salt=item["salt"]["S"],
            secret_hash=item["secretHash"]["S"],
            scopes=tuple(sorted(item["scopes"]["SS"])),
            revoked="revokedAt" in item,
            usage_key=item["usageKey"]["S"] if "usageKey" in item else None,
        )

    # --- Projects from before per-project throttles (tools/enroll_projects.py) -------------------

    def without_usage_keys(self) -> Iterator[UsageKeyGap]:
        """One scan of the table: every project some of whose keys lack its usage key."""
        usage_keys: dict[ProjectId, str | None] = {}
        lacking: dict[ProjectId, list[str]] = {}
        pages = self._client.get_paginator("scan").paginate(
            TableName=self._table,
            ProjectionExpression="pk, projectId, usageKey",
            ConsistentRead=True,
        )
        for page in pages:
            for item in page.get("Items", []):
                project = ProjectId(item["projectId"]["S"])
                usage_key = item["usageKey"]["S"] if "usageKey" in item else None
                if item["pk"]["S"].startswith(storage_keys.API_KEY_PREFIX):
                    if usage_key is None:
                        lacking.setdefault(project, []).append(
                            item["pk"]["S"][len(storage_keys.API_KEY_PREFIX) :]
                        )
                else:
                    usage_keys[project] = usage_key
        for project, usage_key in usage_keys.items():
            if usage_key is None or project in lacking:
                yield UsageKeyGap(project, usage_key, tuple(sorted(lacking.get(project, []))))

    def give_usage_key(self, project: ProjectId, usage_key: str) -> str:
        if self._set_usage_key_if_absent(storage_keys.project_key(project), usage_key):
            return usage_key
        found = self._usage_key(project)
        if found is None:
            raise NotFoundError("project_not_found", f"No project {project!r}.")
        return found

    def give_key_usage_key(self, key_id: str, usage_key: str) -> bool:
        return self._set_usage_key_if_absent(storage_keys.api_key_key(key_id), usage_key)

    def _set_usage_key_if_absent(self, key: dict[str, str], usage_key: str) -> bool:
        """Set ``usageKey`` on an existing item that has none; False when it is missing or has one."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={k: {"S": v} for k, v in key.items()},
                UpdateExpression="SET usageKey = :usageKey",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(usageKey)",
                ExpressionAttributeValues={":usageKey": {"S": usage_key}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False
        return True

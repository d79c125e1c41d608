"""Projects and their API keys in DynamoDB (the Projects table).

``project#<id>`` holds the project; ``apikey#<keyId>`` holds a key's salted
hash, its project and scopes. Keys are found by key id alone: the authorizer
learns the project from the key, never the other way round.

A write that creates a key is safe to send twice: the key's id and salted hash are made once per
request, so when the SDK retries a transaction that had committed (its answer lost), the key's
failed condition returns the stored item, and finding this request's own hash there means done.
A transaction that lost a race to another one, or met its own first attempt still in progress, is
tried again (``dynamodb_transactions``); after a few, ``429 project_busy``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.core import storage_keys
from kaibo_core.core.api_keys import IssuedKey
from kaibo_core.core.errors import NotFoundError, TooManyRequestsError
from kaibo_core.core.models.keys import StoredKey
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


def _project_busy() -> TooManyRequestsError:
    return TooManyRequestsError(
        "project_busy",
        "The project is receiving too many concurrent changes; retry after the Retry-After seconds.",
        retry_after_seconds=1,
    )


class _RefusedError(Exception):
    """A key's transaction failed a condition: ``codes`` are its cancellation reasons."""

    def __init__(self, codes: list[str | None]) -> None:
        super().__init__(f"transaction cancelled: {codes}")
        self.codes = codes


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
        self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str
    ) -> TransactWriteItemTypeDef:
        return {
            "Put": {
                "TableName": self._table,
                "Item": {
                    **{k: {"S": v} for k, v in storage_keys.api_key_key(key.key_id).items()},
                    "projectId": {"S": project},
                    "salt": {"S": key.salt},
                    "secretHash": {"S": key.secret_hash},
                    "scopes": {"SS": list(scopes)},
                    "createdAt": {"S": now},
                },
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
                raise _RefusedError(codes) from exc
            raise

    def create_project(  # noqa: PLR0917 - a project's fields
        self,
        project: ProjectId,
        name: str,
        key: IssuedKey,
        scopes: Sequence[str],
        now: str,
        time_zone: str | None = None,
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
        project_put: TransactWriteItemTypeDef = {
            "Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        }
        try:
            self._commit_with_key([project_put, self._key_put(project, key, scopes, now)], key)
        except _RefusedError as exc:
            raise RuntimeError(f"project {project} or key {key.key_id} exists already: {exc.codes}") from exc

    def add_key(self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str) -> None:
        """A new key for an existing project (404 otherwise)."""
        project_exists: TransactWriteItemTypeDef = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": {k: {"S": v} for k, v in storage_keys.project_key(project).items()},
                "ConditionExpression": "attribute_exists(pk)",
            }
        }
        try:
            self._commit_with_key([project_exists, self._key_put(project, key, scopes, now)], key)
        except _RefusedError as exc:
            if exc.codes[0] == "ConditionalCheckFailed":
                raise NotFoundError("project_not_found", f"No project {project!r}.") from exc
            raise RuntimeError(f"key {key.key_id} exists already: {exc.codes}") from exc

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
        )

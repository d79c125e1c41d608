"""Projects and their API keys in DynamoDB (the Projects table).

``project#<id>`` holds the project; ``apikey#<keyId>`` holds a key's salted
hash, its project and scopes. Keys are found by key id alone: the authorizer
learns the project from the key, never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from kaibo_core.core import storage_keys
from kaibo_core.core.api_keys import IssuedKey
from kaibo_core.core.errors import NotFoundError
from kaibo_core.core.models.keys import StoredKey
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


class DynamoProjectStore:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

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
            }
        }

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
        self._client.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": item,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                self._key_put(project, key, scopes, now),
            ]
        )

    def add_key(self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str) -> None:
        """A new key for an existing project (404 otherwise)."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self._table,
                            "Key": {k: {"S": v} for k, v in storage_keys.project_key(project).items()},
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    self._key_put(project, key, scopes, now),
                ]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                raise NotFoundError("project_not_found", f"No project {project!r}.") from exc
            raise

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

"""DynamoDB attribute values in the low-level client's wire format (no boto3 resource layer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

Item = dict[str, "AttributeValueTypeDef"]


def s(value: str) -> AttributeValueTypeDef:
    return {"S": value}


def n(value: int | float) -> AttributeValueTypeDef:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def strings(values: tuple[str, ...] | list[str]) -> AttributeValueTypeDef:
    """A list of strings (``L``, not ``SS``: string sets cannot be empty and lose order)."""
    return {"L": [{"S": value} for value in values]}


def string_list(value: Any) -> tuple[str, ...]:
    """The strings of a list attribute written by ``strings`` (absent: none)."""
    return tuple(v["S"] for v in value.get("L", [])) if value else ()


def key(fields: Mapping[str, str | int]) -> Item:
    return {name: (n(value) if isinstance(value, int) else s(value)) for name, value in fields.items()}


def item_size(item: Mapping[str, Any]) -> int:
    """DynamoDB's item size: UTF-8 lengths of attribute names and values (numbers ~ digits/2 + 1)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode())
        elif "N" in value:
            size += len(value["N"]) // 2 + 2
        else:
            size += len(json.dumps(value))  # lists and maps: an over-estimate
    return size

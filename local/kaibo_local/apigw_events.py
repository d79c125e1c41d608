"""REST API (payload format 1.0) proxy events, as API Gateway delivers them to a function.

Used by the tests now and by the local stack's HTTP front: one builder, so what
the handlers see locally is what they would see behind API Gateway.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

STAGE = "prod"


def rest_proxy_event(
    method: str,
    path: str,
    *,
    resource: str | None = None,
    path_parameters: Mapping[str, str] | None = None,
    query: Sequence[tuple[str, str]] = (),
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | str | None = None,
    authorizer: Mapping[str, Any] | None = None,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """Build the event; ``body`` bytes that are not UTF-8 arrive base64-encoded, as on AWS."""
    single_headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for name, value in headers:
        single_headers[name] = value  # the last value wins, as in API Gateway
        multi_headers.setdefault(name, []).append(value)
    single_query: dict[str, str] = {}
    multi_query: dict[str, list[str]] = {}
    for name, value in query:
        single_query[name] = value
        multi_query.setdefault(name, []).append(value)
    text_body, is_base64 = _encode_body(body)
    now = datetime.now(UTC)
    request_id = secrets.token_hex(16)
    return {
        "resource": resource or path,
        "path": path,
        "httpMethod": method.upper(),
        "headers": single_headers or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": single_query or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": dict(path_parameters) if path_parameters else None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource or path,
            "httpMethod": method.upper(),
            "path": f"/{STAGE}{path}",
            "stage": STAGE,
            "protocol": "HTTP/1.1",
            "requestId": request_id,
            "extendedRequestId": request_id,
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "accountId": "123456789012",
            "apiId": "kaibolocal",
            "domainName": "127.0.0.1",
            "identity": {"sourceIp": source_ip, "userAgent": single_headers.get("User-Agent")},
            "authorizer": dict(authorizer) if authorizer is not None else None,
        },
        "body": text_body,
        "isBase64Encoded": is_base64,
    }


def _encode_body(body: bytes | str | None) -> tuple[str | None, bool]:
    if body is None:
        return None, False
    if isinstance(body, str):
        return body, False
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True

"""The REST resolver every API function uses, and the one exception table.

Every error leaves as ``{"error": {"code", "message", "details"}}``: domain
errors with their own status, request validation as 400/422 with a stable
code, anything unexpected as a 500 that names only the request id.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any, NamedTuple, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseContentModel,
    OpenAPIResponseContentSchema,
)

from kaibo_core.api.models import EVENT_KINDS, ErrorResponse
from kaibo_core.core.errors import KaiboError, TooManyRequestsError
from kaibo_core.core.json_reader import read_json
from kaibo_core.core.tenancy import Principal
from kaibo_core.core.webhooks import SUBSCRIBABLE
from kaibo_core.runtime.observability import failure_fields, logger

_S = TypeVar("_S")


class _Coded(NamedTuple):
    """A request validation error with a code of its own: pydantic's error ``type`` (None: any) on
    ``field`` (None: any field; else the field the error is on, or, for a route's own entry, any
    field inside it: ``events[0]``), on ``route`` (the resource path) only when given."""

    type: str | None
    field: str | None
    code: str
    status: int
    route: str | None = None

    def matches(self, error: dict[str, Any], route: str | None) -> bool:
        if (self.route is not None and self.route != route) or (
            self.type is not None and error.get("type") != self.type
        ):
            return False
        loc = tuple(error.get("loc", ()))
        if self.field is None:
            return True
        return self.field in loc[1:] if self.route is not None else bool(loc) and loc[-1] == self.field


#: Validation errors that have a code of their own (first match wins).
_VALIDATION_CODES: Sequence[_Coded] = (
    _Coded("json_invalid", None, "malformed_json", 400),
    _Coded(None, "events", "webhook_events_invalid", 422, "/v1/webhooks"),
    _Coded("union_tag_invalid", None, "unknown_kind", 422),
    _Coded("union_tag_not_found", None, "missing_field", 422),
    _Coded("string_pattern_mismatch", "stream", "invalid_stream_name", 422),
    _Coded("too_long", "events", "too_many_events", 422, "/v1/remember"),
    _Coded("too_short", "events", "no_events", 422, "/v1/remember"),
    _Coded("missing", None, "missing_field", 422),
)


ERROR_RESPONSES: dict[int, OpenAPIResponse] = {
    status: {"description": description, "content": {"application/json": {"model": ErrorResponse}}}
    for status, description in [
        (400, "Malformed request (malformed_json, duplicate_key, json_too_deep, number_too_long)"),
        (401, "Missing, unknown or revoked API key"),
        (403, "The key lacks the route's scope"),
        (404, "No such route or resource"),
        (409, "Conflict (e.g. idempotency_key_reused)"),
        (413, "Too large (event_too_large, batch_too_large)"),
        (422, "Invalid request: details.errors lists each field"),
        (429, "Retry later (Retry-After)"),
        (500, "A fault of ours: details.requestId names it"),
        (503, "Unavailable until an operator acts (e.g. api_key_quota_reached); the message says what"),
    ]
}


def responses(
    status: int,
    description: str,
    content: dict[str, OpenAPIResponseContentSchema | OpenAPIResponseContentModel] | None = None,
) -> dict[int, OpenAPIResponse]:
    """A route's ``responses``: its success answer and ``ERROR_RESPONSES``.

    Powertools documents a route's success answer only when the route gives no ``responses``:
    a route that lists its errors alone has no 2xx in /openapi.json. Without ``content`` the
    success answer's schema is the route's return annotation (JSON); ``content={}`` is an answer
    without a body (204)."""
    success: OpenAPIResponse = {"description": description}
    if content is not None:
        success["content"] = content
    return {status: success, **ERROR_RESPONSES}


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[str]:
    body = ErrorResponse.model_validate(
        {"error": {"code": code, "message": message, "details": details or {}}}
    )
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(),
        headers=headers,
    )


def _field(loc: Sequence[Any]) -> str:
    """The field as the request names it: ``events[0].payload.role``, without the ``body`` pydantic
    puts first or the event kind it puts after an event's index (the union's tag, no field)."""
    parts = [
        part
        for number, part in enumerate(loc)
        if part != "body" and not (number and isinstance(loc[number - 1], int) and part in EVENT_KINDS)
    ]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def validation_error_response(errors: Sequence[dict[str, Any]], route: str | None = None) -> Response[str]:
    """The answer to a request that failed validation on ``route`` (the resource path)."""
    listed = [
        {"field": _field(err.get("loc", ())), "type": err.get("type", ""), "problem": err.get("msg", "")}
        for err in errors
    ]
    for coded in _VALIDATION_CODES:
        for error, shown in zip(errors, listed, strict=True):
            if coded.matches(error, route):
                return error_response(
                    coded.status, coded.code, _message(coded.code, shown), {"errors": listed}
                )
    first = listed[0] if listed else {"field": "body", "problem": "invalid"}
    return error_response(422, "invalid_request", f"{first['field']}: {first['problem']}", {"errors": listed})


def _message(code: str, error: dict[str, str]) -> str:
    if code == "malformed_json":
        return "The request body is not valid JSON."
    if code == "webhook_events_invalid":
        subscribable = ", ".join(sorted(SUBSCRIBABLE))
        return f"events must name one to four of {subscribable} ({error['field']}: {error['problem']})"
    return f"{error['field']}: {error['problem']}"


def create_resolver() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(
        enable_validation=True,
        response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR,
        json_body_deserializer=read_json,
    )

    @app.exception_handler(KaiboError)
    def _domain_error(exc: KaiboError) -> Response[str]:
        headers = (
            {"Retry-After": str(exc.retry_after_seconds)} if isinstance(exc, TooManyRequestsError) else None
        )
        logger.info("request refused", extra={"code": exc.code, "status": exc.status})
        return error_response(exc.status, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    def _validation_error(exc: RequestValidationError) -> Response[str]:
        response = validation_error_response(list(exc.errors()), app.current_event.resource)
        logger.info("request invalid", extra={"status": response.status_code})
        return response

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        return error_response(404, "not_found", "No such route. See /openapi.json for the API.")

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response[str]:
        request_id = app.current_event.request_context.request_id
        logger.error("unhandled error", extra={"requestId": request_id, **failure_fields(exc)})
        return error_response(
            500, "internal_error", "Something went wrong on our side; retry later.", {"requestId": request_id}
        )

    return app


def principal(app: APIGatewayRestResolver) -> Principal:
    """The caller as the authorizer established it (never from the body or path)."""
    return Principal.from_context(app.current_event.request_context.authorizer.get_context())


def _utf8_body(event: dict[str, Any]) -> bool:
    if not event.get("isBase64Encoded") or not event.get("body"):
        return True
    try:
        base64.b64decode(event["body"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return True


def injected(app: APIGatewayRestResolver, name: str, kind: type[_S], default: Callable[[], _S]) -> _S:
    """The service ``name`` passed to this request's ``resolve`` (tests inject one), else the
    container's own from ``default`` (a ``runtime.wiring`` factory)."""
    found = app.context.get(name)
    if found is None:
        return default()
    if not isinstance(found, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, not {type(found).__name__}")
    return found


def resolve(
    app: APIGatewayRestResolver, event: dict[str, Any], context: Any, **services: object
) -> dict[str, Any]:
    """Resolve a request, with ``services`` (those not None) for the routes' ``injected``.

    The API speaks only JSON (UTF-8): a body is read as JSON whatever its declared Content-Type
    (curl's default form type is the usual mistake), and a body that is not UTF-8 (API Gateway
    passes it base64-encoded) is refused as malformed JSON, not a 500."""
    if not _utf8_body(event):
        response = error_response(400, "malformed_json", "The request body is not UTF-8 JSON.")
        return {
            "statusCode": response.status_code,
            "headers": {"Content-Type": "application/json"},
            "body": response.body,
            "isBase64Encoded": False,
        }
    headers = event.get("headers") or {}
    if event.get("body") and any(k.lower() == "content-type" for k in headers):
        event = {
            **event,
            "headers": {
                **{k: v for k, v in headers.items() if k.lower() != "content-type"},
                "Content-Type": "application/json",
            },
            "multiValueHeaders": {
                **{
                    k: v
                    for k, v in (event.get("multiValueHeaders") or {}).items()
                    if k.lower() != "content-type"
                },
                "Content-Type": ["application/json"],
            },
        }
    # The resolver's context is cleared after every request (Powertools' resolve).
    app.context.update({name: service for name, service in services.items() if service is not None})
    return app.resolve(event, context)

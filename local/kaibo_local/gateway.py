"""API Gateway (REST API) on one machine: routes, token authorizer, gateway responses.

Everything comes from template.yaml: the routes and the function behind each,
the default authorizer and its identity source, and the gateway responses
(our error shape for 401/403/404/413/5xx). A request is answered the way the
deployed REST API would answer it:

1. no route for the path and method → MISSING_AUTHENTICATION_TOKEN (our 404);
   the most specific route wins, segment by segment (a literal segment beats
   ``{param}``, which beats ``{proxy+}``), and an explicit method beats ``ANY``;
2. an authorized route: the header must match the identity validation
   expression, then the authorizer function runs with a TOKEN event and its
   IAM policy is evaluated against the method ARN → UNAUTHORIZED (401),
   ACCESS_DENIED (403), AUTHORIZER_FAILURE or AUTHORIZER_CONFIGURATION_ERROR;
3. the function gets the payload-format-1.0 proxy event (kaibo_local.apigw_events)
   with the authorizer's context (values as strings, as API Gateway passes them),
   and its proxy response becomes the HTTP answer (a malformed one, a failed function, or one
   whose container died while it ran (``FunctionCrashError``) → 502; none within
   ``INTEGRATION_TIMEOUT_SECONDS``, when the loader waits that long only → INTEGRATION_TIMEOUT, 504).

Where functions run is the loader's business. ``load_handler`` runs them in
this process, one invocation at a time (``INVOCATION_LOCK``): Powertools keeps
the request being resolved in a class attribute (``BaseRouter.current_event``,
shared by every resolver) and metrics in a class-level dict, so two concurrent
in-process invocations would read each other's event, and so each other's
principal. The local stack instead runs them in worker processes
(kaibo_local.containers), one invocation per process at a time like Lambda
containers, so requests really run concurrently.

Event streams (kaibo_core.runtime.streaming): when the request's ``Accept`` asks for
``text/event-stream`` and the caller of ``handle`` offers a ``ResponseStream`` (the
HTTP front does), the function's context carries it under ``STREAM_CONTEXT_ATTRIBUTE``.
A function that starts it sends its status, headers and events to the client while
it runs; its returned proxy response is then not sent. This is the local stack's
own feature: on AWS (API Gateway REST, Lambda's Python runtime) the context has no
stream and the client gets the whole buffered body when the function returns.

Unlike AWS, the authorizer's answer is not cached (a revoked key fails at once),
and BinaryMediaTypes is not consulted: a non-UTF-8 request body always arrives
base64-encoded and a base64 response is always decoded.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import importlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from kaibo_core.runtime.streaming import STREAM_CONTEXT_ATTRIBUTE, ResponseStream, wants_event_stream
from kaibo_local.apigw_events import STAGE, rest_proxy_event
from kaibo_local.template import FunctionSpec, RouteSpec, authorizer_function, function_specs

log = logging.getLogger("kaibo_local.gateway")

Handler = Callable[[dict[str, Any], Any], Any]
API_ID = "kaibolocal"
ACCOUNT = "123456789012"
REGION = "us-east-1"
#: How long API Gateway waits for a function's answer before it gives up with a 504.
INTEGRATION_TIMEOUT_SECONDS = 29.0
#: API Gateway refuses request bodies over 10 MB.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
#: Held around every function invocation in this process (see the module docstring).
INVOCATION_LOCK = threading.RLock()
_PARAM = re.compile(r"\{([A-Za-z0-9_]+)\+?\}")

#: API Gateway's default status of each gateway response type (DEFAULT_4XX/5XX have none).
DEFAULT_STATUS: Mapping[str, int] = {
    "ACCESS_DENIED": 403,
    "API_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_FAILURE": 500,
    "BAD_REQUEST_BODY": 400,
    "BAD_REQUEST_PARAMETERS": 400,
    "EXPIRED_TOKEN": 403,
    "INTEGRATION_FAILURE": 504,
    "INTEGRATION_TIMEOUT": 504,
    "INVALID_API_KEY": 403,
    "INVALID_SIGNATURE": 403,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "QUOTA_EXCEEDED": 429,
    "REQUEST_TOO_LARGE": 413,
    "RESOURCE_NOT_FOUND": 404,
    "THROTTLED": 429,
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "WAF_FILTERED": 403,
}


class IntegrationTimeoutError(TimeoutError):
    """The function did not answer within the time its caller was willing to wait."""


class FunctionCrashError(RuntimeError):
    """The function's container ended while it ran the invocation (it crashed, was killed, ran out
    of memory, or the stack is stopping): API Gateway answers 502, as when a Lambda function crashes."""


def new_request_id() -> str:
    """A request id shaped like API Gateway's (a UUID)."""
    return str(uuid.uuid4())


@dataclass
class LambdaContext:
    """The parts of Lambda's context object that Powertools reads.

    ``kaibo_response_stream`` (``STREAM_CONTEXT_ATTRIBUTE``) is the local stack's addition: a
    ``ResponseStream`` when the request asked for an event stream, else None (as good as absent
    for ``kaibo_core.runtime.streaming.response_stream``). Whoever sends the context to another process
    replaces it with a picklable stream (kaibo_local.containers).
    """

    function_name: str
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=new_request_id)
    kaibo_response_stream: ResponseStream | None = None
    #: The function's Timeout (the loader sets it from the template), and when it runs out
    #: (``time.monotonic()``; set by ``start_clock`` when the handler starts).
    timeout_seconds: float = 3.0
    deadline: float | None = None

    def start_clock(self) -> None:
        self.deadline = time.monotonic() + self.timeout_seconds

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        if self.deadline is None:
            return int(self.timeout_seconds * 1000)
        return max(0, int((self.deadline - time.monotonic()) * 1000))


assert STREAM_CONTEXT_ATTRIBUTE in LambdaContext.__dataclass_fields__, "the field must bear that name"


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str  # raw, percent-encoded, without the query string
    query: Sequence[tuple[str, str]]
    headers: Sequence[tuple[str, str]]
    body: bytes


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The last value of a header (case-insensitive), or None."""
        found = [value for key, value in self.headers if key.lower() == name.lower()]
        return found[-1] if found else None


@dataclass(frozen=True)
class _Route:
    spec: RouteSpec
    pattern: re.Pattern[str]
    names: tuple[str, ...]
    rank: tuple[tuple[int, ...], int]


class MalformedProxyResponseError(ValueError):
    """The function's answer is not a valid Lambda proxy response."""


class _GatewayStream:
    """The function's view of the caller's stream: checks the protocol, adds ``x-amzn-RequestId``."""

    def __init__(self, stream: ResponseStream, request_id: str) -> None:
        self._stream = stream
        self._request_id = request_id
        self.started = False

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        if self.started:
            raise RuntimeError("the response stream is already started")
        if not 100 <= int(status) <= 599:
            raise ValueError(f"status {status}")
        sent = {
            str(name): _header_text(value)
            for name, value in headers.items()
            if str(name).lower() != "x-amzn-requestid"
        }
        sent["x-amzn-RequestId"] = self._request_id
        self.started = True
        self._stream.start(int(status), sent)

    def write(self, data: bytes) -> None:
        if not self.started:
            raise RuntimeError("write before start")
        if data:
            self._stream.write(bytes(data))


def _compile(path: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    names = tuple(m.group(1) for m in _PARAM.finditer(path))
    regex = ""
    last = 0
    for match in _PARAM.finditer(path):
        regex += re.escape(path[last : match.start()])
        regex += "(.+)" if match.group(0).endswith("+}") else "([^/]+)"
        last = match.end()
    regex += re.escape(path[last:])
    return re.compile(f"^{regex}/?$"), names


def _segment_rank(path: str) -> tuple[int, ...]:
    """Per segment: 0 literal, 1 ``{param}``, 2 ``{proxy+}`` (sorted ascending = most specific first)."""
    ranks = []
    for segment in path.strip("/").split("/"):
        if segment.startswith("{") and segment.endswith("+}"):
            ranks.append(2)
        elif segment.startswith("{") and segment.endswith("}"):
            ranks.append(1)
        else:
            ranks.append(0)
    return tuple(ranks)


def load_handler(spec: FunctionSpec) -> Handler:
    """The function's handler, run in this process and serialized by INVOCATION_LOCK.

    The context tells the handler its function's Timeout, but nothing stops a handler that runs
    longer: only the containers enforce it (kaibo_local.containers).
    """
    module = importlib.import_module(spec.qualified_module)
    handler: Handler = getattr(module, spec.handler_name)

    def invoke(event: dict[str, Any], context: Any) -> Any:
        with INVOCATION_LOCK:
            if isinstance(context, LambdaContext):
                context = dataclasses.replace(context, timeout_seconds=spec.timeout_seconds)
                context.start_clock()
            return handler(event, context)

    return invoke


class LocalGateway:
    def __init__(
        self, template: Mapping[str, Any], loader: Callable[[FunctionSpec], Handler] = load_handler
    ) -> None:
        self._specs = {spec.logical_id: spec for spec in function_specs(template)}
        self._loader = loader
        self._handlers: dict[str, Handler] = {}
        self._load_lock = threading.Lock()
        routes: list[_Route] = []
        for spec in self._specs.values():
            for route in spec.routes:
                pattern, names = _compile(route.path)
                rank = (_segment_rank(route.path), 1 if route.method == "ANY" else 0)
                routes.append(_Route(route, pattern, names, rank))
        # API Gateway picks the most specific resource, then an explicit method over ANY.
        self._routes = sorted(routes, key=lambda r: (r.rank, r.spec.path))
        self._gateway_responses: dict[str, Any] = {}
        self._identity: dict[str, Any] = {}
        self._authorizer: str | None = None
        for resource in template["Resources"].values():
            if resource.get("Type") == "AWS::Serverless::Api":
                props = resource.get("Properties") or {}
                self._gateway_responses = props.get("GatewayResponses") or {}
                auth = props.get("Auth") or {}
                default = auth.get("DefaultAuthorizer")
                if default and default != "NONE":
                    self._identity = (auth.get("Authorizers") or {}).get(default, {}).get("Identity") or {}
                    self._authorizer = authorizer_function(template)

    # -- public -----------------------------------------------------------------------------------

    def handle(self, request: HttpRequest, stream: ResponseStream | None = None) -> HttpResponse:
        """Answer one request; never raises (a fault of the gateway itself is a DEFAULT_5XX 500).

        ``stream``: offered to the function when the request's ``Accept`` asks for an event
        stream (see the module docstring). Once the function started it, the returned response
        is what the function returned (or the error answer) and must not be sent again.
        """
        request_id = new_request_id()
        try:
            return self._handle(request, request_id, stream)
        except Exception:
            log.exception("gateway failed on %s %s", request.method, request.path)
            return self.gateway_response("DEFAULT_5XX", request_id, status=500)

    def gateway_response(self, kind: str, request_id: str, status: int | None = None) -> HttpResponse:
        """A gateway response as the template defines it (DEFAULT_4XX/5XX when it doesn't).

        ``status`` is the one API Gateway would choose, used when the template sets none.
        """
        code_hint = status or DEFAULT_STATUS.get(kind, 500)
        default = "DEFAULT_5XX" if code_hint >= 500 else "DEFAULT_4XX"
        spec = self._gateway_responses.get(kind) or self._gateway_responses.get(default) or {}
        template = (spec.get("ResponseTemplates") or {}).get("application/json")
        code = int(spec.get("StatusCode") or code_hint)
        if template:
            body = str(template)
            for variable, value in (
                ("$context.requestId", request_id),
                ("$context.error.responseType", kind),
                ("$context.error.messageString", json.dumps(kind)),
                ("$context.error.message", kind),
            ):
                body = body.replace(variable, value)
        else:
            body = json.dumps(
                {"error": {"code": kind.lower(), "message": kind, "details": {"requestId": request_id}}}
            )
        headers = [("Content-Type", "application/json"), ("x-amzn-RequestId", request_id)]
        for name, value in ((spec.get("ResponseParameters") or {}).get("Headers") or {}).items():
            headers.append((name, str(value).strip("'")))
        return HttpResponse(code, headers, body.encode())

    # -- internals --------------------------------------------------------------------------------

    def _handle(self, request: HttpRequest, request_id: str, stream: ResponseStream | None) -> HttpResponse:
        if len(request.body) > MAX_REQUEST_BYTES:
            return self.gateway_response("REQUEST_TOO_LARGE", request_id)
        found = self._match(request.method, request.path)
        if found is None:
            return self.gateway_response("MISSING_AUTHENTICATION_TOKEN", request_id)
        route, path_parameters = found
        authorizer_context: dict[str, Any] | None = None
        if route.spec.authorized and self._authorizer:
            outcome = self._authorize(request, request_id)
            if isinstance(outcome, HttpResponse):
                return outcome
            authorizer_context = outcome
        event = rest_proxy_event(
            request.method,
            unquote(request.path),
            resource=route.spec.path,
            path_parameters=path_parameters or None,
            query=request.query,
            headers=request.headers,
            body=request.body if request.body else None,
            authorizer=authorizer_context,
        )
        event["requestContext"]["requestId"] = request_id
        event["requestContext"]["extendedRequestId"] = request_id
        offered = None
        if stream is not None and wants_event_stream(_joined_header(request.headers, "accept")):
            offered = _GatewayStream(stream, request_id)
        try:
            result = self._invoke(route.spec.function_logical_id, event, offered)
        except IntegrationTimeoutError:
            log.error(
                "function %s gave no answer within the integration timeout", route.spec.function_logical_id
            )
            return self.gateway_response("INTEGRATION_TIMEOUT", request_id)
        except FunctionCrashError as error:
            log.error("function %s failed: %s", route.spec.function_logical_id, error)
            return self.gateway_response("DEFAULT_5XX", request_id, status=502)
        except Exception:
            if offered is not None and offered.started:
                log.exception(
                    "function %s failed after it started its response stream; ending the stream",
                    route.spec.function_logical_id,
                )
            else:
                log.exception("function %s failed", route.spec.function_logical_id)
            return self.gateway_response("DEFAULT_5XX", request_id, status=502)
        try:
            return _proxy_response(result, request_id)
        except MalformedProxyResponseError as error:
            log.error("function %s: malformed proxy response: %s", route.spec.function_logical_id, error)
            return self.gateway_response("DEFAULT_5XX", request_id, status=502)

    def _match(self, method: str, raw_path: str) -> tuple[_Route, dict[str, str]] | None:
        for route in self._routes:
            if route.spec.method not in (method.upper(), "ANY"):
                continue
            match = route.pattern.match(raw_path)
            if match:
                return route, {
                    name: unquote(value) for name, value in zip(route.names, match.groups(), strict=True)
                }
        return None

    def _handler(self, logical_id: str) -> Handler:
        with self._load_lock:
            if logical_id not in self._handlers:
                self._handlers[logical_id] = self._loader(self._specs[logical_id])
            return self._handlers[logical_id]

    def _invoke(self, logical_id: str, event: dict[str, Any], stream: ResponseStream | None = None) -> Any:
        context = LambdaContext(function_name=logical_id, kaibo_response_stream=stream)
        return self._handler(logical_id)(event, context)

    def _authorize(self, request: HttpRequest, request_id: str) -> dict[str, Any] | HttpResponse:
        header_name = str(self._identity.get("Header", "Authorization")).lower()
        token = next((value for name, value in request.headers if name.lower() == header_name), None)
        expression = self._identity.get("ValidationExpression")
        if not token or (expression and not re.fullmatch(str(expression), token)):
            return self.gateway_response("UNAUTHORIZED", request_id)
        method = request.method.upper()
        method_arn = (
            f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/{STAGE}/{method}{unquote(request.path)}"
        )
        assert self._authorizer is not None
        try:
            answer = self._invoke(
                self._authorizer, {"type": "TOKEN", "authorizationToken": token, "methodArn": method_arn}
            )
        except Exception as exc:
            if str(exc) == "Unauthorized":
                return self.gateway_response("UNAUTHORIZED", request_id)
            if isinstance(exc, FunctionCrashError):
                log.error("authorizer failed: %s", exc)
            else:
                log.exception("authorizer failed")
            return self.gateway_response("AUTHORIZER_FAILURE", request_id)
        context = _authorizer_context(answer)
        if context is None:
            log.error("authorizer returned no valid policy: %r", answer)
            return self.gateway_response("AUTHORIZER_CONFIGURATION_ERROR", request_id)
        if not allows(answer["policyDocument"], method_arn):
            return self.gateway_response("ACCESS_DENIED", request_id)
        return context


def _joined_header(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    """Every value of a header (``name`` lower-case) joined by commas, as a list-valued header reads."""
    found = [value for key, value in headers if key.lower() == name]
    return ", ".join(found) if found else None


def _authorizer_context(answer: Any) -> dict[str, Any] | None:
    """``requestContext.authorizer``: the answer's context (values as strings) and principalId.

    None when API Gateway would refuse the answer (AUTHORIZER_CONFIGURATION_ERROR): no
    principalId, no policy document, or a context value that is not a string, number or boolean.
    """
    if not isinstance(answer, Mapping) or not isinstance(answer.get("policyDocument"), Mapping):
        return None
    principal = answer.get("principalId")
    context = answer.get("context") or {}
    if not isinstance(principal, str) or not principal or not isinstance(context, Mapping):
        return None
    flat: dict[str, Any] = {}
    for name, value in context.items():
        if isinstance(value, bool):
            flat[str(name)] = "true" if value else "false"
        elif isinstance(value, int | float | str):
            flat[str(name)] = str(value)
        else:
            return None
    return {**flat, "principalId": principal}


def _proxy_response(result: Any, request_id: str) -> HttpResponse:
    if not isinstance(result, Mapping) or "statusCode" not in result:
        raise MalformedProxyResponseError("no statusCode")
    try:
        status = int(result["statusCode"])
    except (TypeError, ValueError):
        raise MalformedProxyResponseError(f"statusCode {result['statusCode']!r}") from None
    if not 100 <= status <= 599:
        raise MalformedProxyResponseError(f"statusCode {status}")
    single = result.get("headers") or {}
    multi = result.get("multiValueHeaders") or {}
    if not isinstance(single, Mapping) or not isinstance(multi, Mapping):
        raise MalformedProxyResponseError("headers must be objects")
    # API Gateway merges both; a header named in multiValueHeaders keeps only those values.
    in_multi = {str(name).lower() for name in multi}
    headers = [
        (str(name), _header_text(value)) for name, value in single.items() if name.lower() not in in_multi
    ]
    for name, values in multi.items():
        if not isinstance(values, list):
            raise MalformedProxyResponseError(f"multiValueHeaders[{name!r}] is not a list")
        headers.extend((str(name), _header_text(v)) for v in values)
    headers = [(name, value) for name, value in headers if name.lower() != "x-amzn-requestid"]
    headers.append(("x-amzn-RequestId", request_id))
    body = result.get("body")
    if body is None:
        raw = b""
    elif not isinstance(body, str):
        raise MalformedProxyResponseError("body must be a string")
    elif result.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedProxyResponseError("isBase64Encoded but the body is not base64") from None
    else:
        raw = body.encode()
    return HttpResponse(status, headers, raw)


def _header_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if "\r" in text or "\n" in text:
        raise MalformedProxyResponseError("a header value holds a line break")
    return text


def _iam_pattern(pattern: str) -> re.Pattern[str]:
    """IAM wildcards: ``*`` any run of characters (``/`` included), ``?`` one character."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


def _matches_any(value: str, patterns: Any, *, ignore_case: bool = False) -> bool:
    listed = patterns if isinstance(patterns, list) else [patterns]
    if ignore_case:
        value, listed = value.lower(), [str(p).lower() for p in listed if p is not None]
    return any(_iam_pattern(str(p)).fullmatch(value) for p in listed if p is not None)


def allows(policy: Mapping[str, Any], method_arn: str) -> bool:
    """IAM evaluation for execute-api:Invoke: an explicit Deny wins, else some Allow must match."""
    allowed = False
    statements = policy.get("Statement") or []
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, Mapping):
            continue
        if not _matches_any("execute-api:Invoke", statement.get("Action"), ignore_case=True):
            continue
        if not _matches_any(method_arn, statement.get("Resource")):
            continue
        if statement.get("Effect") == "Deny":
            return False
        if statement.get("Effect") == "Allow":
            allowed = True
    return allowed

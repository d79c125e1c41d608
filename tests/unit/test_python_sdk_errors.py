"""The SDK's error mapping and request building (pure), and the sync client on httpx's mock
transport: every failure becomes a KaiboError with a stable code."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from kaibo import _calls
from kaibo._http import Target, error_for_answer, error_from_body, retry_after_seconds
from kaibo.client import KaiboClient
from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboTimeoutError
from kaibo.retry import RetryPolicy

TARGET = Target("https://api.example/prod", "kb_secret")
SPEC = TARGET.request("GET", "/v1/streams")
NO_WAIT = RetryPolicy(backoff_base=0.0, jitter=lambda: 0.0)


def error_body(code: str, details: dict[str, object] | None = None) -> bytes:
    return json.dumps({"error": {"code": code, "message": "for a person", "details": details or {}}}).encode()


def test_given_the_api_error_shape_then_code_message_details_and_request_id_are_kept() -> None:
    error = error_from_body(409, error_body("preview_changed", {"previewToken": "t", "requestId": "r-1"}))
    assert (error.status, error.code, error.message) == (409, "preview_changed", "for a person")
    assert error.details == {"previewToken": "t", "requestId": "r-1"}
    assert error.request_id == "r-1"
    assert str(error) == "preview_changed: for a person (HTTP 409)"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"Bad Gateway", "Bad Gateway"),
        (b"", "HTTP 502 without an error body"),
        (b'{"message": "Internal server error"}', '{"message": "Internal server error"}'),
        (b'{"error": {"code": 7}}', '{"error": {"code": 7}}'),
        (b"\xff\xfe", "\ufffd\ufffd"),
    ],
)
def test_given_a_body_without_the_error_shape_then_the_code_is_http_status(body: bytes, message: str) -> None:
    error = error_from_body(502, body)
    assert (error.code, error.message) == ("http_502", message)


def test_given_headers_then_retry_after_and_the_gateway_request_id_are_read() -> None:
    headers = {"Retry-After": "2", "x-amzn-RequestId": "gw-9"}
    error = error_for_answer(SPEC, 429, headers, error_body("rate_limited"))
    assert (error.code, error.retry_after, error.request_id) == ("rate_limited", 2.0, "gw-9")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_given_a_redirect_then_it_is_refused_naming_where_it_points(status: int) -> None:
    error = error_for_answer(SPEC, status, {"Location": "https://elsewhere/v1/streams"}, b"")
    assert error.code == "redirect_refused"
    assert "https://elsewhere/v1/streams" in error.message
    assert "GET /v1/streams" in error.message


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        ("0.5", 0.5),
        ("-4", 0.0),
        ("Wed, 02 Dec 2026 00:00:10 GMT", 10.0),
        ("Tue, 01 Dec 2026 00:00:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_given_retry_after_then_seconds_from_delta_or_http_date(
    value: str | None, seconds: float | None
) -> None:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    assert retry_after_seconds(value, now) == seconds


def test_given_an_api_error_when_pickled_then_every_field_survives() -> None:
    error = KaiboAPIError(429, "stream_busy", "busy", {"a": 1}, retry_after=1.5, request_id="r")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.code, copy.details, copy.retry_after, copy.request_id) == (
        429,
        "stream_busy",
        {"a": 1},
        1.5,
        "r",
    )


def test_given_a_request_then_it_carries_the_key_json_and_quoted_segments() -> None:
    spec = TARGET.request("POST", "/v1/recall", body={"question": "Grüße"}, query={"limit": 5})
    assert spec.url == "https://api.example/prod/v1/recall?limit=5"
    assert spec.headers["Authorization"] == "Bearer kb_secret"
    assert spec.headers["Content-Type"] == "application/json"
    assert json.loads(spec.content or b"") == {"question": "Grüße"}
    assert "kb_secret" not in repr(TARGET)
    assert _calls.receipt("rcpt_1/..").path == "/v1/receipts/rcpt_1%2F.."


def test_given_nan_in_a_body_then_value_error_before_sending() -> None:
    with pytest.raises(ValueError, match="JSON"):
        TARGET.request("POST", "/v1/remember", body={"x": float("nan")})


# -- the sync client on a mock transport ---------------------------------------------------------------


def mocked(handler: Callable[[httpx.Request], httpx.Response], max_retries: int | None = None) -> KaiboClient:
    transport = httpx.MockTransport(handler)
    return KaiboClient(
        "https://api.example/prod", "kb_key", max_retries=max_retries, retry=NO_WAIT, transport=transport
    )


def test_given_a_refused_connection_on_a_read_then_retried_then_a_connection_error() -> None:
    seen: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        raise httpx.ConnectError("refused", request=request)

    with mocked(refuse, max_retries=2) as client, pytest.raises(KaiboConnectionError) as raised:
        client.memory("mem_1")
    assert raised.value.code == "network_error"
    assert seen == ["GET", "GET", "GET"]


def test_given_a_read_timeout_then_a_timeout_error_without_retry() -> None:
    seen: list[str] = []

    def slow(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        raise httpx.ReadTimeout("slow", request=request)

    with mocked(slow) as client, pytest.raises(KaiboTimeoutError) as raised:
        client.recall("q")
    assert raised.value.code == "timeout"
    assert seen == ["POST"]


def test_given_a_503_on_a_real_forget_then_it_is_not_sent_again() -> None:
    seen: list[bytes] = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(503, content=error_body("internal_error"))

    with mocked(unavailable) as client, pytest.raises(KaiboAPIError) as raised:
        client.forget(stream="chat", reason="asked", preview_token="ab" * 32)
    assert (raised.value.status, len(seen)) == (503, 1)


def test_given_a_transaction_race_429_then_a_create_or_an_unkeyed_forget_is_sent_once() -> None:
    # The race may follow a first attempt that committed (docs/api.md): a second webhook, or a
    # forget answering an empty set instead of its receipt. A keyed forget replays: sent again.
    seen: list[str] = []

    def racing(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        code = "ledger_busy" if request.url.path.endswith("/forget") else "transaction_busy"
        return httpx.Response(429, content=error_body(code), headers={"Retry-After": "0"})

    with mocked(racing, max_retries=2) as client:
        with pytest.raises(KaiboAPIError, match="for a person") as created:
            client.create_webhook("https://hooks.example/k", ["memory.forgotten"])
        with pytest.raises(KaiboAPIError) as forgot:
            client.forget(query="locker", reason="asked")
        assert (created.value.code, forgot.value.code, len(seen)) == ("transaction_busy", "ledger_busy", 2)
        with pytest.raises(KaiboAPIError):
            client.forget(query="locker", reason="asked", idempotency_key="erase-1")
    assert len(seen) == 2 + 3


def test_given_an_answer_that_is_not_json_then_invalid_response() -> None:
    with (
        mocked(lambda _: httpx.Response(200, content=b"<html>")) as client,
        pytest.raises(KaiboAPIError) as raised,
    ):
        client.job("job_1")
    assert raised.value.code == "invalid_response"


def test_given_a_closed_client_then_a_call_fails_instead_of_reconnecting() -> None:
    client = mocked(lambda _: httpx.Response(200, json={}))
    client.close()
    with pytest.raises(RuntimeError):
        client.job("job_1")


def test_given_a_timeout_that_is_not_positive_then_value_error() -> None:
    with pytest.raises(ValueError, match="timeout"):
        KaiboClient("https://api.example", "k", timeout=0)

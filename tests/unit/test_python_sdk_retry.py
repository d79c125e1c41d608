"""The SDK's retry policy: what is retried, after how long, and how often (pure, no I/O)."""

from __future__ import annotations

import pytest

from kaibo._http import is_idempotent
from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboError, KaiboTimeoutError
from kaibo.retry import Attempts, RetryPolicy

#: The jitter at its lowest and highest: the delay spans [ceiling / 2, ceiling).
LOW = RetryPolicy(jitter=lambda: 0.0)
HIGH = RetryPolicy(jitter=lambda: 0.999)


def api_error(status: int, retry_after: float | None = None) -> KaiboAPIError:
    return KaiboAPIError(status, f"http_{status}", "m", retry_after=retry_after)


@pytest.mark.parametrize("idempotent", [True, False])
def test_given_a_429_with_retry_after_then_it_is_waited_for_whether_or_not_idempotent(
    idempotent: bool,
) -> None:
    assert LOW.delay(0, api_error(429, retry_after=2.5), idempotent=idempotent) == 2.5


@pytest.mark.parametrize("code", ["ledger_busy", "project_busy", "table_busy", "transaction_busy"])
def test_given_a_transaction_race_429_then_only_an_idempotent_call_is_retried(code: str) -> None:
    # The race may have outlasted a first attempt that committed (docs/api.md): sending a webhook
    # or project creation, or a forget without a key, again could do it twice.
    busy = KaiboAPIError(429, code, "m", retry_after=1)
    assert LOW.delay(0, busy, idempotent=True) == 1
    assert LOW.delay(0, busy, idempotent=False) is None


@pytest.mark.parametrize("code", ["kms_busy", "stream_busy", "usage_plan_busy"])
def test_given_a_429_answered_before_anything_was_written_then_every_call_is_retried(code: str) -> None:
    # KMS refuses a webhook's secret or a keyed forget's salt before the route writes anything:
    # a webhook creation sent again is still made once.
    busy = KaiboAPIError(429, code, "m", retry_after=1)
    assert LOW.delay(0, busy, idempotent=False) == 1
    assert LOW.delay(0, busy, idempotent=True) == 1


def test_given_a_retry_after_beyond_the_cap_then_the_error_is_final_at_once() -> None:
    # A used-up quota (the gateway's Retry-After: 3600): waiting the cap and asking again three
    # times would block ~90 s for the same answer; the caller reads retry_after instead.
    assert LOW.delay(0, api_error(429, retry_after=3600), idempotent=False) is None
    assert RetryPolicy(max_retry_after=5).delay(0, api_error(429, 6), idempotent=False) is None
    assert RetryPolicy(max_retry_after=5).delay(0, api_error(429, 5), idempotent=False) == 5


def test_given_a_429_without_retry_after_then_the_backoff_applies() -> None:
    assert LOW.delay(2, api_error(429), idempotent=False) == pytest.approx(0.5)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_given_a_5xx_then_only_an_idempotent_call_is_retried(status: int) -> None:
    assert LOW.delay(0, api_error(status), idempotent=True) == pytest.approx(0.125)
    assert LOW.delay(0, api_error(status), idempotent=False) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 501, 505])
def test_given_another_error_status_then_it_is_never_retried(status: int) -> None:
    assert LOW.delay(0, api_error(status), idempotent=True) is None


def test_given_a_connection_failure_then_only_an_idempotent_call_is_retried() -> None:
    assert LOW.delay(0, KaiboConnectionError("refused"), idempotent=True) is not None
    assert LOW.delay(0, KaiboConnectionError("refused"), idempotent=False) is None


def test_given_a_timeout_then_it_is_not_retried_even_when_idempotent() -> None:
    assert LOW.delay(0, KaiboTimeoutError("slow"), idempotent=True) is None


def test_given_attempts_then_the_backoff_doubles_up_to_its_cap_within_its_jitter() -> None:
    lows = [LOW.backoff(attempt) for attempt in range(8)]
    highs = [HIGH.backoff(attempt) for attempt in range(8)]
    ceilings = [min(8.0, 0.25 * 2**attempt) for attempt in range(8)]
    assert lows == pytest.approx([ceiling / 2 for ceiling in ceilings])
    assert all(c / 2 < high < c for high, c in zip(highs, ceilings, strict=True))
    assert ceilings[-1] == 8.0


def test_given_max_retries_then_the_attempt_past_it_gets_no_delay() -> None:
    policy = RetryPolicy(max_retries=2, jitter=lambda: 0.0)
    assert policy.delay(1, api_error(503), idempotent=True) is not None
    assert policy.delay(2, api_error(503), idempotent=True) is None
    assert RetryPolicy(max_retries=0).delay(0, api_error(429, 0), idempotent=True) is None


def test_given_attempts_then_each_wait_advances_and_the_final_error_is_raised() -> None:
    attempts = Attempts(RetryPolicy(max_retries=2, jitter=lambda: 0.0), idempotent=True)
    busy = api_error(429, retry_after=1)
    assert [attempts.wait_after(busy), attempts.wait_after(busy)] == [1, 1]
    with pytest.raises(KaiboAPIError) as raised:
        attempts.wait_after(busy)
    assert raised.value is busy


def test_given_a_final_error_then_attempts_raise_it_at_once() -> None:
    refused: KaiboError = api_error(422)
    with pytest.raises(KaiboAPIError):
        Attempts(RetryPolicy(), idempotent=True).wait_after(refused)


@pytest.mark.parametrize("bad", [{"max_retries": -1}, {"backoff_base": -0.1}, {"max_retry_after": -1}])
def test_given_a_negative_setting_then_the_policy_refuses_it(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        RetryPolicy(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("GET", "/v1/streams", None, True),
        ("GET", "/v1/memories/mem_1", None, True),
        ("POST", "/v1/recall", {"question": "q"}, True),
        ("POST", "/v1/explain", {"memoryId": "mem_1"}, True),
        ("POST", "/v1/remember", {"stream": "s", "events": []}, True),
        ("POST", "/v1/forget", {"stream": "s", "reason": "r", "dryRun": True}, True),
        ("POST", "/v1/forget", {"stream": "s", "reason": "r"}, False),
        ("POST", "/v1/forget", {"stream": "s", "reason": "r", "previewToken": "ab" * 32}, False),
        ("POST", "/v1/forget", {"stream": "s", "reason": "r", "idempotencyKey": "erase-1"}, True),
        ("POST", "/v1/admin/projects", {"name": "p"}, False),
        ("POST", "/v1/admin/projects/prj_1/keys", {"scopes": ["read"]}, False),
        ("DELETE", "/v1/admin/keys/key_1", None, False),
    ],
)
def test_given_a_route_then_its_idempotency_is_as_documented(
    method: str, path: str, body: object, expected: bool
) -> None:
    assert is_idempotent(method, path, body) is expected

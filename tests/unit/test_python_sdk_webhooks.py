"""``kaibo.verify_webhook``: a subscriber's check of a delivery, against what the service signs."""

from __future__ import annotations

import json
import time

import pytest

from kaibo import verify_webhook
from kaibo_core.core import webhook_signing

SECRET = webhook_signing.new_secret()
BODY = json.dumps(
    {"id": "msg_1", "type": "webhook.test", "data": {"webhookId": "wh_1"}}, separators=(",", ":")
)


def delivery(secrets: list[str], at: int, body: str = BODY) -> dict[str, str]:
    return webhook_signing.headers(secrets, "msg_1", at, body.encode())


def test_given_a_delivery_signed_now_then_it_verifies_with_the_clock_and_as_text_or_bytes() -> None:
    headers = delivery([SECRET], int(time.time()))
    assert verify_webhook(SECRET, headers, BODY)
    assert verify_webhook(SECRET, {name.upper(): value for name, value in headers.items()}, BODY.encode())


def test_given_a_rotation_then_either_secret_verifies_and_a_stranger_s_does_not() -> None:
    newer = webhook_signing.new_secret()
    headers = delivery([SECRET, newer], 1_767_225_600)
    assert verify_webhook(SECRET, headers, BODY, now=1_767_225_600)
    assert verify_webhook(newer, headers, BODY, now=1_767_225_600)
    assert not verify_webhook(webhook_signing.new_secret(), headers, BODY, now=1_767_225_600)


@pytest.mark.parametrize(
    ("body", "now"),
    [
        (BODY.replace("wh_1", "wh_2"), 1_767_225_600),  # another body
        (json.dumps(json.loads(BODY)), 1_767_225_600),  # the same JSON re-serialized: not the raw body
        (BODY, 1_767_225_600 + 301),  # too late
        (BODY, 1_767_225_600 - 301),  # from the future
    ],
)
def test_given_a_changed_body_or_a_far_timestamp_then_it_does_not_verify(body: str, now: int) -> None:
    assert not verify_webhook(SECRET, delivery([SECRET], 1_767_225_600), body, now=now)


def test_given_a_malformed_secret_then_a_value_error() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        verify_webhook(SECRET.removeprefix("whsec_"), delivery([SECRET], 1), BODY, now=1)

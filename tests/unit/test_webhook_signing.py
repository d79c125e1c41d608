"""Webhook signatures (kaibo_core.core.webhook_signing): the Standard Webhooks scheme.

The known answer is the scheme's own test vector (standard-webhooks' reference libraries use it),
so a subscriber's off-the-shelf verifier accepts what Kaibo signs.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.core import webhook_signing
from kaibo_core.core.webhook_signing import headers, new_secret, sign, signature_header, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
EXPECTED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_known_answer() -> None:
    assert sign(SECRET, MSG_ID, TIMESTAMP, BODY) == EXPECTED


def test_headers_carry_id_timestamp_signature_and_content_type() -> None:
    assert headers([SECRET], MSG_ID, TIMESTAMP, BODY) == {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": EXPECTED,
        "content-type": "application/json",
    }


def test_verify_accepts_the_signed_message() -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    assert verify(SECRET, sent, BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    ("header", "value", "body"),
    [
        pytest.param(None, None, b'{"test": 2432232315}', id="body"),
        pytest.param(None, None, BODY + b" ", id="body-whitespace"),
        pytest.param("webhook-timestamp", str(TIMESTAMP + 1), BODY, id="timestamp"),
        pytest.param("webhook-id", MSG_ID + "x", BODY, id="id"),
        pytest.param("webhook-signature", EXPECTED.replace("g0h", "g0i"), BODY, id="signature"),
        pytest.param("webhook-signature", "v2," + EXPECTED[3:], BODY, id="other-version"),
        pytest.param("webhook-signature", EXPECTED[3:], BODY, id="no-version"),
        pytest.param("webhook-signature", "v1,not base64!", BODY, id="garbage"),
        pytest.param("webhook-signature", "v1,ünïcode", BODY, id="non-ascii"),
        pytest.param("webhook-signature", "", BODY, id="empty-signature"),
        pytest.param("webhook-timestamp", "16142653.30", BODY, id="timestamp-not-integer"),
        pytest.param("webhook-timestamp", "-1614265330", BODY, id="timestamp-negative"),
        pytest.param("webhook-id", "", BODY, id="empty-id"),
    ],
)
def test_any_change_fails(header: str | None, value: str | None, body: bytes) -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    if header is not None:
        assert value is not None
        sent[header] = value
    assert not verify(SECRET, sent, body, now=TIMESTAMP)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_fails(missing: str) -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    del sent[missing]
    assert not verify(SECRET, sent, BODY, now=TIMESTAMP)


def test_another_secret_fails() -> None:
    sent = headers([new_secret()], MSG_ID, TIMESTAMP, BODY)
    assert not verify(SECRET, sent, BODY, now=TIMESTAMP)


def test_both_secrets_verify_during_a_rotation() -> None:
    old, new = SECRET, new_secret()
    sent = headers([old, new], MSG_ID, TIMESTAMP, BODY)
    assert sent["webhook-signature"] == f"{EXPECTED} {sign(new, MSG_ID, TIMESTAMP, BODY)}"
    assert verify(old, sent, BODY, now=TIMESTAMP)
    assert verify(new, sent, BODY, now=TIMESTAMP)
    assert not verify(new_secret(), sent, BODY, now=TIMESTAMP)


def test_signature_header_needs_a_sequence_of_secrets() -> None:
    with pytest.raises(ValueError, match="at least one"):
        signature_header([], MSG_ID, TIMESTAMP, BODY)
    with pytest.raises(ValueError, match="at least one"):
        signature_header(SECRET, MSG_ID, TIMESTAMP, BODY)  # a str is a sequence of characters


@pytest.mark.parametrize("skew", [-300, 0, 300])
def test_timestamps_within_the_tolerance_verify(skew: int) -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    assert verify(SECRET, sent, BODY, now=TIMESTAMP + skew)


@pytest.mark.parametrize("skew", [-301, 301, 86_400])
def test_timestamps_outside_the_tolerance_are_refused(skew: int) -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, BODY)
    assert not verify(SECRET, sent, BODY, now=TIMESTAMP + skew)
    assert verify(SECRET, sent, BODY, now=TIMESTAMP + skew, tolerance_seconds=abs(skew))


def test_header_names_match_case_insensitively() -> None:
    sent = {name.title(): value for name, value in headers([SECRET], MSG_ID, TIMESTAMP, BODY).items()}
    assert "Webhook-Signature" in sent
    assert verify(SECRET, sent, BODY, now=TIMESTAMP)


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id="no-prefix"),
        pytest.param("whsec_", id="empty-key"),
        pytest.param("whsec_not base64!", id="not-base64"),
        pytest.param("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", id="bad-padding"),
        pytest.param("WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id="prefix-case"),
    ],
)
def test_a_malformed_secret_raises(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        sign(secret, MSG_ID, TIMESTAMP, BODY)
    with pytest.raises(ValueError, match="secret"):
        verify(secret, headers([SECRET], MSG_ID, TIMESTAMP, BODY), BODY, now=TIMESTAMP)


@pytest.mark.parametrize("msg_id", ["", "msg with space", "msg\r\nX-Injected: 1", "msg_ü", "m" * 257])
def test_a_message_id_that_cannot_be_a_header_raises(msg_id: str) -> None:
    with pytest.raises(ValueError, match="message id"):
        sign(SECRET, msg_id, TIMESTAMP, BODY)


@pytest.mark.parametrize("timestamp", [-1, True])
def test_a_bad_timestamp_raises(timestamp: int) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        sign(SECRET, MSG_ID, timestamp, BODY)


def test_new_secret_is_prefixed_base64_of_32_random_bytes() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert new_secret() != secret
    assert sign(secret, MSG_ID, TIMESTAMP, BODY).startswith("v1,")


@given(body=st.binary(max_size=512), position=st.integers(min_value=0), flip=st.integers(1, 255))
def test_round_trip_and_any_flipped_byte(body: bytes, position: int, flip: int) -> None:
    sent = headers([SECRET], MSG_ID, TIMESTAMP, body)
    assert verify(SECRET, sent, body, now=TIMESTAMP)
    if body:
        index = position % len(body)
        tampered = body[:index] + bytes([body[index] ^ flip]) + body[index + 1 :]
        assert not verify(SECRET, sent, tampered, now=TIMESTAMP)


def test_default_tolerance_is_five_minutes() -> None:
    assert webhook_signing.DEFAULT_TOLERANCE_SECONDS == 300

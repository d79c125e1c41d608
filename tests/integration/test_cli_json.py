"""``--json`` on every command that prints data: stdout parses as JSON (one document, or one per
line for the listings) and holds nothing else. Runs the real CLI against the stub of
tests/integration/test_cli_forget.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kaibo_core.core.api_keys import is_admin_key
from tests.integration.test_cli_forget import DIARY, provisional, receipt, stub
from tests.integration.test_cli_with_stub_server import ADMIN_KEY, PROJECT, Stub, kaibo

__all__ = ["stub"]  # the fixture, used by name


def as_json(stub: Stub, *args: str, **options: Any) -> Any:
    result = kaibo(stub, *args, "--json", **options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def as_json_lines(stub: Stub, *args: str) -> list[Any]:
    result = kaibo(stub, *args, "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_given_json_when_verifying_streams_then_a_report_per_stream(stub: Stub) -> None:
    report = as_json(stub, "verify")
    assert report["ok"] is True
    assert report["complete"] is True
    (diary,) = report["streams"]
    assert (diary["stream"], diary["ok"], diary["eventsChecked"], diary["problem"]) == (DIARY, True, 4, None)
    assert diary["head"] == f"4:{stub.event(DIARY, 4)['hash']}"


def test_given_json_when_a_stream_fails_verification_then_exit_1_and_the_problem(stub: Stub) -> None:
    stub.event(DIARY, 1)["kind"] = "tool_call"
    result = kaibo(stub, "verify", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["streams"][0]["problem"]["code"] == "hash_mismatch"


def test_given_json_when_verifying_the_ledger_and_a_receipt_then_reports(stub: Stub) -> None:
    ledger = as_json(stub, "verify", "--ledger", project_id=PROJECT)
    assert (ledger["ok"], ledger["entriesChecked"]) == (True, 4)
    checked = as_json(stub, "verify", "--receipt", receipt(3), project_id=PROJECT)
    assert (checked["ok"], checked["state"], checked["failures"]) == (True, "purged", [])
    assert checked["memoryStatuses"] == {"purged": 2}


def test_given_json_when_reading_a_memory_a_receipt_and_listings_then_the_served_json(stub: Stub) -> None:
    assert as_json(stub, "memory", provisional(1)) == stub.memories[provisional(1)]
    assert as_json(stub, "receipt", receipt(2)) == stub.receipts[receipt(2)]
    assert as_json_lines(stub, "ledger") == stub.ledger
    assert as_json_lines(stub, "events", "--stream", DIARY) == stub.events[DIARY]
    assert as_json_lines(stub, "streams") == [
        {"stream": DIARY, "seq": 4, "hash": stub.event(DIARY, 4)["hash"]}
    ]


def test_given_json_when_managing_keys_then_the_answers(stub: Stub) -> None:
    created = as_json(stub, "keys", "create", "--name", "acme", admin_key=ADMIN_KEY)
    assert created["apiKey"] == "kb_NEW"
    assert as_json(stub, "keys", "revoke", "00000000000000aa", admin_key=ADMIN_KEY) == {
        "revoked": "00000000000000aa"
    }
    made = as_json(stub, "admin-key")
    assert is_admin_key(made["adminKey"], made["adminKeyHash"])


@pytest.mark.parametrize("position", ["before", "after"])
def test_given_connection_options_before_or_after_the_command_then_they_are_used(
    stub: Stub, position: str
) -> None:
    options = ["--endpoint", stub.url, "--api-key", "kb_0123456789abcdef_" + "s" * 43]
    args = [*options, "streams"] if position == "before" else ["streams", *options]
    result = kaibo(stub, *args, api_key=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == DIARY

"""The client stays light: importing it never loads an AWS SDK, pydantic, Powertools, or the
server's model stack (numpy, tokenizers, wordllama) or the MCP SDK (only `kaibo mcp` needs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from kaibo.client import KaiboAPIError, KaiboClient

HEAVY = ("boto3", "botocore", "pydantic", "aws_lambda_powertools", "numpy", "tokenizers", "wordllama", "mcp")

PROBE = f"""
import json, sys
import kaibo, kaibo.async_client, kaibo.cli, kaibo.client, kaibo.ledger_verify, kaibo.verify, kaibo.webhooks
heavy = {HEAVY!r}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def test_given_a_fresh_interpreter_when_importing_the_client_then_no_heavy_module_is_loaded() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_given_the_probe_when_a_heavy_module_is_imported_then_it_is_detected() -> None:
    # The probe itself must be able to fail: import one heavy module first.
    result = subprocess.run(
        [sys.executable, "-c", "import numpy\n" + PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "numpy" in json.loads(result.stdout)


# -- the SDK's forget and ledger, without a server ---------------------------------------------------


class _Pages(KaiboClient):
    """A client whose calls answer from a script instead of the network, recording each call."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        super().__init__("http://127.0.0.1:9", "kb_key")
        self.answers = list(answers)
        self.calls: list[tuple[str, str, Any, Any]] = []

    def request(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        self.calls.append((method, path, body, query))
        return self.answers.pop(0)


@pytest.mark.parametrize(
    ("memory_id", "query", "stream", "subject"),
    [
        (None, None, None, None),
        ("mem_1", "locker", None, None),
        ("mem_1", "q", "s", None),
        (None, "q", "s", None),
        (None, "q", None, "alice"),
        ("mem_1", None, None, "alice"),
    ],
)
def test_given_not_exactly_one_selector_when_forgetting_then_value_error_before_any_request(
    memory_id: str | None, query: str | None, stream: str | None, subject: str | None
) -> None:
    client = _Pages()
    with pytest.raises(ValueError, match="exactly one of memory_id, query, stream, subject"):
        client.forget(memory_id=memory_id, query=query, stream=stream, subject=subject, reason="r")
    assert client.calls == []


def test_given_options_when_forgetting_then_the_body_carries_them_in_wire_names() -> None:
    client = _Pages({"dryRun": False, "memories": []})
    client.forget(stream="chat", reason="r", dry_run=True, preview_token="ab" * 32, max_memories=200)
    client_default = _Pages({"dryRun": False, "memories": []})
    client_default.forget(query="locker code", reason="r")
    assert client.calls == [
        (
            "POST",
            "/v1/forget",
            {"stream": "chat", "reason": "r", "dryRun": True, "previewToken": "ab" * 32, "maxMemories": 200},
            None,
        )
    ]
    assert client_default.calls[0][2] == {"query": "locker code", "reason": "r"}
    by_subject = _Pages({"dryRun": True, "memories": []})
    by_subject.forget(subject="Release target", reason="r", dry_run=True)
    assert by_subject.calls[0][2] == {"subject": "Release target", "reason": "r", "dryRun": True}


def test_given_pages_when_reading_the_ledger_then_next_from_seq_is_followed() -> None:
    client = _Pages(
        {"entries": [{"ledgerSeq": 1}, {"ledgerSeq": 2}], "nextFromSeq": 3}, {"entries": [{"ledgerSeq": 3}]}
    )
    assert [e["ledgerSeq"] for e in client.ledger()] == [1, 2, 3]
    assert [call[3] for call in client.calls] == [{"fromSeq": 1}, {"fromSeq": 3}]


@pytest.mark.parametrize("next_from", [1, 0, "3", 2.5])
def test_given_a_cursor_that_does_not_advance_when_reading_the_ledger_then_invalid_response(
    next_from: Any,
) -> None:
    client = _Pages({"entries": [], "nextFromSeq": next_from}, {"entries": []})
    with pytest.raises(KaiboAPIError, match="nextFromSeq does not advance"):
        list(client.ledger(from_seq=1))


def test_given_a_receipt_id_when_reading_it_then_the_id_is_quoted_into_the_path() -> None:
    client = _Pages({"id": "rcpt_1", "state": "purged"})
    assert client.receipt("rcpt_1/..")["state"] == "purged"
    assert client.calls[0][:2] == ("GET", "/v1/receipts/rcpt_1%2F..")

"""A scheduled function (or the authorizer) that fails logs one structured line (error class,
where; never the error's message, which may quote stored text) and raises an exception whose
message holds no text either: Lambda prints an uncaught exception's message in its log (#20 item 5)."""

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kaibo_core.runtime.observability import FunctionFailedError
from kaibo_core.runtime.settings import get_settings
from tests.integration.api import FakeLambdaContext

SECRET_TEXT = "the locker code is 4471 zebra"


class Exploding:
    """Any service method raises an SDK error whose message quotes stored text."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_args: Any, **_kwargs: Any) -> Any:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": f"bad item {SECRET_TEXT}"}}, name
            )

        return fail


#: A schedule's event; the authorizer reads only ``authorizationToken`` (here: a key holding text).
SCHEDULE_EVENT = {
    "source": "aws.events",
    "detail-type": "Scheduled Event",
    "authorizationToken": "Bearer kb_0123456789abcdef_" + SECRET_TEXT.replace(" ", "-"),
}


@pytest.mark.parametrize(
    ("function", "service", "what"),
    [
        ("purge", "purger", "purge failed"),
        ("sweeper", "sweeper", "sweep failed"),
        ("webhook_dispatch", "dispatcher", "webhook relay failed"),
        ("authorizer", "service", "authorization failed"),
    ],
)
def test_given_a_failing_scheduled_function_then_one_line_without_text_and_a_sanitized_error(
    function: str,
    service: str,
    what: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("KAIBO_EVENTS_TABLE", "KAIBO_IDEMPOTENCY_TABLE", "KAIBO_PROJECTS_TABLE"):
        monkeypatch.setenv(name, "kaibo-test")  # the sweeper reads its settings before the store
    get_settings.cache_clear()
    handler = importlib.import_module(f"functions.{function}.app").lambda_handler
    with caplog.at_level(logging.INFO), pytest.raises(FunctionFailedError) as raised:
        handler(SCHEDULE_EVENT, FakeLambdaContext(), **{service: Exploding()})
    assert SECRET_TEXT not in str(raised.value)
    assert "ClientError" in str(raised.value)
    (line,) = [record for record in caplog.records if record.getMessage() == what]
    assert line.__dict__["error"] == "ClientError"
    assert line.__dict__["where"]
    assert SECRET_TEXT not in caplog.text
    assert SECRET_TEXT not in json.dumps([r.__dict__ for r in caplog.records], default=str)
    get_settings.cache_clear()

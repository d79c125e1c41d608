"""The local stack's containers keep Lambda's time limits (kaibo_local.containers).

One container, so that invocations queue behind each other as they would for a busy pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaibo_local.containers import ContainerPool, FunctionError
from kaibo_local.gateway import IntegrationTimeoutError, LambdaContext
from kaibo_local.template import FunctionSpec, function_specs


def function(timeout: int) -> dict[str, Any]:
    return {
        "Type": "AWS::Serverless::Function",
        "Properties": {"CodeUri": "tests/fixtures/", "Handler": "timing_handler.handler", "Timeout": timeout},
    }


TEMPLATE: dict[str, Any] = {"Resources": {"OneSecond": function(1), "TenSeconds": function(10)}}
SPECS = {spec.logical_id: spec for spec in function_specs(TEMPLATE)}


@pytest.fixture(scope="module")
def pool() -> Iterator[ContainerPool]:
    containers = ContainerPool(list(SPECS.values()), containers=1)
    containers.wait_warm()
    yield containers
    containers.stop()


def invoke(pool: ContainerPool, spec: FunctionSpec, event: dict[str, Any], **loader: Any) -> Any:
    return pool.loader(spec, **loader)(event, LambdaContext(spec.logical_id))


def test_a_handler_still_running_at_its_timeout_is_stopped_as_lambda_stops_it(pool: ContainerPool) -> None:
    started = time.monotonic()
    with pytest.raises(FunctionError, match=r"^Task timed out after 1\.00 seconds$"):
        invoke(pool, SPECS["OneSecond"], {"sleep": 60})  # its `except Exception` cannot swallow it

    assert time.monotonic() - started < 30
    assert invoke(pool, SPECS["OneSecond"], {})["swallowed"] is False  # the container serves on


def test_the_context_counts_down_from_the_functions_timeout(pool: ContainerPool) -> None:
    assert 9_000 < invoke(pool, SPECS["TenSeconds"], {})["remaining"] <= 10_000
    assert 0 < invoke(pool, SPECS["OneSecond"], {})["remaining"] <= 1_000


def test_time_spent_waiting_for_a_free_container_does_not_count(pool: ContainerPool, tmp_path: Path) -> None:
    """The one container is busy for 2 s; a function with a 1 s timeout queued behind it still
    gets its whole second once it starts."""
    started = tmp_path / "started"
    busy = threading.Thread(
        target=invoke, args=(pool, SPECS["TenSeconds"], {"sleep": 2, "started": str(started)})
    )
    busy.start()
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the busy invocation never started"
        time.sleep(0.01)
    queued_at = time.monotonic()

    answer = invoke(pool, SPECS["OneSecond"], {})
    waited = time.monotonic() - queued_at
    busy.join()

    assert waited > 1.0  # it did wait for the busy one
    assert answer["remaining"] > 500


def test_a_caller_that_waits_less_than_the_function_runs_gets_an_integration_timeout(
    pool: ContainerPool,
) -> None:
    """The HTTP front waits 29 s, as API Gateway does; the function itself runs on."""
    with pytest.raises(IntegrationTimeoutError):
        invoke(pool, SPECS["TenSeconds"], {"sleep": 1}, wait_seconds=0.2)

    assert invoke(pool, SPECS["TenSeconds"], {})["swallowed"] is False  # queued behind it, then served

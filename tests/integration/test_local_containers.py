"""The local stack's containers keep Lambda's time limits and replace a worker that dies
(kaibo_local.containers).

The module's pool has one container, so that invocations queue behind each other as they would
for a busy pool; the tests that kill workers or stop a pool start their own.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kaibo_local.containers import ContainerPool, ContainerPoolStoppedError, FunctionError
from kaibo_local.gateway import FunctionCrashError, IntegrationTimeoutError, LambdaContext
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
    assert invoke(pool, SPECS["OneSecond"], {})["swallowed"] is False  # the pool serves on


def test_a_worker_whose_handler_timed_out_is_replaced_as_lambda_replaces_it(pool: ContainerPool) -> None:
    invoke(pool, SPECS["OneSecond"], {})
    (before,) = pool.worker_pids()
    with pytest.raises(FunctionError, match=r"^Task timed out"):
        invoke(pool, SPECS["OneSecond"], {"sleep": 60})

    assert invoke(pool, SPECS["OneSecond"], {})["swallowed"] is False  # served by its replacement
    assert pool.worker_pids() != [before]


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


def wait_for(condition: Callable[[], bool], seconds: float = 60, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.01)  # polling, bounded by the deadline


def running(pid: int) -> bool:
    """Whether the process exists (a zombie, dead but not reaped, counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def dead(pid: int) -> bool:
    """Gone, or a zombie (it died; nobody reaped it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return not running(pid)
    return stat[stat.rindex(")") + 2] in "ZX"


class Call(threading.Thread):
    """One invocation in a thread of its own: its answer or error, and when it ended."""

    def __init__(self, pool: ContainerPool, spec: FunctionSpec, event: dict[str, Any], **loader: Any) -> None:
        super().__init__(daemon=True)
        self._call = (pool, spec, event, loader)
        self.answer: Any = None
        self.error: BaseException | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        pool, spec, event, loader = self._call
        try:
            self.answer = invoke(pool, spec, event, **loader)
        except BaseException as error:
            self.error = error
        self.ended_at = time.monotonic()


@pytest.fixture
def two_containers() -> Iterator[ContainerPool]:
    containers = ContainerPool(list(SPECS.values()), containers=2)
    containers.wait_warm()
    yield containers
    containers.stop()


def test_a_worker_killed_during_an_invocation_fails_only_that_one_and_a_new_worker_serves_on(
    two_containers: ContainerPool, tmp_path: Path
) -> None:
    pool = two_containers
    calls = [
        Call(pool, SPECS["TenSeconds"], {"sleep": 4, "started": str(tmp_path / f"started-{i}")})
        for i in range(2)
    ]
    for call in calls:
        call.start()
    wait_for(lambda: all((tmp_path / f"started-{i}").exists() for i in range(2)), what="both invocations")
    victim = pool.worker_pids()[0]  # both workers are busy, one invocation each

    os.kill(victim, signal.SIGKILL)
    for call in calls:
        call.join(timeout=60)

    crashed = [call for call in calls if call.error is not None]
    served = [call for call in calls if call.error is None]
    assert len(crashed) == 1, [call.error for call in calls]
    assert isinstance(crashed[0].error, FunctionCrashError)
    assert "killed by SIGKILL" in str(crashed[0].error)
    assert served[0].answer["swallowed"] is False  # the other worker never noticed
    assert crashed[0].ended_at < served[0].ended_at  # answered at the death, not at the end
    wait_for(lambda: len(pool.worker_pids()) == 2 and victim not in pool.worker_pids(), what="a new worker")
    assert not running(victim)
    for _ in range(4):
        assert invoke(pool, SPECS["OneSecond"], {}, wait_seconds=60)["swallowed"] is False


def test_a_worker_that_dies_idle_is_replaced_and_the_next_invocation_does_not_fail(
    two_containers: ContainerPool,
) -> None:
    pool = two_containers
    victims = pool.worker_pids()
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all(dead(pid) for pid in victims), what="the workers' death")

    for _ in range(4):  # at once: the invocations wait for the new workers, none is failed
        assert invoke(pool, SPECS["OneSecond"], {}, wait_seconds=60)["swallowed"] is False
    assert set(pool.worker_pids()).isdisjoint(victims)


def test_stop_ends_busy_and_idle_workers_within_seconds_and_fails_what_they_ran(tmp_path: Path) -> None:
    pool = ContainerPool(list(SPECS.values()), containers=2)
    pool.wait_warm()
    started = tmp_path / "started"
    busy = Call(pool, SPECS["TenSeconds"], {"sleep": 60, "started": str(started)})
    busy.start()
    wait_for(started.exists, what="the busy invocation")
    workers = pool.worker_pids()

    began = time.monotonic()
    pool.stop()
    took = time.monotonic() - began
    busy.join(timeout=30)

    assert took < 5, f"stop took {took:.1f} s"
    assert isinstance(busy.error, ContainerPoolStoppedError)
    assert not any(running(pid) for pid in workers)  # ended and reaped: not even zombies
    with pytest.raises(ContainerPoolStoppedError):
        invoke(pool, SPECS["OneSecond"], {})
    pool.stop()  # again: harmless


def test_stop_after_a_worker_died_idle_ends_at_once(tmp_path: Path) -> None:
    """The pool this replaced shut down by joining workers that ignore SIGTERM: a dead one hung it."""
    pool = ContainerPool(list(SPECS.values()), containers=2)
    pool.wait_warm()
    workers = pool.worker_pids()
    os.kill(workers[0], signal.SIGKILL)

    began = time.monotonic()
    pool.stop()

    assert time.monotonic() - began < 5
    wait_for(lambda: not any(running(pid) for pid in pool.worker_pids() + workers), seconds=5)

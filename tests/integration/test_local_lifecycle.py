"""The local stack as a process tree (``python -m kaibo_local``): a worker that dies, a stop in any
state, 64 clients at once, a port in use (kaibo_local.stack, kaibo_local.containers).

Each stack runs in a subprocess in a session (process group) of its own, with two containers and
template.yaml plus ``GatedFunction`` (``POST /test/gated``, no authorizer; its handler is
``gated_handler`` below, so the stack's workers import this module): it tells the test which
worker runs it and waits for a gate file. Every stack a test started is stopped at its end, and
the test fails if any process of its tree is still there 10 s later (then it is killed). A guard
process ends the tree if the test run itself dies without tearing down (pytest-timeout's thread
method ends the whole process).
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kaibo.client import KaiboClient
from kaibo_local.stack import parse_announcement
from kaibo_local.template import function_specs, load_template
from kaibo_local.workers import triggers
from tests.fixtures.process_guard import guard_group

REPO = Path(__file__).resolve().parents[2]
START_SECONDS = 120
#: The issue's bound: after a stop signal, the whole process tree is gone within this.
STOP_SECONDS = 10.0
CONTAINERS = 2
#: Plus one container per queue and schedule of template.yaml (structuring queue, sweeper, purge…).
BACKGROUND_CONTAINERS = sum(len(kind) for kind in triggers(load_template(), function_specs(load_template())))
ALL_CONTAINERS = CONTAINERS + BACKGROUND_CONTAINERS
PYTHONPATH = os.pathsep.join(str(REPO / p) for p in ("", "local", "layers/kaibo_core", "clients/python"))
#: The stack under test: template.yaml with GatedFunction added.
DRIVER = """
from kaibo_local.stack import main
from kaibo_local.template import load_template
from tests.integration.test_local_lifecycle import with_gated_function

raise SystemExit(main(template=with_gated_function(load_template())))
"""
#: The stack, plus a thread that, once asked (a file appears), sends SIGTERM to itself: the kernel
#: may deliver a process's signal to any of its threads, and Python runs handlers in the main
#: thread only, so the stack must stop even when the signal lands elsewhere.
DRIVER_SIGNAL_TO_A_THREAD = """
import os, signal, sys, threading, time
from kaibo_local.stack import main

def signal_this_thread_when_asked():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

threading.Thread(target=signal_this_thread_when_asked, daemon=True).start()
raise SystemExit(main())
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def with_gated_function(template: dict[str, Any]) -> dict[str, Any]:
    extended = copy.deepcopy(template)
    extended["Resources"]["GatedFunction"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "CodeUri": "tests/integration/",
            "Handler": "test_local_lifecycle.gated_handler",
            "Timeout": 120,
            "Events": {
                "Gated": {
                    "Type": "Api",
                    "Properties": {
                        "RestApiId": {"Ref": "KaiboApi"},
                        "Path": "/test/gated",
                        "Method": "POST",
                        "Auth": {"Authorizer": "NONE"},
                    },
                }
            },
        },
    }
    return extended


def gated_handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    """GatedFunction: write this worker's pid to ``pidfile`` (if given), wait until the ``gate``
    file exists (if given), then answer 200 with the pid."""
    request = json.loads(event.get("body") or "{}")
    if request.get("pidfile"):
        staged = Path(request["pidfile"] + ".tmp")
        staged.write_text(str(os.getpid()))
        staged.replace(request["pidfile"])
    gate = request.get("gate")
    while gate and not Path(gate).exists():
        time.sleep(0.01)
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"pid": os.getpid()}),
    }


# -- processes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    cmdline: str


def processes() -> list[Proc]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found.append(Proc(int(entry.name), int(fields[1]), int(fields[2]), fields[0], cmdline))
    return found


def group_members(pgid: int) -> list[Proc]:
    """The live (not zombie) processes of a process group."""
    return [proc for proc in processes() if proc.pgid == pgid and proc.state not in ("Z", "X")]


def workers_of(pid: int) -> list[int]:
    """The stack's function containers: its children started by multiprocessing's spawn."""
    return [p.pid for p in processes() if p.ppid == pid and "spawn_main" in p.cmdline and p.state != "Z"]


def run_local_command(command: str, data: Path) -> subprocess.CompletedProcess[str]:
    """``python -m kaibo_local <command>`` on the data folder ``data``, as its make target runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kaibo_local", command],
        cwd=REPO,
        env={"PYTHONPATH": PYTHONPATH, "KAIBO_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_kaibo_cli(endpoint: str, api_key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``kaibo`` command against ``endpoint`` with ``api_key``, as a user runs it (no other
    KAIBO_ variable of this process leaks into it)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")}
    env.update(KAIBO_ENDPOINT=endpoint, KAIBO_API_KEY=api_key, PYTHONPATH=PYTHONPATH)
    return subprocess.run(
        [sys.executable, "-m", "kaibo.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for(condition: Callable[[], bool], seconds: float = 60, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.02)  # polling, bounded by the deadline


@dataclass
class StackProcess:
    process: subprocess.Popen[bytes]
    guard: subprocess.Popen[bytes]
    out: Path
    err: Path
    values: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.values["KAIBO_ENDPOINT"].rsplit(":", 1)[1])

    def wait_announced(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            self.values = parse_announcement(self.out.read_text())
            if "KAIBO_PROJECT_ID" in self.values:
                return
            time.sleep(0.05)  # polling the announcement, bounded by the deadline
        raise AssertionError(f"the stack did not start:\n{self.err.read_text()}")

    def stop_tree(self, signum: int = signal.SIGTERM, *, group: bool = False) -> tuple[float, list[Proc]]:
        """Send ``signum`` (to the main process, or its whole group as a terminal's Ctrl-C does);
        the seconds until the tree was gone and what was left of it after ``STOP_SECONDS``
        (which is then killed)."""
        began = time.monotonic()
        if self.process.poll() is None:
            if group:
                os.killpg(self.pid, signum)
            else:
                self.process.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_SECONDS)
        while group_members(self.pid) and time.monotonic() - began < STOP_SECONDS:
            time.sleep(0.05)  # polling the process table, bounded by STOP_SECONDS
        took = time.monotonic() - began
        left = group_members(self.pid)
        if left:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.release_guard()
        return took, left

    def release_guard(self) -> None:
        if self.guard.stdin is not None and not self.guard.stdin.closed:
            self.guard.stdin.close()
        self.guard.wait(timeout=30)


def launch(tmp: Path, *, args: list[str] | None = None, **env: str) -> StackProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    environment = {
        **os.environ,
        "PORT": "0",
        "KAIBO_LOCAL_CONTAINERS": str(CONTAINERS),
        "PYTHONPATH": PYTHONPATH,
        **env,
    }
    environment.pop("AWS_ENDPOINT_URL", None)
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, *(args or ["-c", DRIVER])],
            cwd=REPO,
            env=environment,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    guard = guard_group(process.pid)
    return StackProcess(process, guard, out, err)


def assert_stops_whole(stack: StackProcess, signum: int, *, group: bool) -> None:
    took, left = stack.stop_tree(signum, group=group)
    assert not left, f"still running {took:.1f} s after {signal.Signals(signum).name}: {left}"
    assert took < STOP_SECONDS
    log = stack.err.read_text()
    assert "Kaibo stopped." in log
    assert "Traceback" not in log, log


@pytest.fixture
def stacks(tmp_path: Path) -> Iterator[Callable[[], StackProcess]]:
    """Start stacks (announced); each is stopped at the end, and none may outlive its test."""
    started: list[StackProcess] = []

    def start() -> StackProcess:
        stack = launch(tmp_path / f"stack-{len(started)}")
        started.append(stack)
        stack.wait_announced()
        return stack

    yield start
    survivors = [left for stack in started for left in stack.stop_tree()[1]]
    assert not survivors, f"stack processes outlived their test: {survivors}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    running = launch(tmp_path_factory.mktemp("stack"))
    try:
        running.wait_announced()
        yield running
    finally:
        _, left = running.stop_tree()
    assert not left, f"stack processes outlived the module: {left}"


# -- HTTP ------------------------------------------------------------------------------------------


def post(stack: StackProcess, path: str, document: Any, timeout: float = 60) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=timeout)
    try:
        connection.request(
            "POST", path, body=json.dumps(document), headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        connection.close()


def get(stack: StackProcess, path: str, key: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def assert_error_shape(document: Any) -> None:
    assert set(document) == {"error"}, document
    assert {"code", "message", "details"} <= set(document["error"]), document


# -- a worker that dies ----------------------------------------------------------------------------


def test_given_a_worker_killed_during_a_request_then_it_answers_502_and_the_stack_serves_on(
    stack: StackProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    victim_pid, bystander_pid = tmp_path / "victim.pid", tmp_path / "bystander.pid"
    with ThreadPoolExecutor(2) as pool:
        victim_call = pool.submit(post, stack, "/test/gated", {"pidfile": str(victim_pid), "gate": str(gate)})
        wait_for(victim_pid.exists, what="the first request in a worker")
        bystander_call = pool.submit(
            post, stack, "/test/gated", {"pidfile": str(bystander_pid), "gate": str(gate)}
        )
        wait_for(bystander_pid.exists, what="the second request in the other worker")
        victim = int(victim_pid.read_text())
        assert victim != int(bystander_pid.read_text())

        os.kill(victim, signal.SIGKILL)
        status, document = victim_call.result(timeout=30)
        assert status == 502, document
        assert_error_shape(document)
        assert document["error"]["code"] == "internal_error"

        gate.touch()
        assert bystander_call.result(timeout=60)[0] == 200  # the other container never noticed

    key = stack.values["KAIBO_API_KEY"]
    for _ in range(4):  # every later request succeeds, one by one...
        assert post(stack, "/test/gated", {})[0] == 200
        assert get(stack, "/v1/streams", key)[0] == 200
    with ThreadPoolExecutor(8) as pool:  # ...and at once
        statuses = list(pool.map(lambda _: get(stack, "/v1/streams", key)[0], range(16)))
    assert statuses == [200] * 16
    # The queue poller still structures (it shares the containers): remember waits until done.
    client = KaiboClient(stack.values["KAIBO_ENDPOINT"], key, timeout=60, max_retries=0)
    remembered = client.remember(
        "after-a-crash",
        [
            {
                "idempotencyKey": "k1",
                "kind": "message",
                "payload": {"role": "user", "text": "Lunch is on Friday"},
            }
        ],
        wait=True,
    )
    assert remembered["job"]["status"] == "done"
    wait_for(
        lambda: len(workers_of(stack.pid)) == ALL_CONTAINERS and victim not in workers_of(stack.pid),
        what="a replacement container",
    )


def test_given_64_concurrent_clients_then_none_is_reset_and_none_gets_a_5xx(stack: StackProcess) -> None:
    clients = 64
    key = stack.values["KAIBO_API_KEY"]
    barrier = threading.Barrier(clients)

    def one_client(_: int) -> str:
        connection = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        try:
            barrier.wait(timeout=30)
            connection.request("GET", "/v1/streams", headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            response.read()
            return str(response.status)
        except OSError as error:
            return repr(error)
        finally:
            connection.close()

    with ThreadPoolExecutor(clients) as pool:
        outcomes = list(pool.map(one_client, range(clients)))

    assert outcomes == ["200"] * clients


# -- stopping --------------------------------------------------------------------------------------


def test_given_an_idle_stack_when_ctrl_c_reaches_its_process_group_then_the_whole_tree_ends(
    stacks: Callable[[], StackProcess],
) -> None:
    stack = stacks()
    assert len(workers_of(stack.pid)) == ALL_CONTAINERS

    assert_stops_whole(stack, signal.SIGINT, group=True)


def test_given_a_request_still_running_when_sigterm_then_the_whole_tree_ends_within_10_s(
    stacks: Callable[[], StackProcess], tmp_path: Path
) -> None:
    stack = stacks()
    pidfile = tmp_path / "busy.pid"
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(
            post, stack, "/test/gated", {"pidfile": str(pidfile), "gate": str(tmp_path / "never")}
        )
        wait_for(pidfile.exists, what="the long request in a worker")

        assert_stops_whole(stack, signal.SIGTERM, group=False)
        try:
            status, document = call.result(timeout=30)
        except (OSError, http.client.HTTPException):
            return  # the connection ended with the stack
    assert status == 502, document  # the stack stopped under it: as a crash, in our error shape
    assert_error_shape(document)


def test_given_sigterm_delivered_to_another_thread_than_the_main_one_then_the_whole_tree_ends(
    tmp_path: Path,
) -> None:
    # A main thread in an untimed wait once slept through it: the e2e stack outlived its tests.
    ask = tmp_path / "send-now"
    stack = launch(tmp_path / "stack", args=["-c", DRIVER_SIGNAL_TO_A_THREAD, str(ask)])
    stack.wait_announced()
    began = time.monotonic()
    ask.touch()
    with contextlib.suppress(subprocess.TimeoutExpired):
        stack.process.wait(timeout=STOP_SECONDS)
    took = time.monotonic() - began
    _, left = stack.stop_tree()
    assert not left, left
    assert took < STOP_SECONDS, f"the stack ran on {took:.1f} s after the signal"
    assert "Kaibo stopped." in stack.err.read_text()


def test_given_a_dead_worker_when_sigterm_then_the_whole_tree_ends_within_10_s(
    stacks: Callable[[], StackProcess],
) -> None:
    stack = stacks()
    os.kill(workers_of(stack.pid)[0], signal.SIGKILL)  # its slot is replacing it as the stop comes

    assert_stops_whole(stack, signal.SIGTERM, group=False)


def test_given_a_stack_still_starting_when_sigterm_then_the_whole_tree_ends_within_10_s(
    tmp_path: Path,
) -> None:
    stack = launch(tmp_path)
    try:
        wait_for(lambda: len(workers_of(stack.pid)) == ALL_CONTAINERS, what="the containers")
    finally:
        took, left = stack.stop_tree(signal.SIGTERM)

    assert not left, f"still running {took:.1f} s after SIGTERM: {left}"
    assert "Traceback" not in stack.err.read_text()


# -- start errors ----------------------------------------------------------------------------------


def test_given_the_port_in_use_then_one_line_says_so_and_the_stack_exits_before_any_worker_starts(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack = launch(tmp_path, args=["-m", "kaibo_local"], PORT=str(port))
        saw_workers = False
        deadline = time.monotonic() + START_SECONDS
        while stack.process.poll() is None and time.monotonic() < deadline:
            saw_workers = saw_workers or bool(workers_of(stack.pid))
            time.sleep(0.01)  # watching for workers until it exits, bounded by the deadline
        _, left = stack.stop_tree()

    assert not left
    assert stack.process.returncode not in (0, None)
    assert stack.err.read_text().splitlines() == [
        f"kaibo-local: port {port} is in use; set PORT=... (PORT=0 picks a free one) "
        "or stop the other process"
    ]
    assert stack.out.read_text() == ""
    assert not saw_workers


# -- queues and schedules have containers of their own ---------------------------------------------


def test_given_the_only_api_container_held_by_a_waiting_remember_then_its_structuring_still_runs(
    tmp_path: Path,
) -> None:
    # One API container: remember with wait holds it while it waits for structuring, which must
    # run elsewhere (once, every API container waiting meant no structuring until the waits gave up).
    stack = launch(tmp_path, args=["-m", "kaibo_local"], KAIBO_LOCAL_CONTAINERS="1")
    try:
        stack.wait_announced()
        client = KaiboClient(stack.values["KAIBO_ENDPOINT"], stack.values["KAIBO_API_KEY"], max_retries=0)
        message = {
            "idempotencyKey": "k1",
            "kind": "message",
            "payload": {"role": "user", "text": "Lunch is at noon"},
        }
        remembered = client.remember("one-container", [message], wait=True)
        assert remembered["job"]["status"] == "done", remembered["job"]
        assert len(workers_of(stack.pid)) == 1 + BACKGROUND_CONTAINERS
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)

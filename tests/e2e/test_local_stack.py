"""The local stack as a newcomer starts it (`make run`), driven over HTTP by the SDK and the CLI.

One stack per module (it takes a few seconds to start). Races run from several
OS processes against it, as in Foundation I, but end to end.

Every stack runs in a process group of its own (make, the shell make runs the recipe with, the
stack, its containers). Stopping one means its whole group is gone within 10 s: waiting for
``make`` alone is not enough, since the shell dies at SIGTERM at once and leaves the stack
running under init (how a stack outlived a whole e2e run). A stack that outlives its test fails
it, and is killed; a guard process ends the group if the test run itself dies first.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from kaibo.client import KaiboAPIError, KaiboClient
from kaibo_local.stack import ANNOUNCE_PREFIX, parse_announcement
from tests.fixtures.process_guard import guard_group

REPO = Path(__file__).resolve().parents[2]
START_DEADLINE_SECONDS = 120
#: After a stop signal, the whole process tree of a stack is gone within this (issue #14).
STOP_DEADLINE_SECONDS = 10
WRITERS = 8
EVENTS_PER_WRITER = 200
SENDERS = 16

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class RunningStack:
    process: subprocess.Popen[bytes]
    values: dict[str, str]
    log: Path
    guard: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return self.values["KAIBO_ENDPOINT"]


def _read_announcement(out: Path, process: subprocess.Popen[bytes]) -> dict[str, str]:
    wanted = {"KAIBO_ENDPOINT", "KAIBO_API_KEY", "KAIBO_ADMIN_KEY", "KAIBO_AWS_ENDPOINT"}
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        values = parse_announcement(out.read_text())
        if wanted <= values.keys():
            return values
        if process.poll() is not None:
            break
        time.sleep(0.1)  # polling a file for the announcement, bounded by the deadline
    raise AssertionError(f"the local stack did not announce itself:\n{out.read_text()}")


def start_make_run(tmp: Path) -> RunningStack:
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    env = {**os.environ, "PORT": "0"}
    env.pop("AWS_ENDPOINT_URL", None)
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=REPO,
            env=env,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, like a terminal's foreground job
        )
    guard = guard_group(process.pid)
    try:
        values = _read_announcement(out, process)
    except BaseException:
        _end_group(process, guard)
        raise
    return RunningStack(process, values, err, guard)


def _group_gone(pgid: int, deadline: float) -> bool:
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)  # polling for the processes to exit, bounded by the deadline


def _end_group(process: subprocess.Popen[bytes], guard: subprocess.Popen[bytes]) -> None:
    """Last resort: kill whatever is left of the group, and let the guard go."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    if guard.stdin is not None:
        guard.stdin.close()
    guard.wait(timeout=30)


def stop(stack: RunningStack, signum: int) -> bool:
    """Send ``signum`` to the stack's whole group (as a terminal's Ctrl-C does); whether every
    process of it was gone within ``STOP_DEADLINE_SECONDS`` (what is left is then killed)."""
    deadline = time.monotonic() + STOP_DEADLINE_SECONDS
    with contextlib.suppress(ProcessLookupError):
        os.killpg(stack.process.pid, signum)
    with contextlib.suppress(subprocess.TimeoutExpired):
        stack.process.wait(timeout=STOP_DEADLINE_SECONDS)  # make: exits as soon as its shell does
    gone = _group_gone(stack.process.pid, deadline)  # the stack itself, and its containers
    _end_group(stack.process, stack.guard)
    return gone


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_make_run(tmp_path_factory.mktemp("stack"))
    yield running
    assert stop(running, signal.SIGTERM), f"the stack outlived its tests by {STOP_DEADLINE_SECONDS} s"


def kaibo_cli(stack: RunningStack, *args: str, api_key: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAIBO_ENDPOINT": stack.endpoint, "KAIBO_API_KEY": api_key}
    return subprocess.run(
        [sys.executable, "-m", "kaibo.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def new_project(stack: RunningStack, name: str) -> dict[str, Any]:
    return KaiboClient(stack.endpoint, stack.values["KAIBO_ADMIN_KEY"]).create_project(name)


def message(key: str, text: str) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}}


def all_events(client: KaiboClient, stream: str) -> list[dict[str, Any]]:
    return list(client.events(stream))


def test_given_make_run_then_it_announces_a_working_dev_key(stack: RunningStack) -> None:
    client = KaiboClient(stack.endpoint, stack.values["KAIBO_API_KEY"])
    receipt = client.remember("hello", [message("dev-1", "the dev key works")])["events"][0]
    assert receipt["seq"] == 1
    assert stack.values["KAIBO_AWS_ENDPOINT"].startswith("http://127.0.0.1:")
    assert stack.endpoint.startswith("http://127.0.0.1:")


def test_given_an_admin_created_key_when_remembering_then_pages_and_verify_pass(stack: RunningStack) -> None:
    project = new_project(stack, "e2e-verify")
    client = KaiboClient(stack.endpoint, project["apiKey"])
    for batch in range(3):
        client.remember("notes", [message(f"n{batch}-{i}", f"note {batch}/{i}") for i in range(5)])
    served = all_events(client, "notes")
    assert [e["seq"] for e in served] == list(range(1, 16))

    result = kaibo_cli(stack, "verify", "--stream", "notes", api_key=project["apiKey"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok notes: 15 events" in result.stdout
    head = served[-1]
    pinned = kaibo_cli(
        stack, "verify", "--stream", "notes", "--expect-head", f"15:{head['hash']}", api_key=project["apiKey"]
    )
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr


def test_given_remembered_events_then_recall_answers_over_http_as_json_and_as_a_stream(
    stack: RunningStack,
) -> None:
    project = new_project(stack, "e2e-recall")
    client = KaiboClient(stack.endpoint, project["apiKey"])
    remembered = client.remember(
        "chat-42",
        [
            message("r1", "Move the release target from July 13 to July 17"),
            message("r2", "Lunch is on Friday"),
        ],
        wait=True,  # structured before we ask: the ids below are the structured memories'
    )
    assert remembered["job"]["status"] == "done"
    answer = client.recall("When is the release target?", budget=100)
    memory_id = answer["items"][0]["memoryId"]
    assert memory_id in remembered["job"]["memoryIds"]
    assert answer["items"][0]["citations"][0]["hash"] == remembered["events"][0]["hash"]
    assert client.memory(memory_id)["status"] == "active"

    streamed = list(client.recall_stream("When is the release target?", budget=100, as_of=answer["asOf"]))
    assert [name for name, _ in streamed] == ["candidates", "packed", "final"]
    final = streamed[-1][1]
    assert final["items"] == answer["items"]

    question = "When is the release target?"
    cli = kaibo_cli(stack, "recall", question, "--budget", "100", "--json", api_key=project["apiKey"])
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["items"][0]["memoryId"] == memory_id
    shown = kaibo_cli(stack, "memory", memory_id, api_key=project["apiKey"])
    assert "July 17" in json.loads(shown.stdout)["content"]

    unknown = client.recall("Who won the chess tournament?")
    assert unknown["items"] == []
    assert unknown["abstain"]["abstained"] is True


def test_given_a_correction_then_the_old_fact_is_superseded_and_explain_shows_the_chain(
    stack: RunningStack,
) -> None:
    project = new_project(stack, "e2e-structuring")
    client = KaiboClient(stack.endpoint, project["apiKey"])
    first = client.remember(
        "planning",
        [{**message("s1", "The release target is July 13."), "occurredAt": "2026-06-01T09:00:00Z"}],
        wait=True,
    )
    second = client.remember(
        "planning",
        [
            {
                **message("s2", "Move the release target from July 13 to July 17."),
                "occurredAt": "2026-06-02T09:30:00Z",
            }
        ],
        wait=True,
    )
    assert first["job"]["status"] == second["job"]["status"] == "done"
    (old_fact,) = first["job"]["memoryIds"]
    assert client.memory(old_fact)["status"] == "superseded"
    assert client.memory(old_fact)["validTo"] == "2026-06-02T09:30:00.000Z"
    (newer,) = client.memory(old_fact)["supersededBy"]
    assert newer in second["job"]["memoryIds"]
    assert "July 17, 2026" in client.memory(newer)["content"]

    answer = client.recall("When is the release target?", budget=200)
    assert "July 17" in answer["items"][0]["text"]
    assert old_fact not in [item["memoryId"] for item in answer["items"]]
    past = client.recall("When is the release target?", budget=200, as_of="2026-06-01T12:00:00Z")
    assert [item["memoryId"] for item in past["items"]] == [old_fact]

    chain = client.explain(answer["items"][0] if answer["items"][0]["memoryId"] == newer else newer)["chain"]
    structured = [v["memoryId"] for v in chain if v["status"] != "replaced"]
    assert structured[0] == old_fact
    assert structured[-1] == newer
    assert chain[-1]["sourceEvents"][0]["seq"] == 2
    job = kaibo_cli(stack, "job", second["jobId"], api_key=project["apiKey"])
    assert json.loads(job.stdout)["status"] == "done"
    explained = kaibo_cli(stack, "explain", newer, "--json", api_key=project["apiKey"])
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["chain"][-1]["memoryId"] == newer


def test_given_a_tampered_item_in_the_emulator_then_verify_fails_naming_the_seq(stack: RunningStack) -> None:
    project = new_project(stack, "e2e-tamper")
    client = KaiboClient(stack.endpoint, project["apiKey"])
    client.remember("ledger", [message(f"t{i}", f"entry {i}") for i in range(4)])
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=stack.values["KAIBO_AWS_ENDPOINT"],
        region_name="us-east-1",
        aws_access_key_id="kaibo-local",
        aws_secret_access_key="kaibo-local",
    )
    events_table = next(t for t in dynamodb.list_tables()["TableNames"] if t.startswith("kaibo-EventsTable-"))
    dynamodb.update_item(
        TableName=events_table,
        Key={"pk": {"S": f"{project['projectId']}#ledger"}, "seq": {"N": "3"}},
        UpdateExpression="SET occurredAt = :t",
        ExpressionAttributeValues={":t": {"S": "2020-01-01T00:00:00.000Z"}},
    )
    result = kaibo_cli(stack, "verify", api_key=project["apiKey"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "seq 3" in result.stdout
    assert "hash_mismatch" in result.stdout


def test_given_a_wrong_key_then_401_in_error_shape(stack: RunningStack) -> None:
    with pytest.raises(KaiboAPIError) as caught:
        list(KaiboClient(stack.endpoint, "kb_0123456789abcdef_" + "x" * 43).streams())
    assert caught.value.status == 401
    assert caught.value.code == "unauthorized"


def _append_many(endpoint: str, api_key: str, writer: int, count: int) -> list[int]:
    client = KaiboClient(endpoint, api_key)
    seqs = []
    for i in range(count):
        try:
            receipt = client.remember("raced", [message(f"w{writer}-{i}", f"{writer}/{i}")])["events"][0]
        except KaiboAPIError as exc:  # its own exception would not cross the process boundary
            raise RuntimeError(f"writer {writer} event {i}: {exc.status} {exc.code}: {exc.message}") from None
        seqs.append(receipt["seq"])
    return seqs


def _send_same_key(endpoint: str, api_key: str) -> dict[str, Any]:
    return KaiboClient(endpoint, api_key).remember("one-key", [message("the-key", "same")])["events"][0]


def test_given_8_processes_racing_over_http_then_seqs_are_gapless_and_verify(stack: RunningStack) -> None:
    project = new_project(stack, "e2e-race")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WRITERS, mp_context=ctx) as pool:
        futures = [
            pool.submit(_append_many, stack.endpoint, project["apiKey"], w, EVENTS_PER_WRITER)
            for w in range(WRITERS)
        ]
        seqs = sorted(s for f in futures for s in f.result(timeout=900))
    assert seqs == list(range(1, WRITERS * EVENTS_PER_WRITER + 1))
    result = kaibo_cli(stack, "verify", "--stream", "raced", api_key=project["apiKey"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{WRITERS * EVENTS_PER_WRITER} events" in result.stdout


def test_given_16_senders_of_one_key_over_http_then_one_event_and_15_replays(stack: RunningStack) -> None:
    project = new_project(stack, "e2e-idem")
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(4, mp_context=ctx) as pool:
        receipts = [
            f.result(timeout=300)
            for f in [pool.submit(_send_same_key, stack.endpoint, project["apiKey"]) for _ in range(SENDERS)]
        ]
    client = KaiboClient(stack.endpoint, project["apiKey"])
    served = all_events(client, "one-key")
    assert len(served) == 1
    assert {r["id"] for r in receipts} == {served[0]["id"]}
    assert sorted(r["replayed"] for r in receipts) == [False] + [True] * (SENDERS - 1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_given_a_stop_signal_then_the_stack_shuts_down_cleanly_and_leaves_no_process(
    tmp_path: Path, signum: int
) -> None:
    running = start_make_run(tmp_path)
    # make's own exit code reports the signal; the stack's shutdown is what counts
    assert stop(running, signum), f"a process of the stack outlived {STOP_DEADLINE_SECONDS} s"
    assert "Kaibo stopped." in running.log.read_text()
    assert "Traceback" not in running.log.read_text()


def test_given_a_whole_session_then_the_logs_hold_no_memory_text_payload_or_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything the stack and its containers logged with the functions' LogLevel at DEBUG, the
    most verbose the template allows (stdout and stderr, read once the stack has stopped and every
    log line is flushed), holds ids and counts, never what people said or a key."""
    monkeypatch.setenv("KAIBO_LOG_LEVEL", "DEBUG")  # POWERTOOLS_LOG_LEVEL and LOG_LEVEL of every function
    running = start_make_run(tmp_path)
    try:
        admin = KaiboClient(running.endpoint, running.values["KAIBO_ADMIN_KEY"])
        project = admin.create_project("e2e-logs")
        client = KaiboClient(running.endpoint, project["apiKey"])
        marker = "Quixotrine"  # a word of no language: any trace of it in a log is a leak
        remembered = client.remember(
            "logs",
            [
                message("m1", f"The {marker} budget review moved to Thursday"),
                message("m2", "Lunch on Friday"),
            ],
            wait=True,
        )
        assert remembered["job"]["status"] == "done"
        answer = client.recall(f"When is the {marker} budget review?")
        client.explain(answer["items"][0])
        list(client.recall_stream(f"{marker} review"))
        with pytest.raises(KaiboAPIError):  # a refused request is logged too
            client.recall(marker, budget=0)
    finally:
        assert stop(running, signal.SIGTERM)
    printed = (tmp_path / "stdout.txt").read_text() + running.log.read_text()
    # The announcement prints the development keys on purpose; the rest is what was logged.
    logs = "\n".join(line for line in printed.splitlines() if not line.startswith(ANNOUNCE_PREFIX))
    assert '"message":"remembered"' in logs.replace(" ", "")  # the logs were read: the lines are there
    lowered = logs.lower()
    for secret in (marker.lower(), "quixotrin", "budget review", "lunch on fri"):  # raw, folded, stemmed
        assert secret not in lowered, secret
    for key in (project["apiKey"], running.values["KAIBO_ADMIN_KEY"], running.values["KAIBO_API_KEY"]):
        assert key not in logs


def test_given_curls_default_form_content_type_then_the_body_is_still_read_as_json(
    stack: RunningStack,
) -> None:
    import urllib.request

    body = json.dumps({"stream": "curl", "events": [message("c1", "from curl")]}).encode()
    request = urllib.request.Request(
        f"{stack.endpoint}/v1/remember",
        data=body,
        method="POST",
        headers={
            "Authorization": f"Bearer {stack.values['KAIBO_API_KEY']}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
        assert json.loads(response.read())["events"][0]["seq"] == 1


def test_given_no_key_then_the_docs_and_the_openapi_document_are_served(stack: RunningStack) -> None:
    def get(path: str) -> tuple[int, str, bytes]:
        with urllib.request.urlopen(f"{stack.endpoint}{path}", timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()

    status, content_type, body = get("/openapi.json")
    assert (status, content_type) == (200, "application/json")
    assert "/v1/forget" in json.loads(body)["paths"]
    status, content_type, body = get("/docs/llms.txt")
    assert (status, content_type) == (200, "text/plain; charset=utf-8")
    assert body.startswith(b"# Kaibo")
    status, content_type, body = get("/docs/docs.zip")
    assert (status, content_type) == (200, "application/zip")
    with zipfile.ZipFile(io.BytesIO(body)) as archive:  # binary through the HTTP front intact
        assert "kaibo-docs/docs/forget.md" in archive.namelist()

"""The local stack started again on its data folder (``python -m kaibo_local``, KAIBO_DATA_DIR):
after ``kill -9`` of the whole process tree in the middle of a load, after a torn last write, and
refusing, in one line, a damaged journal or a folder another stack holds.

Each stack runs as in test_local_lifecycle.py (a session of its own, a guard process, two
containers), on template.yaml as it is.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from kaibo.client import KaiboClient
from kaibo.verify import verify_all
from kaibo_local.journal import HEADER
from tests.integration.test_local_lifecycle import (
    START_SECONDS,
    StackProcess,
    assert_stops_whole,
    group_members,
    launch,
    wait_for,
)

RUN = ["-m", "kaibo_local"]
#: Acknowledged remembers before the tree is killed (with structuring and recalls in flight).
ACKNOWLEDGED_BEFORE_KILL = 40
WRITERS = 4


def start(tmp: Path, data: Path) -> StackProcess:
    stack = launch(tmp, args=RUN, KAIBO_DATA_DIR=str(data))
    stack.wait_announced()
    return stack


def kill_tree(stack: StackProcess) -> None:
    os.killpg(stack.pid, signal.SIGKILL)
    stack.process.wait(timeout=30)
    wait_for(lambda: not group_members(stack.pid), seconds=10, what="the killed tree gone")
    stack.release_guard()


def message(key: str, text: str) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}}


def journal_of(data: Path) -> Path:
    journals = sorted(data.glob("dynamodb-*.journal"))
    assert journals, sorted(p.name for p in data.iterdir())
    return journals[-1]


def test_given_the_whole_tree_killed_mid_load_when_started_again_then_nothing_acknowledged_is_lost(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = start(tmp_path / "first", data)
    endpoint, key = first.values["KAIBO_ENDPOINT"], first.values["KAIBO_API_KEY"]
    acknowledged: list[tuple[str, dict[str, Any], str]] = []  # (stream, event, job id)
    lock = threading.Lock()
    stop = threading.Event()

    def writer(number: int) -> None:
        client = KaiboClient(endpoint, key, timeout=30, max_retries=0)
        for n in range(10_000):
            if stop.is_set():
                return
            text = f"Writer {number} says the build number is {n} and the room is {n % 7}"
            try:
                answer = client.remember(f"w{number}", [message(f"w{number}-{n}", text)], wait=n % 3 == 0)
            except Exception:  # the tree was killed under this request: not acknowledged
                return
            with lock:
                acknowledged.extend((f"w{number}", event, answer["jobId"]) for event in answer["events"])

    def reader() -> None:
        client = KaiboClient(endpoint, key, timeout=30, max_retries=0)
        while not stop.is_set():
            try:
                client.recall("What is the build number?")
            except Exception:
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    try:
        wait_for(
            lambda: len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL, seconds=START_SECONDS, what="the load"
        )
        kill_tree(first)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    with lock:
        acknowledged_now = list(acknowledged)

    second = start(tmp_path / "second", data)
    try:
        assert second.values["KAIBO_API_KEY"] == key  # the same key works after a restart
        assert "items restored" in second.err.read_text()
        client = KaiboClient(second.values["KAIBO_ENDPOINT"], key, timeout=60)
        stored = {
            stream: {event["seq"]: event for event in client.events(stream)}
            for stream in {stream for stream, _, _ in acknowledged_now}
        }
        for stream, event, _ in acknowledged_now:
            assert stored[stream][event["seq"]]["hash"] == event["hash"], (stream, event["seq"])
            assert stored[stream][event["seq"]]["id"] == event["id"]
        reports = verify_all(client)
        assert len(reports) == WRITERS
        assert all(report.ok for report in reports), [r for r in reports if not r.ok]

        jobs = {job for _, _, job in acknowledged_now}
        finished: dict[str, dict[str, Any]] = {}

        def all_done() -> bool:
            for job in jobs - set(finished):
                answer = client.job(job)
                if answer["status"] == "done":
                    finished[job] = answer
                else:
                    assert answer["status"] in ("queued", "structuring"), answer
            return set(finished) == jobs

        wait_for(all_done, seconds=120, what="every acknowledged job done")
        memory_ids = [memory for answer in finished.values() for memory in answer["memoryIds"]]
        assert len(memory_ids) == len(set(memory_ids))  # nothing structured twice
        for answer in list(finished.values())[:10]:
            for memory_id in answer["memoryIds"]:
                assert set(client.memory(memory_id)["sourceEventIds"]) <= set(answer["eventIds"])
    finally:
        assert_stops_whole(second, signal.SIGTERM, group=False)


def test_given_a_torn_last_write_when_started_again_then_it_is_dropped_reported_and_the_rest_kept(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = start(tmp_path / "first", data)
    key = first.values["KAIBO_API_KEY"]
    client = KaiboClient(first.values["KAIBO_ENDPOINT"], key)
    remembered = client.remember("torn", [message("k1", "The cabin code is 4412")], wait=True)
    kill_tree(first)
    with journal_of(data).open("ab") as journal:
        journal.write(HEADER.pack(5000, 0) + b"half of a write")

    second = start(tmp_path / "second", data)
    try:
        log = second.err.read_text()
        assert "ended in a torn write (23 bytes" in log, log
        events = list(KaiboClient(second.values["KAIBO_ENDPOINT"], key).events("torn"))
        assert [event["hash"] for event in events] == [remembered["events"][0]["hash"]]
    finally:
        assert_stops_whole(second, signal.SIGTERM, group=False)


def test_given_a_journal_damaged_in_its_middle_then_the_start_ends_with_one_line_before_any_worker(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = start(tmp_path / "first", data)
    client = KaiboClient(first.values["KAIBO_ENDPOINT"], first.values["KAIBO_API_KEY"])
    client.remember("s", [message("k1", "one"), message("k2", "two")], wait=True)
    kill_tree(first)
    journal = journal_of(data)
    damaged = bytearray(journal.read_bytes())
    damaged[HEADER.size + 2] ^= 0xFF  # inside the first record's payload
    journal.write_bytes(bytes(damaged))

    second = launch(tmp_path / "second", args=RUN, KAIBO_DATA_DIR=str(data))
    assert second.process.wait(timeout=START_SECONDS) == 1
    second.release_guard()
    lines = second.err.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kaibo-local: ")
    assert "damaged at byte 0" in lines[0]
    assert "make reset" in lines[0]
    assert second.out.read_text() == ""  # nothing announced


def test_given_a_folder_another_stack_holds_then_a_second_stack_refuses_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start(tmp_path / "first", data)
    try:
        second = launch(tmp_path / "second", args=RUN, KAIBO_DATA_DIR=str(data))
        assert second.process.wait(timeout=START_SECONDS) == 1
        second.release_guard()
        assert second.err.read_text().splitlines() == [
            f"kaibo-local: the data folder {data} is in use by another kaibo-local; stop it, or set "
            "KAIBO_DATA_DIR=... to another folder"
        ]
    finally:
        assert_stops_whole(first, signal.SIGTERM, group=False)

"""Group commit of the journal (kaibo_local.journal.RecordWriter.write / sync_to): an answer never
leaves before an fdatasync that started after its record was written, and concurrent writers share
fdatasyncs; acknowledged records survive ``kill -9`` of the writing process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaibo_local.journal import RecordWriter, read_records

DEADLINE_SECONDS = 10.0


def eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.001)  # polling, bounded by the deadline


class GatedSync:
    """``os.fdatasync`` that waits for ``release()``; records the file size each sync began at."""

    def __init__(self, writer_size: Callable[[], int]) -> None:
        self.began_at: list[int] = []
        self.finished = 0
        self._size = writer_size
        self._gate = threading.Semaphore(0)

    def __call__(self, fd: int) -> None:
        self.began_at.append(self._size())
        self._gate.acquire()
        os.fsync(fd)
        self.finished += 1

    def release(self) -> None:
        self._gate.release()


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RecordWriter, GatedSync]]:
    writer = RecordWriter(tmp_path / "journal")
    sync = GatedSync(lambda: writer.size)
    monkeypatch.setattr("os.fdatasync", sync)
    yield writer, sync
    for _ in range(10):  # whatever still waits, let it finish
        sync.release()
    writer.close()


def answered_in_thread(function: Callable[[], None]) -> threading.Event:
    done = threading.Event()

    def run() -> None:
        function()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


def test_given_a_written_record_then_its_answer_waits_for_the_fdatasync(
    gated: tuple[RecordWriter, GatedSync],
) -> None:
    writer, sync = gated
    offset = writer.write(b"one")
    answered = answered_in_thread(lambda: writer.sync_to(offset))
    eventually(lambda: len(sync.began_at) == 1)
    assert not answered.wait(0.05)  # the fdatasync has not finished: no answer
    sync.release()
    assert answered.wait(DEADLINE_SECONDS)
    assert writer.synced >= offset


def test_given_a_record_written_during_a_sync_then_it_waits_for_the_next_one(
    gated: tuple[RecordWriter, GatedSync],
) -> None:
    writer, sync = gated
    first = writer.write(b"first")
    first_answered = answered_in_thread(lambda: writer.sync_to(first))
    eventually(lambda: len(sync.began_at) == 1)
    second = writer.write(b"second")  # after that sync began: not covered by it
    second_answered = answered_in_thread(lambda: writer.sync_to(second))
    sync.release()
    assert first_answered.wait(DEADLINE_SECONDS)
    eventually(lambda: len(sync.began_at) == 2)  # the second record needs a sync of its own
    assert not second_answered.is_set()
    assert sync.began_at[1] >= second
    sync.release()
    assert second_answered.wait(DEADLINE_SECONDS)


def test_given_many_waiting_writers_then_they_share_fdatasyncs(gated: tuple[RecordWriter, GatedSync]) -> None:
    writer, sync = gated
    blocker = writer.write(b"blocker")
    answers = [answered_in_thread(lambda: writer.sync_to(blocker))]
    eventually(lambda: len(sync.began_at) == 1)
    for n in range(20):
        offset = writer.write(f"record {n}".encode())
        answers.append(answered_in_thread(lambda offset=offset: writer.sync_to(offset)))  # type: ignore[misc]
    sync.release()
    eventually(lambda: len(sync.began_at) == 2)
    sync.release()
    for answered in answers:
        assert answered.wait(DEADLINE_SECONDS)
    assert len(sync.began_at) == 2  # 21 records, 2 fdatasyncs
    assert writer.syncs == 2


def test_given_a_failing_fdatasync_then_no_waiter_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = RecordWriter(tmp_path / "journal")

    def failing(_fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("os.fdatasync", failing)
    offset = writer.write(b"lost")
    with pytest.raises(OSError, match="Input/output error"):
        writer.sync_to(offset)
    assert writer.synced < offset


def test_given_close_then_pending_records_are_synced_first(gated: tuple[RecordWriter, GatedSync]) -> None:
    writer, sync = gated
    offset = writer.write(b"pending")
    closed = answered_in_thread(writer.close)
    eventually(lambda: len(sync.began_at) == 1)
    assert not closed.wait(0.05)
    sync.release()
    assert closed.wait(DEADLINE_SECONDS)
    assert writer.synced >= offset
    writer.sync_to(offset)  # covered already: returns at once on the closed writer


# --- kill -9 of a process writing from many threads ---------------------------------------------

WRITER_PROGRAM = """
import sys, threading
from pathlib import Path
from kaibo_local.journal import RecordWriter

writer = RecordWriter(Path(sys.argv[1]))
write_lock = threading.Lock()
print_lock = threading.Lock()

def loop(number):
    for n in range(1_000_000):
        payload = f"{number}-{n}".encode()
        with write_lock:  # writes are serialized (the emulator's DynamoDB lock)
            offset = writer.write(payload)
        writer.sync_to(offset)  # outside the lock: group commit
        with print_lock:
            sys.stdout.write(payload.decode() + "\\n")
            sys.stdout.flush()

for number in range(8):
    threading.Thread(target=loop, args=(number,), daemon=True).start()
threading.Event().wait()
"""


def test_given_concurrent_writers_killed_then_every_acknowledged_record_is_there(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal"
    local = str(Path(__file__).resolve().parents[2] / "local")
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER_PROGRAM, str(path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([local, os.environ.get("PYTHONPATH", "")])},
    )
    assert process.stdout is not None
    acknowledged: list[str] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    while len(acknowledged) < 200 and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        acknowledged.append(line.decode().strip())
    process.send_signal(signal.SIGKILL)
    process.wait()
    acknowledged += [line.strip() for line in process.stdout.read().decode().splitlines() if line.strip()]
    assert len(acknowledged) >= 200, "the writers acknowledged too few records"
    read = read_records(path)
    stored = {record.decode() for record in read.records}
    assert set(acknowledged) <= stored
    assert len(stored) == len(read.records)  # no record twice

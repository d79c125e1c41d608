"""Append-only record files with checksums: the local stack's journal and snapshots on disk.

A file is a sequence of records, each ``length (4 bytes, big-endian) | crc32 (4 bytes) | payload``.
``RecordWriter.append`` writes one record and ``fdatasync``s it before returning, so a record
whose write returned is on disk. ``RecordWriter.write`` and ``sync_to`` split the two for **group
commit**: a writer appends its record, and whoever answers for it calls ``sync_to`` with the offset
the record ends at, which returns once an ``fdatasync`` that started after that record was written
has finished. Concurrent callers share one ``fdatasync``: the first starts it, the others wait for
it, and one that arrives while it runs waits for the next (a sync covers only what was written
before it started). Reading (``read_records``) tells three endings apart:

- the file ends after a complete record: all is well;
- the last record is incomplete, or complete with a wrong checksum, and nothing follows it:
  a **torn tail**, what a ``kill -9`` or a power cut during the last append leaves. Its write
  never returned, so nothing was acknowledged from it: the reader drops it and says how many
  bytes it dropped (``RecordsRead.torn_bytes``);
- a record with a wrong checksum is followed by more bytes: the file was damaged after it was
  written. ``CorruptRecordsError`` names the file and the offset; nothing guesses past it.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["HEADER", "CorruptRecordsError", "RecordWriter", "RecordsRead", "frame", "read_records"]

HEADER: Final = struct.Struct(">II")


class CorruptRecordsError(Exception):
    """A record file damaged in its middle (not a torn tail): ``path`` at byte ``offset``."""

    def __init__(self, path: Path, offset: int, index: int, problem: str) -> None:
        super().__init__(f"{path} is damaged at byte {offset} (record {index}): {problem}")
        self.path = path
        self.offset = offset
        self.index = index


def frame(payload: bytes) -> bytes:
    """One record: header and payload."""
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True, slots=True)
class RecordsRead:
    records: list[bytes]
    valid_bytes: int  # the length of the file up to the end of its last complete record
    torn_bytes: int  # bytes after that (a torn last write); 0 if none


def read_records(path: Path) -> RecordsRead:
    """Every complete record of ``path``; a torn tail is reported, damage raises."""
    data = path.read_bytes()
    records: list[bytes] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < HEADER.size:
            break  # a header cut short: torn
        length, checksum = HEADER.unpack_from(data, offset)
        start, end = offset + HEADER.size, offset + HEADER.size + length
        if end > len(data):
            break  # a payload cut short: torn
        payload = data[start:end]
        if zlib.crc32(payload) != checksum:
            if end == len(data):
                break  # the last write, complete in length but not in content: torn
            raise CorruptRecordsError(path, offset, len(records), "checksum mismatch")
        records.append(payload)
        offset = end
    return RecordsRead(records, offset, len(data) - offset)


class RecordWriter:
    """Appends records to a file; ``append`` returns once its record is on disk (fdatasync), and
    ``write`` + ``sync_to`` do the same in two steps, sharing fdatasyncs (group commit).

    One thread writes at a time (the caller serializes ``write``, ``append``, ``append_many`` and
    ``close``); ``sync_to`` may be called from any number of threads meanwhile.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = os.fstat(self._fd).st_size  # bytes written
        self.synced = self.size  # bytes known to be on disk
        self.syncs = 0  # fdatasyncs done (group commit shares them)
        self._sync = threading.Condition()
        self._syncing = False

    def append(self, payload: bytes) -> None:
        self.sync_to(self.write(payload))

    def write(self, payload: bytes) -> int:
        """Write one record, not synced yet; the offset it ends at (for ``sync_to``)."""
        self._write(payload)
        return self.size

    def append_many(self, payloads: list[bytes]) -> None:
        """Several records, synced once at the end (for snapshots, written before they count)."""
        for payload in payloads:
            self._write(payload)
        self.sync_to(self.size)

    def sync_to(self, offset: int) -> None:
        """Return once the file's first ``offset`` bytes are on disk; OSError if a sync fails."""
        with self._sync:
            while self.synced < offset:
                if self._syncing:
                    self._sync.wait()  # a sync is running: it may cover ``offset``, or the next will
                    continue
                self._sync_locked()

    def _sync_locked(self) -> None:
        """One fdatasync covering every byte written before it starts; others wait meanwhile."""
        self._syncing = True
        covered = self.size  # every byte counted here was written: the fdatasync below covers it
        synced = False
        self._sync.release()
        try:
            os.fdatasync(self._fd)
            synced = True
        finally:
            self._sync.acquire()
            self._syncing = False
            if synced:
                self.synced = max(self.synced, covered)
                self.syncs += 1
            self._sync.notify_all()

    def _write(self, payload: bytes) -> None:
        record = frame(payload)
        view = memoryview(record)
        while view:  # a regular file takes it whole, short of a full disk
            view = view[os.write(self._fd, view) :]
        self.size += len(record)

    def close(self) -> None:
        """Sync what is not on disk yet (so that no ``sync_to`` waits on a closed file), close."""
        if self._fd < 0:
            return
        self.sync_to(self.size)
        with self._sync:
            os.close(self._fd)
            self._fd = -1

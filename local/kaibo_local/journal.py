"""Append-only record files with checksums: the local stack's journal and snapshots on disk.

A file is a sequence of records, each ``length (4 bytes, big-endian) | crc32 (4 bytes) | payload``.
``RecordWriter.append`` writes one record and ``fdatasync``s it before returning, so a record
whose write returned is on disk. Reading (``read_records``) tells three endings apart:

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
    """Appends records to a file, each on disk (fdatasync) before ``append`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = os.fstat(self._fd).st_size

    def append(self, payload: bytes) -> None:
        self._write(payload)
        os.fdatasync(self._fd)

    def append_many(self, payloads: list[bytes]) -> None:
        """Several records, synced once at the end (for snapshots, written before they count)."""
        for payload in payloads:
            self._write(payload)
        os.fdatasync(self._fd)

    def _write(self, payload: bytes) -> None:
        record = frame(payload)
        view = memoryview(record)
        while view:  # a regular file takes it whole, short of a full disk
            view = view[os.write(self._fd, view) :]
        self.size += len(record)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

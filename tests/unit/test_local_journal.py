"""Record files (kaibo_local.journal): what a torn last write and damage in the middle look like."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaibo_local.journal import HEADER, CorruptRecordsError, RecordWriter, frame, read_records


def written(path: Path, payloads: list[bytes]) -> Path:
    writer = RecordWriter(path)
    for payload in payloads:
        writer.append(payload)
    writer.close()
    return path


def test_given_appended_records_then_they_read_back_in_order_with_no_tail(tmp_path: Path) -> None:
    path = written(tmp_path / "j", [b"one", b"", b"three" * 1000])
    read = read_records(path)
    assert read.records == [b"one", b"", b"three" * 1000]
    assert read.torn_bytes == 0
    assert read.valid_bytes == path.stat().st_size


def test_given_a_writer_reopened_then_it_appends_after_what_is_there(tmp_path: Path) -> None:
    path = written(tmp_path / "j", [b"a"])
    writer = RecordWriter(path)
    assert writer.size == len(frame(b"a"))
    writer.append_many([b"b", b"c"])
    writer.close()
    assert read_records(path).records == [b"a", b"b", b"c"]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\x00\x00", id="header cut short"),
        pytest.param(HEADER.pack(100, 0) + b"x" * 10, id="payload cut short"),
        pytest.param(frame(b"last write")[:-1] + b"?", id="complete length, wrong content"),
    ],
)
def test_given_a_torn_last_write_then_the_records_before_it_are_read_and_its_bytes_reported(
    tmp_path: Path, tail: bytes
) -> None:
    path = written(tmp_path / "j", [b"kept-1", b"kept-2"])
    whole = path.stat().st_size
    with path.open("ab") as file:
        file.write(tail)
    read = read_records(path)
    assert read.records == [b"kept-1", b"kept-2"]
    assert read.valid_bytes == whole
    assert read.torn_bytes == len(tail)


def test_given_a_damaged_record_followed_by_others_then_reading_refuses_naming_where(tmp_path: Path) -> None:
    path = written(tmp_path / "j", [b"first", b"second", b"third"])
    data = bytearray(path.read_bytes())
    second_payload = len(frame(b"first")) + HEADER.size
    data[second_payload] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordsError) as raised:
        read_records(path)
    assert raised.value.offset == len(frame(b"first"))
    assert raised.value.index == 1
    assert "checksum mismatch" in str(raised.value)


def test_given_an_empty_file_then_no_records_and_no_tail(tmp_path: Path) -> None:
    path = tmp_path / "j"
    path.write_bytes(b"")
    read = read_records(path)
    assert (read.records, read.valid_bytes, read.torn_bytes) == ([], 0, 0)

"""kaibo.sse: the client's incremental event-stream parser (WHATWG rules)."""

from __future__ import annotations

import pytest

from kaibo.sse import SseEvent, SseParser


def parse(*chunks: bytes) -> list[SseEvent]:
    parser = SseParser()
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return events


def pairs(events: list[SseEvent]) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in events]


STREAM = b'event: candidates\ndata: {"a":1}\n\nevent: final\ndata: {"b":"\xc3\xbc"}\n\n'
EXPECTED = [("candidates", '{"a":1}'), ("final", '{"b":"ü"}')]


def test_given_a_stream_then_its_events_in_order() -> None:
    assert pairs(parse(STREAM)) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_given_the_stream_split_anywhere_then_the_same_events(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]

    assert pairs(parse(*chunks)) == EXPECTED  # also splits the two UTF-8 bytes of "ü"


def test_given_events_then_each_is_returned_by_the_feed_that_completes_it() -> None:
    parser = SseParser()

    assert parser.feed(b"event: candidates\ndata: 1\n") == []
    assert pairs(parser.feed(b"\nevent: fin")) == [("candidates", "1")]
    assert parser.feed(b"al\ndata: 2") == []
    assert pairs(parser.feed(b"\n\n")) == [("final", "2")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_given_any_line_ending_then_the_same_events(newline: bytes) -> None:
    stream = STREAM.replace(b"\n", newline)

    assert pairs(parse(stream)) == EXPECTED
    assert pairs(parse(*[stream[i : i + 1] for i in range(len(stream))])) == EXPECTED


def test_given_a_crlf_split_between_chunks_then_it_is_one_line_end() -> None:
    # Two line ends, not three: "data: x", then the blank line that dispatches.
    assert pairs(parse(b"data: x\r", b"\n\r", b"\n")) == [("message", "x")]
    # A lone CR at a chunk's end followed by a non-LF line is also one line end.
    assert pairs(parse(b"data: x\r", b"data: y\r\r")) == [("message", "x\ny")]


def test_given_several_data_lines_then_they_are_joined_by_newlines() -> None:
    assert pairs(parse(b"data: one\ndata:two\ndata\ndata:  four\n\n")) == [("message", "one\ntwo\n\n four")]


def test_given_comments_and_unknown_fields_then_they_are_ignored() -> None:
    stream = b": keep-alive\n:\nevent: x\nfoo: bar\ndata: 1\n: mid-event comment\n\n"

    assert pairs(parse(stream)) == [("x", "1")]


def test_given_an_event_without_data_then_nothing_is_dispatched_and_its_type_is_reset() -> None:
    assert pairs(parse(b"event: lonely\n\ndata: 1\n\n")) == [("message", "1")]


def test_given_an_empty_data_line_then_an_event_with_empty_data() -> None:
    assert pairs(parse(b"event: ping\ndata\n\n")) == [("ping", "")]


def test_given_no_space_after_the_colon_or_two_then_only_one_space_is_dropped() -> None:
    assert pairs(parse(b"event:x\ndata:  y \n\n")) == [("x", " y ")]


def test_given_an_unterminated_event_at_the_end_then_it_is_discarded() -> None:
    assert pairs(parse(b"data: 1\n\ndata: 2\n")) == [("message", "1")]
    assert pairs(parse(b"data: 1\n\ndata: 2")) == [("message", "1")]


def test_given_a_byte_order_mark_at_the_start_then_it_is_skipped() -> None:
    assert pairs(parse(b"\xef\xbb", b"\xbfdata: 1\n\n")) == [("message", "1")]


def test_given_ids_and_retry_then_they_are_kept_and_a_nul_id_is_ignored() -> None:
    parser = SseParser()
    (first,) = parser.feed(b"id: 7\nretry: 1500\ndata: a\n\n")
    (second,) = parser.feed(b"id: x\x00y\nretry: 2s\ndata: b\n\n")

    assert (first.id, first.retry) == ("7", 1500)
    assert (second.id, second.retry) == ("7", 1500)
    assert parser.last_event_id == "7"


def test_given_invalid_utf8_then_replacement_characters() -> None:
    assert pairs(parse(b"data: \xff\n\n")) == [("message", "\ufffd")]

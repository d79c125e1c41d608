"""The purge's search of a project's streams for the events an old ledger entry does not locate
(services/purging.StreamSearch, core/locating.py), over a fake that pages like DynamoDB: a page
stops at its limit and then says more may follow, even when nothing does."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.adapters.memory_ledger import InMemoryLedgerStore
from kaibo_core.core.ledger import LedgerEntry
from kaibo_core.core.locating import EventsFound, LocateCursor, LocateState, StreamNames
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.purging import StreamSearch

PROJECT = "prj_01JZ8Q4W7T2M5R9X3C6B1N0VKD"


class PagedStreams:
    """A project's streams (name -> event ids, seq 1 first), read as DynamoDB pages them."""

    def __init__(self, streams: dict[str, list[str]]) -> None:
        self.streams = streams

    def stream_names(self, project: ProjectId, after: str | None, limit: int) -> StreamNames:
        names = sorted(name for name in self.streams if after is None or name > after)[:limit]
        return StreamNames(tuple(names), more=len(names) == limit, reads=len(names))

    def find_events(
        self,
        project: ProjectId,
        stream: str,
        event_ids: Collection[str],
        from_seq: int,
        limit: int,
    ) -> EventsFound:
        read = list(enumerate(self.streams[stream], start=1))[from_seq - 1 :][:limit]
        found = {event: seq for seq, event in read if event in event_ids}
        next_seq = read[-1][0] + 1 if len(read) == limit else None
        return EventsFound(found, next_seq, reads=len(read))


def old_entry(event_ids: list[str]) -> LedgerEntry:
    ledger = InMemoryLedgerStore()
    return ledger.append(
        ProjectId(PROJECT),
        memory_ids=[],
        event_ids=event_ids,
        reason_digest="0" * 64,
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
    )


def search_run_by_run(
    streams: PagedStreams, entry: LedgerEntry, budget: int
) -> tuple[dict[str, tuple[str, int]], list[int], bool]:
    """Runs of ``budget`` reads each, every one going on from the state the last kept (at most 100
    runs): where each event was found, the reads of each run, whether the search finished."""
    found: dict[str, tuple[str, int]] = {}
    reads: list[int] = []
    for _ in range(100):
        sought = [event for event in entry.event_ids if event not in found]
        searched = StreamSearch(streams, budget, lambda: True).events(entry, sought)
        found.update({event: (stream, seq) for event, stream, seq in searched.found})
        reads.append(searched.reads)
        entry = replace(entry, locate=searched.state)
        if searched.finished:
            return found, reads, True
    return found, reads, False


STREAMS = {
    "alpha": ["evt_a1", "evt_a2", "evt_a3"],
    "beta": [],
    "chat": ["evt_c1", "evt_c2"],
    "zulu": ["evt_z1", "evt_z2", "evt_z3", "evt_z4"],
}


@given(
    budget=st.integers(min_value=1, max_value=12),
    sought=st.lists(
        st.sampled_from(["evt_a2", "evt_c2", "evt_z4", "evt_a1", "evt_nowhere", "evt_gone"]),
        min_size=1,
        max_size=4,
        unique=True,
    ),
)
def test_given_any_budget_then_runs_never_read_past_it_and_find_each_stored_event_where_it_is(
    budget: int, sought: list[str]
) -> None:
    streams = PagedStreams(STREAMS)
    found, reads, finished = search_run_by_run(streams, old_entry(sought), budget)
    assert finished
    assert all(0 < spent <= budget for spent in reads[:-1])
    assert reads[-1] <= budget
    where = {event: (stream, at) for stream, events in STREAMS.items() for at, event in enumerate(events, 1)}
    assert found == {event: where[event] for event in sought if event in where}


def test_given_a_whole_budget_then_one_run_reads_every_stream_once_for_an_event_stored_nowhere() -> None:
    streams = PagedStreams(STREAMS)
    searched = StreamSearch(streams, 1_000, lambda: True).events(old_entry(["evt_nowhere"]), ["evt_nowhere"])
    assert (searched.finished, searched.found, searched.nowhere) == (True, (), ("evt_nowhere",))
    assert searched.reads == len(STREAMS) + sum(len(events) for events in STREAMS.values())


@pytest.mark.parametrize(
    ("budget", "cursor"),
    [
        (2, LocateCursor("alpha", 1)),  # two stream names listed, no event read yet
        (7, LocateCursor("alpha", 4)),  # every name, then alpha's three events: its end not seen yet
    ],
)
def test_given_a_run_out_of_budget_then_its_cursor_says_where_the_next_run_goes_on(
    budget: int, cursor: LocateCursor
) -> None:
    searched = StreamSearch(PagedStreams(STREAMS), budget, lambda: True).events(
        old_entry(["evt_z4"]), ["evt_z4"]
    )
    assert (searched.state, searched.reads, searched.finished) == (LocateState(cursor), budget, False)


def test_given_a_run_out_of_time_at_a_stream_s_end_then_the_next_run_goes_on_after_that_stream() -> None:
    entry = replace(old_entry(["evt_z4"]), locate=LocateState(LocateCursor("chat", 2)))
    answers = iter([True])
    cut = StreamSearch(PagedStreams(STREAMS), 1_000, lambda: next(answers, False)).events(entry, ["evt_z4"])
    assert (cut.state, cut.reads) == (LocateState(LocateCursor("chat")), 1)

    entry = replace(entry, locate=cut.state)
    rest = StreamSearch(PagedStreams(STREAMS), 1_000, lambda: True).events(entry, ["evt_z4"])
    assert (rest.found, rest.reads, rest.finished) == ((("evt_z4", "zulu", 4),), 1 + 4, True)


def test_given_no_time_left_then_nothing_is_read_and_the_state_is_kept() -> None:
    entry = replace(old_entry(["evt_z4"]), locate=LocateState(LocateCursor("chat", 2)))
    searched = StreamSearch(PagedStreams(STREAMS), 1_000, lambda: False).events(entry, ["evt_z4"])
    assert (searched.reads, searched.state, searched.found) == (0, entry.locate, ())


def test_given_a_finished_search_then_nothing_is_read_again() -> None:
    entry = replace(old_entry(["evt_nowhere"]), locate=LocateState(finished=True))
    searched = StreamSearch(PagedStreams(STREAMS), 1_000, lambda: True).events(entry, ["evt_nowhere"])
    assert (searched.reads, searched.nowhere) == (0, ("evt_nowhere",))


def test_given_one_run_then_its_budget_is_shared_by_every_entry() -> None:
    search = StreamSearch(PagedStreams(STREAMS), 10, lambda: True)
    first = search.events(old_entry(["evt_a1"]), ["evt_a1"])
    second = search.events(old_entry(["evt_z1"]), ["evt_z1"])
    assert (first.found, first.reads, first.finished) == ((("evt_a1", "alpha", 1),), 4 + 3, True)
    assert (second.reads, second.state) == (10 - 7, LocateState(LocateCursor("alpha", 1)))

"""The purge's search for events whose place a ledger entry does not keep (docs/forget.md, step 3).

Entries written before entries kept their events' locations (``eventLocations``) may name an event
no memory cites. Events are keyed by stream and seq, and nothing maps an event id to them, so the
purge reads the project's streams (in name order, each in seq order) for such events: their keys
and ids only, never a payload. That can be long, so a run reads at most ``LOCATE_READS_PER_RUN``
items (stream heads and events) for every entry together, and a search that has not ended keeps a
``LocateCursor`` beside its entry: the next run goes on from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from kaibo_core.core.ledger import EventLocation  # core.ledger keeps a LocateState per entry

#: Items (stream heads and events) the purge reads per run, every entry's search together: about
#: 50,000 read units per run at most, eventually consistent (a Query is charged for whole items,
#: whatever it projects). A project with more events is searched over several runs.
LOCATE_READS_PER_RUN: Final = 100_000
#: Streams listed per read of the project's stream heads.
LOCATE_STREAMS_PER_PAGE: Final = 100


@dataclass(frozen=True)
class LocateCursor:
    """Where a search goes on: in ``stream`` from ``seq`` on; ``seq`` None: with the streams
    after ``stream`` (it was read to its end). Kept beside the entry, neither hashed nor served."""

    stream: str
    seq: int | None = None


@dataclass(frozen=True)
class LocateState:
    """How far the search for an entry's events has gone: not started (the default), going on
    from ``cursor``, or ``finished`` (every stream of the project read: an event still sought is
    stored nowhere)."""

    cursor: LocateCursor | None = None
    finished: bool = False


@dataclass(frozen=True)
class StreamNames:
    """One read of a project's stream heads: stream names in order, whether more follow, and how
    many items were read."""

    names: tuple[str, ...]
    more: bool
    reads: int


@dataclass(frozen=True)
class EventsFound:
    """One read of a stream: the sought events in it (id -> seq), the seq to read from next (None:
    the stream's end), and how many items were read."""

    found: dict[str, int]
    next_seq: int | None
    reads: int


@dataclass(frozen=True)
class Searched:
    """What one run's search for an entry's events did: ``found`` (their locations), ``reads``
    (items read), ``finished`` (every stream read, or every event found) and ``state`` (to keep)."""

    sought: tuple[str, ...]
    found: tuple[EventLocation, ...] = ()
    reads: int = 0
    state: LocateState = field(default_factory=LocateState)

    @property
    def finished(self) -> bool:
        return self.state.finished

    @property
    def nowhere(self) -> tuple[str, ...]:
        """The events stored in no stream of the project (only once the search is finished)."""
        located = {event for event, _stream, _seq in self.found}
        return tuple(e for e in self.sought if e not in located) if self.finished else ()

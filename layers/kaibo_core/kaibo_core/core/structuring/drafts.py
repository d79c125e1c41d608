"""What a structurer takes and gives (pure: no I/O).

A structurer reads one event (its text, time and time zone) and proposes memory
**drafts**: typed statements with a validity start, a confidence, a subject, and
links to earlier memories they supersede or cancel. It may look up earlier
memories through a ``CandidateSearch`` the service gives it; a link is only ever
to one of the candidates it was given (or to an id the event names explicitly).
The service, not the structurer, decides the final order by ``occurredAt`` and
writes everything (kaibo_core.services.structuring).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from kaibo_core.core.models.memories import MemoryType

LinkKind = Literal["supersedes", "cancels"]

#: A structurer proposes at most this many links per event (an event's text may try to
#: steer a model into retiring many memories; rules never need more).
MAX_LINKS_PER_EVENT: Final = 5
#: At most this many memories from one event.
MAX_DRAFTS_PER_EVENT: Final = 20
#: Candidates a structurer may see per search.
MAX_CANDIDATES: Final = 10
#: The time zone relative dates resolve in when neither the event nor its stream or
#: project names one (docs/structuring.md, "Time zones").
DEFAULT_TIME_ZONE: Final = "UTC"


@dataclass(frozen=True, slots=True)
class EventToStructure:
    """One stored event, as the structurer sees it."""

    event_id: str
    stream: str
    seq: int
    hash: str
    kind: str  # message | tool_call | file | commit
    text: str  # the event's text (kaibo_core.core.provisional.provisional_text)
    occurred_at: str  # canonical instant (UTC, ms, Z)
    time_zone: str = DEFAULT_TIME_ZONE  # IANA name, already validated
    supersedes: tuple[str, ...] = ()  # memory ids the event names explicitly
    cancels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CandidateMemory:
    """An earlier memory a statement may refer to (current: active or provisional)."""

    memory_id: str
    type: MemoryType
    content: str
    valid_from: str
    stream: str
    subject: str | None = None
    score: float = 0.0
    #: Its vector's code (the memory item's placement), when placed by the model the service runs.
    vector: str | None = None


@dataclass(frozen=True, slots=True)
class Link:
    kind: LinkKind
    memory_id: str


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """One statement a structurer proposes to remember."""

    type: MemoryType
    content: str
    valid_from: str  # canonical instant; the event's occurredAt unless the statement says otherwise
    confidence: float  # 0..1
    subject: str | None = None  # a normalized subject key ("release target"), for matching later
    links: tuple[Link, ...] = field(default_factory=tuple)


#: Earlier current memories matching a query (best first, at most MAX_CANDIDATES).
CandidateSearch = Callable[[str], Sequence[CandidateMemory]]
#: The cosine of a statement's text to a candidate memory by recall by meaning's model; None when
#: the candidate has no vector of it. Given to the rules when the model is on.
Meaning = Callable[[str, CandidateMemory], float | None]


def clear_best(scored: Sequence[tuple[int, CandidateMemory]]) -> list[CandidateMemory]:
    """The one candidate scored highest, as a list; [] when none is scored or two are as close
    (which one did the statement mean?)."""
    if not scored:
        return []
    best = max(score for score, _ in scored)
    found = [candidate for score, candidate in scored if score == best]
    return found if len(found) == 1 else []

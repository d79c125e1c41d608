"""Context: a memory's neighbours in its stream corroborate it (docs/recall.md, "Context").

    the best candidates (anchors) --their source events' neighbours, seq ± span in the same stream-->
      the memories those events made, fetched and scored like every candidate
    every candidate's score moves weight x the way toward its best neighbour's, when that is higher

An answer is often told next to the words that find it, not in them: "Did you go anywhere last
weekend?" / "Yes, hiking on Mount Tam", or a question answered in the turn after the one that names
its subject. Neither the words nor the meaning of the second turn match the question; its place in
the conversation does. Pure: no I/O; the service reads the neighbours' events and memory items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Where an event sits: its stream and its sequence number there.
Location = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ContextParams:
    """The frozen parameters of context (docs/recall.md, "Context")."""

    #: The best candidates whose neighbours are fetched.
    anchors: int = 5
    #: Events on each side of a memory's source event that are its neighbours.
    span: int = 2
    #: The share of the gap to its best neighbour's score that a candidate closes.
    weight: float = 0.6

    def __post_init__(self) -> None:
        if self.anchors < 0 or self.span < 0:
            raise ValueError("anchors and span must be >= 0")
        if not 0.0 <= self.weight < 1.0:
            raise ValueError(f"weight must be >= 0 and < 1 (a share of the gap), got {self.weight!r}")


def neighbour_locations(
    anchors: Iterable[Sequence[Location]], known: Iterable[Location], span: int
) -> list[Location]:
    """The locations within ``span`` of the anchors' locations that no candidate already holds
    (``known``), in the order first met: nearest the best anchor first."""
    held = set(known)
    wanted: dict[Location, None] = {}
    for locations in anchors:
        for stream, seq in locations:
            for distance in range(1, span + 1):
                for neighbour in ((stream, seq - distance), (stream, seq + distance)):
                    if neighbour[1] > 0 and neighbour not in held:
                        wanted[neighbour] = None
    return list(wanted)


def context_scores(
    scores: Mapping[str, float], locations: Mapping[str, Sequence[Location]], span: int, weight: float
) -> dict[str, float]:
    """Each memory's score moved ``weight`` of the way toward its best neighbour's, when that is
    higher (a neighbour: another memory whose source event lies within ``span`` of one of its own
    in the same stream; two memories of one event included). A memory stronger than all its
    neighbours keeps its score, and none passes its neighbour. A share of the gap, not of the
    neighbour's score: with recall by meaning, unrelated texts still have cosines of 0.1-0.3, and
    lifting them by a share of the score would put every neighbour right behind its anchor. The
    lift is computed from the scores before any lift: context does not spread along a stream."""
    at: dict[Location, list[str]] = {}
    for memory_id, memory_locations in locations.items():
        for location in memory_locations:
            at.setdefault(location, []).append(memory_id)
    lifted: dict[str, float] = {}
    for memory_id, score in scores.items():
        best = score
        for stream, seq in locations.get(memory_id, ()):
            for neighbour_seq in range(seq - span, seq + span + 1):
                for neighbour in at.get((stream, neighbour_seq), ()):
                    if neighbour != memory_id:
                        best = max(best, scores.get(neighbour, 0.0))
        lifted[memory_id] = score + weight * (best - score)
    return lifted

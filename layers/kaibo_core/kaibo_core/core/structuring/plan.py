"""An event's structuring plan and the writes that carry it out (pure: no I/O).

The **plan** is the structurer's drafts for one event. The first worker to structure
an event stores it on the event's provisional memory (a conditional write), and every
later or concurrent worker uses the stored plan: a redelivered job makes the same
memories with the same ids even when the structurer (a model, or a search whose
results moved) would answer differently the second time.

The **commit** is what switches the plan on, in one transaction: the provisional
memory becomes ``replaced``, the staged structured memories take their status, and
each link either retires an older memory (``superseded``/``canceled``, ``validTo``
set, linked both ways) or, for a statement older than the memory it names, files
the new memory as history behind it (docs/structuring.md, "Links").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.structuring.drafts import Link, MemoryDraft

CommitOutcome = Literal["committed", "already_committed", "refused", "conflict"]


def structured_memory_id(provisional_id: str, position: int) -> str:
    """The id of the ``position``-th (from 1) structured memory of an event: new, and the same
    on every attempt."""
    return f"{provisional_id}-{position}"


def require_staged(memory: MemoryRecord) -> MemoryRecord:
    """What a store's ``stage`` accepts: a memory in status ``staged`` naming what it becomes."""
    if memory.status != "staged" or memory.becomes is None:
        raise ValueError("stage takes a memory in status staged that names what it becomes")
    return memory


#: A draft's content at least this long that is a piece of the event's text is stored as where it is
#: in that text, not again: the plan is stored on the provisional memory, beside the text, and an
#: event near the payload limit would otherwise take that item past DynamoDB's 400 KB.
MIN_SPAN_CHARS: Final = 64


def encode_plan(drafts: Sequence[MemoryDraft], text: str) -> str:
    """The plan as stored; ``text`` is the event's (the provisional memory's content)."""
    return json.dumps(
        [
            {
                "type": d.type,
                **_content(d.content, text),
                "validFrom": d.valid_from,
                "confidence": d.confidence,
                "subject": d.subject,
                "links": [[link.kind, link.memory_id] for link in d.links],
            }
            for d in drafts
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _content(content: str, text: str) -> dict[str, Any]:
    start = text.find(content) if len(content) >= MIN_SPAN_CHARS else -1
    return {"content": content} if start < 0 else {"span": [start, start + len(content)]}


def decode_plan(plan: str, text: str) -> list[MemoryDraft]:
    """The drafts of a stored plan (``text``: the event's, which its spans point into)."""
    data: list[dict[str, Any]] = json.loads(plan)
    return [
        MemoryDraft(
            type=d["type"],
            content=d["content"] if "span" not in d else text[d["span"][0] : d["span"][1]],
            valid_from=d["validFrom"],
            confidence=float(d["confidence"]),
            subject=d.get("subject"),
            links=tuple(Link(kind, memory_id) for kind, memory_id in d.get("links", [])),
        )
        for d in data
    ]


@dataclass(frozen=True, slots=True)
class Retire:
    """An older memory a new one supersedes or cancels: only if still ``active``, once."""

    memory_id: str
    status: Literal["superseded", "canceled"]
    valid_to: str
    by: str


@dataclass(frozen=True, slots=True)
class FileBehind:
    """A newer memory that a late-arriving older statement is filed behind as history:
    the newer one gains a ``supersedes`` link to it."""

    memory_id: str
    older: str


@dataclass(frozen=True, slots=True)
class StructuringCommit:
    provisional_id: str
    structured: tuple[MemoryRecord, ...]  # their final state (status, validTo, links)
    retire: tuple[Retire, ...] = ()
    file_behind: tuple[FileBehind, ...] = ()

    @property
    def structured_ids(self) -> list[str]:
        return [m.id for m in self.structured]

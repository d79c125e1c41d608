"""What a forget takes, decided without I/O: the set's closure rules, its preview token, its limits.

A forget names memories by one selector (a memory id, a query, a stream, a subject); the set it erases is
the closure of those matches under two relations, and never more:

- **older versions**: what a member ``supersedes`` (walking back), and the provisional memory a
  structured member ``replaces``;
- **same source event**: every memory made from one of the members' source events (the event's
  provisional memory and everything structured from it).

A newer version is *not* followed (``supersededBy``): forgetting "the release is July 13" must not
erase "it moved to July 17", said later in another event. It is taken only when it shares a
source event with the set (then it carries the same text).

A real forget may carry an **idempotency key** (its own namespace per project, apart from
remember's): its first answer is kept ``FORGET_KEY_TTL`` (``KeyedForget``, written in the ledger
append's transaction), so a retry under the key gets that answer again instead of a second entry.
A retry is recognised by a salted digest of the normalized request (``forget_request_digest``),
never by the request kept in clear; the salt is kept encrypted (``KeyedForget.salt_ciphertext``),
so that the record alone confirms no guess of the reason, the query or the subject.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal

from kaibo_core.core.chain import canonicalize
from kaibo_core.core.indexing import memory_terms
from kaibo_core.core.ledger import EventLocation, LedgerEntry
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import PREFERENCE_SUBJECT_WORD, MemoryRecord, SourceEventRef
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.text import query_terms

Why = Literal["match", "older_version", "same_source_event"]

#: A set larger than this is refused unless the call raises ``maxMemories``.
DEFAULT_MAX_MEMORIES: Final = 100
#: ``maxMemories`` may go up to this (one forget is one ledger entry and one request).
MAX_MEMORIES_LIMIT: Final = 1000
#: A ``query`` or ``subject`` whose rarest stem is indexed for more memories than this is refused
#: (``forget_selector_too_broad``) before any memory is read: resolving it completely would read
#: that many candidates, ten times the largest set a forget may take.
MAX_FORGET_CANDIDATES: Final = 10 * MAX_MEMORIES_LIMIT
#: Statuses that are already forgotten: never part of a new set.
FORGOTTEN: Final = frozenset({"tombstoned", "purged"})
#: Internal statuses a forget takes too (never served): a structured memory not switched on yet.
UNSERVED: Final = frozenset({"staged"})
#: How long a forget's idempotency key keeps the first call's answer (and its ``reasonSalt``),
#: for the client's retries; the key may be used afresh after it.
FORGET_KEY_TTL: Final = timedelta(hours=24)


class ForgetKeyTakenError(RuntimeError):
    """Another forget claimed this idempotency key first: nothing of this one was written."""

    def __init__(self, key: str) -> None:
        super().__init__(f"forget idempotency key {key!r} was claimed by another call")
        self.key = key


@dataclass(frozen=True, slots=True)
class MemoryHeader:
    """What a candidate of a ``query`` or ``subject`` is filtered by, read without its text."""

    id: str
    status: str
    subject: str | None


@dataclass(frozen=True, slots=True)
class ForgetMember:
    memory: MemoryRecord
    why: Why


@dataclass(frozen=True, slots=True)
class ForgetSet:
    """The memories a forget erases (in the order found: matches first) and their source events."""

    members: tuple[ForgetMember, ...]
    event_ids: tuple[str, ...]
    #: Tombstones for events of the set that have no memory yet (a stream forgotten before its
    #: events were indexed): written so that nothing is made from those events later.
    placeholders: tuple[MemoryRecord, ...] = ()

    @property
    def memory_ids(self) -> list[str]:
        return sorted(member.memory.id for member in self.members)

    @property
    def event_locations(self) -> list[EventLocation]:
        """Where each of ``event_ids`` lives, as the set's memories cite it."""
        memories = [*(member.memory for member in self.members), *self.placeholders]
        cited = {ref.event_id: (ref.stream, ref.seq) for memory in memories for ref in memory.source_events}
        return [(event, *cited[event]) for event in self.event_ids if event in cited]

    @property
    def preview_token(self) -> str:
        return preview_token(self.memory_ids, self.event_ids)


@dataclass(frozen=True, slots=True)
class ForgetRequest:
    reason: str
    memory_id: str | None = None
    query: str | None = None
    stream: str | None = None
    subject: str | None = None
    dry_run: bool = False
    preview_token: str | None = None
    max_memories: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class AnsweredMember:
    """A member of a forget's set as its answer shows it (a real forget never shows text)."""

    id: str
    status: str  # before the forget
    type: str
    why: Why


#: The encryption context's ``purpose`` of a kept reason salt: a ciphertext made for anything else
#: with the same KMS key (a webhook's signing secret) does not decrypt as a salt, nor the reverse.
FORGET_KEY_SALT_PURPOSE: Final = "forget-key-salt"


def salt_encryption_context(project_id: str, attempt_id: str) -> dict[str, str]:
    """What a kept salt's ciphertext is bound to: its project and its record's attempt (a random
    receipt id). Never the idempotency key: KMS logs the context in clear (CloudTrail), and a key
    is the caller's own text."""
    return {"project": project_id, "purpose": FORGET_KEY_SALT_PURPOSE, "attempt": attempt_id}


@dataclass(frozen=True, slots=True)
class KeyedForget:
    """What a real forget under an idempotency key answered, kept to answer its retries alike.

    ``attempt_id`` is the receipt id that forget reserved (its entry's id when it wrote one), so
    that a write of its own, retried by the AWS SDK, is not taken for another call's.

    The reason's salt is kept encrypted (``salt_ciphertext``, bound by
    ``salt_encryption_context``): with it in clear, whoever reads the table could confirm a
    guessed reason against the ledger's ``reasonDigest``, or a guessed request against
    ``request_digest``. A record written before salts were encrypted holds it in clear
    (``clear_salt``) and is read as it is until it expires. Exactly one of the two is set.
    """

    key: str
    request_digest: str
    salt_ciphertext: str | None
    attempt_id: str
    receipt_id: str | None  # None: the set was empty, nothing was written but this record
    members: tuple[AnsweredMember, ...]
    event_ids: tuple[str, ...]
    written_at: int  # epoch seconds
    clear_salt: str | None = None

    def __post_init__(self) -> None:
        if (self.salt_ciphertext is None) == (self.clear_salt is None):
            raise ValueError("a kept forget holds its salt either encrypted or (written before) in clear")

    @property
    def expires_at(self) -> int:
        """Epoch seconds (the DynamoDB TTL attribute): the key is free again from then on."""
        return self.written_at + int(FORGET_KEY_TTL.total_seconds())

    def expired(self, now: int) -> bool:
        return self.expires_at <= now


@dataclass(frozen=True, slots=True)
class ForgetOutcome:
    found: ForgetSet
    dry_run: bool
    receipt: LedgerEntry | None = None
    reason_salt: str | None = None
    #: The call carried an idempotency key: True if it repeated an earlier call, answered as that
    #: one was (``replay``; ``found`` is then empty: nothing was resolved again).
    replayed: bool | None = None
    replay: KeyedForget | None = None

    @property
    def memories(self) -> tuple[AnsweredMember, ...]:
        return self.replay.members if self.replay is not None else answered_members(self.found)

    @property
    def event_ids(self) -> tuple[str, ...]:
        return self.replay.event_ids if self.replay is not None else self.found.event_ids

    @property
    def preview_token(self) -> str:
        return preview_token([m.id for m in self.memories], self.event_ids)


def answered_members(found: ForgetSet) -> tuple[AnsweredMember, ...]:
    return tuple(
        AnsweredMember(member.memory.id, member.memory.status, member.memory.type, member.why)
        for member in found.members
    )


def normalized_request(request: ForgetRequest) -> dict[str, Any]:
    """What makes two forgets the same request: the selector (a query by its stems: two queries
    with the same stems select the same memories; a subject by ``comparable_subject``), the
    reason, ``maxMemories`` and ``previewToken``. Not ``dryRun`` (a keyed forget is never a dry
    run) nor the key itself."""
    if request.memory_id is not None:
        selector: dict[str, Any] = {"memoryId": request.memory_id}
    elif request.query is not None:
        selector = {"query": sorted(query_terms(request.query))}
    elif request.subject is not None:
        selector = {"subject": comparable_subject(request.subject)}
    else:
        selector = {"stream": request.stream}
    document: dict[str, Any] = {"selector": selector, "reason": request.reason}
    if request.max_memories is not None:
        document["maxMemories"] = request.max_memories
    if request.preview_token is not None:
        document["previewToken"] = request.preview_token
    return document


def forget_request_digest(salt_hex: str, request: ForgetRequest) -> str:
    """``sha256(salt || JCS(normalized request))``, hex: salted with the reason's salt, so that the
    record kept for the key cannot confirm a guess of the reason, the query or the subject
    without that salt, which the record keeps only encrypted."""
    return hashlib.sha256(bytes.fromhex(salt_hex) + canonicalize(normalized_request(request))).hexdigest()


_WHITESPACE: Final = re.compile(r"\s+")


def comparable_subject(subject: str) -> str:
    """A subject as ``forget`` compares it: Unicode NFKC, case-folded, every run of whitespace
    one space, none at the ends. Nothing else is changed: punctuation and words count
    ("Alice's" is not "alice", "the release" is not "release")."""
    folded = unicodedata.normalize("NFKC", subject).casefold()
    return _WHITESPACE.sub(" ", folded).strip()


def subject_lookup_terms(subject: str) -> frozenset[str]:
    """The index terms a memory with this subject is found by: the subject's stems, but for the
    word the rules add to a preference's subject (``PREFERENCE_SUBJECT_WORD``), which its text
    may not hold, unless nothing else is left. Empty: the subject has no searchable word."""
    terms = frozenset(query_terms(subject))
    narrowed = terms - frozenset(query_terms(PREFERENCE_SUBJECT_WORD))
    return narrowed or terms


def has_subject(memory: MemoryRecord | MemoryHeader, wanted: str) -> bool:
    """``memory``'s stored subject is ``wanted`` (a ``comparable_subject``)."""
    return memory.subject is not None and comparable_subject(memory.subject) == wanted


def holds_terms(memory: MemoryRecord, terms: Iterable[str]) -> bool:
    """``memory``'s text (with its date) has every one of ``terms``: what its postings say,
    recomputed from the text as the removal of its postings does."""
    if memory.content is None:
        return False
    return set(terms) <= set(memory_terms(memory))


def preview_token(memory_ids: Iterable[str], event_ids: Iterable[str]) -> str:
    """A digest of exactly the set: sha256 of the JCS of its sorted memory and event ids."""
    document = {"eventIds": sorted(set(event_ids)), "memoryIds": sorted(set(memory_ids))}
    return hashlib.sha256(canonicalize(document)).hexdigest()


def older_versions(memory: MemoryRecord) -> list[str]:
    """The memories one step older than ``memory``: what it supersedes, and what it replaces."""
    return [*memory.supersedes, *([memory.replaces] if memory.replaces else [])]


def same_event_memories(memory: MemoryRecord) -> list[str]:
    """Memories made from the same text as ``memory``: the structured ones a provisional memory
    was replaced by (its siblings are found through their common provisional memory)."""
    return list(memory.replaced_by)


def unlocated_placeholder(project_id: str, event_id: str, now: str) -> MemoryRecord:
    """The tombstoned provisional memory of a forgotten event whose place nothing records (a ledger
    entry written before entries kept their events' locations, naming an event no memory cites): it
    cites no event (none could be read), but like ``forgotten_placeholder`` it keeps anything from
    being made from the event later."""
    return MemoryRecord(
        project_id=project_id,
        id=provisional_memory_id(event_id),
        status="tombstoned",
        type="episode",
        content=None,
        valid_from=now,
        valid_to=None,
        confidence=0.0,
        stream="",
        source_events=(),
        created_at=now,
    )


def forgotten_placeholder(event: EventRecord, now: str) -> MemoryRecord:
    """The tombstoned provisional memory of a forgotten event that has none, so that none is made
    from it later (structuring and remember only ever put a memory item that does not exist)."""
    return MemoryRecord(
        project_id=event.project_id,
        id=provisional_memory_id(event.id),
        status="tombstoned",
        type="episode",
        content=None,
        valid_from=event.occurred_at,
        valid_to=None,
        confidence=0.0,
        stream=event.stream,
        source_events=(SourceEventRef(event.id, event.stream, event.seq, event.hash),),
        created_at=now,
    )

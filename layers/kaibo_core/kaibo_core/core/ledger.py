"""The deletion ledger: a per-project, append-only, hash-chained record of forget operations.

Every forget appends one entry, whose ``id`` is the receipt id the caller gets back. The
entries are chained exactly like events (same canonical form, same hash, same genesis; see
``kaibo_core.core.chain`` and the "deletion ledger" section of docs/verify.md)::

    reasonDigest = sha256(reasonSalt || UTF-8(reason))       (hex)
    hash         = sha256(prevHash || JCS(header))           (hex)
    genesis prevHash = 32 zero bytes

Like chain.py, this module is shared by the service (which hashes when it appends) and the
client (which recomputes in ``kaibo verify``): it depends only on the standard library and
the pure core (``chain`` for JCS, ``ids`` for receipt ids), never on boto3, pydantic or
Powertools.

The ledger stores a salted digest of the reason, never the reason: the salt is returned
once, to the caller, so only someone who holds it can confirm "was the reason X?".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaibo_core.core import chain, ids
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.locating import LocateState

LEDGER_FORMAT_VERSION = 1

#: Where an event lives: (event id, stream, seq).
EventLocation = tuple[str, str, int]
REASON_SALT_BYTES = 16
RECEIPT_ID_PREFIX = "rcpt"

_HEX64 = re.compile("[0-9a-f]{64}")
_REASON_SALT = re.compile(f"[0-9a-f]{{{2 * REASON_SALT_BYTES}}}")

#: The hashed header, in the order the docs list it (JCS sorts keys anyway).
LEDGER_HEADER_FIELDS = (
    "v",
    "projectId",
    "seq",
    "id",
    "memoryIds",
    "eventIds",
    "reasonDigest",
    "tombstonedAt",
    "purgeAfter",
)

#: Where a served entry carries each header field (the served shape says ``ledgerSeq``, and
#: leaves ``projectId`` out: the verifier supplies the project it asked about).
_SERVED_NAME = {field: field for field in LEDGER_HEADER_FIELDS} | {"seq": "ledgerSeq"}

#: What a served entry must carry; ``projectId`` may be omitted.
_REQUIRED_SERVED = (
    *(_SERVED_NAME[f] for f in LEDGER_HEADER_FIELDS if f != "projectId"),
    "hash",
    "prevHash",
)


def ledger_busy() -> TooManyRequestsError:
    """An append kept losing the race for the head (or its transaction kept meeting another one);
    nothing was appended, unless its first attempt was still committing. Retry later."""
    return TooManyRequestsError(
        "ledger_busy",
        "Too many forgets are being recorded in this project at once; retry after the Retry-After seconds.",
        retry_after_seconds=1,
    )


class ReceiptIdTakenError(ValueError):
    """The receipt id given to an append already names an entry recording another forget."""


# --- receipt ids and reason digests -------------------------------------------------------------


def new_receipt_id() -> str:
    """``rcpt_`` + 26 Crockford base32 characters, sortable by creation time (``ids.new_id``)."""
    return ids.new_id(RECEIPT_ID_PREFIX)


def new_reason_salt() -> str:
    """A fresh salt for one reason: 16 random bytes as 32 lowercase hex characters."""
    return secrets.token_hex(REASON_SALT_BYTES)


def reason_digest(salt_hex: str, reason: str) -> str:
    """``sha256(salt || UTF-8(reason))`` as lowercase hex; the salt is 32 lowercase hex characters.

    The reason is hashed as its plain UTF-8 bytes (it is a string, not a JSON value: no JCS).
    A reason with a lone surrogate has no UTF-8 form and raises ValueError.
    """
    if not _REASON_SALT.fullmatch(salt_hex):
        raise ValueError(f"reason salt must be {2 * REASON_SALT_BYTES} lowercase hex characters")
    try:
        encoded = reason.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"reason is not valid Unicode text: {exc}") from exc
    return hashlib.sha256(bytes.fromhex(salt_hex) + encoded).hexdigest()


# --- headers and hashes -------------------------------------------------------------------------


def _id_list(values: Iterable[str]) -> list[str]:
    """Sorted and without repeats: a forget names a *set* of ids, whatever order it found them in."""
    items = list(values)
    if not all(isinstance(value, str) for value in items):
        raise TypeError("memory and event ids must be strings")
    return sorted(set(items))


def ledger_header(
    *,
    project_id: str,
    seq: int,
    receipt_id: str,
    memory_ids: Iterable[str],
    event_ids: Iterable[str],
    reason_digest: str,
    tombstoned_at: str,
    purge_after: str,
) -> dict[str, Any]:
    """The hashed header of a ledger entry (see docs/verify.md, "The deletion ledger")."""
    return {
        "v": LEDGER_FORMAT_VERSION,
        "projectId": project_id,
        "seq": seq,
        "id": receipt_id,
        "memoryIds": _id_list(memory_ids),
        "eventIds": _id_list(event_ids),
        "reasonDigest": reason_digest,
        "tombstonedAt": tombstoned_at,
        "purgeAfter": purge_after,
    }


def ledger_hash(prev_hash_hex: str, header: Mapping[str, Any]) -> str:
    """``sha256(prevHash || JCS(header))`` as lowercase hex; ``prev_hash_hex`` is 64 hex characters.

    Written out rather than delegated to ``chain.event_hash``, so that the ledger's formula
    (which docs/verify.md promises separately) cannot change with the events' by accident.
    """
    return hashlib.sha256(bytes.fromhex(prev_hash_hex) + chain.canonicalize(dict(header))).hexdigest()


@dataclass(frozen=True)
class LedgerEntry:
    """One forget as recorded: its header fields, its link and its hash."""

    project_id: str
    seq: int
    id: str
    memory_ids: tuple[str, ...]
    event_ids: tuple[str, ...]
    reason_digest: str
    tombstoned_at: str
    purge_after: str
    prev_hash: str
    hash: str
    v: int = LEDGER_FORMAT_VERSION
    #: Where each of ``event_ids`` lives, kept with the entry but neither hashed nor served: the
    #: purge erases every named event's payload by it, also one no memory cites (an event whose
    #: forget died before writing its placeholder). Empty in entries written before it was kept.
    event_locations: tuple[EventLocation, ...] = field(default=(), compare=False)
    #: The idempotency key the forget was sent under (None: none), kept with the entry but neither
    #: hashed nor served: the purge deletes the key's record, which holds the reason's salt.
    forget_key: str | None = field(default=None, compare=False)
    #: How far the purge's search of the project's streams for the events whose place this entry
    #: does not keep has gone (core/locating.py); neither hashed nor served.
    locate: LocateState = field(default_factory=LocateState, compare=False)

    def header(self) -> dict[str, Any]:
        """The hashed header, rebuilt from the stored fields (``v`` as stored, not as current)."""
        return {
            "v": self.v,
            "projectId": self.project_id,
            "seq": self.seq,
            "id": self.id,
            "memoryIds": list(self.memory_ids),
            "eventIds": list(self.event_ids),
            "reasonDigest": self.reason_digest,
            "tombstonedAt": self.tombstoned_at,
            "purgeAfter": self.purge_after,
        }

    def as_served(self) -> dict[str, Any]:
        """The receipt shape of docs (API.md ``receipt``, and each ``GET /v1/ledger`` entry)."""
        return {
            "id": self.id,
            "ledgerSeq": self.seq,
            "hash": self.hash,
            "prevHash": self.prev_hash,
            "memoryIds": list(self.memory_ids),
            "eventIds": list(self.event_ids),
            "reasonDigest": self.reason_digest,
            "tombstonedAt": self.tombstoned_at,
            "purgeAfter": self.purge_after,
            "v": self.v,
        }


@dataclass(frozen=True)
class PurgeOutcome:
    """How the purge finished a ledger entry, kept beside it (not hashed: the entry never changes).

    ``finished_at`` is when it did. ``unlocated_event_ids`` are the events it named that no stream
    of the project holds (an entry written before entries kept their events' locations, naming an
    event no memory cites, which the purge then searched every stream for): no payload of theirs is
    stored, so there was nothing to erase, and nothing can be made from them (a tombstoned
    placeholder stands in their place). The receipt reads ``purged`` either way and carries these
    ids beside its state.
    """

    finished_at: str
    unlocated_event_ids: tuple[str, ...] = ()


def make_entry(
    *,
    project_id: str,
    seq: int,
    receipt_id: str,
    memory_ids: Iterable[str],
    event_ids: Iterable[str],
    reason_digest: str,
    tombstoned_at: str,
    purge_after: str,
    prev_hash: str,
    event_locations: Iterable[EventLocation] = (),
    forget_key: str | None = None,
) -> LedgerEntry:
    """Build entry ``seq`` chained onto ``prev_hash``, computing its hash.

    Refuses what would make an entry no verifier could check: a seq below 1, or a
    ``prev_hash`` / ``reason_digest`` that is not 64 lowercase hex characters.
    """
    if type(seq) is not int or seq < 1:
        raise ValueError(f"a ledger seq is an integer of 1 or more, not {seq!r}")
    for name, value in (("prev_hash", prev_hash), ("reason_digest", reason_digest)):
        if not _HEX64.fullmatch(value):
            raise ValueError(f"{name} must be 64 lowercase hex characters")
    header = ledger_header(
        project_id=project_id,
        seq=seq,
        receipt_id=receipt_id,
        memory_ids=memory_ids,
        event_ids=event_ids,
        reason_digest=reason_digest,
        tombstoned_at=tombstoned_at,
        purge_after=purge_after,
    )
    return LedgerEntry(
        project_id=project_id,
        seq=seq,
        id=receipt_id,
        memory_ids=tuple(header["memoryIds"]),
        event_ids=tuple(header["eventIds"]),
        reason_digest=reason_digest,
        tombstoned_at=tombstoned_at,
        purge_after=purge_after,
        prev_hash=prev_hash,
        hash=ledger_hash(prev_hash, header),
        event_locations=tuple(sorted(event_locations)),
        forget_key=forget_key,
    )


def records_same_forget(
    entry: LedgerEntry, memory_ids: Iterable[str], event_ids: Iterable[str], reason_digest: str
) -> bool:
    """Whether ``entry`` records this forget: same ids and reason, whatever its timestamps.

    A store that is handed a receipt id already in the ledger returns the entry when this
    holds (a retried append) and raises ReceiptIdTakenError otherwise.
    """
    return (
        entry.memory_ids == tuple(_id_list(memory_ids))
        and entry.event_ids == tuple(_id_list(event_ids))
        and entry.reason_digest == reason_digest
    )


# --- verification -------------------------------------------------------------------------------


def _same_hex(computed: str, served: Any) -> bool:
    """Constant-time comparison that tolerates anything a server might send."""
    return hmac.compare_digest(computed.encode(), str(served).encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class LedgerProblem:
    """The first thing wrong with a served ledger (its own type: ``ledger`` is a valid stream name)."""

    seq: int
    code: str
    detail: str

    def __str__(self) -> str:
        return f"ledger seq {self.seq}: {self.code}: {self.detail}"


class LedgerVerifier:
    """Recomputes one project's deletion ledger entry by entry, as the entries are paged in.

    The ledger twin of ``chain.ChainVerifier``: feed served entries (the ``as_served`` shape)
    in order; ``feed`` returns the first problem and keeps returning it. Nothing served is
    trusted: ``ledgerSeq`` must run 1, 2, 3..., each hash is recomputed from the header
    fields exactly as served, and each ``prevHash`` must be the previous *recomputed* hash.
    """

    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        self.head = chain.ChainHead(seq=0, hash=chain.GENESIS_PREV_HASH)
        self.problem: LedgerProblem | None = None
        self._pinned: dict[int, str] = {}

    def expect(self, seq: int, hash_hex: str) -> None:
        """Pin a head seen earlier (a receipt kept): the ledger must contain exactly this entry."""
        if seq < 1:
            raise ValueError("a pinned head has seq 1 or more")
        self._pinned[seq] = hash_hex.lower()

    def feed(self, entry: Mapping[str, Any]) -> LedgerProblem | None:
        if self.problem is None:
            self.problem = self._check(entry)
        return self.problem

    def finish(self) -> LedgerProblem | None:
        """Call after the last entry: fails if a pinned head lies beyond the served ledger."""
        if self.problem is None:
            beyond = sorted(seq for seq in self._pinned if seq > self.head.seq)
            if beyond:
                self.problem = LedgerProblem(
                    beyond[0],
                    "pinned_head_missing",
                    f"the served ledger ends at seq {self.head.seq}, before the pinned head "
                    f"seq {beyond[0]} (history was truncated or rolled back)",
                )
        return self.problem

    def _check(self, entry: Mapping[str, Any]) -> LedgerProblem | None:
        expected_seq = self.head.seq + 1
        served_seq = entry.get("ledgerSeq")
        if type(served_seq) is not int or served_seq != expected_seq:
            return LedgerProblem(
                expected_seq, "seq_gap", f"expected seq {expected_seq}, served {served_seq!r}"
            )
        problem = check_fields(self.project_id, entry)
        if problem is None and str(entry["prevHash"]) != self.head.hash:
            problem = LedgerProblem(
                expected_seq,
                "prev_hash_mismatch",
                f"prevHash served {entry['prevHash']}, previous entry hashes to {self.head.hash}",
            )
        if problem is not None:
            return problem
        recomputed, problem = recompute(self.project_id, self.head.hash, entry)
        if problem is not None:
            return problem
        pinned = self._pinned.get(expected_seq)
        if pinned is not None and pinned != recomputed:
            return LedgerProblem(
                expected_seq,
                "pinned_head_mismatch",
                f"pinned hash {pinned}, served ledger has {recomputed} (history was rewritten)",
            )
        self.head = chain.ChainHead(seq=expected_seq, hash=recomputed)
        return None


def _seq_of(entry: Mapping[str, Any]) -> int:
    seq = entry.get("ledgerSeq")
    return seq if type(seq) is int else 0


def check_fields(project_id: str, entry: Mapping[str, Any]) -> LedgerProblem | None:
    """Every field present, the version known, the project the one asked about."""
    seq = _seq_of(entry)
    missing = [name for name in _REQUIRED_SERVED if name not in entry]
    if missing:
        return LedgerProblem(seq, "missing_field", f"served entry lacks {', '.join(missing)}")
    if type(entry["v"]) is not int or entry["v"] != LEDGER_FORMAT_VERSION:
        return LedgerProblem(seq, "unsupported_version", f"format version {entry['v']!r}")
    if entry.get("projectId", project_id) != project_id:
        return LedgerProblem(seq, "wrong_project", f"entry claims project {entry.get('projectId')!r}")
    return None


def served_header(project_id: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The header of a served entry, its values exactly as served (``projectId`` as asked)."""
    header = {field: entry.get(_SERVED_NAME[field]) for field in LEDGER_HEADER_FIELDS}
    header["projectId"] = project_id
    return header


def recompute(project_id: str, prev_hash: str, entry: Mapping[str, Any]) -> tuple[str, LedgerProblem | None]:
    """The entry's hash chained onto ``prev_hash``, and a problem if it is not the served ``hash``."""
    seq = _seq_of(entry)
    try:
        recomputed = ledger_hash(prev_hash, served_header(project_id, entry))
    except (chain.NotCanonicalizableError, ValueError) as exc:
        return "", LedgerProblem(seq, "bad_header", str(exc))
    if not _same_hex(recomputed, entry["hash"]):
        return recomputed, LedgerProblem(
            seq, "hash_mismatch", f"header hashes to {recomputed}, served hash {entry['hash']}"
        )
    return recomputed, None


def check_receipt(project_id: str, receipt: Mapping[str, Any]) -> LedgerProblem | None:
    """A receipt on its own: its hash recomputed from its fields and its own ``prevHash``.

    This proves only that the receipt is self-consistent. That it is *in* the ledger is
    shown by pinning it (``LedgerVerifier.expect(ledgerSeq, hash)``) and verifying the ledger.
    """
    problem = check_fields(project_id, receipt)
    if problem is not None:
        return problem
    prev_hash = receipt["prevHash"]
    if not isinstance(prev_hash, str) or not _HEX64.fullmatch(prev_hash):
        return LedgerProblem(_seq_of(receipt), "bad_header", "prevHash is not 64 lowercase hex characters")
    _, problem = recompute(project_id, prev_hash, receipt)
    return problem

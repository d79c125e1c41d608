"""The event chain: canonical form, payload digests, headers, hashes, and verification.

This module is the single implementation shared by the service (which computes
hashes when it appends) and the client (which recomputes them in
``kaibo verify``). Its only dependency besides the standard library is
``rfc8785``, so the client can import it without boto3, pydantic or Powertools.
``docs/verify.md`` specifies every byte of what happens here.

    payloadDigest = sha256(salt || JCS(payload))            (hex)
    hash          = sha256(prevHash || JCS(header))         (hex)
    genesis prevHash = 32 zero bytes
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785

FORMAT_VERSION = 1
GENESIS_PREV_HASH = "00" * 32
SALT_BYTES = 16
_SALT = re.compile(f"[0-9a-f]{{{2 * SALT_BYTES}}}")

#: The hashed header, in the order the docs list it (JCS sorts keys anyway).
HEADER_FIELDS = (
    "v",
    "projectId",
    "stream",
    "seq",
    "id",
    "kind",
    "idempotencyKey",
    "occurredAt",
    "receivedAt",
    "payloadDigest",
)


class NotCanonicalizableError(ValueError):
    """The value has no RFC 8785 canonical form (big integers, NaN, lone surrogates...)."""


#: JCS prints doubles in [2^53, 10^21) as plain integer digits, which standard JSON
#: parsers read back as integers beyond the safe range: such a payload could not be
#: verified after a round trip, so these numbers are refused like big integers.
_UNSAFE_INTEGRAL_DOUBLES = (2.0**53, 1e21)


def _check_numbers(value: Any) -> None:
    if isinstance(value, float):
        low, high = _UNSAFE_INTEGRAL_DOUBLES
        if low <= abs(value) < high:
            raise NotCanonicalizableError(
                f"{value!r} lies in [2^53, 10^21): its canonical form reads back as an unsafe integer"
            )
    elif isinstance(value, dict):
        for item in value.values():
            _check_numbers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_numbers(item)


def canonical_payload(payload: Any) -> bytes:
    """JCS bytes of a payload Kaibo accepts: canonicalizable and safe to round-trip through JSON."""
    _check_numbers(payload)
    return canonicalize(payload)


def canonicalize(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonicalizableError(str(exc)) from exc
    except (TypeError, ValueError, UnicodeError) as exc:  # defensive: rfc8785 passes some through
        raise NotCanonicalizableError(str(exc)) from exc


def payload_digest(salt_hex: str, canonical_payload: bytes) -> str:
    """``sha256(salt || JCS(payload))`` as lowercase hex; the salt is given as hex."""
    return hashlib.sha256(bytes.fromhex(salt_hex) + canonical_payload).hexdigest()


def event_header(
    *,
    project_id: str,
    stream: str,
    seq: int,
    event_id: str,
    kind: str,
    idempotency_key: str,
    occurred_at: str,
    received_at: str,
    payload_digest: str,
) -> dict[str, Any]:
    """The hashed header of an event (see docs/verify.md)."""
    return {
        "v": FORMAT_VERSION,
        "projectId": project_id,
        "stream": stream,
        "seq": seq,
        "id": event_id,
        "kind": kind,
        "idempotencyKey": idempotency_key,
        "occurredAt": occurred_at,
        "receivedAt": received_at,
        "payloadDigest": payload_digest,
    }


def event_hash(prev_hash: str, header: Mapping[str, Any]) -> str:
    """``sha256(prevHash || JCS(header))`` as lowercase hex; ``prev_hash`` is hex."""
    return hashlib.sha256(bytes.fromhex(prev_hash) + canonicalize(dict(header))).hexdigest()


def _same_hex(computed: str, served: Any) -> bool:
    """Constant-time comparison that tolerates anything a server might send."""
    return hmac.compare_digest(computed.encode(), str(served).encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class ChainProblem:
    """The first thing wrong with a served chain."""

    stream: str
    seq: int
    code: str
    detail: str

    def __str__(self) -> str:
        return f"stream {self.stream!r} seq {self.seq}: {self.code}: {self.detail}"


@dataclass(frozen=True)
class ChainHead:
    seq: int
    hash: str


class ChainVerifier:
    """Recomputes one stream's chain event by event, as the events are paged in.

    Feed events in seq order; ``feed`` returns the first problem it finds (and
    keeps returning it). It trusts nothing it was served: seqs must run 1, 2,
    3..., every hash is recomputed from the header fields, each link is checked
    against the previous *recomputed* hash, and each present payload is checked
    against its salted digest.
    """

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.head = ChainHead(seq=0, hash=GENESIS_PREV_HASH)
        self.problem: ChainProblem | None = None
        self.payloads_checked = 0
        self._pinned: dict[int, str] = {}

    def expect(self, seq: int, hash_hex: str) -> None:
        """Pin a head seen earlier: the served chain must contain exactly this event."""
        if seq < 1:
            raise ValueError("a pinned head has seq 1 or more")
        self._pinned[seq] = hash_hex.lower()

    def feed(self, event: Mapping[str, Any]) -> ChainProblem | None:
        if self.problem is None:
            self.problem = self._check(event)
        return self.problem

    def finish(self) -> ChainProblem | None:
        """Call after the last event: fails if a pinned head lies beyond the served chain."""
        if self.problem is None:
            beyond = sorted(seq for seq in self._pinned if seq > self.head.seq)
            if beyond:
                self.problem = ChainProblem(
                    self.stream,
                    beyond[0],
                    "pinned_head_missing",
                    f"the served chain ends at seq {self.head.seq}, before the pinned head "
                    f"seq {beyond[0]} (history was truncated or rolled back)",
                )
        return self.problem

    def _fail(self, seq: int, code: str, detail: str) -> ChainProblem:
        return ChainProblem(self.stream, seq, code, detail)

    def _check(self, event: Mapping[str, Any]) -> ChainProblem | None:
        expected_seq = self.head.seq + 1
        seq = event.get("seq")
        if type(seq) is not int or seq != expected_seq:
            return self._fail(expected_seq, "seq_gap", f"expected seq {expected_seq}, served {seq!r}")
        missing = [f for f in (*HEADER_FIELDS, "hash") if f not in event and f != "stream"]
        if missing:
            return self._fail(expected_seq, "missing_field", f"served event lacks {', '.join(missing)}")
        if type(event["v"]) is not int or event["v"] != FORMAT_VERSION:
            return self._fail(expected_seq, "unsupported_version", f"format version {event['v']!r}")
        if event.get("stream", self.stream) != self.stream:
            return self._fail(expected_seq, "wrong_stream", f"event claims stream {event.get('stream')!r}")
        served_prev = str(event.get("prevHash", self.head.hash))
        if served_prev != self.head.hash:
            return self._fail(
                expected_seq,
                "prev_hash_mismatch",
                f"prevHash served {served_prev}, previous event hashes to {self.head.hash}",
            )
        header = {field: event.get(field) for field in HEADER_FIELDS}
        header["stream"] = self.stream
        try:
            recomputed = event_hash(self.head.hash, header)
        except (NotCanonicalizableError, ValueError) as exc:
            return self._fail(expected_seq, "bad_header", str(exc))
        if not _same_hex(recomputed, event["hash"]):
            return self._fail(
                expected_seq,
                "hash_mismatch",
                f"header hashes to {recomputed}, served hash {event['hash']}",
            )
        problem = self._check_payload(expected_seq, event)
        if problem:
            return problem
        pinned = self._pinned.get(expected_seq)
        if pinned is not None and pinned != recomputed:
            return self._fail(
                expected_seq,
                "pinned_head_mismatch",
                f"pinned hash {pinned}, served chain has {recomputed} (history was rewritten)",
            )
        self.head = ChainHead(seq=expected_seq, hash=recomputed)
        return None

    def _check_payload(self, seq: int, event: Mapping[str, Any]) -> ChainProblem | None:
        # absent and null both mean purged
        has_payload, has_salt = event.get("payload") is not None, event.get("salt") is not None
        if not has_payload and not has_salt:
            return None  # purged: the header still proves the event existed
        if has_payload != has_salt:
            return self._fail(seq, "partial_purge", "payload and salt must be present or absent together")
        if not isinstance(event["salt"], str) or not _SALT.fullmatch(event["salt"]):
            return self._fail(seq, "bad_salt", f"salt must be {2 * SALT_BYTES} lowercase hex characters")
        try:
            digest = payload_digest(event["salt"], canonicalize(event["payload"]))
        except (NotCanonicalizableError, ValueError) as exc:
            return self._fail(seq, "bad_payload", str(exc))
        if not _same_hex(digest, event["payloadDigest"]):
            return self._fail(
                seq,
                "payload_digest_mismatch",
                f"payload hashes to {digest}, header says {event['payloadDigest']}",
            )
        self.payloads_checked += 1
        return None

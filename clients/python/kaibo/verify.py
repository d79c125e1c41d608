"""``kaibo verify``: recompute every served event's hash and payload digest, trusting nothing served.

The checks themselves live in ``kaibo_core.core.chain.ChainVerifier`` (the same code
the service hashes with); this module pages events into it (``null`` payload
and salt read as absent) and adds two cross-checks: a head pinned by the caller
(``expect_head``) and the head the stream listing reports.
docs/verify.md specifies every byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kaibo.client import KaiboAPIError, KaiboClient
from kaibo_core.core.chain import ChainHead, ChainProblem, ChainVerifier

_HEAD = re.compile(r"^([0-9]+):([0-9a-fA-F]{64})$")


@dataclass(frozen=True)
class StreamReport:
    """The outcome for one stream.

    ``events_checked`` counts the events fed to the verifier (including the one
    that failed, if any); ``head`` is the last event that verified (seq 0 and
    the genesis hash if none did); ``problem`` is the first thing wrong, or None.
    """

    stream: str
    events_checked: int
    payloads_checked: int
    head: ChainHead
    problem: ChainProblem | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def parse_head(text: str) -> tuple[int, str]:
    """``"SEQ:HASH"`` (as ``kaibo verify`` prints it) → ``(seq, lowercase hash)``."""
    match = _HEAD.match(text.strip())
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"expected SEQ:HASH with SEQ >= 1 and a 64-hex-digit HASH, got {text!r}")
    return int(match.group(1)), match.group(2).lower()


def served_event_for_verifier(event: Mapping[str, Any]) -> dict[str, Any]:
    """The served event as ChainVerifier reads it: ``null`` payload/salt mean absent (purged)."""
    normalized = dict(event)
    for field in ("payload", "salt"):
        if field in normalized and normalized[field] is None:
            del normalized[field]
    return normalized


def verify_events(
    stream: str,
    events: Iterable[Any],
    expect_head: tuple[int, str] | None = None,
    *,
    listed_head: tuple[int, str] | None = None,
) -> StreamReport:
    """Verify one stream's served events (in the order served); stops at the first problem.

    ``expect_head`` is a head the caller saw before: the chain must contain that
    seq with exactly that hash. ``listed_head`` is what ``GET /v1/streams``
    reported: the served events must reach it, with that hash.
    """
    verifier = ChainVerifier(stream)
    if expect_head is not None:
        verifier.expect(*expect_head)
    checked = 0
    problem: ChainProblem | None = None
    for event in events:
        checked += 1
        problem = _feed(verifier, event)
        if problem is None and listed_head is not None:
            problem = _check_listed(verifier, listed_head)
        if problem is not None:
            break
    if problem is None:
        problem = verifier.finish()
    if problem is None and listed_head is not None and listed_head[0] > verifier.head.seq:
        problem = ChainProblem(
            stream,
            listed_head[0],
            "listed_head_missing",
            f"the stream listing reports head seq {listed_head[0]}, the served events end at seq "
            f"{verifier.head.seq}",
        )
    return StreamReport(stream, checked, verifier.payloads_checked, verifier.head, problem)


def _feed(verifier: ChainVerifier, event: Any) -> ChainProblem | None:
    seq = verifier.head.seq + 1
    if not isinstance(event, dict):
        return ChainProblem(verifier.stream, seq, "malformed_event", "served event is not a JSON object")
    try:
        return verifier.feed(served_event_for_verifier(event))
    except (TypeError, ValueError, AttributeError) as exc:  # defensive: a field the checks cannot use
        return ChainProblem(verifier.stream, seq, "malformed_event", f"{type(exc).__name__}: {exc}")


def _check_listed(verifier: ChainVerifier, listed: tuple[int, str]) -> ChainProblem | None:
    seq, hash_hex = listed
    if verifier.head.seq == seq and verifier.head.hash != hash_hex.lower():
        return ChainProblem(
            verifier.stream,
            seq,
            "listed_head_mismatch",
            f"the stream listing reports hash {hash_hex} for seq {seq}, the served chain has "
            f"{verifier.head.hash}",
        )
    return None


def verify_stream(
    client: KaiboClient,
    stream: str,
    expect_head: tuple[int, str] | None = None,
    *,
    listed_head: tuple[int, str] | None = None,
) -> StreamReport:
    """Page through one stream's events and verify them (see ``verify_events``)."""
    events = client.events(stream)
    try:
        return verify_events(stream, events, expect_head, listed_head=listed_head)
    finally:
        events.close()  # stop paging at the first problem


def iter_verify_all(client: KaiboClient) -> Iterator[StreamReport]:
    """Every stream of the project, one report at a time, each checked against its listed head."""
    for listed in client.streams():
        stream, seq, hash_hex = (listed.get(k) for k in ("stream", "seq", "hash"))
        if not isinstance(stream, str) or type(seq) is not int or not isinstance(hash_hex, str):
            raise KaiboAPIError(200, "invalid_response", f"GET /v1/streams: malformed entry {listed!r}")
        yield verify_stream(client, stream, listed_head=(seq, hash_hex) if seq > 0 else None)


def verify_all(client: KaiboClient) -> list[StreamReport]:
    """Every stream of the project (``GET /v1/streams``), verified."""
    return list(iter_verify_all(client))

"""Events from the command line: a --text message, an --event-json object, or a file (one JSON
event, a JSON list of events, or JSON lines), and the idempotency key a keyless event gets.

**The derived key.** An event read from a file without its own ``idempotencyKey`` gets
``kaibo-file-`` + the SHA-256 hex digest of ``stream``, its number (its line in a JSON-lines
file, its position from 1 in a list, 1 for a lone object) and its canonical JSON (sorted keys,
no spaces), each followed by a newline. The same file remembered into the same stream again
yields the same keys, so Kaibo answers ``replayed`` and appends nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaibo.cli._shared import UsageError

KEY_PREFIX = "kaibo-file-"


@dataclass(frozen=True)
class NumberedEvent:
    """An event read from a file, with its number there (line or position), or why it is not one."""

    number: int
    event: dict[str, Any] | None
    problem: str | None = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and has no canonical form)")


def parse_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def derived_key(stream: str, number: int, event: dict[str, Any]) -> str:
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(f"{stream}\n{number}\n{canonical}\n".encode()).hexdigest()
    return KEY_PREFIX + digest


def with_key(stream: str, item: NumberedEvent) -> dict[str, Any]:
    """The event to send: its own idempotency key, else the derived one."""
    assert item.event is not None
    if "idempotencyKey" in item.event:
        return item.event
    return {**item.event, "idempotencyKey": derived_key(stream, item.number, item.event)}


def read_source(path: str) -> str:
    """The text of ``path``, or of stdin for ``-``."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def json_lines(text: str) -> list[NumberedEvent]:
    """Each non-blank line an event; a line that is not a JSON object is kept as a problem."""
    events = []
    for number, raw in enumerate(text.split("\n"), start=1):  # not splitlines(): JSON may hold U+2028
        if not raw.strip():
            continue
        try:
            event = parse_json(raw)
        except ValueError as exc:
            events.append(NumberedEvent(number, None, f"not JSON: {exc}"))
            continue
        if not isinstance(event, dict):
            events.append(NumberedEvent(number, None, "not a JSON object (an event with kind and payload)"))
            continue
        events.append(NumberedEvent(number, event))
    return events


def file_events(text: str) -> list[NumberedEvent]:
    """A file's events: a JSON object, a JSON list of objects, or JSON lines."""
    try:
        whole = parse_json(text)
    except ValueError:
        return json_lines(text)
    if isinstance(whole, dict):
        return [NumberedEvent(1, whole)]
    if isinstance(whole, list) and all(isinstance(event, dict) for event in whole):
        return [NumberedEvent(number, event) for number, event in enumerate(whole, start=1)]
    raise UsageError("the file must hold a JSON object (one event), a JSON list of objects, or JSON lines")


def option_event(
    *, text: str | None, event_json: str | None, role: str | None, key: str | None, occurred_at: str | None
) -> dict[str, Any]:
    """The event of ``remember --text`` or ``--event-json``, with --key and --occurred-at."""
    if event_json is not None:
        if role is not None:
            raise UsageError("--role goes with --text")
        try:
            event = parse_json(event_json)
        except ValueError as exc:
            raise UsageError(f"--event-json is not valid JSON: {exc}") from None
        if not isinstance(event, dict):
            raise UsageError("--event-json must be a JSON object (an event with kind and payload)")
    else:
        event = {"kind": "message", "payload": {"role": role or "user", "text": text}}
    for field, value in (("idempotencyKey", key), ("occurredAt", occurred_at)):
        if value is None:
            continue
        if field in event and event[field] != value:
            raise UsageError(f"--event-json has {field} {event[field]!r}, the option says {value!r}")
        event[field] = value
    event.setdefault("idempotencyKey", str(uuid.uuid4()))
    return event

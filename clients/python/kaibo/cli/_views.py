"""Human views of API answers: what remember appended, what recall found, a memory's timeline.

Every served value goes through ``out.plain`` (no control characters reach the terminal)."""

from __future__ import annotations

from typing import Any

from kaibo.cli import _output as out

HASH_SHOWN = 12
STATUS_STYLES = {
    "active": "green",
    "provisional": "cyan",
    "superseded": "yellow",
    "replaced": "yellow",
    "cancelled": "yellow",
    "tombstoned": "red",
    "purged": "red",
}


def _short(hash_hex: Any) -> str:
    text = out.plain(hash_hex)
    return text[:HASH_SHOWN] + "…" if len(text) > HASH_SHOWN else text


def _status(value: Any) -> tuple[str, str]:
    text = out.plain(value)
    return text, STATUS_STYLES.get(text, "bold")


def _items(answer: dict[str, Any], field: str) -> list[dict[str, Any]]:
    value = answer.get(field)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _indented(text: Any, indent: str = "   ") -> list[str]:
    if not isinstance(text, str):
        return [indent + "(no content)"]
    return [indent + out.plain(part) for part in text.splitlines() or [""]]


def _citation(source: dict[str, Any]) -> str:
    return (
        f"{out.plain(source.get('stream'))} seq {out.plain(source.get('seq'))}  "
        f"{out.plain(source.get('eventId'))}  hash {_short(source.get('hash'))}"
    )


def remembered(answer: dict[str, Any]) -> None:
    for event in _items(answer, "events"):
        done = ("already there", "yellow") if event.get("replayed") else ("appended", "green")
        out.line(
            done,
            f" {out.plain(event.get('stream'))} seq {out.plain(event.get('seq'))}  "
            f"{out.plain(event.get('id'))}  "
            f"key {out.plain(event.get('idempotencyKey'))}  hash {_short(event.get('hash'))}",
        )
    job = answer.get("job")
    status = f" ({out.plain(job.get('status'))})" if isinstance(job, dict) else ""
    if answer.get("jobId") is not None:
        out.line(("job", "bold"), f" {out.plain(answer.get('jobId'))}{status}")
    for memory in _items(answer, "memories"):
        out.line(
            ("memory", "bold"),
            f" {out.plain(memory.get('id'))}  ",
            _status(memory.get("status")),
            f"  {out.plain(memory.get('type'))}  {out.preview(memory.get('content'))}",
        )


def recalled(answer: dict[str, Any]) -> None:
    items = _items(answer, "items")
    for rank, item in enumerate(items, start=1):
        out.line(
            (f"{rank}.", "bold"),
            f" {out.plain(item.get('memoryId'))}  ",
            (out.plain(item.get("type")), "cyan"),
            f"  {out.plain(item.get('form'))}  score {out.plain(item.get('score'))}",
        )
        for text_line in _indented(item.get("text")):
            out.line(text_line)
        out.line(("   valid ", "dim"), _validity(item))
        for source in _items(item, "citations"):
            out.line(("   cites ", "dim"), _citation(source))
    abstain = answer.get("abstain")
    if isinstance(abstain, dict) and abstain.get("abstained"):
        message = f": {out.plain(abstain.get('message'))}" if abstain.get("message") else ""
        out.line(("abstained", "bold yellow"), f" ({out.plain(abstain.get('reason'))}){message}")
    used, budget, as_of = (out.plain(answer.get(k)) for k in ("usedTokens", "budget", "asOf"))
    out.line((f"{out.plural(len(items), 'item', 'items')}, {used} of {budget} tokens, as of {as_of}", "dim"))


def _validity(version: dict[str, Any]) -> str:
    valid_to = version.get("validTo")
    return f"{out.plain(version.get('validFrom'))} → {'now' if valid_to is None else out.plain(valid_to)}"


def explained(answer: dict[str, Any]) -> None:
    chain = _items(answer, "chain")
    count = out.plural(len(chain), "version", "versions")
    out.line(("explain", "bold"), f" {out.plain(answer.get('memoryId'))}: {count}, oldest first")
    for position, version in enumerate(chain):
        last = position == len(chain) - 1
        out.line(
            ("● " if last else "○ ", "bold"),
            _validity(version),
            "  ",
            _status(version.get("status")),
            f"  {out.plain(version.get('type'))}  {out.plain(version.get('memoryId'))}",
        )
        gutter = "  " if last else "│ "
        for text_line in _indented(version.get("content"), gutter):
            out.line(text_line)
        for source in _items(version, "sourceEvents"):
            out.line((f"{gutter}from ", "dim"), _citation(source))
        for link in ("replaces", "supersedes"):
            targets = version.get(link)
            if targets:
                shown = ", ".join(out.plain(t) for t in (targets if isinstance(targets, list) else [targets]))
                out.line((f"{gutter}{link} ", "dim"), shown)

"""``forget`` (a dry run, a confirmation, then the receipt), ``ledger`` and ``receipt``."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from kaibo.cli import _output as out
from kaibo.cli._shared import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    JsonOption,
    client,
    command,
    exactly_one,
    print_api_error,
)
from kaibo.client import KaiboAPIError


def _forget_set(answer: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    memories, event_ids = answer.get("memories"), answer.get("eventIds", [])
    if not isinstance(memories, list) or not all(isinstance(m, dict) for m in memories):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: 'memories' is not a list of objects")
    if not isinstance(event_ids, list):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: 'eventIds' is not a list")
    return memories, event_ids


def _show_set(memories: list[dict[str, Any]], event_ids: list[Any], *, stderr: bool) -> None:
    for memory in memories:
        out.line(
            (out.plain(memory.get("id")), "bold"),
            f"  {out.plain(memory.get('status')):<11} {out.plain(memory.get('why')):<17} ",
            (out.preview(memory.get("content")), "cyan"),
            stderr=stderr,
        )
    purged = (
        f", and the payloads of {out.plural(len(event_ids), 'event', 'events')} purged" if event_ids else ""
    )
    out.line(
        (f"{out.plural(len(memories), 'memory', 'memories')} would be forgotten{purged}.", "bold red"),
        stderr=stderr,
    )


def _confirmed(count: int) -> bool:
    """Ask on the terminal; only y or yes goes on. The caller made sure stdin is a terminal."""
    this = "this" if count == 1 else "these"
    question = f"Forget {this} {out.plural(count, 'memory', 'memories')}? This cannot be undone. [y/N] "
    out.line((question, "bold"), stderr=True, end="")
    answer = sys.stdin.readline()
    if not answer.endswith("\n"):
        out.line(stderr=True)  # end the question's line: no answer was typed (stdin ended)
    return answer.strip().lower() in ("y", "yes")


def forget(
    *,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            metavar="TEXT",
            help="why (required): the ledger keeps only a salted digest of it, never the text",
            show_default=False,
        ),
    ],
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            metavar="MEMORY_ID",
            help="forget this memory, its older versions and what shares its source events",
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option("--query", metavar="TEXT", help="forget every memory that holds all the words of TEXT"),
    ] = None,
    stream: Annotated[
        str | None,
        typer.Option("--stream", metavar="NAME", help="forget everything remembered in this stream"),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject",
            metavar="TEXT",
            help="forget every memory whose subject is TEXT (as 'kaibo memory' shows it; case and "
            "spacing aside)",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            metavar="",
            help="do not ask for confirmation (needed when stdin is not a terminal); the dry run still runs",
        ),
    ] = False,
    max_memories: Annotated[
        int | None,
        typer.Option(
            "--max-memories",
            metavar="N",
            min=1,
            help="allow a set of up to N memories (default: 100, at most 1000)",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            metavar="KEY",
            help="a name of yours for this erasure, sent with the real forget (not the dry run): "
            "it is then resent after a 5xx or a lost connection, and the server answers the first "
            "answer instead of forgetting twice; never purged: keep personal data out of it",
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="print the API's answer as JSON on stdout (the set and the question go to stderr)",
        ),
    ] = False,
) -> int:
    """Erase memories for good: the set (a dry run), your confirmation, then the receipt; no undo."""
    exactly_one(memory=memory, query=query, stream=stream, subject=subject)
    kaibo = client()
    selector: dict[str, Any] = {"memory_id": memory, "query": query, "stream": stream, "subject": subject}
    try:
        preview = kaibo.forget(**selector, reason=reason, dry_run=True, max_memories=max_memories)
    except KaiboAPIError as exc:
        if exc.code != "forget_set_too_large":
            raise
        print_api_error(exc)
        out.note("hint: narrow the selection, or allow a larger set with --max-memories N")
        return EXIT_USAGE
    memories, event_ids = _forget_set(preview)
    if not memories and not event_ids:
        out.line("nothing to forget", stderr=json_output)
        if json_output:
            out.print_json(preview)
        return EXIT_OK
    _show_set(memories, event_ids, stderr=json_output)
    if not yes:
        if not sys.stdin.isatty():
            out.error(
                "kaibo: error: not_confirmed: stdin is not a terminal, so forget cannot ask: nothing was "
                "forgotten. Pass --yes to forget the set above without asking."
            )
            return EXIT_FAILED
        if not _confirmed(len(memories)):
            out.error("not confirmed: nothing was forgotten")
            return EXIT_FAILED
    token = preview.get("previewToken")
    if not isinstance(token, str):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: the dry run answered no previewToken")
    try:
        # The key goes with the real call only: the API refuses one on a dry run.
        answer = kaibo.forget(
            **selector,
            reason=reason,
            preview_token=token,
            max_memories=max_memories,
            idempotency_key=idempotency_key,
        )
    except KaiboAPIError as exc:
        if exc.code != "preview_changed":
            raise
        out.error(
            "error: preview_changed: the set changed since the dry run (memories were remembered, "
            "structured or forgotten meanwhile), so nothing was forgotten. Run the command again "
            "to see the new set."
        )
        return EXIT_USAGE
    return _show_forgotten(answer, json_output, keyed=idempotency_key is not None)


def _show_forgotten(answer: dict[str, Any], json_output: bool, *, keyed: bool) -> int:
    receipt, salt = answer.get("receipt"), answer.get("reasonSalt")
    if json_output:
        out.print_json(answer)
    if not isinstance(receipt, dict):
        out.warning("nothing was forgotten: the set was empty by the time of the call")
        return EXIT_OK
    if not json_output:
        memories, event_ids = _forget_set(answer)
        after = f"after {out.plain(receipt.get('purgeAfter'))}"
        purged = (
            f"; the payloads of {out.plural(len(event_ids), 'event', 'events')} are purged {after}"
            if event_ids
            else ""
        )
        out.line(
            ("forgotten:", "bold green"),
            f" {out.plural(len(memories), 'memory', 'memories')} tombstoned{purged}",
        )
        out.line("receipt:")
        out.show_json(receipt)
        out.line(f"reasonSalt: {out.plain(salt)}")
    kept = (
        "Kaibo keeps it, encrypted, only so that a retry under this idempotency key gets it again "
        "(24 hours at most, or until the purge)"
        if keyed
        else "Kaibo does not keep it"
    )
    out.warning(
        f"warning: the reasonSalt is shown once and {kept}: with the reason, it reproduces the "
        "receipt's reasonDigest. Store it now, with the receipt."
    )
    out.note(f"check the erasure any time: kaibo verify --receipt {out.plain(receipt.get('id'))}")
    return EXIT_OK


def ledger(
    from_seq: Annotated[
        int, typer.Option("--from-seq", metavar="N", min=1, help="first ledger seq to list")
    ] = 1,
    json_output: JsonOption = False,
) -> int:
    """The deletion ledger's entries as served, one JSON object per line (the same with --json)."""
    del json_output  # JSON lines either way
    for entry in client().ledger(from_seq=from_seq):
        out.print_json_line(entry)
    return EXIT_OK


def receipt(
    receipt_id: Annotated[
        str,
        typer.Argument(
            metavar="RECEIPT_ID", help="the receipt's id (rcpt_...), as forget printed it", show_default=False
        ),
    ],
    json_output: JsonOption = False,
) -> int:
    """One forget's receipt: its ledger entry and its state (tombstoned, then purged)."""
    answer = client().receipt(receipt_id)
    out.emit(answer, json_output)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    app.command("forget")(command(forget))
    app.command("ledger")(command(ledger))
    app.command("receipt")(command(receipt))

"""``verify``: the hash chains (all streams, or one), the deletion ledger, or one receipt."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kaibo.cli import _output as out
from kaibo.cli._shared import (
    ENV_PROJECT_ID,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    JsonOption,
    UsageError,
    client,
    command,
    print_api_error,
    setting,
)
from kaibo.client import KaiboError
from kaibo.ledger_verify import LedgerReport, ReceiptReport, parse_project_id, verify_ledger, verify_receipt
from kaibo.verify import StreamReport, iter_verify_all, parse_head, verify_stream

HeadOption = tuple[int, str] | None


def _head(option: str, text: str) -> tuple[int, str]:
    try:
        return parse_head(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def verify(
    *,
    stream: Annotated[
        str | None, typer.Option("--stream", metavar="NAME", help="verify only this stream")
    ] = None,
    ledger: Annotated[
        bool,
        typer.Option(
            "--ledger", metavar="", help="verify the project's deletion ledger instead of its streams"
        ),
    ] = False,
    receipt: Annotated[
        str | None,
        typer.Option(
            "--receipt",
            metavar="RECEIPT_ID",
            help="check one forget's receipt (rcpt_...): in the ledger, its memories without content, "
            "its events without payload once purged",
        ),
    ] = None,
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            metavar="SEQ:HASH",
            help="a head printed by an earlier verify: the chain must still contain it (needs --stream)",
        ),
    ] = None,
    pin: Annotated[
        str | None,
        typer.Option(
            "--pin",
            metavar="SEQ:HASH",
            help="a ledger head kept from before (an earlier verify --ledger, or a receipt's "
            "ledgerSeq:hash): the ledger must still contain it (needs --ledger)",
        ),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            metavar="PRJ",
            help=f"the project id (prj_...) the ledger's hashes cover, for --ledger and --receipt "
            f"(default: ${ENV_PROJECT_ID})",
        ),
    ] = None,
    json_output: JsonOption = False,
) -> int:
    """Recompute the hash chains (all streams, or one), the deletion ledger, or check a receipt."""
    if sum(given is not None and given is not False for given in (stream, ledger, receipt)) > 1:
        raise UsageError("give at most one of --stream | --ledger | --receipt")
    expected = _head("--expect-head", expect_head) if expect_head is not None else None
    pinned = _head("--pin", pin) if pin is not None else None
    if expected is not None and stream is None:
        raise UsageError("--expect-head needs --stream (a head belongs to one stream)")
    if pinned is not None and not ledger:
        raise UsageError("--pin needs --ledger (a receipt is checked against its own seq and hash)")
    if ledger:
        return _verify_ledger(_project(project), pinned, json_output)
    if receipt is not None:
        return _verify_receipt(_project(project), receipt, json_output)
    if project is not None:
        raise UsageError("--project goes with --ledger or --receipt")
    return _verify_streams(stream, expected, json_output)


def _stream_json(report: StreamReport) -> dict[str, Any]:
    problem = report.problem
    return {
        "stream": report.stream,
        "ok": report.ok,
        "eventsChecked": report.events_checked,
        "payloadsChecked": report.payloads_checked,
        "head": f"{report.head.seq}:{report.head.hash}",
        "problem": None
        if problem is None
        else {"seq": problem.seq, "code": problem.code, "detail": problem.detail},
    }


def _show_stream(report: StreamReport) -> None:
    if report.problem is None:
        out.line(
            ("ok", "green"),
            f" {report.stream}: {report.events_checked} events, {report.payloads_checked} payloads checked, "
            f"head {report.head.seq}:{report.head.hash}",
        )
        return
    problem = report.problem
    out.line(("FAIL", "bold red"), f" {report.stream} seq {problem.seq}: {problem.code}: {problem.detail}")


def _verify_streams(stream: str | None, expected: HeadOption, json_output: bool) -> int:
    kaibo = client()
    reports: list[StreamReport] = []
    error: KaiboError | None = None
    try:
        if stream is not None:
            named = verify_stream(kaibo, stream, expected)
            if named.ok and named.events_checked == 0:  # a stream exists once it has an event
                out.error(f"kaibo: no stream {stream!r} in this project (it has no event): nothing verified")
                return EXIT_FAILED
        found = iter([named]) if stream is not None else iter_verify_all(kaibo)
        for report in found:
            reports.append(report)
            if not json_output:
                _show_stream(report)
    except KaiboError as exc:
        error = exc
        print_api_error(exc)
    failed = sum(1 for report in reports if not report.ok)
    if json_output:
        out.print_json(
            {
                "ok": error is None and not failed,
                "complete": error is None,
                "streams": [_stream_json(r) for r in reports],
            }
        )
    elif failed:
        so_far = " checked so far" if error is not None else ""
        out.line(("FAILED:", "bold red"), f" {failed} of {len(reports)} streams{so_far} failed verification")
    elif error is None:
        noun = "stream" if len(reports) == 1 else "streams"
        out.line(("verified:", "bold green"), f" {len(reports)} {noun} ok" if reports else " no streams yet")
    if failed:
        return EXIT_FAILED
    return EXIT_USAGE if error is not None else EXIT_OK


def _project(value: str | None) -> str:
    chosen = setting(value, ENV_PROJECT_ID)
    if chosen is None:
        raise UsageError(
            f"no project id: the ledger's hashes cover it; pass --project prj_... or set {ENV_PROJECT_ID} "
            "(`make run` and `kaibo keys create` print it)"
        )
    try:
        return parse_project_id(chosen)
    except ValueError as exc:
        raise UsageError(f"--project: {exc}") from None


def _ledger_json(report: LedgerReport) -> dict[str, Any]:
    problem = report.problem
    return {
        "ok": report.ok,
        "entriesChecked": report.entries_checked,
        "head": f"{report.head.seq}:{report.head.hash}",
        "problem": None
        if problem is None
        else {"seq": problem.seq, "code": problem.code, "detail": problem.detail},
    }


def _show_ledger(report: LedgerReport) -> None:
    if report.problem is not None:
        problem = report.problem
        out.line(("FAIL", "bold red"), f" ledger seq {problem.seq}: {problem.code}: {problem.detail}")
    elif report.head.seq == 0:
        out.line(("ok", "green"), " ledger: 0 entries (no forget yet)")
    else:
        out.line(
            ("ok", "green"),
            f" ledger: {report.entries_checked} entries, head {report.head.seq}:{report.head.hash}",
        )


def _hint_project(report: LedgerReport) -> None:
    problem = report.problem
    if problem is not None and problem.seq == 1 and problem.code == "hash_mismatch":
        out.note(
            f"hint: every entry's hash covers the project id; check that {report.project_id} is the "
            f"project of the API key (--project, ${ENV_PROJECT_ID})"
        )


def _verify_ledger(project: str, pinned: HeadOption, json_output: bool) -> int:
    report = verify_ledger(client(), project, pinned)
    if json_output:
        out.print_json(_ledger_json(report))
    else:
        _show_ledger(report)
    if report.ok:
        if not json_output:
            out.line(("verified:", "bold green"), " ledger ok")
        return EXIT_OK
    _hint_project(report)
    if not json_output:
        out.line(("FAILED:", "bold red"), " the ledger failed verification")
    return EXIT_FAILED


def _receipt_summary(report: ReceiptReport) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.memory_statuses.items()))
    memories = f"{out.plural(report.memories_checked, 'memory', 'memories')} without content" + (
        f" ({counts})" if counts else ""
    )
    if report.state == "purged":
        events = f"{out.plural(report.events_checked, 'event', 'events')} without payload or salt"
        unlocated = len(report.unlocated_event_ids)
        if unlocated:
            it = "it" if unlocated == 1 else "them"
            events += (
                f", {unlocated} not found in any stream (nothing stored to erase; nothing can be made "
                f"from {it})"
            )
    elif report.purge_due:
        events = "its events not checked (purge pending)"
    else:
        events = f"its events are purged after {report.purge_after}"
    return f" receipt {report.receipt_id}: state {report.state}; {memories}; {events}"


def _receipt_json(report: ReceiptReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "receiptId": report.receipt_id,
        "state": report.state,
        "ledgerSeq": report.ledger_seq,
        "purgeAfter": report.purge_after,
        "purgeDue": report.purge_due,
        "ledger": None if report.ledger is None else _ledger_json(report.ledger),
        "memoriesChecked": report.memories_checked,
        "memoryStatuses": report.memory_statuses,
        "eventsChecked": report.events_checked,
        "unlocatedEventIds": list(report.unlocated_event_ids),
        "failures": [{"subject": f.subject, "code": f.code, "detail": f.detail} for f in report.failures],
        "notes": list(report.notes),
    }


def _verify_receipt(project: str, receipt_id: str, json_output: bool) -> int:
    report = verify_receipt(client(), project, receipt_id)
    if json_output:
        out.print_json(_receipt_json(report))
    else:
        _show_receipt(report)
    if report.ok:
        return EXIT_OK
    if report.ledger is not None:
        _hint_project(report.ledger)
    return EXIT_FAILED


def _show_receipt(report: ReceiptReport) -> None:
    ledger = report.ledger
    if ledger is not None and ledger.ok:
        head = f"{ledger.head.seq}:{ledger.head.hash}"
        out.line(("ok", "green"), f" ledger: {ledger.entries_checked} entries up to the receipt, head {head}")
    for failure in report.failures:
        out.line(("FAIL", "bold red"), f" {failure}")
    for note in report.notes:
        out.line(("note:", "yellow"), f" {note}")
    if report.ok:
        out.line(("verified:", "bold green"), _receipt_summary(report))
        return
    checks = out.plural(len(report.failures), "check", "checks")
    out.line(("FAILED:", "bold red"), f" receipt {report.receipt_id}: {checks} failed")


def register(app: typer.Typer) -> None:
    app.command("verify")(command(verify))

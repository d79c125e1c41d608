"""``kaibo import``: a JSON-lines file into a stream, in batches, with a progress bar; resumable.

Each line's idempotency key is its own ``idempotencyKey`` or the derived one
(``_events_input.derived_key``), so running the same import again after an interruption
appends only what is missing: Kaibo answers ``replayed`` for the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from kaibo.cli import _events_input as events_input
from kaibo.cli import _output as out
from kaibo.cli._memory import MAX_EVENTS_PER_CALL
from kaibo.cli._shared import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    JsonOption,
    UsageError,
    client,
    command,
    print_api_error,
)
from kaibo.client import KaiboAPIError, KaiboClient, KaiboError

#: Refusals that concern the whole import, not one line: stop instead of trying line by line.
_STOP_STATUSES = (401, 403, 429)


@dataclass
class Failure:
    line: int
    code: str
    message: str


@dataclass
class Tally:
    appended: int = 0
    already_there: int = 0
    failed: list[Failure] = field(default_factory=list)
    stopped: str | None = None  # why the import stopped before the end, if it did

    def as_json(self, stream: str, path: str) -> dict[str, Any]:
        return {
            "file": path,
            "stream": stream,
            "complete": self.stopped is None,
            "appended": self.appended,
            "alreadyThere": self.already_there,
            "failed": [{"line": f.line, "code": f.code, "message": f.message} for f in self.failed],
            "stopped": self.stopped,
        }


def _batches(
    items: Sequence[events_input.NumberedEvent], size: int
) -> Iterator[list[events_input.NumberedEvent]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _send(kaibo: KaiboClient, stream: str, batch: list[events_input.NumberedEvent], tally: Tally) -> None:
    """Append one batch; a batch the API refuses is retried line by line to name the bad lines."""
    try:
        answer = kaibo.remember(stream, [events_input.with_key(stream, item) for item in batch])
    except KaiboAPIError as exc:
        if exc.status in _STOP_STATUSES or exc.status >= 500:
            raise
        if len(batch) == 1:
            tally.failed.append(Failure(batch[0].number, exc.code, exc.message))
            return
        for item in batch:
            _send(kaibo, stream, [item], tally)
        return
    receipts = answer.get("events")
    if not isinstance(receipts, list) or len(receipts) != len(batch):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/remember: not one receipt per event sent")
    for receipt in receipts:
        if isinstance(receipt, dict) and receipt.get("replayed"):
            tally.already_there += 1
        else:
            tally.appended += 1


@contextmanager
def _progress(total: int, path: str) -> Iterator[Any]:
    """A progress bar on stderr, only when stderr is a terminal (never in logs or pipes)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: PLC0415

    stderr = out.console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr, disable=not stderr.is_terminal, transient=False) as progress:
        task = progress.add_task(f"importing {out.plain(path)}", total=total)
        yield lambda advance: progress.advance(task, advance)


def import_file(
    path: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="a JSON-lines file, one event per line (- for stdin)", show_default=False
        ),
    ],
    stream: Annotated[
        str,
        typer.Option(
            "--stream",
            metavar="NAME",
            help="the stream to append to (created on first use)",
            show_default=False,
        ),
    ],
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            metavar="N",
            min=1,
            max=MAX_EVENTS_PER_CALL,
            help="events per call (each call is all or nothing)",
        ),
    ] = MAX_EVENTS_PER_CALL,
    json_output: JsonOption = False,
) -> int:
    """Import a JSON-lines file into a stream, in batches, with a progress bar; run it again to resume."""
    items = events_input.json_lines(events_input.read_source(path))
    if not items:
        raise UsageError(f"{path} holds no event")
    tally = Tally(
        failed=[Failure(i.number, "invalid_json", i.problem) for i in items if i.problem is not None]
    )
    valid = [item for item in items if item.event is not None]
    kaibo = client()
    code = EXIT_OK
    with _progress(len(items), path) as advance:
        advance(len(tally.failed))
        try:
            for batch in _batches(valid, batch_size):
                _send(kaibo, stream, batch, tally)
                advance(len(batch))
        except KaiboError as exc:
            print_api_error(exc)
            tally.stopped = f"{exc}"
            code = EXIT_USAGE
        except KeyboardInterrupt:
            tally.stopped = "interrupted"
            code = EXIT_INTERRUPTED
    tally.failed.sort(key=lambda failure: failure.line)
    if json_output:
        out.print_json(tally.as_json(stream, path))
    else:
        _summary(tally, stream, path)
    if code == EXIT_OK and tally.failed:
        return EXIT_FAILED
    return code


def _summary(tally: Tally, stream: str, path: str) -> None:
    counts = f"{tally.appended} appended, {tally.already_there} already there, {len(tally.failed)} failed"
    style = "bold red" if tally.failed or tally.stopped else "bold green"
    out.line((f"{out.plain(path)} → {out.plain(stream)}:", style), f" {counts}")
    for failure in tally.failed:
        out.line(
            ("  line ", "red"), f"{failure.line}: {out.plain(failure.code)}: {out.plain(failure.message)}"
        )
    if tally.failed:
        lines = ", ".join(str(failure.line) for failure in tally.failed)
        out.error(f"error: lines not imported: {lines}; fix them and run the same command again")
    if tally.stopped is not None:
        out.error(
            f"stopped before the end ({out.plain(tally.stopped)}): run the same command again to resume; "
            "lines already appended are not appended twice"
        )


def register(app: typer.Typer) -> None:
    app.command("import")(command(import_file))

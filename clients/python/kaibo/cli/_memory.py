"""``remember``, ``recall``, ``memory``, ``explain`` and ``job``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kaibo.cli import _events_input as events_input
from kaibo.cli import _output as out
from kaibo.cli import _views as views
from kaibo.cli._shared import EXIT_OK, JsonOption, UsageError, client, command, exactly_one

#: The most events one ``POST /v1/remember`` takes (docs/api.md#limits); ``kaibo import`` batches.
MAX_EVENTS_PER_CALL = 49

StreamOption = Annotated[
    str,
    typer.Option(
        "--stream", metavar="NAME", help="the stream to append to (created on first use)", show_default=False
    ),
]
MemoryIdArgument = Annotated[
    str, typer.Argument(metavar="MEMORY_ID", help="the memory's id (mem_...)", show_default=False)
]


def remember(
    *,
    stream: StreamOption,
    text: Annotated[
        str | None,
        typer.Option("--text", metavar="TEXT", help='a message event: payload {"role": ROLE, "text": TEXT}'),
    ] = None,
    event_json: Annotated[
        str | None,
        typer.Option(
            "--event-json", metavar="JSON", help="the whole event as a JSON object (kind, payload, ...)"
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            metavar="PATH",
            help="events from a file (- for stdin): a JSON object, a JSON list or JSON lines, "
            f"at most {MAX_EVENTS_PER_CALL}; events without idempotencyKey get a derived one",
        ),
    ] = None,
    role: Annotated[
        str | None, typer.Option("--role", metavar="ROLE", help="role of a --text message (default: user)")
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key", metavar="KEY", help="idempotency key of --text or --event-json (default: a random UUID)"
        ),
    ] = None,
    occurred_at: Annotated[
        str | None,
        typer.Option("--occurred-at", metavar="TS", help="RFC 3339 timestamp with offset (default: now)"),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", metavar="", help="wait until the memories are structured")
    ] = False,
    json_output: JsonOption = False,
) -> int:
    """Append events to a stream: one message, one event, or a file's events (one call, all or none)."""
    source = exactly_one(text=text, event_json=event_json, file=file)
    if source == "file":
        if role is not None or key is not None or occurred_at is not None:
            raise UsageError(
                "--role, --key and --occurred-at go with --text or --event-json; file events carry their own"
            )
        events = _file_events(stream, file or "-")
    else:
        events = [
            events_input.option_event(
                text=text, event_json=event_json, role=role, key=key, occurred_at=occurred_at
            )
        ]
    answer = client().remember(stream, events, wait=wait)
    out.emit(answer, json_output, views.remembered)
    return EXIT_OK


def _file_events(stream: str, path: str) -> list[dict[str, Any]]:
    read = events_input.file_events(events_input.read_source(path))
    problems = [f"line {item.number}: {item.problem}" for item in read if item.problem is not None]
    if problems:
        raise UsageError(f"{path}: " + "; ".join(problems))
    if not read:
        raise UsageError(f"{path} holds no event")
    if len(read) > MAX_EVENTS_PER_CALL:
        raise UsageError(
            f"{path} holds {len(read)} events; one call takes at most {MAX_EVENTS_PER_CALL}: "
            f"use `kaibo import {path} --stream {stream}` (batches, a progress bar, resumable)"
        )
    return [events_input.with_key(stream, item) for item in read]


def recall(
    question: Annotated[
        str, typer.Argument(metavar="QUESTION", help="the question, in plain words", show_default=False)
    ],
    *,
    budget: Annotated[int, typer.Option("--budget", metavar="N", min=1, help="token budget")] = 300,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of", metavar="TS", help="RFC 3339 instant: answer from what was valid then (default: now)"
        ),
    ] = None,
    streams: Annotated[
        list[str] | None,
        typer.Option("--stream", metavar="NAME", help="only this stream (repeatable)", show_default=False),
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", metavar="TYPE", help="only this memory type (repeatable)", show_default=False),
    ] = None,
    include_superseded: Annotated[
        bool,
        typer.Option("--include-superseded", metavar="", help="also memories whose validity ended (audits)"),
    ] = False,
    json_output: JsonOption = False,
) -> int:
    """Ask a question: the cited memories that answer it within the budget, or why Kaibo abstains."""
    answer = client().recall(
        question,
        budget,
        as_of=as_of,
        streams=streams or None,
        types=types or None,
        include_superseded=include_superseded,
    )
    out.emit(answer, json_output, views.recalled)
    return EXIT_OK


def memory(memory_id: MemoryIdArgument, json_output: JsonOption = False) -> int:
    """One memory by id, in any status: its content, validity and source events."""
    answer = client().memory(memory_id)
    out.emit(answer, json_output)
    return EXIT_OK


def explain(memory_id: MemoryIdArgument, json_output: JsonOption = False) -> int:
    """Why a memory is believed: its versions as a timeline, oldest first."""
    answer = client().explain(memory_id)
    out.emit(answer, json_output, views.explained)
    return EXIT_OK


def job(
    job_id: Annotated[
        str,
        typer.Argument(
            metavar="JOB_ID", help="the job's id (job_...), as remember printed it", show_default=False
        ),
    ],
    json_output: JsonOption = False,
) -> int:
    """A structuring job's status: queued, structuring, done (with its memories) or failed."""
    answer = client().job(job_id)
    out.emit(answer, json_output)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    app.command("remember")(command(remember))
    app.command("recall")(command(recall))
    app.command("memory")(command(memory))
    app.command("explain")(command(explain))
    app.command("job")(command(job))

"""``streams`` and ``events``: the project's streams and a stream's events, as served."""

from __future__ import annotations

from typing import Annotated

import typer

from kaibo.cli import _output as out
from kaibo.cli._shared import EXIT_FAILED, EXIT_OK, JsonOption, client, command


def streams(json_output: JsonOption = False) -> int:
    """List the project's streams, each with its head: stream seq hash."""
    for head in client().streams():
        if json_output:
            out.print_json_line(head)
        else:
            out.line(
                (out.plain(head.get("stream")), "bold"),
                f" {out.plain(head.get('seq'))} {out.plain(head.get('hash'))}",
            )
    return EXIT_OK


def events(
    stream: Annotated[
        str, typer.Option("--stream", metavar="NAME", help="the stream to list", show_default=False)
    ],
    from_seq: Annotated[int, typer.Option("--from-seq", metavar="N", min=1, help="first seq to list")] = 1,
    json_output: JsonOption = False,
) -> int:
    """A stream's events as served, one JSON object per line (the same with --json)."""
    del json_output  # JSON lines either way: accepted so every data command takes --json
    printed = 0
    for event in client().events(stream, from_seq=from_seq):
        out.print_json_line(event)
        printed += 1
    if printed == 0 and from_seq == 1:  # a stream exists once it has an event
        out.error(f"kaibo: no stream {stream!r} in this project (it has no event)")
        return EXIT_FAILED
    return EXIT_OK


def register(app: typer.Typer) -> None:
    app.command("streams")(command(streams))
    app.command("events")(command(events))

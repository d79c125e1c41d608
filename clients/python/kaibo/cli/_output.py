"""Printing: Rich consoles for people (colour only on a terminal, never with NO_COLOR), plain
JSON for machines. Served text is made safe for a terminal before it is shown (``plain``)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

#: How much of a memory's content a one-line preview shows.
PREVIEW_CHARS = 60


@functools.cache
def console(*, stderr: bool = False) -> Console:
    """Rich decides colour from the stream (a terminal?), NO_COLOR and FORCE_COLOR. Markup,
    emoji codes and highlighting are off: served text is printed as it is, never interpreted."""
    from rich.console import Console  # noqa: PLC0415 - Rich only once something is printed

    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, soft_wrap=True)


def line(*parts: str | tuple[str, str], stderr: bool = False, end: str = "\n") -> None:
    """Print one line made of plain strings and ``(text, style)`` pairs."""
    from rich.text import Text  # noqa: PLC0415

    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            text.append(part[0], style=part[1])
        else:
            text.append(part)
    print_text(text, stderr=stderr, end=end)


def print_text(text: Text, *, stderr: bool = False, end: str = "\n") -> None:
    console(stderr=stderr).print(text, end=end)
    (sys.stderr if stderr else sys.stdout).flush()


def error(message: str) -> None:
    line((message, "bold red"), stderr=True)


def warning(message: str) -> None:
    line((message, "yellow"), stderr=True)


def note(message: str) -> None:
    line((message, "dim"), stderr=True)


def json_dump(value: Any, *, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def print_json(value: Any) -> None:
    """Machine-readable: indented JSON on stdout, never coloured."""
    sys.stdout.write(json_dump(value, indent=2) + "\n")
    sys.stdout.flush()


def print_json_line(value: Any) -> None:
    sys.stdout.write(json_dump(value) + "\n")
    sys.stdout.flush()


def show_json(value: Any) -> None:
    """For people: the same indented JSON, coloured when stdout is a terminal."""
    if not console().is_terminal or console().no_color:
        print_json(value)
        return
    from rich.json import JSON  # noqa: PLC0415

    console().print(JSON(json_dump(value), indent=2, ensure_ascii=False))


def emit(value: Any, json_output: bool, view: Callable[[Any], None] | None = None) -> None:
    """``value`` as JSON with ``--json``, else through ``view`` (default: the readable JSON view)."""
    if json_output:
        print_json(value)
    else:
        (view or show_json)(value)


def plain(value: Any) -> str:
    """A served value safe to print on a terminal: no control characters (escape sequences)."""
    return "".join(char if char.isprintable() else "?" for char in str(value))


def preview(content: Any, limit: int = PREVIEW_CHARS) -> str:
    """The start of a memory's content, on one line, quoted, control characters escaped."""
    if not isinstance(content, str):
        return "(no content)"
    text = " ".join(content.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"

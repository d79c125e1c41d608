"""The ``kaibo`` Typer application: the root options, the commands, and ``main``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from kaibo.cli import _forget, _import, _keys, _mcp, _memory, _streams, _verify
from kaibo.cli._shared import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    AdminKeyOption,
    ApiKeyOption,
    EndpointOption,
    remember_connection,
    reset_connection,
)

app = typer.Typer(
    name="kaibo",
    help="Kaibo client: remember, recall and forget; manage keys; verify the hash chains and the ledger.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("kaibo")
    except PackageNotFoundError:  # run from a source tree without installing
        from kaibo import __version__  # noqa: PLC0415

        return __version__


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"kaibo {_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def root(
    endpoint: EndpointOption = None,
    api_key: ApiKeyOption = None,
    admin_key: AdminKeyOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            help="print the client's version and exit",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Kaibo client: remember, recall and forget; manage keys; verify the hash chains and the ledger.

    Connection options work before or after the command; each defaults to its environment
    variable. Exit codes: 0 ok; 1 verify failed, forget not confirmed, no such stream, or import
    lines failed; 2 usage, configuration or API error.
    """
    del version  # handled by its callback
    remember_connection(endpoint, api_key, admin_key)


_keys.register(app)
_memory.register(app)
_import.register(app)
_streams.register(app)
_forget.register(app)
_verify.register(app)
_mcp.register(app)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (docs/cli.md#exit-codes)."""
    reset_connection()
    command = typer.main.get_command(app)
    try:
        command.main(
            args=list(sys.argv[1:] if argv is None else argv), prog_name="kaibo", standalone_mode=True
        )
    except SystemExit as exc:
        if exc.code is None:
            return EXIT_OK
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK

"""``keys create``, ``keys revoke`` (the admin key) and ``admin-key`` (offline)."""

from __future__ import annotations

from typing import Annotated

import typer

from kaibo.cli import _output as out
from kaibo.cli._shared import EXIT_OK, JsonOption, UsageError, client, command, exactly_one

DEFAULT_SCOPES = "read,write"


def create(
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="create a new project with this name, and its first key"),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", metavar="PRJ", help="create another key for this project id (prj_...)"),
    ] = None,
    time_zone: Annotated[
        str | None,
        typer.Option(
            "--time-zone",
            metavar="ZONE",
            help="with --name: the project's default time zone (IANA, e.g. Europe/Berlin)",
        ),
    ] = None,
    scopes: Annotated[
        str | None,
        typer.Option(
            "--scopes",
            metavar="SCOPES",
            help="with --project: comma-separated scopes read,write,forget (admin is refused) "
            f"(default: {DEFAULT_SCOPES})",
        ),
    ] = None,
    json_output: JsonOption = False,
) -> int:
    """A new project and its first key (--name), or another key for a project (--project)."""
    exactly_one(name=name, project=project)
    kaibo = client(admin=True)
    if name is not None:
        if scopes is not None:
            raise UsageError(
                "--scopes goes with --project; a new project's first key gets the server's default scopes"
            )
        created = kaibo.create_project(name, time_zone)
    else:
        if time_zone is not None:
            raise UsageError("--time-zone goes with --name (a project's time zone is set when it is created)")
        chosen = [s.strip() for s in (scopes or DEFAULT_SCOPES).split(",") if s.strip()]
        if not chosen:
            raise UsageError("--scopes needs at least one scope")
        created = kaibo.create_key(str(project), chosen)
    out.emit(created, json_output)
    out.warning(
        "warning: the API key above is shown once; Kaibo keeps only a salted hash of it. Store it now."
    )
    return EXIT_OK


def revoke(
    key_id: Annotated[
        str,
        typer.Argument(
            metavar="KEY_ID", help="the key's id (the keyId keys create printed)", show_default=False
        ),
    ],
    json_output: JsonOption = False,
) -> int:
    """Revoke an API key: calls with it fail with 401 from then on."""
    client(admin=True).revoke_key(key_id)
    if json_output:
        out.print_json({"revoked": key_id})
    else:
        out.line(("revoked", "green"), f" {out.plain(key_id)}")
    return EXIT_OK


def admin_key(json_output: JsonOption = False) -> int:
    """Offline: a new admin key and the AdminKeyHash to deploy with."""
    from kaibo_core.core.api_keys import issue_admin_key  # noqa: PLC0415 - only this command

    key, key_hash = issue_admin_key()
    made = {"adminKey": key, "adminKeyHash": key_hash}
    out.emit(made, json_output)
    out.note(
        "Deploy with the parameter AdminKeyHash set to adminKeyHash (e.g. sam deploy "
        "--parameter-overrides AdminKeyHash=<adminKeyHash>) and keep adminKey secret: "
        "it is shown once and not stored anywhere."
    )
    return EXIT_OK


def register(app: typer.Typer) -> None:
    keys = typer.Typer(help="Create or revoke API keys (with the admin key).", no_args_is_help=True)
    keys.command("create")(command(create))
    keys.command("revoke")(command(revoke))
    app.add_typer(keys, name="keys")
    app.command("admin-key")(command(admin_key))

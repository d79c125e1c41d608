"""What every ``kaibo`` command shares: exit codes, the connection options, errors, the client."""

from __future__ import annotations

import functools
import inspect
import ipaddress
import os
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from kaibo.cli import _output as out
from kaibo.client import KaiboAPIError, KaiboClient, KaiboConnectionError, KaiboError

EXIT_OK = 0
#: ``verify`` found a problem, ``forget`` was not confirmed, ``events`` found no such stream,
#: ``import`` could not append some lines.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: The output pipe closed early (``kaibo events … | head``): what a shell reports for any command
#: ended by SIGPIPE (128 + 13), so ``set -o pipefail`` treats it as it treats ``seq … | head``.
EXIT_BROKEN_PIPE = 141

ENV_ENDPOINT = "KAIBO_ENDPOINT"
ENV_API_KEY = "KAIBO_API_KEY"
ENV_ADMIN_KEY = "KAIBO_ADMIN_KEY"
ENV_PROJECT_ID = "KAIBO_PROJECT_ID"


class UsageError(Exception):
    """A command line or configuration problem (exit 2)."""


@dataclass
class Connection:
    """The connection options: given before the command (root) or after it (the command wins)."""

    endpoint: str | None = None
    api_key: str | None = None
    admin_key: str | None = None


#: Filled by the root callback, then by each command's own options.
CONNECTION = Connection()

EndpointOption = Annotated[
    str | None,
    typer.Option(
        "--endpoint", metavar="URL", help=f"API base URL (default: ${ENV_ENDPOINT})", show_default=False
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key", metavar="KEY", help=f"project API key (default: ${ENV_API_KEY})", show_default=False
    ),
]
AdminKeyOption = Annotated[
    str | None,
    typer.Option(
        "--admin-key",
        metavar="KEY",
        help=f"admin key, for the `keys` commands (default: ${ENV_ADMIN_KEY})",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option("--json", metavar="", help="print machine-readable JSON on stdout, and nothing else there"),
]

_CONNECTION_PARAMETERS = (
    inspect.Parameter("endpoint", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=EndpointOption),
    inspect.Parameter("api_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ApiKeyOption),
    inspect.Parameter("admin_key", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=AdminKeyOption),
)


def reset_connection() -> None:
    CONNECTION.endpoint = CONNECTION.api_key = CONNECTION.admin_key = None


def remember_connection(endpoint: str | None, api_key: str | None, admin_key: str | None) -> None:
    """Record the connection options given; a later (command-level) value wins."""
    CONNECTION.endpoint = endpoint or CONNECTION.endpoint
    CONNECTION.api_key = api_key or CONNECTION.api_key
    CONNECTION.admin_key = admin_key or CONNECTION.admin_key


def command(func: Callable[..., int]) -> Callable[..., None]:
    """A Typer command from ``func``: it also takes the connection options (so they work after
    the command too), maps its errors to exit codes, and exits with the code it returns."""
    signature = inspect.signature(func, eval_str=True)

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> None:
        remember_connection(kwargs.pop("endpoint"), kwargs.pop("api_key"), kwargs.pop("admin_key"))
        code = _exit_code(lambda: func(*args, **kwargs))
        if code != EXIT_OK:
            raise typer.Exit(code)

    parameters = [*signature.parameters.values(), *_CONNECTION_PARAMETERS]
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def _exit_code(call: Callable[[], int]) -> int:
    try:
        return call()
    except UsageError as exc:
        out.error(f"kaibo: error: {exc}")
        return EXIT_USAGE
    except KaiboError as exc:
        print_api_error(exc)
        return EXIT_USAGE
    except BrokenPipeError:  # `kaibo events ... | head`: stop quietly, but do not claim success
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def print_api_error(exc: KaiboError) -> None:
    if isinstance(exc, KaiboAPIError):
        out.error(f"error: {exc.code}: {exc.message} (HTTP {exc.status})")
    elif isinstance(exc, KaiboConnectionError):
        out.error(f"error: connection_failed: {exc}")
    else:
        out.error(f"error: {exc}")


def setting(value: str | None, env: str) -> str | None:
    chosen = value or os.environ.get(env)
    return chosen.strip() if chosen and chosen.strip() else None


def client(*, admin: bool = False) -> KaiboClient:
    """A client for the configured endpoint, with the project key (or the admin key)."""
    endpoint = setting(CONNECTION.endpoint, ENV_ENDPOINT)
    if endpoint is None:
        raise UsageError(f"no endpoint: pass --endpoint URL or set {ENV_ENDPOINT}")
    if admin:
        key = setting(CONNECTION.admin_key, ENV_ADMIN_KEY)
        if key is None:
            raise UsageError(f"no admin key: pass --admin-key or set {ENV_ADMIN_KEY}")
    else:
        key = setting(CONNECTION.api_key, ENV_API_KEY)
        if key is None:
            raise UsageError(f"no API key: pass --api-key or set {ENV_API_KEY}")
    try:
        made = KaiboClient(endpoint, key)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _warn_if_cleartext(endpoint)
    return made


def _warn_if_cleartext(endpoint: str) -> None:
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.scheme != "http" or host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    out.warning(f"warning: {host} is plain http; the key travels unencrypted")


def exactly_one(**given: object) -> str:
    """The name of the one option given among ``given`` (``--a-b`` style), else a UsageError."""
    chosen = [name for name, value in given.items() if value is not None and value is not False]
    names = " | ".join(f"--{name.replace('_', '-')}" for name in given)
    if len(chosen) != 1:
        raise UsageError(f"give exactly one of {names}")
    return chosen[0]

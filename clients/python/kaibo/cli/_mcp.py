"""``kaibo mcp``: Kaibo's tools for an agent, over MCP (stdio or streamable HTTP)."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from kaibo.cli import _output as out
from kaibo.cli._shared import ENV_PROJECT_ID, EXIT_OK, EXIT_USAGE, client, command


class Transport(StrEnum):
    STDIO = "stdio"
    STREAMABLE_HTTP = "streamable-http"


def mcp(
    transport: Annotated[
        Transport,
        typer.Option(
            "--transport",
            metavar="stdio|streamable-http",
            help="stdio: an agent starts `kaibo mcp` itself; streamable-http: serve on --host and --port",
        ),
    ] = Transport.STDIO,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="with streamable-http: the address to listen on")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", metavar="PORT", min=1, max=65535, help="with streamable-http: the port to listen on"
        ),
    ] = 8765,
) -> int:
    """Serve Kaibo's tools to an agent over MCP (needs: pip install 'kaibo\\[mcp]')."""
    try:
        from kaibo import mcp_server  # noqa: PLC0415 - the MCP SDK only for this command
    except ImportError:
        out.error("kaibo: error: the MCP server needs the mcp package: pip install 'kaibo[mcp]'")
        return EXIT_USAGE
    kaibo = client()
    project_id = os.environ.get(ENV_PROJECT_ID) or None
    serve = getattr(mcp_server, "serve", None)
    try:
        if serve is not None:
            serve(kaibo, project_id, transport=transport.value, host=host, port=port)
            return EXIT_OK
        if transport is not Transport.STDIO:
            out.error("kaibo: error: this kaibo's MCP server serves stdio only")
            return EXIT_USAGE
        mcp_server.build_server(kaibo, project_id).run("stdio")
    except ImportError:
        out.error("kaibo: error: the MCP server needs the mcp package: pip install 'kaibo[mcp]'")
        return EXIT_USAGE
    return EXIT_OK


def register(app: typer.Typer) -> None:
    app.command("mcp")(command(mcp))

"""The ``kaibo`` command line (docs/cli.md), on Typer and Rich.

Exit codes: 0 success; 1 ``verify`` found a problem, ``forget`` was not confirmed, ``events``
found no such stream, or ``import`` could not append some lines; 2 a usage or configuration
error, or the API refused or could not be reached; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from kaibo.cli._app import main

__all__ = ["main"]

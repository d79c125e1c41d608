"""Fixtures of the contract tests: the template (parsed once) and the SAM/cfn-lint tools directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kaibo_local.template import REPO_ROOT, load_template

#: Where the Makefile builds the tools environment (SAM CLI + cfn-lint, requirements-tools.txt).
DEFAULT_TOOLS_BIN = REPO_ROOT / ".venv-tools" / "bin"


def tools_bin_dir() -> Path:
    """``$KAIBO_TOOLS_BIN`` or ``<repo>/.venv-tools/bin``."""
    configured = os.environ.get("KAIBO_TOOLS_BIN")
    return Path(configured) if configured else DEFAULT_TOOLS_BIN


@pytest.fixture(scope="session")
def tools_bin() -> Path:
    """The tools directory. Missing: skipped locally, a failure under CI (``$CI`` set)."""
    directory = tools_bin_dir()
    if not directory.is_dir():
        message = (
            f"SAM CLI/cfn-lint tools directory {directory} does not exist: build the tools "
            "environment from requirements-tools.txt (the Makefile makes .venv-tools) or point "
            "KAIBO_TOOLS_BIN at a directory holding `sam` and `cfn-lint`."
        )
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so a missing tool is a failure)")
        pytest.skip(message)
    return directory


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()

"""Every test has a time limit (issue #20): pytest-timeout is pinned, installed and configured, so a
hang fails its test instead of stalling the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_given_the_dev_requirements_then_pytest_timeout_is_pinned_exactly() -> None:
    text = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert re.search(r"^pytest-timeout==\d+(\.\d+)+$", text, flags=re.MULTILINE)


def test_given_the_suite_config_then_a_timeout_applies_to_every_test(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert 60 <= float(pytestconfig.getini("timeout")) <= 600
    # thread, not signal: kaibo_local.containers times handlers with SIGALRM (pyproject.toml).
    assert pytestconfig.getini("timeout_method") == "thread"

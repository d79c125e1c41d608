"""The suite runs on every core: pytest-xdist is pinned, `make test` asks for a worker per core, and
the suite's options hand out whole files in their collected order (tests/integration/
test_suite_in_parallel.py shows what these options do on a real run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_given_the_dev_requirements_then_pytest_xdist_and_execnet_are_pinned_exactly() -> None:
    text = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert re.search(r"^pytest-xdist==\d+(\.\d+)+$", text, flags=re.MULTILINE)
    assert re.search(r"^execnet==\d+(\.\d+)+$", text, flags=re.MULTILINE)


def test_given_make_test_then_pytest_runs_a_worker_per_core() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^pytest:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert recipe, "the Makefile has no pytest target"
    assert re.search(r"\$\(VENV\)/bin/pytest -n auto\b", recipe.group(1)), recipe.group(1)


def test_given_the_suite_config_then_workers_take_whole_files_in_order_and_a_crash_ends_the_run(
    pytestconfig: pytest.Config,
) -> None:
    # Read from the ini: on a worker, xdist resets the distribution options it was started with.
    addopts = " ".join(pytestconfig.getini("addopts"))
    assert "--dist loadfile" in addopts
    assert "--no-loadscope-reorder" in addopts
    assert "--max-worker-restart=0" in addopts
    assert "--durations=20" in addopts
    assert pytestconfig.pluginmanager.hasplugin("xdist")

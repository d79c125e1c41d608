"""The import contracts (pyproject.toml, ``[tool.importlinter]``) hold, and each one can fail.

``make lint`` runs them on the tree; here each contract is also shown to break on a copy of the
code with one forbidden import planted, so a contract that could never fail is caught.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path, contract: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'layers' / 'kaibo_core'}"}
    only = ["--contract", contract] if contract else []
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache", *only],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("tree")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "functions", copy / "functions", ignore=ignore)
    shutil.copytree(
        ROOT / "layers" / "kaibo_core" / "kaibo_core", copy / "layers/kaibo_core/kaibo_core", ignore=ignore
    )
    return copy


def test_given_the_code_as_it_is_then_every_contract_is_kept() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("layers/kaibo_core/kaibo_core/core/ids.py", "import botocore", "pure-core"),
        (
            "layers/kaibo_core/kaibo_core/core/text.py",
            "from kaibo_core import ports",
            "pure-core",
        ),
        (
            "layers/kaibo_core/kaibo_core/services/jobs.py",
            "from kaibo_core.adapters import sqs_jobs",
            "layers",
        ),
        (
            "layers/kaibo_core/kaibo_core/services/jobs.py",
            "from kaibo_core.runtime import settings",
            "layers",
        ),
        (
            "layers/kaibo_core/kaibo_core/adapters/sqs_jobs.py",
            "from kaibo_core.services import jobs",
            "layers",
        ),
        (
            "layers/kaibo_core/kaibo_core/services/memories.py",
            "from kaibo_core.api import models",
            "services-domain-only",
        ),
        (
            "layers/kaibo_core/kaibo_core/adapters/memory_jobs.py",
            "from kaibo_core.adapters import dynamodb_jobs",
            "fakes-apart",
        ),
        ("functions/recall/app.py", "import boto3", "thin-handlers"),
        ("functions/events/app.py", "from kaibo_core.adapters import aws", "thin-handlers"),
        (
            "layers/kaibo_core/kaibo_core/adapters/sqs_jobs.py",
            "from kaibo_core.adapters.sdk_speedups import plain_items",
            "sdk-speedups-contained",
        ),
    ],
)
def test_given_a_forbidden_import_then_its_contract_breaks(
    tree: Path, module: str, planted: str, contract: str
) -> None:
    path = tree / module
    original = path.read_text()
    path.write_text(f"{original}\n{planted}  # planted by the test\n")
    try:
        result = lint(tree, contract)
    finally:
        path.write_text(original)
    assert result.returncode != 0, result.stdout
    assert "0 kept, 1 broken" in result.stdout, result.stdout

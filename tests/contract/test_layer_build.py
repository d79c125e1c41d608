"""The layer ships bytecode: Lambda's /opt is read-only, so without .pyc files every cold start
compiles every module (layers/kaibo_core/Makefile, docs/deploy.md).

``sam build`` runs the Makefile's ``build-KaiboCoreLayer`` (the target must carry the layer's
logical id). Its pip step needs the package index; the rest (kaibo_core and the bytecode) runs
here offline, into a temporary build directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kaibo_local.template import REPO_ROOT, load_template

TEMPLATE = load_template()
LAYER_DIR = REPO_ROOT / TEMPLATE["Resources"]["KaiboCoreLayer"]["Properties"]["ContentUri"]
MAKEFILE = LAYER_DIR / "Makefile"
UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, source not checked


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    artifacts = tmp_path_factory.mktemp("KaiboCoreLayer")
    make = shutil.which("make")
    assert make, "make is needed by sam build for the layer"
    env = {**os.environ, "ARTIFACTS_DIR": str(artifacts), "PYTHON": sys.executable}
    subprocess.run(
        [make, "--no-print-directory", "-C", str(LAYER_DIR), "kaibo-core-bytecode"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return artifacts / "python"


def test_given_the_makefile_then_sam_finds_the_layers_target() -> None:
    targets = re.findall(r"^([A-Za-z0-9_-]+):", MAKEFILE.read_text(encoding="utf-8"), re.MULTILINE)
    assert "build-KaiboCoreLayer" in targets, "sam build runs build-<LogicalId>"


def test_given_the_build_then_every_module_has_unchecked_hash_bytecode(built: Path) -> None:
    sources = sorted((built / "kaibo_core").rglob("*.py"))
    assert len(sources) > 50
    assert not [p for p in built.rglob("*.pyc") if "__pycache__" not in p.parts]
    tag = sys.implementation.cache_tag
    for source in sources:
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert compiled.is_file(), f"no bytecode for {source.relative_to(built)}"
        header = compiled.read_bytes()[:8]
        assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH, compiled


def test_given_the_built_layer_then_imports_run_from_its_bytecode(built: Path, tmp_path: Path) -> None:
    """As on Lambda, nothing is written, and the bytecode is used even though the source's
    timestamp and content changed (in the zip, on extraction): here a source replaced by one
    that would raise if it were compiled."""
    layer = tmp_path / "opt"
    shutil.copytree(built, layer)
    (layer / "kaibo_core" / "cold_start.py").write_text("raise RuntimeError('source compiled')\n")
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import kaibo_core.runtime.cold_start as m; print(m.__name__)"],
        env={"PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "kaibo_core.runtime.cold_start"

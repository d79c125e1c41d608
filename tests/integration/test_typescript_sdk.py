"""The TypeScript SDK (clients/typescript) against the local stack as users run it
(``python -m kaibo_local``): Node's own test runner runs its tests with KAIBO_URL and
KAIBO_API_KEY set, and its generated types must be what the served OpenAPI document generates.

Skipped only when ``node`` is missing or older than 20 (the SDK's ``engines``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_local_lifecycle import REPO, launch

TS = REPO / "clients" / "typescript"
GENERATOR = TS / "scripts" / "generate-types.mjs"
OPENAPI = REPO / "functions" / "docs" / "site" / "openapi.json"
MIN_NODE_MAJOR = 20
NODE_SECONDS = 300
#: The fewest tests the SDK's suite holds (unit, types and live): fewer means some were not found.
MIN_NODE_TESTS = 44


def _node_problem() -> str | None:
    node = shutil.which("node")
    if node is None:
        return "node is not installed: the TypeScript SDK needs Node 20+ to be tested"
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if match is None or int(match.group(1)) < MIN_NODE_MAJOR:
        shown_version = version or "(unknown version)"
        return f"node {shown_version} is older than {MIN_NODE_MAJOR}: the TypeScript SDK needs 20+"
    return None


NODE_PROBLEM = _node_problem()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(NODE_PROBLEM is not None, reason=NODE_PROBLEM or "")]


def node(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=NODE_SECONDS,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def shown(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"


def tap_counts(output: str) -> dict[str, int]:
    """The summary of Node's TAP reporter: ``# pass 38``, ``# fail 0``, ..."""
    return {name: int(count) for name, count in re.findall(r"^# (\w+) (\d+)$", output, flags=re.MULTILINE)}


def test_given_the_served_openapi_document_then_the_committed_typescript_types_match_it() -> None:
    result = node(str(GENERATOR), "--check")
    assert result.returncode == 0, shown(result)
    assert "can go" not in result.stderr, shown(result)  # every type comes from the document


def test_given_an_openapi_document_that_changed_a_schema_then_the_types_check_fails_and_names_the_file(
    tmp_path: Path,
) -> None:
    document = json.loads(OPENAPI.read_text())
    document["components"]["schemas"]["RecallItem"]["properties"]["rank"] = {"type": "integer"}
    changed = tmp_path / "openapi.json"
    changed.write_text(json.dumps(document))

    result = node(str(GENERATOR), "--check", "--openapi", str(changed))

    assert result.returncode == 1, shown(result)
    assert "src/types.d.ts differs" in result.stderr
    assert "rank" in result.stderr


def test_given_the_local_stack_then_the_typescript_sdk_tests_pass_against_it(tmp_path: Path) -> None:
    stack = launch(tmp_path / "stack", args=["-m", "kaibo_local"], KAIBO_DATA_DIR=":memory:")
    try:
        stack.wait_announced()
        env = {
            **{name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")},
            "KAIBO_URL": stack.values["KAIBO_ENDPOINT"],
            "KAIBO_API_KEY": stack.values["KAIBO_API_KEY"],
            "KAIBO_ADMIN_KEY": stack.values["KAIBO_ADMIN_KEY"],
        }
        result = node("--test", "--test-reporter=tap", str(TS / "test"), env=env)
    finally:
        _, left = stack.stop_tree()
    log = stack.err.read_text()
    assert result.returncode == 0, f"{shown(result)}\n--- the stack's stderr ---\n{log}"
    counts = tap_counts(result.stdout)
    assert counts.get("fail") == 0, shown(result)
    skipped = counts.get("skipped", 0) or "# SKIP" in result.stdout
    assert not skipped, f"tests were skipped (KAIBO_URL not seen?)\n{shown(result)}"
    assert counts.get("pass", 0) >= MIN_NODE_TESTS, shown(result)
    assert not left, f"stack processes outlived the test: {left}"
    assert "Traceback" not in log, log

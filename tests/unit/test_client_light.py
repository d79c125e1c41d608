"""The client stays light: importing it never loads an AWS SDK, pydantic or Powertools."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("boto3", "botocore", "pydantic", "aws_lambda_powertools")

PROBE = f"""
import json, sys
import kaibo, kaibo.cli, kaibo.client, kaibo.verify
heavy = {HEAVY!r}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def test_given_a_fresh_interpreter_when_importing_the_client_then_no_heavy_module_is_loaded() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_given_the_probe_when_a_heavy_module_is_imported_then_it_is_detected() -> None:
    # The probe itself must be able to fail: import one heavy module first.
    result = subprocess.run(
        [sys.executable, "-c", "import pydantic\n" + PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "pydantic" in json.loads(result.stdout)

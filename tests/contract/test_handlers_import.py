"""Every function named in template.yaml imports the way Lambda imports it, and exposes its handler.

Each also runs its cold start without the garbage collector (``kaibo_core/runtime/cold_start.py``): paused
before the heavy imports, on again once the first invocation has ended, however it ended.

Lambda puts the function's code directory and the layer (``/opt/python``) on ``sys.path`` and
imports ``Handler``'s module by its bare name (``app``), in a fresh interpreter. Each import
below runs in such a fresh subprocess: no ``functions.`` package, fake credentials, no
KAIBO_* settings, and every socket connection refused, so a handler that touches the network
or reads its settings at import time fails here instead of at its first cold start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kaibo_local.template import REPO_ROOT, FunctionSpec, function_specs, load_template

TEMPLATE = load_template()
SPECS = function_specs(TEMPLATE)
LAYER_DIR = REPO_ROOT / TEMPLATE["Resources"]["KaiboCoreLayer"]["Properties"]["ContentUri"]

#: Runs in the subprocess: argv = code_dir, layer_dir, module, handler name.
IMPORT_PROBE = """
import importlib, json, socket, sys

def _refuse(*args, **kwargs):
    raise OSError("network access at import time")

socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse

code_dir, layer_dir, module_name, handler_name = sys.argv[1:5]
sys.path[:0] = [code_dir, layer_dir]

import gc
from kaibo_core.runtime import cold_start

HEAVY = ("botocore", "pydantic", "aws_lambda_powertools")
loaded_before_pause = []
pause = cold_start.pause_collector

def spy():
    loaded_before_pause.extend(name for name in HEAVY if name in sys.modules)
    pause()

cold_start.pause_collector = spy
collecting_at_start = gc.isenabled()
module = importlib.import_module(module_name)
collecting_after_import = gc.isenabled()
handler = getattr(module, handler_name, None)
frozen_before = gc.get_freeze_count()
try:
    handler({}, None)  # an event no handler accepts: the first invocation fails, somewhere
except BaseException:
    pass
print(json.dumps({
    "file": getattr(module, "__file__", None),
    "callable": callable(handler),
    "functions_package_loaded": any(name.split(".")[0] == "functions" for name in sys.modules),
    "collecting_at_start": collecting_at_start,
    "loaded_before_pause": loaded_before_pause,
    "collecting_after_import": collecting_after_import,
    "collecting_after_first_invocation": gc.isenabled(),
    "frozen_by_first_invocation": gc.get_freeze_count() - frozen_before,
}))
"""

FAKE_LAMBDA_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "POWERTOOLS_SERVICE_NAME": "kaibo",
    "POWERTOOLS_METRICS_NAMESPACE": "Kaibo",
    # Never reachable: any AWS call at import time would fail loudly.
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "PYTHONDONTWRITEBYTECODE": "1",
}


_REPORTS: dict[str, dict[str, Any]] = {}


def import_in_fresh_interpreter(spec: FunctionSpec) -> dict[str, Any]:
    """The probe's report for ``spec`` (one subprocess per function, shared by the tests)."""
    if spec.logical_id not in _REPORTS:
        _REPORTS[spec.logical_id] = _probe(spec)
    return _REPORTS[spec.logical_id]


def _probe(spec: FunctionSpec) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            IMPORT_PROBE,
            str(spec.code_dir),
            str(LAYER_DIR),
            spec.handler_module,
            spec.handler_name,
        ],
        cwd=spec.code_dir,
        env=FAKE_LAMBDA_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{spec.logical_id} does not import:\n{result.stderr}"
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def test_given_the_template_then_it_names_functions() -> None:
    assert SPECS, "template.yaml has no AWS::Serverless::Function"


@pytest.mark.parametrize("spec", SPECS, ids=[spec.logical_id for spec in SPECS])
def test_given_a_function_when_imported_like_lambda_then_its_handler_is_callable(spec: FunctionSpec) -> None:
    module_file = spec.code_dir / (spec.handler_module.replace(".", "/") + ".py")
    assert module_file.is_file(), f"{spec.logical_id}: {module_file} does not exist"

    report = import_in_fresh_interpreter(spec)

    assert Path(report["file"]).resolve() == module_file.resolve(), "imported another module of that name"
    assert report["callable"], f"{spec.logical_id}: {spec.handler_module}.{spec.handler_name} is not callable"
    assert not report["functions_package_loaded"], (
        "the handler reaches into the repository's functions package"
    )


@pytest.mark.parametrize("spec", SPECS, ids=[spec.logical_id for spec in SPECS])
def test_given_a_function_then_its_cold_start_runs_without_the_garbage_collector(spec: FunctionSpec) -> None:
    report = import_in_fresh_interpreter(spec)

    assert report["collecting_at_start"]
    assert report["loaded_before_pause"] == [], "the collector is paused after heavy imports"
    assert not report["collecting_after_import"], "the import ran with the collector on"
    assert report["collecting_after_first_invocation"], "the first invocation left the collector off"
    assert report["frozen_by_first_invocation"] > 0, "what the cold start built was not frozen"


def test_given_the_functions_directory_then_every_handler_module_is_deployed() -> None:
    deployed = {spec.code_dir.resolve() for spec in SPECS}
    on_disk = {path.parent.resolve() for path in (REPO_ROOT / "functions").glob("*/app.py")}
    assert on_disk <= deployed, f"not in template.yaml: {sorted(str(p) for p in on_disk - deployed)}"


def test_given_each_function_then_its_qualified_module_is_importable_in_tests() -> None:
    # The in-process tests and the local stack import handlers by this dotted name.
    for spec in SPECS:
        relative = spec.code_dir.relative_to(REPO_ROOT)
        assert spec.qualified_module == ".".join((*relative.parts, spec.handler_module))
        assert (spec.code_dir / "__init__.py").is_file(), f"{relative} needs __init__.py"

"""Fuzzing the API against its own OpenAPI document (#20 item 2), on the local stack as users run
it (``python -m kaibo_local``, one stack for the module, ``KAIBO_DATA_DIR=:memory:``).

``bench/fuzz_api.py`` does the fuzzing, run here once for the module with ``EXAMPLES`` per
operation and kind, in a process of its own (schemathesis patches hypothesis process-wide once it
generates; the suite's property tests must not inherit that). Every operation of ``/openapi.json``
gets schemathesis's schema-valid and schema-violating requests (hypothesis: derandomized, no
deadline, no shrinking) and up to 10 whose ids exist (a seeded job, memories, a receipt, a project
and keys); project routes carry the development key, admin routes the admin key. Every answer must
pass ``bench.fuzz_api.CHECKS``: never a 5xx, only statuses the document declares for the
operation, content types and bodies as documented, a schema-violating request refused with a 4xx,
and a route that needs a key refusing a request without one. One test per operation says which.

What the fuzzing found, each fixed at its root and asserted below: every route that listed its
error responses documented no success answer at all (each 2xx was "undocumented"), remember's 200
(with ``wait``) was missing, recall's 200 had no schema, and the bounds of the query's numbers were
written as "ge"/"le", no JSON Schema keywords, so the document declared none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.integration.test_local_lifecycle import StackProcess, launch

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "fuzz_api.py"
#: What /openapi.json serves (DocsFunction reads it; ``make docs`` builds it).
DOCUMENT = REPO / "functions" / "docs" / "site" / "openapi.json"
#: Generated requests per operation, of each kind (schema-valid, schema-violating): about 30 s for
#: the module on 2 cores, the stack's start included.
EXAMPLES = 25
FUZZ_TIMEOUT_SECONDS = 400
METHODS = ("get", "put", "post", "delete", "patch")
#: Not JSON Schema keywords: pydantic's names for bounds, which a validator ignores.
PYDANTIC_BOUNDS = {"ge", "le", "gt", "lt", "max_length", "min_length", "multiple_of"}

pytestmark = pytest.mark.e2e


def documented_operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = json.loads(DOCUMENT.read_text())
    return [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if method in METHODS
    ]


LABELS = [f"{method} {path}" for method, path, _ in documented_operations()]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    running = launch(
        tmp_path_factory.mktemp("fuzz-stack"), args=["-m", "kaibo_local"], KAIBO_DATA_DIR=":memory:"
    )
    try:
        running.wait_announced()
        yield running
    finally:
        _, left = running.stop_tree()
    assert not left, f"stack processes outlived the module: {left}"
    log = running.err.read_text()
    assert "Traceback" not in log, log
    assert "Task timed out" not in log, log


@pytest.fixture(scope="module")
def fuzzed(stack: StackProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each operation's run (``bench.fuzz_api.as_json``), by label."""
    runs = tmp_path_factory.mktemp("fuzz") / "runs.json"
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")},
        "KAIBO_API_KEY": stack.values["KAIBO_API_KEY"],
        "KAIBO_ADMIN_KEY": stack.values["KAIBO_ADMIN_KEY"],
    }
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--endpoint",
            stack.values["KAIBO_ENDPOINT"],
            "--examples",
            str(EXAMPLES),
            "--json",
            str(runs),
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=FUZZ_TIMEOUT_SECONDS,
        check=False,
    )
    # 1: it found something (each operation's test says what); anything else: it broke.
    assert result.returncode in {0, 1}, f"{result.stdout}\n{result.stderr}"
    assert runs.exists(), f"{result.stdout}\n{result.stderr}"
    return {run["label"]: run for run in json.loads(runs.read_text())}


@pytest.mark.parametrize("label", LABELS)
def test_given_generated_requests_then_every_answer_is_documented_and_none_is_a_5xx(
    label: str, fuzzed: dict[str, dict[str, Any]]
) -> None:
    assert label in fuzzed, f"{label} is in {DOCUMENT.name} but was not served: {sorted(fuzzed)}"
    run = fuzzed[label]
    if run["skipped"]:
        pytest.skip(f"not fuzzed: {run['skipped']} (bench.fuzz_api.NEVER_FUZZED)")

    assert not run["findings"], json.dumps(run, indent=1)
    assert run["examples"].get("positive", 0) >= 1, run
    statuses = {int(status) for status in run["statuses"]}
    assert not {status for status in statuses if status >= 500}, run
    # It names things, and some of them existed (forget: by exactly one selector, the schema allows any)
    if "{" in label or label in {"POST /v1/explain", "POST /v1/forget"}:
        assert run["examples"].get("known", 0) >= 1, run
        assert any(200 <= status < 300 for status in statuses), run


def test_given_the_served_document_then_it_is_the_built_one_and_every_operation_documents_its_success(
    stack: StackProcess,
) -> None:
    served = requests.get(f"{stack.values['KAIBO_ENDPOINT']}/openapi.json", timeout=60)
    assert served.status_code == 200
    assert served.json() == json.loads(DOCUMENT.read_text())
    for method, path, operation in documented_operations():
        successes = {code: answer for code, answer in operation["responses"].items() if code.startswith("2")}
        assert successes, f"{method} {path} documents no success answer"
        for code, answer in successes.items():
            if code == "204":
                assert not answer.get("content"), (method, path)
                continue
            for media_type, content in answer["content"].items():
                assert content.get("schema"), (method, path, code, media_type)
    remember = served.json()["paths"]["/v1/remember"]["post"]["responses"]
    assert {"200", "202"} <= set(remember)  # 200: with wait, once the job is done
    recall = served.json()["paths"]["/v1/recall"]["post"]["responses"]["200"]["content"]
    assert recall["application/json"]["schema"] == {"$ref": "#/components/schemas/RecallResponse"}


def test_given_the_query_numbers_then_their_bounds_are_json_schema_keywords() -> None:
    def keys(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                yield from keys(value)
        elif isinstance(node, list):
            for value in node:
                yield from keys(value)

    for method, path, operation in documented_operations():
        assert not PYDANTIC_BOUNDS & set(keys(operation.get("parameters", []))), (method, path)
    bounds = {
        (path, parameter["name"]): (parameter["schema"]["minimum"], parameter["schema"]["maximum"])
        for _method, path, operation in documented_operations()
        for parameter in operation.get("parameters", [])
        if parameter["name"] in {"limit", "fromSeq"}
    }
    assert bounds == {
        ("/v1/streams", "limit"): (1, 1000),
        ("/v1/webhooks/{webhook_id}/deliveries", "limit"): (1, 100),
        ("/v1/streams/{stream}/events", "limit"): (1, 1000),
        ("/v1/streams/{stream}/events", "fromSeq"): (1, 2**53 - 1),
        ("/v1/ledger", "fromSeq"): (1, 2**53 - 1),
    }

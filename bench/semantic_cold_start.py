"""The recall function's cold start with recall by meaning off and on (the model's load counts).

Fresh child processes, alternating off / on / the boto3 baseline, each: import the recall handler
(``functions.recall.app``), answer a first recall (a cold container: with the model on, wiring
loads all-MiniLM-L6-v2 and its cells, and the question is embedded), then a second one (warm).
The tables are in the emulator of this process, filled with memories placed by the model (the
paraphrase tuning set's texts), so both answer from the same data; with the model off the cell
postings are simply not read. Timed inside each child from its first line, as
``bench/remember.py`` times remember's cold start.

    PYTHONPATH=.:local .venv/bin/python bench/semantic_cold_start.py [--runs 11]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.common import local_tables, machine, markdown_table, progress
from bench.recall_paraphrases import SETS, load_set, remember_all
from bench.recall_quality import Kaibo
from kaibo_core.runtime.wiring import build_semantic_channel
from kaibo_local.apigw_events import rest_proxy_event

ROOT = Path(__file__).resolve().parent.parent
RESULT = "RESULT "
QUESTION = "When is the daily team sync now?"
MEMORIES = 300

HANDLER_CHILD = """
import time
began = time.perf_counter()
import json, os
from functions.recall.app import lambda_handler
imported = time.perf_counter()
class Context:
    function_name = "kaibo-RecallFunction"
    memory_limit_in_mb = 1769
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:kaibo-RecallFunction"
    aws_request_id = "cold-start"
event = json.loads(os.environ["BENCH_EVENT"])
first = lambda_handler(event, Context())
answered = time.perf_counter()
second = lambda_handler(event, Context())
again = time.perf_counter()
items = len(json.loads(first["body"])["items"])
print("RESULT " + json.dumps({"import": imported - began, "first": answered - imported,
    "second": again - answered, "status": first["statusCode"], "items": items}))
"""

BOTO3_CHILD = """
import time
began = time.perf_counter()
import json, boto3
boto3.client("dynamodb")
done = time.perf_counter()
result = {"import": done - began, "first": 0.0, "second": 0.0, "status": 200, "items": 0}
print("RESULT " + json.dumps(result))
"""


def child(script: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(lines[-1][len(RESULT) :])
    if result["status"] != 200:
        raise RuntimeError(f"recall answered {result['status']}: {done.stdout[-1000:]}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=11, help="children per variant (default 11)")
    args = parser.parse_args(argv)
    channel = build_semantic_channel("mini6")
    _, texts = load_set(SETS["tuning"])
    with local_tables() as local:
        kaibo = Kaibo(local.client, local.tables, cache_reads=False, semantic=channel)
        remember_all(kaibo, texts[:MEMORIES])
        progress(f"remembered {MEMORIES} memories, placed by the model")
        event = rest_proxy_event(
            "POST",
            "/v1/recall",
            headers=[("Content-Type", "application/json")],
            body=json.dumps({"question": QUESTION, "budget": 300}),
            authorizer={
                "role": "project",
                "keyId": "0123456789abcdef",
                "projectId": kaibo.project,
                "scopes": "read",
                "principalId": "0123456789abcdef",
            },
        )
        base = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), str(ROOT / "layers" / "kaibo_core"), str(ROOT / "local")]
            ),
            "BENCH_EVENT": json.dumps(event),
            "KAIBO_EVENTS_TABLE": local.tables["EventsTable"],
            "KAIBO_IDEMPOTENCY_TABLE": local.tables["IdempotencyTable"],
            "KAIBO_PROJECTS_TABLE": local.tables["ProjectsTable"],
            "KAIBO_MEMORIES_TABLE": local.tables["MemoriesTable"],
            "KAIBO_INDEX_TABLE": local.tables["TermIndexTable"],
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
        }
        variants = {
            "recall, words only": (HANDLER_CHILD, {**base, "KAIBO_SEMANTIC_MODEL": "off"}),
            "recall, by meaning (mini6)": (HANDLER_CHILD, {**base, "KAIBO_SEMANTIC_MODEL": "mini6"}),
            "import boto3 + client": (BOTO3_CHILD, base),
        }
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        for number in range(args.runs):
            for name, (script, env) in variants.items():
                runs[name].append(child(script, env))
            progress(f"  round {number + 1}/{args.runs}")
    rows = []
    baseline = statistics.median(r["import"] for r in runs["import boto3 + client"]) * 1000
    for name, results in runs.items():
        imported = statistics.median(r["import"] for r in results) * 1000
        first = statistics.median(r["first"] for r in results) * 1000
        second = statistics.median(r["second"] for r in results) * 1000
        cold = imported + first
        rows.append(
            [
                name,
                f"{imported:.0f}",
                f"{first:.0f}",
                f"{cold:.0f}",
                f"{second:.1f}",
                f"{cold / baseline:.2f}x",
                str(int(statistics.median(r["items"] for r in results))),
            ]
        )
    header = [
        "child",
        "import ms",
        "first request ms",
        "cold start ms",
        "warm request ms",
        "vs boto3",
        "items",
    ]
    print("# The recall function's cold start, recall by meaning off and on")
    print()
    print(f"Machine: {machine('numpy', 'tokenizers', 'moto')}.")
    print(f"Medians of {args.runs} fresh processes each, alternating.")
    print(f"Question {QUESTION!r} over {MEMORIES} memories placed by the model; budget 300.")
    print()
    print("\n".join(markdown_table(header, rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

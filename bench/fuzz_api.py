"""Fuzz the API against its own OpenAPI document (``GET /openapi.json``) with schemathesis (#20).

Run from the repository root::

    PYTHONPATH=.:local .venv/bin/python bench/fuzz_api.py [--examples 200] [--operation "POST /v1/recall"]
    KAIBO_API_KEY=kb_... KAIBO_ADMIN_KEY=kb_admin_... PYTHONPATH=.:local .venv/bin/python \\
        bench/fuzz_api.py --endpoint http://127.0.0.1:3000 [--json runs.json]

Without ``--endpoint`` it starts a stack of its own (``python -m kaibo_local`` with
``KAIBO_DATA_DIR=:memory:``, as ``make run`` starts it) and stops it at the end. Against a given
endpoint it writes into that deployment's project: it seeds a few things (``seed``), remember
appends events, forget and the DELETE routes delete, the admin routes create projects and keys.
Use a throwaway stack.

Every operation of the served document gets ``--examples`` generated requests of each kind:
schema-valid ones (positive) and schema-violating ones (negative: wrong types, missing fields,
values out of range, no key), and up to ``KNOWN_EXAMPLES`` naming things that exist. Project
routes carry the project key, ``/v1/admin/`` routes the admin key (except where a negative case
takes the key away). Every answer is checked with ``CHECKS`` (see there for the checks left out
and why). The report is a table per operation: examples, statuses seen, failures; then one entry
per distinct failure with a curl command that reproduces it (the key filtered out). Exit status 1
when anything failed.

``tests/integration/test_fuzz_openapi.py`` runs this script, shorter, on every test run, in a
process of its own: schemathesis patches hypothesis process-wide once it generates (its printer,
its buffer size), which the suite's own property tests must not inherit.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: This checkout's code first, even where the venv has the packages installed from another one.
CODE_PATHS: Final = [str(ROOT / p) for p in ("", "local", "layers/kaibo_core", "clients/python")]
sys.path[:0] = [p for p in CODE_PATHS if p not in sys.path]

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import BaseSchema, Case, CheckFunction, GenerationMode
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.result import Err
from schemathesis.specs.openapi import checks as openapi_checks

from bench.common import Report, machine, progress
from bench.local_stack import start_stack

#: The checks every answer must pass. Left out, on purpose:
#: - ``positive_data_acceptance`` (a schema-valid request must not get a 4xx): the API has rules a
#:   JSON Schema does not carry, each answered with a documented 4xx: an IANA time zone, numbers
#:   with an RFC 8785 form, exactly one of forget's selectors (memoryId/query/stream/subject) and its
#:   idempotencyKey on a real forget only (``forget_bodies``), a stream name in a path, cursors
#:   this API issued, ids that exist (404), integers written as integers (``777.0`` is refused,
#:   docs/api.md "request field types exactly as documented"). Status codes are checked instead;
#: - ``response_headers_conformance``: no response header is documented, so it checks nothing;
#: - ``missing_required_header``, ``unsupported_method``, ``allow_header_conformance``: they judge
#:   the cases of schemathesis's coverage phase, which this run does not use (generated cases only);
#: - ``use_after_free``, ``ensure_resource_availability``, ``object_level_authorization``: stateful
#:   checks (links between operations, several identities), for a stateful run.
CHECKS: Final[tuple[CheckFunction, ...]] = (
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.negative_data_rejection,
    openapi_checks.ignored_auth,
)
DEFAULT_EXAMPLES: Final = 200
#: Per request; a remember with ``wait`` answers within KAIBO_WAIT_SECONDS (10 s by default).
REQUEST_TIMEOUT_SECONDS: Final = 60
ADMIN_PREFIX: Final = "/v1/admin/"
#: How much of an answer a finding quotes.
EXCERPT_CHARACTERS: Final = 600
#: Cases per operation whose path parameters name things that exist (``seed``): generated ids
#: are all unknown (404), which leaves the documented 2xx answers of those routes unchecked.
KNOWN_EXAMPLES: Final = 10
SEED_STREAM: Final = "fuzz-seed"
SEED_TEXTS: Final = ("The launch review moved to Thursday at 10:00.", "Maria prefers tea over coffee.")
#: Few, so that generated forgets send a key again: the same request replays its first answer,
#: another one is refused (409 idempotency_key_reused).
FORGET_KEYS: Final = ("fuzz-forget-1", "fuzz-forget-2")
#: Operations never sent, and why. A generated webhook URL can name a public host, and the stack
#: delivers events to what is subscribed: fuzzing must send traffic to this machine only. (Today's
#: /openapi.json does not list the webhook routes; this keeps it so once it does.)
NEVER_FUZZED: Final = {
    "POST /v1/webhooks": "it subscribes generated URLs, and the stack would deliver events to them",
}


@dataclass
class Finding:
    """One distinct failure of an operation: a check's title and the status it was seen with."""

    title: str
    status: int | None
    count: int
    reproduce: str
    detail: str


@dataclass
class OperationRun:
    label: str
    examples: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    findings: dict[tuple[str, int | None], Finding] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def failures(self) -> int:
        return sum(finding.count for finding in self.findings.values())

    def found(self, title: str, status: int | None, reproduce: str, detail: str) -> None:
        known = self.findings.get((title, status))
        if known is None:
            self.findings[title, status] = Finding(title, status, 1, reproduce, detail[:EXCERPT_CHARACTERS])
        else:
            known.count += 1

    def describe(self) -> str:
        """Every finding, with a way to reproduce it."""
        lines = [f"{self.label}: {self.failures} failures"]
        for finding in self.findings.values():
            lines += [
                f"- {finding.title} (status {finding.status}, {finding.count}x)",
                f"  {finding.reproduce}",
                *(f"  {line}" for line in finding.detail.splitlines()),
            ]
        return "\n".join(lines)


def seed(endpoint: str, api_key: str, admin_key: str | None) -> dict[str, list[str]]:
    """Things that exist, by the path parameter that names them: a structured job and its
    memories, a forget's receipt, a stream; with the admin key, a project and one of its keys (never
    the keys this run uses: the fuzzing revokes what it is given)."""
    session = requests.Session()

    def post(path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
        answer = session.post(
            f"{endpoint}{path}",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
        answer.raise_for_status()
        document: dict[str, Any] = answer.json()
        return document

    events = [
        {"idempotencyKey": f"fuzz-seed-{n}", "kind": "message", "payload": {"role": "user", "text": text}}
        for n, text in enumerate(SEED_TEXTS)
    ]
    remembered = post("/v1/remember", {"stream": SEED_STREAM, "events": events, "wait": True}, api_key)
    memories = [memory["id"] for memory in remembered["memories"]]
    forgotten = post("/v1/forget", {"memoryId": memories[-1], "reason": "fuzz seed"}, api_key)
    # A webhook whose URL never resolves (RFC 2606 ``.invalid``): its test events go nowhere.
    webhook = post(
        "/v1/webhooks", {"url": "https://hooks.invalid/kaibo", "events": ["memory.forgotten"]}, api_key
    )
    known = {
        "webhook_id": [webhook["id"]],
        "job_id": [remembered["jobId"]],
        "memory_id": memories,
        "receipt_id": [forgotten["receipt"]["id"]],
        "stream": [SEED_STREAM],
    }
    if admin_key:
        project = post("/v1/admin/projects", {"name": "fuzz seed"}, admin_key)
        other = post(f"/v1/admin/projects/{project['projectId']}/keys", {"scopes": ["read"]}, admin_key)
        known |= {"project_id": [project["projectId"]], "key_id": [project["keyId"], other["keyId"]]}
    return known


def forget_bodies(known: dict[str, list[str]]) -> st.SearchStrategy[dict[str, Any]]:
    """Forgets the schema cannot describe: exactly one selector, naming seeded things (a memory, the
    stream, words of the seeded texts as a query or a subject), a dry run or a real forget, with one
    of ``FORGET_KEYS`` or none (a key on a dry run is refused: 400 idempotency_key_with_dry_run)."""
    words = st.sampled_from([word.strip(".") for text in SEED_TEXTS for word in text.split()])
    selectors = st.one_of(
        st.fixed_dictionaries({"memoryId": st.sampled_from(known["memory_id"])}),
        st.fixed_dictionaries({"stream": st.sampled_from(known["stream"])}),
        st.fixed_dictionaries({"query": words}),
        st.fixed_dictionaries({"subject": words}),
    )
    options = st.fixed_dictionaries(
        {"reason": st.just("fuzz")},
        optional={"dryRun": st.booleans(), "idempotencyKey": st.sampled_from(FORGET_KEYS)},
    )
    return st.tuples(selectors, options).map(lambda parts: {**parts[0], **parts[1]})


def known_cases(operation: Any, known: dict[str, list[str]]) -> st.SearchStrategy[Case[Any]] | None:
    """Positive cases of ``operation`` whose path parameters (explain: whose memoryId) exist, and
    forgets with exactly one selector (``forget_bodies``)."""
    names = [parameter.name for parameter in operation.path_parameters]
    if operation.label == "POST /v1/explain":
        return st.sampled_from(known.get("memory_id", [])).flatmap(
            lambda memory: operation.as_strategy(body={"memoryId": memory})
        )
    if operation.label == "POST /v1/forget" and known.get("memory_id") and known.get("stream"):
        return forget_bodies(known).flatmap(lambda body: operation.as_strategy(body=body))
    if not names or not all(known.get(name) for name in names):
        return None
    choices = st.fixed_dictionaries({name: st.sampled_from(known[name]) for name in names})
    return choices.flatmap(lambda parameters: operation.as_strategy(path_parameters=parameters))


def load_schema(endpoint: str, api_key: str, admin_key: str | None) -> BaseSchema:
    """The document the deployment serves, with its keys: the admin key for admin routes."""
    answer = requests.get(f"{endpoint}/openapi.json", timeout=REQUEST_TIMEOUT_SECONDS)
    answer.raise_for_status()
    schema = schemathesis.openapi.from_dict(answer.json(), config=schemathesis.Config())

    class Keys:
        """An auth provider (schemathesis's protocol): the key each route takes."""

        def get(self, case: Case[Any], _context: object) -> str:
            admin = case.operation.path.startswith(ADMIN_PREFIX)
            return admin_key if admin and admin_key else api_key

        def set(self, case: Case[Any], key: str, _context: object) -> None:
            case.headers["Authorization"] = f"Bearer {key}"

    # No caching (so no refetch-and-replay on a 401 either): a key is a constant.
    schema.auth(refresh_interval=None)(Keys)
    return schema


def operations(schema: BaseSchema) -> Iterator[Any]:
    for result in schema.get_all_operations():
        if isinstance(result, Err):  # an operation schemathesis cannot read is a finding of its own
            raise result.err()
        yield result.ok()


def fuzz_operation(
    operation: Any,
    endpoint: str,
    examples: int,
    *,
    known: dict[str, list[str]] | None = None,
    session: requests.Session | None = None,
) -> OperationRun:
    """``examples`` positive and ``examples`` negative cases of ``operation``, and some naming
    things that exist (``known``, from ``seed``), each checked."""
    run = OperationRun(operation.label)
    session = session or requests.Session()
    began = time.monotonic()
    for mode in GenerationMode:
        cases = operation.as_strategy(generation_mode=mode)
        fuzz_cases(cases, mode.value, examples, endpoint=endpoint, session=session, run=run)
    existing = known_cases(operation, known or {})
    if existing is not None:
        fuzz_cases(
            existing, "known", min(examples, KNOWN_EXAMPLES), endpoint=endpoint, session=session, run=run
        )
    run.seconds = time.monotonic() - began
    return run


def fuzz_cases(
    cases: st.SearchStrategy[Case[Any]],
    kind: str,
    examples: int,
    *,
    endpoint: str,
    session: requests.Session,
    run: OperationRun,
) -> None:
    """``examples`` of ``cases``, each sent and checked, recorded in ``run`` under ``kind``."""

    @given(case=cases)
    @settings(
        max_examples=examples,
        deadline=None,  # a request's time is the service's, not the generator's
        derandomize=True,  # the same cases every run
        database=None,  # nothing kept between runs (.hypothesis/)
        phases=[Phase.explicit, Phase.generate],  # no shrinking: every case is recorded as sent
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    def one_case(case: Case[Any]) -> None:
        run.examples[kind] += 1
        try:
            response = case.call(base_url=endpoint, session=session, timeout=REQUEST_TIMEOUT_SECONDS)
        except requests.RequestException as error:  # a hang or a dropped connection is a finding too
            run.found(f"no answer: {type(error).__name__}", None, case.as_curl_command(), str(error))
            return
        run.statuses[response.status_code] += 1
        try:
            case.validate_response(
                response,
                checks=list(CHECKS),
                transport_kwargs={"base_url": endpoint, "session": session},
            )
        except FailureGroup as group:
            curl = case.as_curl_command(headers=dict(response.request.headers), base_url=endpoint)
            excerpt = response.content[:EXCERPT_CHARACTERS].decode("utf-8", errors="replace")
            for failure in group.exceptions:
                if isinstance(failure, Failure):
                    run.found(
                        f"{kind}: {failure.title}",
                        response.status_code,
                        curl,
                        f"{failure.message}\nanswer: {excerpt}",
                    )

    try:
        one_case()
    except Unsatisfiable:
        if kind != GenerationMode.NEGATIVE.value:
            raise
        # A route with no parameter, body or key (the docs) has nothing to make invalid.


def deletes(label: str) -> bool:
    return label.startswith("DELETE ") or label == "POST /v1/forget"


def fuzz(
    schema: BaseSchema,
    endpoint: str,
    examples: int,
    *,
    only: Sequence[str] = (),
    known: dict[str, list[str]] | None = None,
    on_done: Callable[[OperationRun], None] | None = None,
) -> list[OperationRun]:
    session = requests.Session()
    runs = []
    # Deletions last: a DELETE given a known id removes it, and the routes after it would only
    # ever see 404 for that id; a forget of the seeded stream forgets every seeded memory.
    ordered = sorted(operations(schema), key=lambda operation: deletes(operation.label))
    for operation in ordered:
        if only and operation.label not in only:
            continue
        if operation.label in NEVER_FUZZED:
            run = OperationRun(operation.label, skipped=NEVER_FUZZED[operation.label])
        else:
            run = fuzz_operation(operation, endpoint, examples, known=known, session=session)
        runs.append(run)
        if on_done:
            on_done(run)
    return runs


def statuses_cell(statuses: Counter[int]) -> str:
    return " ".join(f"{status}×{count}" for status, count in sorted(statuses.items()))


def write_report(report: Report, runs: Sequence[OperationRun], examples: int, endpoint: str) -> None:
    report.title(f"Fuzzing {endpoint} against its /openapi.json ({examples} examples per mode)")
    report(f"machine: {machine('schemathesis', 'hypothesis')}")
    report(f"checks: {', '.join(check.__name__ for check in CHECKS)}", "")
    report.table(
        ["operation", "positive", "negative", "known ids", "statuses seen", "failures", "seconds"],
        [
            [
                run.label,
                run.examples["positive"],
                run.examples["negative"],
                run.examples["known"],
                f"skipped: {run.skipped}" if run.skipped else statuses_cell(run.statuses),
                run.failures,
                f"{run.seconds:.1f}",
            ]
            for run in runs
        ],
    )
    failed = [run for run in runs if run.findings]
    if failed:
        report.title("Failures")
        for run in failed:
            report(run.describe(), "")


def as_json(runs: Sequence[OperationRun]) -> list[dict[str, Any]]:
    return [
        {
            "label": run.label,
            "examples": dict(run.examples),
            "statuses": {str(status): count for status, count in sorted(run.statuses.items())},
            "findings": [asdict(finding) for finding in run.findings.values()],
            "seconds": round(run.seconds, 2),
            "skipped": run.skipped,
        }
        for run in runs
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="per operation and mode")
    parser.add_argument("--endpoint", help="a running deployment (default: start a local stack)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("KAIBO_API_KEY"),
        help="a project key (read, write, forget) of --endpoint; default: $KAIBO_API_KEY",
    )
    parser.add_argument(
        "--admin-key",
        default=os.environ.get("KAIBO_ADMIN_KEY"),
        help="the admin key of --endpoint (admin routes get 401 without); default: $KAIBO_ADMIN_KEY",
    )
    parser.add_argument(
        "--operation", action="append", default=[], help='only this one, e.g. "GET /v1/streams"'
    )
    parser.add_argument("--json", type=Path, help="also write every operation's run to this file")
    args = parser.parse_args(argv)
    if args.endpoint and not args.api_key:
        parser.error("--endpoint needs --api-key (or KAIBO_API_KEY)")

    stack = None
    if args.endpoint:
        endpoint, api_key, admin_key = args.endpoint.rstrip("/"), args.api_key, args.admin_key
    else:
        logs = Path(tempfile.mkdtemp(prefix="kaibo-fuzz-"))
        progress(f"starting a local stack (logs in {logs})")
        stack = start_stack(":memory:", logs, "fuzz")
        endpoint, api_key, admin_key = stack.endpoint, stack.api_key, stack.values["KAIBO_ADMIN_KEY"]
    try:
        schema = load_schema(endpoint, api_key, admin_key)
        runs = fuzz(
            schema,
            endpoint,
            args.examples,
            only=args.operation,
            known=seed(endpoint, api_key, admin_key),
            on_done=lambda run: progress(
                f"{run.label}: {sum(run.examples.values())} cases, {run.failures} failures"
            ),
        )
    finally:
        if stack is not None:
            stack.stop()
    write_report(Report(), runs, args.examples, endpoint)
    if args.json:
        args.json.write_text(json.dumps(as_json(runs), indent=1) + "\n")
    return 1 if any(run.findings for run in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every error code the service can answer with is in docs/api.md's error table, with its status,
and the table names no code that nothing produces.

The codes are collected from the source, not listed by hand: each construction of a
``KaiboError`` (any subclass), each ``error_response(status, code, ...)`` with literal
arguments, the resolver's table of validation codes, and the template's gateway responses.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kaibo_core.core import errors
from kaibo_core.runtime.http import _VALIDATION_CODES
from kaibo_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "layers" / "kaibo_core" / "kaibo_core", ROOT / "functions"]
API_DOC = ROOT / "docs" / "api.md"

#: A documented status and code; a gateway response without a status matches any of its class
#: (``"4xx"``: it keeps the status API Gateway chose).
Pair = tuple[str, str]

ERROR_STATUS: dict[str, int] = {
    name: cls.status
    for name, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.KaiboError)
}


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _literal(node: ast.expr | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _calls() -> Iterator[tuple[str, ast.Call]]:
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def raised_pairs() -> tuple[set[Pair], list[str]]:
    """(status, code) of every error the code can answer with, and the places whose code is not
    a literal (this test could not see it)."""
    pairs: set[Pair] = set()
    unseen: list[str] = []
    for where, call in _calls():
        name = _name(call)
        if name in ERROR_STATUS:
            code = _literal(_argument(call, 0, "code"))
            if isinstance(code, str):
                pairs.add((str(ERROR_STATUS[name]), code))
            else:
                unseen.append(where)
        elif name == "error_response":
            status, code = _literal(_argument(call, 0, "status")), _literal(_argument(call, 1, "code"))
            if isinstance(status, int) and isinstance(code, str):
                pairs.add((str(status), code))
            # else: the resolver passing on a KaiboError's code, or one of _VALIDATION_CODES
    pairs.update((str(coded.status), coded.code) for coded in _VALIDATION_CODES)
    return pairs, unseen


def gateway_pairs() -> set[Pair]:
    responses = load_template()["Resources"]["KaiboApi"]["Properties"]["GatewayResponses"]
    pairs: set[Pair] = set()
    for kind, spec in responses.items():
        body = spec["ResponseTemplates"]["application/json"]
        (code,) = re.findall(r'"code":"([a-z_]+)"', body)
        status = spec.get("StatusCode") or ("5xx" if "5XX" in kind else "4xx")
        pairs.add((str(status), code))
    return pairs


def documented_pairs() -> set[Pair]:
    errors_section = API_DOC.read_text(encoding="utf-8").split("\n## Errors\n", 1)[1]
    table = errors_section.split("\n## ", 1)[0]
    pairs: set[Pair] = set()
    for status, codes in re.findall(r"^\| (\d{3}) \| ([^|]+) \|", table, flags=re.MULTILINE):
        pairs.update((status, code) for code in re.findall(r"`([a-z_]+)`", codes))
    return pairs


def _covered(pair: Pair, documented: set[Pair]) -> bool:
    status, code = pair
    if status.endswith("xx"):  # any documented status of that class
        return any(c == code and s[0] == status[0] for s, c in documented)
    return pair in documented


def test_given_the_source_then_every_error_code_is_a_literal_the_docs_test_can_see() -> None:
    _, unseen = raised_pairs()
    assert unseen == [], f"error codes that are not literals (write the code out): {unseen}"


def test_given_every_error_the_service_answers_then_docs_api_md_lists_its_status_and_code() -> None:
    documented = documented_pairs()
    raised, _ = raised_pairs()
    missing = sorted(p for p in raised | gateway_pairs() if not _covered(p, documented))
    assert missing == [], f"add these (status, code) rows to docs/api.md's error table: {missing}"


def test_given_the_error_table_then_every_code_in_it_is_produced_somewhere() -> None:
    raised, _ = raised_pairs()
    produced = {code for _, code in raised | gateway_pairs()}
    stale = sorted(code for _, code in documented_pairs() if code not in produced)
    assert stale == [], f"docs/api.md documents codes nothing produces: {stale}"


def test_given_the_collectors_then_they_find_the_codes_of_issue_20() -> None:
    """The collectors themselves: codes known to exist are found, from each kind of source."""
    raised, _ = raised_pairs()
    assert {("400", "json_too_deep"), ("400", "duplicate_key"), ("400", "number_too_long")} <= raised
    assert {("422", "invalid_timestamp"), ("400", "malformed_json"), ("500", "internal_error")} <= raised
    assert {("413", "request_too_large"), ("4xx", "bad_request")} <= gateway_pairs()
    assert ("400", "bad_request") in documented_pairs()

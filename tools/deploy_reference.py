"""The parts of docs/deploy.md that restate template.yaml, written from it (``make docs``).

Three blocks, each between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``: the
functions (what triggers each, its memory, timeout and every permission of its inline policy), the
tables (keys, indexes, retention) and the alarms. Hand-written, they went stale as the template
grew (four of thirteen functions listed, three of eight tables); ``tests/contract/test_deploy_doc.py``
renders them again and fails on any difference.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
DEPLOY_DOC: Final = ROOT / "docs" / "deploy.md"
_BLOCK: Final = re.compile(r"(<!-- generated:(?P<name>[a-z]+) -->\n).*?(<!-- /generated:(?P=name) -->)", re.S)


def _name(value: Any) -> str:
    """A policy resource or table reference as a reader knows it: the logical id."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "Fn::GetAtt":
            resource, attribute = inner
            return resource if attribute == "Arn" else f"{resource}.{attribute}"
        if key == "Ref":
            return str(inner)
        if key == "Fn::Sub":
            text = inner if isinstance(inner, str) else inner[0]
            return re.sub(r"\$\{([A-Za-z0-9]+)\.Arn\}", r"\1", re.sub(r"\$\{AWS::[A-Za-z]+\}", "*", text))
        if key == "Fn::If":
            return " or ".join(_name(v) for v in inner[1:] if not _no_value(v))
    return str(value)


def _no_value(value: Any) -> bool:
    return isinstance(value, dict) and value.get("Ref") == "AWS::NoValue"


def _setting(value: Any) -> str:
    """A memory size or timeout: a number, or ``!If [Condition, a, b]`` as ``a (Condition), else b``."""
    if isinstance(value, dict) and "Fn::If" in value:
        condition, when, otherwise = value["Fn::If"]
        return f"{when} ({condition}), else {otherwise}"
    return str(value)


def _resources(template: Mapping[str, Any], kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, resource in template["Resources"].items():
        if isinstance(resource, dict) and resource.get("Type") == kind:
            yield logical_id, resource


def _triggers(properties: Mapping[str, Any]) -> str:
    found: list[str] = []
    for event in (properties.get("Events") or {}).values():
        kind, spec = event.get("Type"), event.get("Properties") or {}
        if kind == "Api":
            found.append(f"`{spec['Method'].upper()} {spec['Path']}`")
        elif kind == "SQS":
            found.append(f"SQS {_name(spec['Queue'])}")
        elif kind == "Schedule":
            found.append(f"schedule `{spec['Schedule']}`")
        else:
            found.append(str(kind))
    return ", ".join(found) or "—"


def _permissions(properties: Mapping[str, Any]) -> str:
    grants: list[str] = []
    for policy in properties.get("Policies") or []:
        if not isinstance(policy, dict):
            grants.append(f"`{policy}`")
            continue
        for listed in policy.get("Statement", []):
            statement, only_if = listed, ""
            if isinstance(listed, dict) and "Fn::If" in listed:  # granted under a condition
                condition, statement, _ = listed["Fn::If"]
                only_if = f" ({condition})"
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            targets = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            names = ", ".join(dict.fromkeys(_name(t) for t in targets))
            when = f" when {_condition(statement['Condition'])}" if "Condition" in statement else ""
            grants.append(f"{', '.join(f'`{a}`' for a in actions)} on {names}{when}{only_if}")
    return "; ".join(grants) or "—"


def _condition(condition: Mapping[str, Any]) -> str:
    """A statement's IAM condition: ``{StringEquals: {key: value}}`` as "`key` = value", and
    ``{Null: {key: "false"}}`` as "`key` is set"."""
    return " and ".join(
        f"`{key}` is set" if operator == "Null" and value == "false" else f"`{key}` = {_name(value)}"
        for operator, keys in condition.items()
        for key, value in keys.items()
    )


def functions_block(template: Mapping[str, Any]) -> str:
    defaults = template.get("Globals", {}).get("Function", {})
    rows = [
        "| function | triggered by | memory (MB) | timeout (s) | permissions (its inline policy) |",
        "|---|---|---|---|---|",
    ]
    for logical_id, resource in _resources(template, "AWS::Serverless::Function"):
        properties = resource["Properties"]
        memory = _setting(properties.get("MemorySize", defaults.get("MemorySize")))
        timeout = _setting(properties.get("Timeout", defaults.get("Timeout")))
        rows.append(
            f"| {logical_id} | {_triggers(properties)} | {memory} | {timeout} | {_permissions(properties)} |"
        )
    return "\n".join(rows) + "\n"


def _keys(schema: list[Mapping[str, str]]) -> str:
    return ", ".join(f"`{k['AttributeName']}`" for k in schema)


def tables_block(template: Mapping[str, Any]) -> str:
    rows = [
        "| table | key | indexes | time to live | kept when the stack is deleted |",
        "|---|---|---|---|---|",
    ]
    for logical_id, resource in _resources(template, "AWS::DynamoDB::Table"):
        properties = resource["Properties"]
        indexes = ", ".join(
            f"{index['IndexName']} ({_keys(index['KeySchema'])})"
            for index in properties.get("GlobalSecondaryIndexes", [])
        )
        ttl = properties.get("TimeToLiveSpecification") or {}
        kept = "yes" if resource.get("DeletionPolicy") == "Retain" else "no"
        rows.append(
            f"| {logical_id} | {_keys(properties['KeySchema'])} | {indexes or '—'} | "
            f"{'`' + ttl['AttributeName'] + '`' if ttl.get('Enabled') else '—'} | {kept} |"
        )
    return "\n".join(rows) + "\n"


def alarms_block(template: Mapping[str, Any]) -> str:
    lines = []
    for logical_id, resource in _resources(template, "AWS::CloudWatch::Alarm"):
        description = " ".join(str(resource["Properties"].get("AlarmDescription", "")).split())
        only_if = f" (only with {resource['Condition']})" if "Condition" in resource else ""
        lines.append(f"- `{logical_id}`{only_if}: {description}")
    return "\n".join(lines) + "\n"


BLOCKS: Final = {"functions": functions_block, "tables": tables_block, "alarms": alarms_block}


def render(doc: str, template: Mapping[str, Any]) -> str:
    """``doc`` with every generated block written again from ``template``."""

    def fill(match: re.Match[str]) -> str:
        return f"{match[1]}{BLOCKS[match['name']](template)}{match[3]}"

    return _BLOCK.sub(fill, doc)


def main() -> int:
    sys.path.insert(0, str(ROOT / "local"))
    from kaibo_local.template import load_template  # noqa: PLC0415 - the local stack's template reader

    doc = DEPLOY_DOC.read_text(encoding="utf-8")
    DEPLOY_DOC.write_text(render(doc, load_template()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

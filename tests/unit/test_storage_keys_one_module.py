"""ARCHITECTURE.md, invariant 7: keys are built in one module, ``core/storage_keys.py``, so that every
key starts with its project. An adapter that joins values with ``#`` itself builds a key outside it."""

from __future__ import annotations

import ast
from pathlib import Path

import kaibo_core

PACKAGE = Path(kaibo_core.__file__).resolve().parent


def joins_with_hash(node: ast.JoinedStr) -> bool:
    """An f-string with ``#`` right next to a value it formats: ``f"{project}#{stream}"``."""
    parts = node.values
    for number, part in enumerate(parts):
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            continue
        before = number > 0 and isinstance(parts[number - 1], ast.FormattedValue)
        after = number + 1 < len(parts) and isinstance(parts[number + 1], ast.FormattedValue)
        if (before and part.value.startswith("#")) or (after and part.value.endswith("#")):
            return True
    return False


def test_given_the_adapters_then_none_builds_a_key_of_its_own() -> None:
    built = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
        for path in sorted((PACKAGE / "adapters").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.JoinedStr) and joins_with_hash(node)
    ]
    assert built == [], "build keys in core/storage_keys.py:\n" + "\n".join(built)


def f_string(source: str) -> ast.JoinedStr:
    (node,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.JoinedStr)]
    return node


def test_given_a_key_built_inline_then_the_scan_sees_it() -> None:
    assert joins_with_hash(f_string('x = f"{project}#{job_id}"'))
    assert not joins_with_hash(f_string('x = f"#status = :prior AND {placed}"'))  # an attribute name

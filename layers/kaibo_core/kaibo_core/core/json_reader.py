"""Reading a request body as JSON, within documented limits (docs/api.md, "Limits").

Strict where ``json.loads`` is lax: no ``NaN``/``Infinity`` (they have no canonical form), no
duplicate names in an object (RFC 8785 takes I-JSON, which forbids them, and "last one wins"
would hash something other than what was sent), nesting at most ``MAX_JSON_DEPTH`` deep and
number literals at most ``MAX_JSON_NUMBER_CHARS`` long. Each refusal is a 400 with its own
code; nothing here can raise anything else for any input text.
"""

from __future__ import annotations

import json
from typing import Any

from kaibo_core.core.errors import BadRequestError
from kaibo_core.core.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS


def _reject_constant(name: str) -> None:
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise BadRequestError(
                "duplicate_key",
                f"The JSON object names {name[:200]!r} more than once; each name may appear once (I-JSON).",
                {"name": name[:200]},
            )
        seen.add(name)
    return found  # not reached: a shorter dict means a repeated name


def _number_too_long(text: str) -> BadRequestError:
    return BadRequestError(
        "number_too_long",
        f"A number in the body has {len(text)} characters; at most {MAX_JSON_NUMBER_CHARS} are read.",
        {"limit": MAX_JSON_NUMBER_CHARS},
    )


def _int(text: str) -> int:
    if len(text) > MAX_JSON_NUMBER_CHARS:
        raise _number_too_long(text)
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_JSON_NUMBER_CHARS:
        raise _number_too_long(text)
    return float(text)


def _too_deep() -> BadRequestError:
    return BadRequestError(
        "json_too_deep",
        f"The body nests arrays and objects more than {MAX_JSON_DEPTH} deep.",
        {"limit": MAX_JSON_DEPTH},
    )


def _check_depth(value: Any) -> None:
    """Iteratively (a recursive walk could itself overflow): containers at most MAX_JSON_DEPTH deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def read_json(text: str) -> Any:
    """The body's value; ``json.JSONDecodeError`` for text that is not JSON, ``BadRequestError``
    (``duplicate_key``, ``number_too_long``, ``json_too_deep``) for JSON beyond the limits."""
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_names,
            parse_int=_int,
            parse_float=_float,
        )
    except RecursionError as exc:  # deeper than the parser itself can go: far past the limit
        raise _too_deep() from exc
    _check_depth(value)
    return value

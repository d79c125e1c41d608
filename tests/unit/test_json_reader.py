"""The request body reader: JSON within documented limits, every refusal a 400 with its own code."""

from __future__ import annotations

import json

import pytest

from kaibo_core.core.errors import BadRequestError
from kaibo_core.core.json_reader import read_json
from kaibo_core.core.limits import MAX_JSON_DEPTH, MAX_JSON_NUMBER_CHARS


def refused(text: str) -> str:
    with pytest.raises(BadRequestError) as caught:
        read_json(text)
    return caught.value.code


@pytest.mark.parametrize(
    "text",
    [
        '{"text": "a", "text": "b"}',
        '{"events": [{"payload": {"role": "user", "role": "admin"}}]}',
        '[{"a": 1}, {"b": {"c": 1, "c": 1}}]',
    ],
)
def test_given_a_name_twice_in_an_object_then_duplicate_key(text: str) -> None:
    assert refused(text) == "duplicate_key"


def test_given_nesting_ten_thousand_deep_then_json_too_deep_not_a_recursion_error() -> None:
    assert refused("[" * 10_000 + "]" * 10_000) == "json_too_deep"
    assert refused('{"a":' * 10_000 + "1" + "}" * 10_000) == "json_too_deep"


def test_given_nesting_at_and_past_the_limit_then_the_limit_is_exact() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert isinstance(read_json(at_limit), list)
    assert refused("[" + at_limit + "]") == "json_too_deep"


@pytest.mark.parametrize("literal", ["9" * 5000, "-" + "1" * 4999, "1." + "0" * 5000, "1e" + "9" * 100])
def test_given_a_huge_number_literal_then_number_too_long(literal: str) -> None:
    assert refused(f'{{"n": {literal}}}') == "number_too_long"


def test_given_numbers_within_the_limit_then_they_are_read_exactly() -> None:
    longest = "1" * MAX_JSON_NUMBER_CHARS
    assert read_json(f"[{longest}, 2.5, -7, 1e3]") == [int(longest), 2.5, -7, 1000.0]


@pytest.mark.parametrize("text", ['{"x": NaN}', "[Infinity]", '{"x": -Infinity}', "{", '{"a" 1}'])
def test_given_text_that_is_not_json_then_a_json_decode_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        read_json(text)


def test_given_ordinary_json_then_the_same_value_in_the_same_order() -> None:
    text = '{"b": 1, "a": [true, null, {"z": "é", "y": 0.5}]}'
    value = read_json(text)
    assert value == json.loads(text)
    assert list(value) == ["b", "a"]

"""RFC 8785 (JCS) conformance of ``kaibo_core.core.chain.canonicalize``: the RFC's own examples."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest

from kaibo_core.core.chain import NotCanonicalizableError, canonical_payload, canonicalize

# RFC 8785 §3.2.2, the input as JSON text (so the numbers go through a JSON parser as in the RFC).
RFC_SAMPLE_INPUT = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
RFC_SAMPLE_OUTPUT = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)


def test_given_the_rfc_8785_sample_when_canonicalized_then_bytes_equal_the_rfc_output() -> None:
    assert canonicalize(json.loads(RFC_SAMPLE_INPUT)) == RFC_SAMPLE_OUTPUT.encode("utf-8")


def test_given_the_rfc_sample_output_when_read_back_then_it_is_its_own_canonical_form() -> None:
    assert canonicalize(json.loads(RFC_SAMPLE_OUTPUT)) == RFC_SAMPLE_OUTPUT.encode("utf-8")


def test_given_the_rfc_sorting_example_when_canonicalized_then_keys_sort_by_utf16_code_units() -> None:
    # RFC 8785 §3.2.3: U+1F600 (UTF-16 D83D DE00) sorts before U+FB33, unlike code-point order.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
    assert canonicalize(value) == expected.encode("utf-8")
    assert sorted(value) != list(json.loads(expected))  # code-point order would differ


def test_given_nested_objects_when_canonicalized_then_every_level_is_sorted_and_arrays_keep_order() -> None:
    assert canonicalize({"b": [3, {"z": 1, "a": 2}, 1], "a": {"d": None, "c": True}}) == (
        b'{"a":{"c":true,"d":null},"b":[3,{"a":2,"z":1},1]}'
    )


# RFC 8785 Appendix B: IEEE 754 bit patterns and their ES6 serialization.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def double(bits: str) -> float:
    (number,) = struct.unpack(">d", bytes.fromhex(bits))
    assert isinstance(number, float)
    return number


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_given_an_appendix_b_double_when_canonicalized_then_es6_text(bits: str, expected: str) -> None:
    assert canonicalize(double(bits)) == expected.encode("ascii")


@pytest.mark.parametrize(
    "value", [2.0**53, -(2.0**53), 1e20, 999999999999999900000.0, {"n": [1.5, {"m": 1e20}]}]
)
def test_given_a_double_jcs_writes_as_unsafe_integer_digits_when_accepted_as_payload_then_refused(
    value: Any,
) -> None:
    # JCS writes doubles with 2^53 <= |x| < 1e21 as plain digits, which JSON parsers read back as
    # integers beyond 2^53 - 1; a verifier could not canonicalize such a served payload again, so
    # Kaibo keeps them out of payloads (docs/verify.md, "Kaibo's domain").
    text = canonicalize(value)  # plain RFC 8785 has a canonical form...
    with pytest.raises(NotCanonicalizableError):
        canonicalize(json.loads(text))  # ...that does not survive a JSON round trip...
    with pytest.raises(NotCanonicalizableError):
        canonical_payload(value)  # ...so remember refuses it


@pytest.mark.parametrize(
    "value", [{"n": 2.0**53 - 1}, {"n": 1e21}, {"n": -1e21, "m": 0.1}, {"n": 9007199254740991}]
)
def test_given_numbers_that_round_trip_when_accepted_as_payload_then_same_bytes_as_jcs(value: Any) -> None:
    assert canonical_payload(value) == canonicalize(value)
    assert canonicalize(json.loads(canonical_payload(value))) == canonical_payload(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (5.0, "5"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (0.1, "0.1"),
        (4.50, "4.5"),
        (-1.5, "-1.5"),
        (9007199254740991, "9007199254740991"),
        (-9007199254740991, "-9007199254740991"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_given_a_number_or_literal_when_canonicalized_then_es6_text(value: Any, expected: str) -> None:
    assert canonicalize(value) == expected.encode("ascii")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ("\u0000\u001f", '"\\u0000\\u001f"'),
        ("\u007f/<>&'", '"\u007f/<>&\'"'),
        ("Grüße 👋", '"Grüße 👋"'),
    ],
)
def test_given_a_string_when_canonicalized_then_only_quote_backslash_and_controls_are_escaped(
    text: str, expected: str
) -> None:
    assert canonicalize(text) == expected.encode("utf-8")


@pytest.mark.parametrize(
    "value",
    [
        2**53,
        -(2**53),
        10**30,
        math.nan,
        math.inf,
        -math.inf,
        "\ud800",
        "a\udfffb",
        {"\ud800": 1},
        [1, {"k": [math.nan]}],
    ],
    ids=[
        "2^53",
        "-2^53",
        "1e30-as-int",
        "nan",
        "inf",
        "-inf",
        "lone-high-surrogate",
        "lone-low-surrogate",
        "surrogate-key",
        "nested-nan",
    ],
)
def test_given_a_value_outside_jcs_when_canonicalized_then_not_canonicalizable(value: Any) -> None:
    with pytest.raises(NotCanonicalizableError):
        canonicalize(value)


def test_given_text_when_canonicalized_then_output_is_utf8_without_whitespace() -> None:
    out = canonicalize({"a b": ["x y", 1, {"c": "d"}]})
    assert out == b'{"a b":["x y",1,{"c":"d"}]}'
    assert canonicalize("€") == b'"\xe2\x82\xac"'

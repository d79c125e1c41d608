"""The conservative token-counting rule (docs/recall.md, "Counting tokens")."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.core.tokens import count_tokens

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True)

#: Mixed text, weighted toward what memories contain: ASCII words, digits,
#: punctuation, whitespace, and other scripts.
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcXYZ019 _-.,:;!?'\"\n\t"),
        st.characters(codec="utf-8"),
    ),
    max_size=120,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", 0),
        (" ", 1),
        ("a", 1),
        ("hello", 2),  # 5 bytes / 3
        # 44 ASCII bytes -> 15; pre-tokens: 9 words + "." = 10 (cl100k: 10).
        ("The quick brown fox jumps over the lazy dog.", 15),
        # 3 letter runs (I, m, ok) + 3 symbols (' : )) beat 9 bytes / 3.
        ("I'm ok :)", 6),
        # hex: letter runs e, a, fc, a, e + digit runs 8, 9, 2, 48, 428, 65 -> 11.
        ("8e9a2fc48a428e65", 11),
        ("1234567", 3),  # digits go in groups of at most 3
        ("東京", 4),  # 6 non-ASCII bytes * 2 / 3
        ("привет", 8),  # 12 non-ASCII bytes * 2 / 3
        ("😀", 3),  # 4 bytes * 2 / 3 -> ceil(8/3)
        ("((()))", 6),  # every symbol counts
    ],
)
def test_examples(value: str, expected: int) -> None:
    assert count_tokens(value) == expected


def test_english_overestimates_but_not_wildly() -> None:
    sentence = "Caroline moved the release target from July 13 to July 17 after the review."
    # 15 words and a period: about one token a word for real tokenizers; the rule
    # allows ~1.6x that, not more.
    assert 16 <= count_tokens(sentence) <= 26


@PROPERTY
@given(TEXT)
def test_at_least_one_token_per_whitespace_separated_word(value: str) -> None:
    assert count_tokens(value) >= len(value.split())


@PROPERTY
@given(TEXT)
def test_at_least_a_quarter_of_the_bytes(value: str) -> None:
    assert count_tokens(value) >= math.ceil(len(value.encode("utf-8")) / 4)
    assert count_tokens(value) >= math.ceil(len(value.encode("utf-8")) / 3)


@PROPERTY
@given(TEXT, TEXT)
def test_subadditive(a: str, b: str) -> None:
    assert count_tokens(a + b) <= count_tokens(a) + count_tokens(b)


@PROPERTY
@given(TEXT, TEXT, st.sampled_from([" ", "\n", "\n\n"]))
def test_joining_with_a_separator_never_exceeds_the_sum(a: str, b: str, sep: str) -> None:
    assert count_tokens(a + sep + b) <= count_tokens(a) + count_tokens(b) + count_tokens(sep)
    if sep == " ":
        assert count_tokens(a + " " + b) <= count_tokens(a) + count_tokens(b) + 1


@PROPERTY
@given(st.lists(TEXT, max_size=6))
def test_packing_by_summing_never_undercounts_the_joined_text(items: list[str]) -> None:
    separators = max(len(items) - 1, 0)
    assert count_tokens("\n".join(items)) <= sum(map(count_tokens, items)) + separators


@PROPERTY
@given(TEXT, TEXT)
def test_monotone(a: str, b: str) -> None:
    assert count_tokens(a) <= count_tokens(a + b)
    assert count_tokens(b) <= count_tokens(a + b)


@PROPERTY
@given(TEXT)
def test_non_empty_text_costs_at_least_one(value: str) -> None:
    assert (count_tokens(value) == 0) == (value == "")

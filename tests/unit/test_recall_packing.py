"""Packing into the token budget (docs/recall.md, "Packing")."""

from __future__ import annotations

import itertools
import math
import random
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kaibo_core.core.recall import packing
from kaibo_core.core.recall.packing import (
    MAX_SENTENCE_TOKENS,
    MIN_SUMMARY_TOKENS,
    SUMMARY_SEPARATOR,
    PackedItem,
    Packing,
    may_hold,
    pack,
    split_clauses,
    summarize,
    summary_spans,
    term_probe,
)
from kaibo_core.core.text import analyze, query_terms, stem
from kaibo_core.core.tokens import count_tokens
from tests.fixtures.long_file import long_file

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)


def units(text: str, max_sentence_tokens: int = MAX_SENTENCE_TOKENS) -> list[str]:
    return [text[start:end] for start, end in split_clauses(text, max_sentence_tokens)]


# --- split_clauses -----------------------------------------------------------


def test_sentences_end_at_terminal_punctuation_before_whitespace_and_at_newlines() -> None:
    text = 'We ship v1.2.3 at 3.5 GB! Really? He said "stop." Then… nothing\nnext line\r\nlast'
    assert units(text) == [
        "We ship v1.2.3 at 3.5 GB!",
        "Really?",
        'He said "stop."',
        "Then…",
        "nothing",
        "next line",
        "last",
    ]


def test_cjk_sentences_end_without_whitespace() -> None:
    assert units("東京に行く。大阪は明日！") == ["東京に行く。", "大阪は明日！"]


def test_long_sentences_split_into_clauses() -> None:
    text = "Alice prefers tea, never sugar; Bob: coffee — black – always. Short one."
    assert units(text) == ["Alice prefers tea, never sugar; Bob: coffee — black – always.", "Short one."]
    assert units(text, max_sentence_tokens=5) == [
        "Alice prefers tea,",
        "never sugar;",
        "Bob:",
        "coffee —",
        "black –",
        "always.",
        "Short one.",
    ]
    assert units("1,000 or 10:30,no") == ["1,000 or 10:30,no"]  # no whitespace after the comma or colon
    assert units("1,000 or 10:30,no", max_sentence_tokens=1) == ["1,000 or 10:30,no"]


def test_blank_text_has_no_units() -> None:
    assert split_clauses("") == []
    assert split_clauses(" \n\t ") == []


# --- summarize ---------------------------------------------------------------

LONG = (
    "We moved the release to July 17 after the review. "
    "The team reviews every Friday after lunch in the small room. "
    "Alice prefers tea with lemon and never takes sugar. "
    "Bob brought cake for everyone on Monday."
)


def test_summary_keeps_the_relevant_sentences_in_text_order() -> None:
    question = query_terms("What does Alice drink, and when is the release?")
    weights = {"alic": 2.0, "drink": 3.0, "releas": 1.0}
    summary = summarize(LONG, question, weights, 40)
    assert summary == (
        "We moved the release to July 17 after the review."
        + SUMMARY_SEPARATOR
        + "Alice prefers tea with lemon and never takes sugar."
    )
    assert count_tokens(summary) <= 40


def test_the_best_unit_wins_when_only_one_fits() -> None:
    question = query_terms("Alice release")
    summary = summarize(LONG, question, {"alic": 2.0, "releas": 1.0}, 20)
    assert summary == "Alice prefers tea with lemon and never takes sugar."


def test_missing_weights_weigh_one() -> None:
    assert summarize(LONG, ["cake"], {}, 20) == "Bob brought cake for everyone on Monday."
    # A non-positive weight is ignored: nothing is relevant, the text's beginning is kept.
    assert summarize(LONG, ["cake"], {"cake": 0.0}, 20) == "We moved the release to July 17 after the review."


def test_without_relevant_units_the_beginning_is_kept() -> None:
    summary = summarize(LONG, ["zebra"], {"zebra": 1.0}, 45)
    assert summary == (
        "We moved the release to July 17 after the review."
        + SUMMARY_SEPARATOR
        + "The team reviews every Friday after lunch in the small room."
    )


def test_a_unit_too_long_is_cut_at_a_word_boundary() -> None:
    text = "Alice prefers green tea with lemon and honey and never takes any sugar at all in it"
    summary = summarize(text, ["alic"], {}, 10)
    assert summary is not None
    assert text.startswith(summary)
    assert text[len(summary)] == " "
    assert MIN_SUMMARY_TOKENS <= count_tokens(summary) <= 10
    assert count_tokens(text[: text.index(" ", len(summary) + 1)]) > 10  # the longest such prefix


def test_no_summary_below_the_minimum() -> None:
    assert summarize(LONG, ["alic"], {}, MIN_SUMMARY_TOKENS - 1) is None
    assert summarize(LONG, ["alic"], {}, count_tokens(LONG)) is None  # the text fits: a quote
    assert summarize("Tea, and biscuits." + " " * 60, ["tea"], {}, 20) is None  # fewer than 8 tokens
    assert summarize("a" * 200, ["alic"], {}, 20) is None  # no word boundary to cut at
    assert summarize("", [], {}, 100) is None


# --- pack --------------------------------------------------------------------


def test_pack_quotes_summarizes_and_skips_in_input_order() -> None:
    selected = [("m1", "Alice prefers tea."), ("m2", LONG), ("m3", "x" * 400), ("m4", "Bob likes cake.")]
    question = query_terms("What does Alice drink?")
    packing = pack(selected, question, {}, 40)
    assert [(item.memory_id, item.form) for item in packing.items] == [
        ("m1", "quote"),
        ("m2", "summary"),
        ("m4", "quote"),
    ]
    assert packing.items[0] == PackedItem(
        "m1", "quote", "Alice prefers tea.", count_tokens("Alice prefers tea.")
    )
    assert packing.items[1].text == "Alice prefers tea with lemon and never takes sugar."
    assert packing.skipped == ["m3"]
    assert packing.used_tokens == sum(item.tokens for item in packing.items) <= 40


def test_zero_budget_packs_nothing() -> None:
    assert pack([("m1", "Alice"), ("m2", "")], ["alic"], {}, 0) == Packing([], 0, ["m1", "m2"])


def test_a_spent_budget_skips_the_rest() -> None:
    text = "Alice prefers tea."
    budget = count_tokens(text)
    packing = pack([("m1", text), ("m2", "")], [], {}, budget)
    assert packing == Packing([PackedItem("m1", "quote", text, budget)], budget, ["m2"])


def test_negative_budget_is_rejected() -> None:
    with pytest.raises(ValueError, match="budget"):
        pack([], [], {}, -1)


# --- properties --------------------------------------------------------------

WORDS = [
    "Alice", "tea", "coffee", "release", "July", "17", "moved", "the", "review", "Friday",
    "v1.2.3", "東京", "привет", "😀", "naïve", "don't", "HTTPServer", "1,000", "sugar",
]  # fmt: skip
SEPARATORS = [
    " ",
    " ",
    " ",
    ". ",
    ", ",
    "; ",
    ": ",
    "! ",
    "? ",
    " — ",
    " – ",
    "\n",
    "\n\n",
    "… ",
    "。",
    "、",
    '." ',
]
PIECE = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(SEPARATORS),
    st.text(st.characters(codec="utf-8"), max_size=4),
)
#: Sentence-like text (words, then a separator) mixed with raw pieces of any script.
CLAUSE = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), st.sampled_from(SEPARATORS))
TEXT_PART = st.one_of(CLAUSE.map(lambda clause: " ".join(clause[0]) + clause[1]), PIECE)
TEXT = st.lists(TEXT_PART, max_size=40).map("".join)
LONG_TEXT = st.lists(TEXT_PART, min_size=6, max_size=40).map("".join)
#: Budgets 0..400, weighted toward the small ones where summaries happen.
BUDGET = st.one_of(st.integers(min_value=0, max_value=60), st.integers(min_value=0, max_value=400))
QUESTION = st.lists(st.sampled_from(WORDS), max_size=4).map(lambda words: query_terms(" ".join(words)))
WEIGHTS = st.dictionaries(
    st.sampled_from(sorted({term for word in WORDS for term in analyze(word)})),
    st.floats(min_value=0.0, max_value=5.0),
    max_size=6,
)
SELECTED = st.lists(st.one_of(TEXT, LONG_TEXT), max_size=5).map(
    lambda texts: [(f"m{i}", text) for i, text in enumerate(texts)]
)


def assert_verbatim_summary(text: str, summary: str, spans: list[tuple[int, int]], max_tokens: int) -> None:
    """The summary joins verbatim, ordered, disjoint pieces of ``text``: each a unit of
    ``split_clauses`` or, alone, a prefix of one cut just before whitespace."""
    assert spans
    assert SUMMARY_SEPARATOR.join(text[start:end] for start, end in spans) == summary
    assert summary != text
    assert count_tokens(text) > max_tokens
    assert MIN_SUMMARY_TOKENS <= count_tokens(summary) <= max_tokens
    all_units = split_clauses(text, min(MAX_SENTENCE_TOKENS, max_tokens))
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start
    for start, end in spans:
        if (start, end) not in all_units:
            assert len(spans) == 1
            assert any(s == start and end < e for s, e in all_units)
            assert text[end].isspace()
            assert not text[end - 1].isspace()


@PROPERTY
@given(TEXT)
def test_split_clauses_properties(text: str) -> None:
    spans = split_clauses(text, 5)
    position = 0
    for start, end in spans:
        assert position <= start < end <= len(text)
        assert text[start:end] == text[start:end].strip()
        assert not text[position:start].strip()  # only whitespace is left out
        position = end
    assert not text[position:].strip()
    sentences = split_clauses(text)
    assert all(any(s <= start and end <= e for s, e in sentences) for start, end in spans)


@PROPERTY
@given(st.one_of(TEXT, LONG_TEXT), QUESTION, WEIGHTS, st.data())
def test_summarize_properties(
    text: str, question: list[str], weights: dict[str, float], data: st.DataObject
) -> None:
    max_tokens = data.draw(st.integers(min_value=0, max_value=count_tokens(text) + 5), label="max_tokens")
    summary = summarize(text, question, weights, max_tokens)
    assert summary == summarize(text, question, weights, max_tokens)
    spans = summary_spans(text, question, weights, max_tokens)
    if summary is None:
        assert spans is None
        return
    assert spans is not None
    assert_verbatim_summary(text, summary, spans, max_tokens)


def reference_spans(
    text: str, question: list[str], weights: dict[str, float], max_tokens: int
) -> list[tuple[int, int]] | None:
    """summarize's rules read literally: every fit decided by counting the joined text."""
    if max_tokens < MIN_SUMMARY_TOKENS or count_tokens(text) <= max_tokens:
        return None
    spans = split_clauses(text, min(MAX_SENTENCE_TOKENS, max_tokens))
    if not spans:
        return None
    question_weights = {t: weights.get(t, 1.0) for t in dict.fromkeys(question) if weights.get(t, 1.0) > 0}
    scores = [math.fsum(w for t, w in question_weights.items() if t in analyze(text[s:e])) for s, e in spans]
    relevant = sorted((i for i in range(len(spans)) if scores[i] > 0), key=lambda i: (-scores[i], i))
    order = relevant or list(range(len(spans)))

    def joined(indexes: list[int]) -> str:
        return SUMMARY_SEPARATOR.join(text[spans[i][0] : spans[i][1]] for i in indexes)

    def acceptable(summary: str) -> bool:
        return summary != text and MIN_SUMMARY_TOKENS <= count_tokens(summary) <= max_tokens

    start, end = spans[order[0]]
    if count_tokens(text[start:end]) > max_tokens:
        cuts = [k for k in range(start + 1, end) if text[k].isspace() and not text[k - 1].isspace()]
        fitting = [k for k in cuts if count_tokens(text[start:k]) <= max_tokens]
        if fitting and acceptable(text[start : fitting[-1]]):
            return [(start, fitting[-1])]
    chosen: list[int] = []
    for index in order:
        if count_tokens(joined(sorted([*chosen, index]))) <= max_tokens:
            chosen = sorted([*chosen, index])
        elif not relevant:
            break
    return [spans[i] for i in chosen] if chosen and acceptable(joined(chosen)) else None


@PROPERTY
@given(st.one_of(TEXT, LONG_TEXT), QUESTION, WEIGHTS, st.data())
def test_summary_follows_the_rules_read_literally(
    text: str, question: list[str], weights: dict[str, float], data: st.DataObject
) -> None:
    max_tokens = data.draw(st.integers(min_value=0, max_value=count_tokens(text) + 5), label="max_tokens")
    assert summary_spans(text, question, weights, max_tokens) == reference_spans(
        text, question, weights, max_tokens
    )


@PROPERTY
@given(SELECTED, QUESTION, WEIGHTS, BUDGET)
def test_pack_properties(
    selected: list[tuple[str, str]], question: list[str], weights: dict[str, float], budget: int
) -> None:
    packing = pack(selected, question, weights, budget)
    assert packing == pack(selected, question, weights, budget)  # deterministic
    assert packing.used_tokens <= budget
    assert packing.used_tokens == sum(count_tokens(item.text) for item in packing.items)
    assert all(item.tokens == count_tokens(item.text) for item in packing.items)
    texts = dict(selected)
    # Every memory is either an item or skipped, in input order.
    placed = {item.memory_id for item in packing.items}
    assert [item.memory_id for item in packing.items] == [m for m, _ in selected if m in placed]
    assert packing.skipped == [m for m, _ in selected if m not in placed]
    if budget == 0:
        assert packing.items == []
    remaining = budget
    for item in packing.items:
        text = texts[item.memory_id]
        if item.form == "quote":
            assert item.text == text
        else:
            assert count_tokens(text) > remaining
            spans = summary_spans(text, question, weights, remaining)
            assert spans is not None
            assert_verbatim_summary(text, item.text, spans, remaining)
        remaining -= item.tokens


# --- long texts: only the units that may hold a question term are analyzed ---------------


@PROPERTY
@given(st.one_of(TEXT, LONG_TEXT, st.text(st.characters(codec="utf-8"))))
@example("We met on May \u0662\u0660\u0662\u0663.")  # Arabic-Indic digits: the date term is 2023-05
@example("Order \u0967\u0968\u0969 shipped.")  # Devanagari digits kept as a token
def test_every_term_of_a_text_leaves_its_probe_in_it(text: str) -> None:
    for term in set(analyze(text)):
        assert may_hold(text, [term_probe(term)]), term


def test_a_stems_probe_stands_in_every_word_with_that_stem() -> None:
    """``term_probe``'s rule for stems, on ~45k words: every suffix the stemmer removes or
    rewrites, after random letters (seeded) and after the words of the docs' examples."""
    suffixes = [
        "", "s", "es", "ed", "ing", "ly", "ness", "ation", "ational", "tional", "ization", "izer",
        "ity", "iveness", "ively", "fully", "fulness", "ousness", "ously", "ies", "ied", "ying", "y",
        "ily", "iness", "able", "ably", "ibility", "ability", "ality", "alism", "ically", "icate",
        "ative", "ement", "ence", "ency", "ance", "ancy", "ant", "ent", "li", "bli", "logi", "er",
        "est", "eed", "eedly", "ingly", "edly", "ie", "yes", "ys",
    ]  # fmt: skip
    exceptions = ["dying", "lying", "tying", "skis", "skies", "idly", "gently", "ugly", "early", "only"]
    rng = random.Random(20261206)
    letters = "aeiouybcdfghlmnprstvwy"
    bases = [w.lower() for w in WORDS if w.isalpha() and w.isascii()] + ["generous", "commune", "arsenal"]
    bases += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 8))) for _ in range(800)]
    words = [base + suffix for base in bases for suffix in suffixes] + exceptions
    assert [word for word in words if term_probe(stem(word)) not in word] == []


def analyzed_chars(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text packing analyzes, from now on."""
    lengths: list[int] = []

    def counted(text: str) -> list[str]:
        lengths.append(len(text))
        return analyze(text)

    monkeypatch.setattr(packing, "analyze", counted)
    return lengths


def test_a_long_memory_is_summarized_from_the_units_that_may_hold_the_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a 250 KB file remembered as one memory, the question's words in two of its sentences
    file = long_file()
    text = file.text
    assert len(text) > 250_000
    question = query_terms(file.question)
    lengths = analyzed_chars(monkeypatch)
    # When it is summarized for a budget of 300 tokens
    spans = summary_spans(text, question, {}, 300)
    # Then the summary is the one the rules give, from the two sentences,
    assert spans == reference_spans(text, question, {}, 300)
    assert spans is not None
    assert [text[start:end] for start, end in spans] == list(file.answers)
    # and only those were analyzed, not the 250 KB around them.
    assert sum(lengths) == sum(len(sentence) for sentence in file.answers)


def test_a_short_memory_is_analyzed_unit_by_unit_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    lengths = analyzed_chars(monkeypatch)
    assert summarize(LONG, ["cake"], {}, 20) == "Bob brought cake for everyone on Monday."
    assert len(LONG) <= packing.PROBED_TEXT_CHARS
    assert sum(lengths) == sum(len(unit) for unit in units(LONG, 20))


@PROPERTY
@given(st.one_of(TEXT, LONG_TEXT), QUESTION, WEIGHTS, st.data())
def test_a_probed_summary_follows_the_rules_read_literally(
    text: str, question: list[str], weights: dict[str, float], data: st.DataObject
) -> None:
    max_tokens = data.draw(st.integers(min_value=0, max_value=count_tokens(text) + 5), label="max_tokens")
    with mock.patch.object(packing, "PROBED_TEXT_CHARS", 0):  # every text probed, however short
        spans = summary_spans(text, question, weights, max_tokens)
    assert spans == reference_spans(text, question, weights, max_tokens)

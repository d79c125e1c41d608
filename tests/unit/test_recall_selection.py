"""Near-duplicates and the smallest set (docs/recall.md, "Near-duplicates", "The smallest set")."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.core.recall import packing, selection
from kaibo_core.core.recall.selection import (
    NEGATION_TERMS,
    Ranked,
    SelectionParams,
    collapse_near_duplicates,
    normalized_text,
    smallest_set,
)
from kaibo_core.core.text import analyze

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)


def memory(memory_id: str, score: float, text: str) -> Ranked:
    return Ranked(memory_id, score, frozenset(analyze(text)), text)


def synthetic(memory_id: str, score: float, terms: str) -> Ranked:
    return Ranked(memory_id, score, frozenset(terms.split()), terms)


def ids(candidates: list[Ranked]) -> list[str]:
    return [candidate.memory_id for candidate in candidates]


# --- near-duplicates ---------------------------------------------------------


@pytest.mark.parametrize(
    ("better", "worse"),
    [
        ("We moved the release to July 17.", "The release was moved to July 17"),  # stopwords, inflection
        ("Alice prefers tea.", "ALICE PREFERS TEA!!"),  # case, punctuation
        ("Alice prefers tea", "tea: Alice prefers"),  # word order
        ("Alice prefers tea", "Alice prefers tea, tea, tea"),  # repetition
        ("The release moved to July 17 after the review", "release moved to July 17"),  # adds words
        ("Alice  prefers\ttea", "alice prefers tea"),  # whitespace
    ],
)
def test_paraphrases_collapse_into_the_better_ranked(better: str, worse: str) -> None:
    kept, dropped = collapse_near_duplicates([memory("a", 2.0, better), memory("b", 1.0, worse)])
    assert ids(kept) == ["a"]
    assert dropped == {"b": "a"}


def test_the_shorter_better_ranked_version_keeps_the_longer_one() -> None:
    # The longer one says something (after the review) the better-ranked one does not.
    kept, dropped = collapse_near_duplicates(
        [
            memory("a", 2.0, "release moved to July 17"),
            memory("b", 1.0, "release moved to July 17 after review"),
        ]
    )
    assert ids(kept) == ["a", "b"]
    assert dropped == {}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("release is July 13", "release is July 17"),
        ("Alice prefers tea", "Alice prefers coffee"),
        (
            "After the long review on Friday the team agreed with Caroline that the public release of "
            "version two moves from July 13 to the morning of July 20 in Berlin",
            "After the long review on Friday the team agreed with Caroline that the public release of "
            "version two moves from July 13 to the morning of July 21 in Berlin",
        ),
        # A negation added by the better-ranked text contradicts, it does not repeat.
        ("The deploy is not on Tuesday", "The deploy is on Tuesday"),
        ("Alice no longer drinks coffee", "Alice drinks coffee"),
        ("We don't ship on Fridays", "We ship on Fridays"),
    ],
)
def test_different_values_never_collapse(first: str, second: str) -> None:
    for a, b in ((first, second), (second, first)):
        kept, dropped = collapse_near_duplicates([memory("a", 2.0, a), memory("b", 1.0, b)])
        assert ids(kept) == ["a", "b"]
        assert dropped == {}


def test_empty_term_sets_collapse_only_on_equal_text() -> None:
    ranked = [
        memory("a", 3.0, "Release on July 17"),
        memory("b", 2.0, "and then?"),
        memory("c", 1.5, "Is it?"),
        memory("d", 1.0, "AND THEN?"),
    ]
    assert all(not candidate.terms for candidate in ranked[1:])
    kept, dropped = collapse_near_duplicates(ranked)
    assert ids(kept) == ["a", "b", "c"]
    assert dropped == {"d": "b"}


def test_dropped_maps_to_the_first_kept_that_covers_it() -> None:
    ranked = [
        synthetic("a", 5.0, "x y"),
        synthetic("b", 4.0, "x z"),
        synthetic("c", 3.0, "x"),  # covered by a and b: a ranks better
        synthetic("d", 2.0, "z"),  # covered by b only
    ]
    kept, dropped = collapse_near_duplicates(ranked)
    assert ids(kept) == ["a", "b"]
    assert dropped == {"c": "a", "d": "b"}


def test_a_dropped_candidate_does_not_drop_others() -> None:
    # c is contained in b, but b was dropped (by a): c is compared with kept candidates only.
    ranked = [synthetic("a", 3.0, "p q r"), synthetic("b", 2.0, "p q"), synthetic("c", 1.0, "s")]
    kept, dropped = collapse_near_duplicates(ranked)
    assert ids(kept) == ["a", "c"]
    assert dropped == {"b": "a"}


def test_negation_terms() -> None:
    assert {"not", "no", "never", "dont", "cant", "without", "noth"} <= NEGATION_TERMS


def test_normalized_text() -> None:
    assert normalized_text("  Ｓtraße\n\tIS  here ") == "strasse is here"


# --- the smallest set --------------------------------------------------------

WEIGHTS = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0}
OVERLAPPING = [
    synthetic("D", 3.0, "a b c"),
    synthetic("A", 2.9, "a b"),
    synthetic("B", 2.8, "c d"),
    synthetic("C", 2.7, "e f"),
    synthetic("E", 1.0, "d e f"),
]


def test_greedy_cover_picks_two_items_over_three_overlapping() -> None:
    chosen = smallest_set(OVERLAPPING, WEIGHTS, SelectionParams(relative_floor=1.0))
    assert ids(chosen) == ["D", "E"]


def test_corroboration_adds_high_scorers_in_rank_order() -> None:
    # floor = 0.5 * 3.0 = 1.5: A, B and C corroborate; E is in by the cover.
    assert ids(smallest_set(OVERLAPPING, WEIGHTS)) == ["D", "A", "B", "C", "E"]
    assert ids(smallest_set(OVERLAPPING, WEIGHTS, SelectionParams(relative_floor=0.95))) == ["D", "A", "E"]


def test_max_items_caps_cover_first_then_corroboration() -> None:
    assert ids(smallest_set(OVERLAPPING, WEIGHTS, SelectionParams(max_items=1))) == ["D"]
    assert ids(smallest_set(OVERLAPPING, WEIGHTS, SelectionParams(max_items=3))) == ["D", "A", "E"]


def test_gain_ties_go_to_the_higher_score_then_the_earlier() -> None:
    weights = {"x": 1.0}
    by_score = [synthetic("low", 1.0, "x"), synthetic("high", 2.0, "x")]
    assert ids(smallest_set(by_score, weights, SelectionParams(relative_floor=1.0))) == ["high"]
    by_order = [synthetic("first", 1.0, "x"), synthetic("second", 1.0, "x")]
    params = SelectionParams(relative_floor=1.0, max_items=1)
    assert ids(smallest_set(by_order, weights, params)) == ["first"]


def test_gain_is_weighted_by_idf() -> None:
    weights = {"rare": 5.0, "common": 0.5, "other": 0.5}
    candidates = [synthetic("broad", 3.0, "common other"), synthetic("rare", 1.0, "rare")]
    params = SelectionParams(relative_floor=1.0, coverage_target=0.8)
    # rare alone covers 5 / 6 >= 0.8; "broad" comes in only as the top scorer.
    assert ids(smallest_set(candidates, weights, params)) == ["broad", "rare"]
    params = SelectionParams(relative_floor=1.0, coverage_target=0.8, max_items=1)
    assert ids(smallest_set(candidates, weights, params)) == ["rare"]


def test_uncoverable_terms_stop_the_cover() -> None:
    candidates = [synthetic("a", 2.0, "a"), synthetic("z", 0.1, "z")]
    weights = {"a": 1.0, "missing": 9.0}
    assert ids(smallest_set(candidates, weights, SelectionParams(relative_floor=1.0))) == ["a"]


def test_without_weights_only_corroboration() -> None:
    candidates = [synthetic("a", 1.0, "a"), synthetic("b", 4.0, "b"), synthetic("c", 2.0, "c")]
    assert ids(smallest_set(candidates, {})) == ["b", "c"]
    assert ids(smallest_set(candidates, {"a": 0.0, "b": float("nan")})) == ["b", "c"]
    assert ids(smallest_set(candidates, {"a": 1.0}, SelectionParams(coverage_target=0.0))) == ["b", "c"]


def test_output_is_best_first_with_ties_in_input_order() -> None:
    candidates = [
        synthetic("t1", 1.0, "p"),
        synthetic("top", 3.0, "q"),
        synthetic("t2", 1.0, "r"),
    ]
    chosen = smallest_set(candidates, {"p": 1.0, "q": 1.0, "r": 1.0}, SelectionParams(relative_floor=1.0))
    assert ids(chosen) == ["top", "t1", "t2"]


def test_empty_candidates() -> None:
    assert smallest_set([], {"a": 1.0}) == []


@pytest.mark.parametrize(
    "kwargs",
    [{"coverage_target": 1.5}, {"coverage_target": -0.1}, {"relative_floor": 1.1}, {"max_items": 0}],
)
def test_params_are_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        SelectionParams(**kwargs)  # type: ignore[arg-type]


# --- properties --------------------------------------------------------------

TERMS = st.frozensets(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "not"]), max_size=5)
CANDIDATES = st.lists(st.tuples(st.floats(min_value=0.01, max_value=10.0), TERMS), max_size=12).map(
    lambda rows: [
        Ranked(f"m{i}", score, terms, " ".join(sorted(terms))) for i, (score, terms) in enumerate(rows)
    ]
)
WEIGHTS_STRATEGY = st.dictionaries(st.sampled_from("abcdefghij"), st.floats(min_value=0.1, max_value=5.0))
PARAMS = st.builds(
    SelectionParams,
    coverage_target=st.floats(min_value=0.0, max_value=1.0),
    relative_floor=st.floats(min_value=0.0, max_value=1.0),
    max_items=st.integers(min_value=1, max_value=15),
)


@PROPERTY
@given(CANDIDATES, WEIGHTS_STRATEGY, PARAMS)
def test_smallest_set_properties(
    candidates: list[Ranked], weights: dict[str, float], params: SelectionParams
) -> None:
    chosen = smallest_set(candidates, weights, params)
    assert chosen == smallest_set(candidates, weights, params)  # deterministic
    assert len(chosen) <= params.max_items
    assert len({c.memory_id for c in chosen}) == len(chosen)
    assert set(ids(chosen)) <= set(ids(candidates))
    position = {c.memory_id: i for i, c in enumerate(candidates)}
    keys = [(-c.score, position[c.memory_id]) for c in chosen]
    assert keys == sorted(keys)
    if candidates:
        assert chosen
    if candidates and params.max_items >= len(candidates) and params.coverage_target == 1.0:
        coverable = set(weights) & set().union(*(c.terms for c in candidates))
        assert coverable <= set().union(*(c.terms for c in chosen))
    if params.max_items >= len(candidates):
        top = max((c.score for c in candidates), default=0.0)
        assert {c.memory_id for c in candidates if c.score >= params.relative_floor * top} <= set(ids(chosen))


@PROPERTY
@given(CANDIDATES)
def test_collapse_properties(candidates: list[Ranked]) -> None:
    kept, dropped = collapse_near_duplicates(candidates)
    assert (kept, dropped) == collapse_near_duplicates(candidates)
    position = {c.memory_id: i for i, c in enumerate(candidates)}
    assert [c for c in candidates if c.memory_id not in dropped] == kept
    kept_ids = set(ids(kept))
    for dropped_id, kept_id in dropped.items():
        assert kept_id in kept_ids
        assert position[kept_id] < position[dropped_id]
    for i, a in enumerate(kept):
        for b in kept[i + 1 :]:
            assert not (b.terms and b.terms <= a.terms and not (a.terms - b.terms) & NEGATION_TERMS)
            assert normalized_text(a.text) != normalized_text(b.text)


ALLOWED_IMPORTS = {
    "__future__",
    "collections",
    "dataclasses",
    "math",
    "re",
    "typing",
    "unicodedata",
    "kaibo_core",
}


@pytest.mark.parametrize("module", [selection, packing])
def test_pure_modules_import_only_the_standard_library_and_kaibo_core(module: ModuleType) -> None:
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    roots = {name.split(".")[0] for name in imported}
    assert roots <= ALLOWED_IMPORTS
    assert {name for name in imported if name.startswith("kaibo_core")} <= {
        "kaibo_core.core.text",
        "kaibo_core.core.tokens",
    }


def test_with_recall_by_meaning_corroboration_is_per_channel_not_a_share_of_the_fused_score() -> None:
    """Cosines of unrelated memories sit near the best one's: a share of the fused score (0.3 of
    the top) would add every semantic candidate; a cosine close to the best, or a BM25 close to
    the best BM25, corroborates."""
    weights = {"ship": 2.0}
    candidates = [
        Ranked("best", 0.62, frozenset(), "the release target is July 17", lexical=0.0, cosine=0.62),
        Ranked("close", 0.59, frozenset(), "launch planned for mid July", lexical=0.0, cosine=0.59),
        Ranked("words", 0.45, frozenset({"ship"}), "ship the fix", lexical=6.0, cosine=0.27),
        Ranked("far", 0.40, frozenset(), "the office wifi password", lexical=0.0, cosine=0.40),
        Ranked("farther", 0.31, frozenset(), "ramen for lunch", lexical=0.0, cosine=0.31),
    ]
    chosen = ids(smallest_set(candidates, weights))
    assert chosen == ["best", "close", "words"]  # "words" by the cover; "far" is 0.22 below the best
    without_meaning = [Ranked(c.memory_id, c.score, c.terms, c.text) for c in candidates]
    assert ids(smallest_set(without_meaning, weights)) == ["best", "close", "words", "far", "farther"]


def test_a_neighbour_lifted_by_context_joins_only_with_a_relevance_of_its_own() -> None:
    """Context lifts a memory's neighbours toward its score (core/recall/context.py); the smallest
    set keeps a lifted neighbour when it holds a question term or, with recall by meaning, a cosine
    of at least ``neighbour_min_cosine``: the note written next to the answer is not part of it."""
    weights = {"ramen": 2.0}
    best = Ranked("best", 1.0, frozenset({"ramen"}), "ramen place downtown", lexical=20.0, cosine=0.7)
    reply = Ranked("reply", 0.6, frozenset(), "loved the broth", lexical=0.0, cosine=0.3, context_lift=0.5)
    note = Ranked("note", 0.6, frozenset(), "wifi password", lexical=0.0, cosine=0.05, context_lift=0.55)
    assert ids(smallest_set([best, reply, note], weights)) == ["best", "reply"]

    words_only = [
        Ranked("best", 10.0, frozenset({"ramen", "place"}), "ramen place downtown"),
        Ranked("shares", 6.5, frozenset({"place"}), "the place was packed", context_lift=6.0),
        Ranked("nothing", 6.0, frozenset(), "loved the broth", context_lift=6.0),
    ]
    assert ids(smallest_set(words_only, {"ramen": 2.0, "place": 1.0})) == ["best", "shares"]

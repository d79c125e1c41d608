"""The recall text pipeline (docs/recall.md, "The text pipeline"), rule by rule."""

from __future__ import annotations

import ast
import string
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.core import ranking, text, tokens
from kaibo_core.core.text import (
    MAX_TERM_LENGTH,
    PIPELINE_VERSION,
    STOPWORDS,
    Token,
    analyze,
    query_terms,
    time_terms,
    tokenize,
    written_date_terms,
)

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)


def raw_tokens(value: str) -> list[str]:
    return [token.text for token in tokenize(value)]


def test_pipeline_version_is_pinned() -> None:
    assert PIPELINE_VERSION == 2
    assert MAX_TERM_LENGTH == 64


# --- numbers and dates -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("13", ["13"]),
        ("3.5", ["3.5"]),
        ("1,000", ["1000"]),
        ("1,000,000.25", ["1000000.25"]),
        ("costs 3.5.", ["cost", "3.5"]),
        ("007", ["007"]),
    ],
)
def test_numbers_are_one_token(value: str, expected: list[str]) -> None:
    assert analyze(value) == expected


def test_comma_between_words_or_after_space_does_not_join() -> None:
    assert analyze("July 17, 2026") == ["juli", "17", "2026", "2026-07-17", "2026-07"]
    assert analyze("17, 2026") == ["17", "2026"]
    assert raw_tokens("July 17") == ["july", "17"]


def test_iso_date_is_one_token() -> None:
    assert analyze("2026-06-02") == ["2026-06-02"]
    assert analyze("due 2026-06-02.") == ["due", "2026-06-02"]


def test_iso_date_inside_a_timestamp_is_also_a_part() -> None:
    terms = analyze("2026-06-02T10:00:00Z")
    assert terms[0] == "2026-06-02t10:00:00z"
    assert "2026-06-02" in terms


def test_clock_time_keeps_whole_and_parts() -> None:
    assert analyze("10:30") == ["10:30", "10", "30"]


# --- identifiers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("snake_case_name", ["snake_case_name", "snake", "case", "name"]),
        ("CamelCase", ["camelcas", "camel", "case"]),
        ("HTTPServer", ["httpserver", "server"]),  # "http" is a stopword
        ("v1.2.3", ["v1.2.3", "v1", "2", "3"]),
        ("evt_01ABC", ["evt_01abc", "evt", "01abc"]),
        ("foo-bar", ["foo-bar", "foo", "bar"]),
        ("alice@example.com", ["alice@example.com", "alic", "exampl", "com"]),
        (
            "https://github.com/acme/kaibo-core",
            ["https://github.com/acme/kaibo-core", "github", "com", "acm", "kaibo", "core"],
        ),
    ],
)
def test_identifiers_keep_whole_and_parts(value: str, expected: list[str]) -> None:
    assert analyze(value) == expected


def test_camel_case_whole_matches_the_same_word_in_lower_case() -> None:
    # A question may write "iphone" or "iPhone": the whole analyzes identically.
    assert analyze("iPhone")[0] == analyze("iphone")[0] == "iphon"
    assert "phone" in analyze("iPhone")


def test_raw_tokens_of_identifiers_are_lower_cased() -> None:
    assert raw_tokens("CamelCase") == ["camelcase", "camel", "case"]
    assert raw_tokens("snake_case_name") == ["snake_case_name", "snake", "case", "name"]


def test_whole_compounds_are_neither_stemmed_nor_stopworded() -> None:
    assert analyze("moving-files") == ["moving-files", "move", "file"]
    assert analyze("the-end")[0] == "the-end"


def test_underscores_only_give_nothing() -> None:
    assert analyze("___ __") == []


# --- apostrophes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("don't", ["dont"]),
        ("don’t", ["dont"]),  # typographic apostrophe
        ("dont", ["dont"]),
        ("Alice's", ["alic"]),
        ("rock'n'roll", ["rocknrol"]),
        ("students'", ["student"]),  # a trailing apostrophe is not inside a word
    ],
)
def test_apostrophes_inside_words_are_removed(value: str, expected: list[str]) -> None:
    assert analyze(value) == expected


# --- stems, case, stopwords, negations ---------------------------------------------


@pytest.mark.parametrize(
    ("word", "stem"),
    [("moving", "move"), ("moved", "move"), ("moves", "move"), ("running", "run"), ("files", "file")],
)
def test_snowball_english_stems(word: str, stem: str) -> None:
    assert analyze(word) == [stem]


def test_numbers_and_dates_are_not_stemmed() -> None:
    assert analyze("1990s") == ["1990s"]
    assert analyze("2026-06-02") == ["2026-06-02"]


def test_case_folding_including_non_ascii() -> None:
    assert raw_tokens("Straße") == ["strasse"]
    assert analyze("Straße") == analyze("STRASSE") == analyze("strasse")
    assert analyze("ÉCOLE") == analyze("école")


def test_nfkc_normalization() -> None:
    assert raw_tokens("ｆｕｌｌｗｉｄｔｈ") == ["fullwidth"]
    assert raw_tokens("ﬁle") == ["file"]


def test_stopwords_are_dropped() -> None:
    assert analyze("The cat is on the mat") == ["cat", "mat"]
    assert analyze("When did we move it?") == ["move"]


@pytest.mark.parametrize("negation", ["not", "no", "never", "nor", "none", "nothing", "without"])
def test_negations_are_kept(negation: str) -> None:
    assert negation not in STOPWORDS
    assert analyze(negation)


def test_negations_change_the_terms() -> None:
    assert analyze("Alice no longer works here") == ["alic", "no", "longer", "work"]
    assert "dont" in analyze("I don't like it")
    assert "not" in analyze("I do not like it")


def test_temporal_words_are_kept() -> None:
    assert analyze("before after since until") == ["befor", "after", "sinc", "until"]


def test_cjk_text_gives_overlapping_bigrams() -> None:
    assert analyze("東京に行きました") == ["東京", "京に", "に行", "行き", "きま", "まし", "した"]
    assert analyze("한국어") == ["한국", "국어"]
    assert analyze("猫") == ["猫"]
    assert analyze("東京tokyo") == ["東京", "tokyo"]


def test_other_scripts_are_case_folded_words() -> None:
    assert analyze("ПРИВЕТ мир") == ["привет", "мир"]


def test_overlong_terms_are_dropped_but_parts_kept() -> None:
    blob = "a" * (MAX_TERM_LENGTH + 1)
    assert analyze(blob) == []
    assert analyze("a" * MAX_TERM_LENGTH) == ["a" * MAX_TERM_LENGTH]
    assert analyze(f"{blob}-kaibo") == ["kaibo"]


def test_sentence_end_to_end() -> None:
    assert analyze("We moved the release from July 13 to July 17 (was 2026-06-02).") == [
        "move",
        "releas",
        "juli",
        "13",
        "juli",
        "17",
        "2026-06-02",
    ]


# --- query terms and determinism ----------------------------------------------------


def test_query_terms_are_distinct_in_first_seen_order() -> None:
    assert query_terms("Moving? Moved! The move of files, file moves") == ["move", "file"]
    assert query_terms("b a b c a") == ["b", "c"]  # "a" is a stopword


def test_index_and_query_agree() -> None:
    memory = analyze("Release target moved to July 17")
    assert set(query_terms("When was the release target moving?")) <= set(memory)


def test_empty_and_punctuation_only() -> None:
    assert analyze("") == []
    assert analyze("  ...!?  -- ") == []
    assert query_terms("") == []


ALLOWED_IMPORTS = {"__future__", "collections", "dataclasses", "functools", "math", "re", "unicodedata"}
#: text.py loads snowballstemmer's English stemmer on its own (``text._stemmer``).
STEMMER_LOADING = {"importlib", "sys", "types", "typing"}


@pytest.mark.parametrize("module", [text, tokens, ranking])
def test_pure_core_imports_only_the_standard_library_and_snowball(module: ModuleType) -> None:
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        (node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    }
    assert imported <= ALLOWED_IMPORTS | STEMMER_LOADING | {"snowballstemmer"}


@PROPERTY
@given(st.text())
def test_analyze_never_raises_and_terms_are_well_formed(value: str) -> None:
    terms = analyze(value)
    assert terms == analyze(value)  # deterministic
    for term in terms:
        assert term
        assert term == term.casefold()
        assert len(term) <= MAX_TERM_LENGTH
        assert not any(char.isspace() for char in term)
    assert query_terms(value) == list(dict.fromkeys(terms))


@PROPERTY
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_ascii_terms_never_carry_upper_case(value: str) -> None:
    assert all(term == term.lower() for term in analyze(value))


@PROPERTY
@given(
    st.lists(
        st.sampled_from(["Moved", "release", "July", "17", "snake_case", "v1.2", "東京", "no"]), max_size=8
    )
)
def test_analysis_is_compositional_over_spaces(words: list[str]) -> None:
    joined = analyze(" ".join(words))
    assert joined == [term for word in words for term in analyze(word)]


def test_docs_list_the_stopwords_exactly() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "recall.md").read_text(encoding="utf-8")
    listed = doc.split("The list (135 words):", 1)[1].split("`", 2)[1]
    assert frozenset(listed.split()) == STOPWORDS
    assert len(STOPWORDS) == 135


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("on 8 May, 2023", ["2023-05-08", "2023-05"]),
        ("May 8th 2023", ["2023-05-08", "2023-05"]),
        ("the 3rd of Sept. 2024", ["2024-09-03", "2024-09"]),
        ("in July 2023 and December, 2024", ["2023-07", "2024-12"]),
        ("JULY 17, 2026", ["2026-07-17", "2026-07"]),
        ("on December 1,2023", ["2023-12-01", "2023-12"]),
        ("on 32 May 2023", ["2023-05"]),
        ("May I come in 2023", []),
        ("July 17", []),
    ],
)
def test_given_dates_written_out_then_their_iso_terms_are_added(text: str, dates: list[str]) -> None:
    assert written_date_terms(text) == dates
    assert analyze(text)[len(analyze(text)) - len(dates) :] == dates


def test_given_a_validity_date_then_its_time_terms() -> None:
    assert time_terms(2023, 7, 1) == ["2023-07-01", "2023-07", "2023", "juli"]
    assert time_terms(2023, 5, 8) == ["2023-05-08", "2023-05", "2023"]  # "may" is a stopword


@given(st.text(alphabet=string.ascii_letters, min_size=1, max_size=12))
def test_given_an_ascii_word_then_the_fast_path_gives_what_the_general_rule_gives(word: str) -> None:
    general = [Token(text.fold(token.text), token.word) for token in text._compound_tokens(word)]
    assert tokenize(word) == general


# -- the stemmer: snowballstemmer's English, loaded on its own ----------------------------------------

STEM_WORDS = [
    "running",
    "runs",
    "ran",
    "easily",
    "fairly",
    "generously",
    "dying",
    "lying",
    "tying",
    "skies",
    "sky",
    "news",
    "innings",
    "outing",
    "canning",
    "proceed",
    "exceed",
    "succeed",
    "generalization",
    "organizational",
    "communism",
    "arguing",
    "argued",
    "releases",
    "released",
    "releasing",
    "deploys",
    "deployment",
    "deployments",
    "meetings",
    "caroline's",
]


def test_the_stemmer_is_snowballstemmers_english() -> None:
    import snowballstemmer

    reference = snowballstemmer.stemmer("english")
    words = [*STEM_WORDS, *(w.lower() for w in STEM_WORDS), *string.ascii_lowercase]
    assert [text._stemmer().stemWord(w) for w in words] == [reference.stemWord(w) for w in words]


def test_stemming_does_not_import_every_language() -> None:
    """Cold start: the handlers stem with the English stemmer alone (~50 ms less to import)."""
    import subprocess
    import sys

    probe = (
        "import sys; from kaibo_core.core.text import analyze; assert analyze('Releases deployed') == "
        "['releas', 'deploy'], analyze('Releases deployed'); "
        "print(sorted(m for m in sys.modules if m.startswith('snowballstemmer')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

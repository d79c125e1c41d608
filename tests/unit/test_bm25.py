"""BM25 (docs/recall.md, "Ranking") against a hand-computed example, plus its properties."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.core.ranking import DEFAULT_PARAMS, Bm25Params, bm25_score, idf

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)

# A 3-document corpus, already analyzed (terms as kaibo_core.core.text.analyze gives them).
D1 = ["releas", "move", "juli"]  # |d1| = 3
D2 = ["releas", "releas", "review", "friday", "team"]  # |d2| = 5
D3 = ["lunch", "friday"]  # |d3| = 2
CORPUS = [D1, D2, D3]
N = 3
AVGDL = (3 + 5 + 2) / 3  # 10/3 = 3.3333...
DF = {"releas": 2, "move": 1, "juli": 1, "review": 1, "friday": 2, "team": 1, "lunch": 1}
QUERY = ["releas", "juli"]


def score(doc: list[str], query: list[str], params: Bm25Params = DEFAULT_PARAMS) -> float:
    return bm25_score(Counter(doc), len(doc), AVGDL, DF, N, query, params)


def test_defaults() -> None:
    assert Bm25Params(k1=1.2, b=0.75) == DEFAULT_PARAMS


def test_idf_by_hand() -> None:
    # idf(releas) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1 + 1.5/2.5) = ln(1.6)
    assert idf(3, 2) == pytest.approx(0.47000362924573563)
    # idf(juli) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(1 + 2.5/1.5) = ln(8/3)
    assert idf(3, 1) == pytest.approx(0.9808292530117262)
    # a term in every document: ln(1 + 0.5/3.5) = ln(8/7) > 0
    assert idf(3, 3) == pytest.approx(0.13353139262452263)


def test_corpus_statistics_match_the_corpus() -> None:
    assert sum(map(len, CORPUS)) / len(CORPUS) == AVGDL
    assert Counter(term for doc in CORPUS for term in set(doc)) == DF


def test_score_d1_by_hand() -> None:
    # d1: |d| = 3, tf(releas) = 1, tf(juli) = 1.
    # K = k1 * (1 - b + b * |d| / avgdl) = 1.2 * (0.25 + 0.75 * 3 / (10/3))
    #   = 1.2 * (0.25 + 0.675) = 1.2 * 0.925 = 1.11
    # releas: 0.47000362924573563 * 1 * 2.2 / (1 + 1.11) = 0.4900511774126154
    # juli:   0.9808292530117262  * 1 * 2.2 / (1 + 1.11) = 1.0226655718605677
    # total:  1.5127167492731832
    assert score(D1, ["releas"]) == pytest.approx(0.4900511774126154)
    assert score(D1, ["juli"]) == pytest.approx(1.0226655718605677)
    assert score(D1, QUERY) == pytest.approx(1.5127167492731832)


def test_score_d2_by_hand() -> None:
    # d2: |d| = 5, tf(releas) = 2, no "juli".
    # K = 1.2 * (0.25 + 0.75 * 5 / (10/3)) = 1.2 * (0.25 + 1.125) = 1.2 * 1.375 = 1.65
    # releas: 0.47000362924573563 * 2 * 2.2 / (2 + 1.65) = 0.5665797174469143
    # juli: tf = 0 -> 0
    assert score(D2, QUERY) == pytest.approx(0.5665797174469143)


def test_score_d3_by_hand() -> None:
    # d3 holds neither query term.
    assert score(D3, QUERY) == 0.0


def test_ranking_of_the_example() -> None:
    ranked = sorted(range(3), key=lambda i: -score(CORPUS[i], QUERY))
    assert ranked == [0, 1, 2]


def test_repeated_query_terms_count_once() -> None:
    assert score(D1, ["juli", "juli", "releas"]) == pytest.approx(score(D1, QUERY))


def test_missing_doc_freq_counts_as_zero_and_stale_df_is_clamped() -> None:
    assert idf(3, 0) == pytest.approx(math.log(1 + 3.5 / 0.5))
    assert idf(3, 7) == idf(3, 3)
    assert idf(0, 0) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="n_docs"):
        idf(-1, 0)


def test_empty_corpus_statistics_turn_length_normalization_off() -> None:
    with_zero_avg = bm25_score({"x": 2}, 10, 0.0, {"x": 1}, 1, ["x"])
    # K = k1 = 1.2: idf(1, 1) * 2 * 2.2 / (2 + 1.2)
    assert with_zero_avg == pytest.approx(math.log(1 + 0.5 / 1.5) * 4.4 / 3.2)


@pytest.mark.parametrize(("k1", "b"), [(-0.1, 0.75), (math.inf, 0.75), (1.2, -0.01), (1.2, 1.5)])
def test_invalid_params_are_refused(k1: float, b: float) -> None:
    with pytest.raises(ValueError, match="must"):
        Bm25Params(k1=k1, b=b)


# --- properties ---------------------------------------------------------------------

PARAMS = st.builds(Bm25Params, k1=st.floats(0.1, 3.0), b=st.floats(0.0, 1.0))
N_DOCS = st.integers(1, 10_000)


@PROPERTY
@given(PARAMS, N_DOCS, st.integers(1, 50), st.integers(1, 200), st.floats(1.0, 200.0))
def test_more_occurrences_score_higher_but_saturate(
    params: Bm25Params, n_docs: int, tf: int, doc_len: int, avgdl: float
) -> None:
    df = {"t": max(1, n_docs // 3)}

    def s(freq: int) -> float:
        # the same document length for both frequencies
        return bm25_score({"t": freq}, doc_len + 51, avgdl, df, n_docs, ["t"], params)

    assert s(tf + 1) > s(tf)
    # saturation: never more than (k1 + 1) * idf, however many occurrences
    assert s(tf) < (params.k1 + 1) * idf(n_docs, df["t"]) + 1e-9


@PROPERTY
@given(st.floats(0.1, 3.0), st.floats(0.05, 1.0), N_DOCS, st.integers(1, 20), st.integers(1, 200))
def test_longer_document_with_same_tf_scores_lower(
    k1: float, b: float, n_docs: int, tf: int, doc_len: int
) -> None:
    params = Bm25Params(k1=k1, b=b)
    short = bm25_score({"t": tf}, tf + doc_len, 50.0, {"t": 1}, n_docs, ["t"], params)
    long = bm25_score({"t": tf}, tf + doc_len + 10, 50.0, {"t": 1}, n_docs, ["t"], params)
    assert long < short


@PROPERTY
@given(N_DOCS, st.integers(1, 20), st.integers(1, 200))
def test_b_zero_ignores_length(n_docs: int, tf: int, doc_len: int) -> None:
    params = Bm25Params(b=0.0)
    short = bm25_score({"t": tf}, tf, 50.0, {"t": 1}, n_docs, ["t"], params)
    long = bm25_score({"t": tf}, tf + doc_len, 50.0, {"t": 1}, n_docs, ["t"], params)
    assert long == pytest.approx(short)


@PROPERTY
@given(PARAMS, N_DOCS, st.integers(1, 20), st.integers(1, 200))
def test_absent_term_contributes_nothing(params: Bm25Params, n_docs: int, tf: int, doc_len: int) -> None:
    freqs = {"present": tf}
    dfs = {"present": 1, "absent": 1}
    alone = bm25_score(freqs, tf + doc_len, 20.0, dfs, n_docs, ["present"], params)
    with_absent = bm25_score(freqs, tf + doc_len, 20.0, dfs, n_docs, ["present", "absent"], params)
    assert with_absent == alone


@PROPERTY
@given(PARAMS, st.integers(2, 10_000), st.data())
def test_rarer_terms_weigh_more(params: Bm25Params, n_docs: int, data: st.DataObject) -> None:
    rare = data.draw(st.integers(1, n_docs - 1))
    common = data.draw(st.integers(rare + 1, n_docs))
    assert idf(n_docs, rare) > idf(n_docs, common) > 0
    dfs = {"rare": rare, "common": common}
    freqs = {"rare": 1, "common": 1}
    s_rare = bm25_score(freqs, 10, 10.0, dfs, n_docs, ["rare"], params)
    s_common = bm25_score(freqs, 10, 10.0, dfs, n_docs, ["common"], params)
    assert s_rare > s_common


@PROPERTY
@given(
    PARAMS,
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 30)),
    st.lists(st.sampled_from("abcdefgh"), max_size=8),
    st.integers(0, 500),
)
def test_score_is_non_negative_and_finite(
    params: Bm25Params, freqs: dict[str, int], query: list[str], doc_len: int
) -> None:
    value = bm25_score(freqs, doc_len, 12.5, dict.fromkeys("abcdefgh", 3), 40, query, params)
    assert value >= 0
    assert math.isfinite(value)

"""Scoring postings: the same BM25 as the reference formula, and visibility at asOf."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.core.models.memories import CorpusStats, Posting
from kaibo_core.core.ranking import bm25_score
from kaibo_core.core.recall.scoring import RecallFilters, score_postings, term_weights, visible

NOW = 1_780_000_000_000

documents = st.lists(
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 5), min_size=1),
    min_size=1,
    max_size=8,
)


@given(documents=documents, extra_length=st.lists(st.integers(0, 30), min_size=8, max_size=8))
def test_given_postings_then_scores_equal_the_reference_bm25(
    documents: list[dict[str, int]], extra_length: list[int]
) -> None:
    lengths = [sum(doc.values()) + extra_length[i] for i, doc in enumerate(documents)]
    corpus = CorpusStats(docs=len(documents), terms=sum(lengths))
    doc_freqs = {t: sum(1 for doc in documents if t in doc) for t in "abcd"}
    postings = {
        term: [
            Posting(f"mem_{i}", doc[term], lengths[i], 0, None, "s", "episode", "provisional")
            for i, doc in enumerate(documents)
            if term in doc
        ]
        for term in "abcd"
    }
    query = ["a", "c", "d"]
    weights = term_weights({t: doc_freqs[t] for t in query}, corpus)
    candidates, _ = score_postings({t: postings[t] for t in query}, weights, corpus, RecallFilters(NOW))
    got = {c.memory_id: c.score for c in candidates}
    for i, doc in enumerate(documents):
        expected = bm25_score(doc, lengths[i], corpus.avg_doc_len, doc_freqs, corpus.docs, query)
        assert math.isclose(got.get(f"mem_{i}", 0.0), expected, rel_tol=1e-9, abs_tol=1e-12)
    assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)


def test_given_statuses_and_validity_then_visibility_follows_the_documented_rule() -> None:
    now = RecallFilters(NOW)
    audit = RecallFilters(NOW, include_superseded=True)
    assert visible("provisional", NOW - 1, None, "s", "episode", now)
    assert visible("active", NOW, None, "s", "fact", now)
    assert not visible("active", NOW + 1, None, "s", "fact", now)  # not yet valid
    assert not visible("superseded", NOW - 10, NOW - 1, "s", "fact", now)
    assert visible("superseded", NOW - 10, NOW + 1, "s", "fact", now)  # still valid at asOf
    assert visible("superseded", NOW - 10, NOW - 1, "s", "fact", audit)
    for hidden in ("replaced", "tombstoned", "purged"):
        assert not visible(hidden, NOW - 10, None, "s", "fact", audit)
    assert not visible("active", NOW - 1, None, "s", "fact", RecallFilters(NOW, streams=frozenset({"t"})))
    assert not visible("active", NOW - 1, None, "s", "fact", RecallFilters(NOW, types=frozenset({"task"})))


def test_given_postings_filtered_only_by_time_then_they_are_counted_for_the_abstain_reason() -> None:
    future = Posting("mem_f", 1, 3, NOW + 5, None, "s", "episode", "active")
    other_stream = Posting("mem_o", 1, 3, NOW + 5, None, "t", "episode", "active")
    filters = RecallFilters(NOW, streams=frozenset({"s"}))
    candidates, invalid = score_postings(
        {"a": [future, other_stream]}, {"a": 1.0}, CorpusStats(2, 6), filters
    )
    assert candidates == []
    assert invalid == 1


postings_strategy = st.builds(
    Posting,
    memory_id=st.sampled_from([f"mem_{n}" for n in range(6)]),
    tf=st.integers(1, 3),
    dl=st.integers(3, 20),
    valid_from_ms=st.sampled_from([NOW - 10, NOW, NOW + 10]),
    valid_to_ms=st.sampled_from([None, NOW - 5, NOW, NOW + 5]),
    stream=st.sampled_from(["s", "t"]),
    type=st.sampled_from(["episode", "fact"]),
    status=st.sampled_from(["provisional", "active", "superseded", "canceled", "replaced", "tombstoned"]),
)
filters_strategy = st.builds(
    RecallFilters,
    as_of_ms=st.just(NOW),
    streams=st.none() | st.just(frozenset({"s"})),
    types=st.none() | st.just(frozenset({"fact"})),
    include_superseded=st.booleans(),
)


@given(
    postings=st.lists(postings_strategy, max_size=8, unique_by=lambda p: p.memory_id),
    filters=filters_strategy,
)
def test_given_any_postings_then_scoring_keeps_exactly_the_visible_ones(
    postings: list[Posting], filters: RecallFilters
) -> None:
    # score_postings inlines ``visible`` for speed: the two must never disagree.
    candidates, _ = score_postings({"a": postings}, {"a": 1.0}, CorpusStats(10, 100), filters)
    expected = {
        p.memory_id
        for p in postings
        if visible(p.status, p.valid_from_ms, p.valid_to_ms, p.stream, p.type, filters)
    }
    assert {c.memory_id for c in candidates} == expected

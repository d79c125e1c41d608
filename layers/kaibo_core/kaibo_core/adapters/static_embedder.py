"""Recall by meaning's model: a static (token-embedding) model read from the ``wordllama`` wheel.

WordLlama's ``l2_supercat`` model (MIT; ``wordllama==0.4.0.post1`` on PyPI) is 32,000 token vectors
of 256 dimensions (float16, 16 MB) for the LLaMA-2 tokenizer, trained so that the mean of a text's
token vectors embeds the text. No transformer runs: a text costs one tokenizer call and a mean, a
few microseconds, on Lambda's CPU as here. Only the package's two data files are read (the
safetensors weights and the tokenizer's JSON); its own loader is never imported, because it
fetches from a model hub whatever it does not find (the functions make no network call but AWS's).
The choice and its figures: docs/recall.md, "Recall by meaning".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kaibo_core.adapters import model_files

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

#: Names the model and the pooling; a posting carries it, so that vectors of two models never meet.
MODEL_VERSION: Final = "wl256"
DIMENSIONS: Final = 256
REQUIREMENT: Final = "wordllama==0.4.0.post1"
WEIGHTS_FILE: Final = "weights/l2_supercat_256.safetensors"
TOKENIZER_FILE: Final = "tokenizers/l2_supercat_tokenizer_config.json"
TENSOR_NAME: Final = "embedding.weight"
#: Texts longer than this many tokens are embedded from their first tokens (a memory is short).
MAX_TOKENS: Final = 512


def package_folder() -> Path:
    return model_files.package_folder("wordllama", REQUIREMENT)


class StaticEmbedder:
    """Unit-length text vectors: the mean of the text's token vectors, normalised."""

    version: str = MODEL_VERSION
    dimensions: int = DIMENSIONS

    def __init__(self, weights: NDArray[np.generic], tokenizer: Tokenizer) -> None:
        self._weights = weights
        self._tokenizer = tokenizer

    @classmethod
    def from_package(cls) -> StaticEmbedder:
        folder = package_folder()
        weights = model_files.load_tensors(folder / WEIGHTS_FILE)[TENSOR_NAME]
        return cls(weights, model_files.load_tokenizer(folder / TOKENIZER_FILE, MAX_TOKENS))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, float32, unit length; a text with no token gives a row of zeros."""
        import numpy as np  # noqa: PLC0415

        rows = np.zeros((len(texts), self._weights.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            if encoding.ids:
                mean = self._weights[encoding.ids].astype(np.float32).mean(axis=0)
                norm = float(np.linalg.norm(mean))
                if norm > 0.0:
                    rows[row] = mean / norm
        return rows

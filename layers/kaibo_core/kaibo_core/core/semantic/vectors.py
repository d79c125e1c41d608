"""A memory's vector as a posting carries it: int8 codes with one scale, in base64.

A 256-dimension unit vector becomes 256 bytes (344 base64 characters) instead of 1 KB of float32.
Each component moves by at most half a code step (``scale / 254``); on the models' vectors the
cosine computed from the codes stays within 0.01 of the exact one (tests/integration/
test_semantic_models.py), well inside the gaps that rank memories. Strings, not binary attributes,
because recall's direct read path keeps
only answers without binary values (docs/recall.md).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CODE_LEVELS: Final = 127
SEPARATOR: Final = ":"


def encode_vector(vector: NDArray[np.float32]) -> str:
    """``<scale>:<base64 int8 codes>``; the scale is the largest absolute component."""
    import numpy as np  # noqa: PLC0415

    scale = float(np.abs(vector).max()) if vector.size else 0.0
    if scale == 0.0:
        codes = np.zeros(vector.shape, dtype=np.int8)
    else:
        codes = np.rint(vector / scale * CODE_LEVELS).astype(np.int8)
    return f"{scale:.6g}{SEPARATOR}{base64.b64encode(codes.tobytes()).decode('ascii')}"


def decode_vector(text: str) -> NDArray[np.float32]:
    """The vector an ``encode_vector`` string holds (to within the codes' rounding)."""
    import numpy as np  # noqa: PLC0415

    scale, _, codes = text.partition(SEPARATOR)
    raw = np.frombuffer(base64.b64decode(codes), dtype=np.int8).astype(np.float32)
    return raw * (float(scale) / CODE_LEVELS)


def decode_vectors(texts: Sequence[str]) -> NDArray[np.float32]:
    """One row per ``encode_vector`` string, all of one model (one length): what ``decode_vector``
    gives each, in one array built at once (recall decodes hundreds of postings per question)."""
    import numpy as np  # noqa: PLC0415

    scales = np.empty(len(texts), dtype=np.float64)
    chunks: list[bytes] = []
    for row, text in enumerate(texts):
        scale, _, codes = text.partition(SEPARATOR)
        scales[row] = float(scale)
        chunks.append(binascii.a2b_base64(codes))
    if not chunks:
        return np.zeros((0, 0), dtype=np.float32)
    width = len(chunks[0])
    if any(len(chunk) != width for chunk in chunks):
        raise ValueError("vectors of different lengths: they come from different models")
    raw = np.frombuffer(b"".join(chunks), dtype=np.int8).reshape(len(chunks), width)
    return raw.astype(np.float32) * (scales / CODE_LEVELS).astype(np.float32)[:, None]

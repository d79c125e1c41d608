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

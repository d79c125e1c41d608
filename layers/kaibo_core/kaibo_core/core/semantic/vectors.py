"""A memory's vector as its item and its cell postings carry it: small codes with one scale, in base64.

Two codes, both ``[<form>:]<scale>:<base64>``, the scale being the largest absolute component:

- **int8** (the memory item's ``sem``): 127 levels a side, one byte a component; a 384-dimension
  vector is 512 base64 characters instead of 1.5 KB of float32. Recall's fused score uses it.
- **4-bit** (``q4:``, a cell posting's ``v``): 7 levels a side, two components a byte, half the
  characters. A recall reads a few hundred cell postings, so the posting's code is most of what it
  reads by meaning (its read units and its JSON); it only chooses which memories are fetched, and
  each fetched memory's cosine is then computed from its item's int8 code.

Each component moves by at most half a code step (``scale / 254``, ``scale / 14``). Strings, not
binary attributes, because recall's direct read path keeps only answers without binary values
(docs/recall.md). Postings written before the 4-bit code carry int8 codes; both decode.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CODE_LEVELS: Final = 127
NIBBLE_LEVELS: Final = 7
SEPARATOR: Final = ":"
NIBBLE_FORM: Final = "q4" + SEPARATOR


def encode_vector(vector: NDArray[np.float32]) -> str:
    """The int8 code: ``<scale>:<base64 int8 codes>``."""
    import numpy as np  # noqa: PLC0415

    scale = _scale(vector)
    codes = np.zeros(vector.shape, dtype=np.int8) if scale == 0.0 else np.rint(vector / scale * CODE_LEVELS)
    return f"{scale:.6g}{SEPARATOR}{base64.b64encode(codes.astype(np.int8).tobytes()).decode('ascii')}"


def encode_nibbles(vector: NDArray[np.float32]) -> str:
    """The 4-bit code: ``q4:<scale>:<base64>``, component ``2i`` in byte ``i``'s high half. Even
    dimensions only (both models' are)."""
    import numpy as np  # noqa: PLC0415

    if vector.shape[-1] % 2:
        raise ValueError("a 4-bit code needs an even number of dimensions")
    scale = _scale(vector)
    levels = np.zeros(vector.shape) if scale == 0.0 else np.rint(vector / scale * NIBBLE_LEVELS)
    halves = (levels + NIBBLE_LEVELS + 1).astype(np.uint8)  # 1..15; 8 is zero
    packed = (halves[0::2] << 4) | halves[1::2]
    return f"{NIBBLE_FORM}{scale:.6g}{SEPARATOR}{base64.b64encode(packed.tobytes()).decode('ascii')}"


@lru_cache(maxsize=64)
def posting_code(item_code: str) -> str:
    """What a cell posting carries for a memory whose item holds ``item_code`` (a memory is posted
    under several cells: its code is made once)."""
    return encode_nibbles(decode_vector(item_code))


def decode_vector(text: str) -> NDArray[np.float32]:
    """The vector an ``encode_vector`` or ``encode_nibbles`` string holds (to within its rounding)."""
    row: NDArray[np.float32] = decode_vectors([text])[0]
    return row


def decode_vectors(texts: Sequence[str]) -> NDArray[np.float32]:
    """One row per code, all of one model (one dimension), in one array built at once (recall
    decodes hundreds of postings per question); int8 and 4-bit codes may be mixed."""
    import numpy as np  # noqa: PLC0415

    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    scales = np.empty(len(texts), dtype=np.float64)
    wide: list[int] = []
    narrow: list[int] = []
    chunks: list[bytes] = []
    for row, text in enumerate(texts):
        nibbles = text.startswith(NIBBLE_FORM)
        scale, _, codes = text[len(NIBBLE_FORM) if nibbles else 0 :].partition(SEPARATOR)
        scales[row] = float(scale)
        (narrow if nibbles else wide).append(row)
        chunks.append(binascii.a2b_base64(codes))
    widths = {len(chunks[row]) for row in wide} | {2 * len(chunks[row]) for row in narrow}
    if len(widths) != 1:
        raise ValueError("vectors of different lengths: they come from different models")
    levels = np.empty((len(texts), widths.pop()), dtype=np.float32)
    if wide:
        raw = np.frombuffer(b"".join(chunks[row] for row in wide), dtype=np.int8)
        levels[wide] = raw.reshape(len(wide), -1)
        scales[wide] /= CODE_LEVELS
    if narrow:
        packed = np.frombuffer(b"".join(chunks[row] for row in narrow), dtype=np.uint8).reshape(
            len(narrow), -1
        )
        halves = np.empty((len(narrow), packed.shape[1] * 2), dtype=np.int8)
        halves[:, 0::2] = packed >> 4
        halves[:, 1::2] = packed & 0x0F
        levels[narrow] = halves - (NIBBLE_LEVELS + 1)
        scales[narrow] /= NIBBLE_LEVELS
    return levels * scales.astype(np.float32)[:, None]


def _scale(vector: NDArray[np.float32]) -> float:
    import numpy as np  # noqa: PLC0415

    return float(np.abs(vector).max()) if vector.size else 0.0

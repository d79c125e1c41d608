"""The inverted file's cells: fixed centroids, trained once offline, shipped with the code.

A memory is posted under its ``n`` nearest cells; a question reads its ``n`` nearest cells'
postings (IVF). The centroids are unit vectors of the model's space (cosine = dot product), so a
cell is named by its row number, and a set of centroids by its ``version``: a posting's key
carries both, so that postings of another model or another training never mix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Cells:
    version: str
    centroids: NDArray[np.float32]  # (cells, dimensions), unit rows

    @property
    def count(self) -> int:
        return int(self.centroids.shape[0])

    def nearest(self, vector: NDArray[np.float32], n: int) -> list[tuple[int, float]]:
        """The ``n`` cells nearest ``vector`` (cell, cosine), nearest first; none for a zero vector."""
        import numpy as np  # noqa: PLC0415

        if n <= 0 or not np.any(vector):
            return []
        similarity = self.centroids @ vector
        n = min(n, self.count)
        top = np.argpartition(-similarity, n - 1)[:n]
        ordered = sorted(top.tolist(), key=lambda cell: (-float(similarity[cell]), cell))
        return [(cell, float(similarity[cell])) for cell in ordered]


def cells_file_name(model_version: str, count: int) -> str:
    return f"semantic_cells_{model_version}_c{count}.npy"

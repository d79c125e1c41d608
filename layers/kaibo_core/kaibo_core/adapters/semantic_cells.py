"""The trained cells shipped with the code (``kaibo_core/data``), loaded once per container."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from kaibo_core.core.semantic.cells import Cells, cells_file_name

#: The cell set recall uses today (``tools/train_semantic_cells.py --cells 256``).
DEFAULT_CELLS: Final = 256


@functools.cache
def load_cells(model_version: str, count: int = DEFAULT_CELLS) -> Cells:
    import numpy as np  # noqa: PLC0415 - only a function that embeds pays for numpy

    name = cells_file_name(model_version, count)
    with resources.files("kaibo_core.data").joinpath(name).open("rb") as handle:
        centroids = np.load(handle).astype(np.float32)
    return Cells(version=f"{model_version}c{count}", centroids=centroids)

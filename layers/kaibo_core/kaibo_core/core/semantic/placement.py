"""A memory's place in the inverted file, and a question's probes: cells as terms of the term index.

A memory is posted under its ``MEMORY_CELLS`` nearest cells, each a pseudo-term ``~<version>.<cell>``
of the same term index, so that everything that moves a memory's postings (supersede, forget,
purge) moves these too. ``analyze`` never makes a term with ``~``, so a cell never meets a word.
The posting's impact orders a cell's postings nearest its centroid first; the posting carries the
memory's vector, from which recall computes the cosine without reading the memory item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kaibo_core.core.models.memories import SemanticPlacement
from kaibo_core.core.semantic.vectors import encode_vector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaibo_core.core.semantic.cells import Cells

#: Cells a memory is posted under (measured: bench/semantic_model.py).
MEMORY_CELLS: Final = 2
CELL_TERM_PREFIX: Final = "~"
#: The impact of a cell posting: its cosine to the centroid, scaled like a term's impact.
CELL_IMPACT_SCALE: Final = 10_000
_PLACEMENT_SEPARATOR: Final = "|"


def cell_term(version: str, cell: int) -> str:
    return f"{CELL_TERM_PREFIX}{version}.{cell}"


def is_cell_term(term: str) -> bool:
    return term.startswith(CELL_TERM_PREFIX)


def place(vector: NDArray[np.float32], cells: Cells, count: int = MEMORY_CELLS) -> SemanticPlacement:
    """The placement of a memory whose text has ``vector`` (a zero vector: no cell)."""
    nearest = cells.nearest(vector, count)
    return SemanticPlacement(
        version=cells.version,
        cells=tuple((cell, round(max(0.0, cosine) * CELL_IMPACT_SCALE)) for cell, cosine in nearest),
        vector=encode_vector(vector),
    )


def probe_terms(vector: NDArray[np.float32], cells: Cells, probes: int) -> list[str]:
    """The cell terms a question with ``vector`` reads, nearest first."""
    return [cell_term(cells.version, cell) for cell, _ in cells.nearest(vector, probes)]


def encode_placement(placement: SemanticPlacement) -> str:
    """``<version>|<cell>:<impact>,…|<vector>``: one string attribute of the memory item."""
    cells = ",".join(f"{cell}:{impact}" for cell, impact in placement.cells)
    return _PLACEMENT_SEPARATOR.join((placement.version, cells, placement.vector))


def decode_placement(text: str) -> SemanticPlacement:
    version, cells, vector = text.split(_PLACEMENT_SEPARATOR, 2)
    pairs = [pair.split(":", 1) for pair in cells.split(",") if pair]
    return SemanticPlacement(version, tuple((int(c), int(i)) for c, i in pairs), vector)

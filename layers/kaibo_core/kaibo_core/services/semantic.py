"""Recall by meaning's model at work: memories placed when written, questions embedded when asked.

One object per container, shared by remember, structuring and recall: the model (an ``Embedder``)
and the cells trained for it. Placing a memory embeds its text once; every later move of its
postings reads the placement from the memory item (kaibo_core.core.semantic.placement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kaibo_core.core.semantic.placement import place, probe_terms
from kaibo_core.core.semantic.scoring import SemanticParams
from kaibo_core.core.semantic.vectors import decode_vector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaibo_core.core.models.memories import MemoryRecord
    from kaibo_core.core.semantic.cells import Cells
    from kaibo_core.core.structuring.drafts import CandidateMemory
    from kaibo_core.ports import Embedder


#: Statements whose vectors ``SemanticChannel.meaning`` keeps (an event's, with room to spare).
RECENT_STATEMENTS = 64


@dataclass(frozen=True)
class SemanticChannel:
    embedder: Embedder
    cells: Cells
    params: SemanticParams = field(default_factory=SemanticParams)
    #: ``meaning``'s recent statements' vectors: each is compared with several candidates.
    _recent: dict[str, NDArray[np.float32]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def version(self) -> str:
        return self.cells.version

    def place(self, memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """``memories``, each with text and no placement of this model placed (one model call)."""
        todo = [
            position
            for position, memory in enumerate(memories)
            if memory.content is not None
            and (memory.semantic is None or memory.semantic.version != self.version)
        ]
        placed = list(memories)
        if not todo:
            return placed
        vectors = self.embedder.embed([str(memories[position].content) for position in todo])
        for row, position in enumerate(todo):
            placed[position] = replace(memories[position], semantic=place(vectors[row], self.cells))
        return placed

    def question(self, text: str) -> tuple[NDArray[np.float32], list[str]]:
        """The question's vector and the cell terms it reads."""
        vector = self.embedder.embed([text])[0]
        return vector, probe_terms(vector, self.cells, self.params.probes)

    def meaning(self, text: str, candidate: CandidateMemory) -> float | None:
        """The cosine of ``text`` (a statement being structured) to a candidate memory, from the
        candidate's placement; None when it has none of this model. The structurer asks for one
        statement against several candidates: its vector is embedded once."""
        if candidate.vector is None:
            return None
        vector = self._recent.get(text)
        if vector is None:
            if len(self._recent) >= RECENT_STATEMENTS:
                self._recent.clear()
            vector = self._recent[text] = self.embedder.embed([text])[0]
        return float(decode_vector(candidate.vector) @ vector)

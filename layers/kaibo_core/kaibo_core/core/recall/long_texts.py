"""The terms of a long text, analyzed only where a question looks (docs/recall.md, "Long texts").

Recall rescores each candidate from its memory item: BM25 needs the text's count of each question
term (and its length, which the item records), near-duplicate detection whether one text's terms
hold another's. A file remembered as one memory is hundreds of KB, and analyzing all of it took
~240 ms per memory and recall. ``ProbedText`` gives the same answers as ``analyze(text)`` while
analyzing only the pieces of the text that can hold the term asked about:

- The text is cut into chunks at whitespace. A token of ``analyze`` never spans whitespace (a span
  is word characters and connectors) and NFKC never joins characters across it, so the text's
  tokens are its chunks' tokens, in order (``token_terms``).
- A chunk whose terms include a term holds the term's probe once folded (``term_probe``, proved in
  tests/unit/test_recall_packing.py): only the chunks holding it are analyzed for the term.
- Dates written out in English may span chunks (``8 May\\n2023``), and a year in other digits
  (``٢٠٢٣``) leaves no probe: their ISO terms are read from the whole text, once, and only when a
  term of their shape is asked about.

Pure: standard library and the core's text pipeline.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from itertools import accumulate, chain
from typing import Any, Final, TypeVar

from kaibo_core.core.recall.packing import probed_form, term_probe
from kaibo_core.core.text import may_be_written_date, token_terms, written_date_terms

#: A chunk is cut at the first whitespace after this many characters: small enough that a term's
#: few occurrences cost little to analyze, large enough that a text has few chunks to keep.
CHUNK_CHARS: Final = 512
#: A term set asked about more terms than this is built whole: each test searches the whole text
#: for a probe (~50 µs in 250 KB), and comparing two long texts asks about every term of one.
MAX_PROBED_LOOKUPS: Final = 256
_WHITESPACE = re.compile(r"\s")
_T = TypeVar("_T")


def _chunks(text: str, chunk_chars: int) -> list[str]:
    """``text`` cut at one whitespace character after every ``chunk_chars`` characters or more."""
    chunks: list[str] = []
    start = 0
    while start < len(text):
        cut = _WHITESPACE.search(text, start + chunk_chars)
        if cut is None:
            chunks.append(text[start:])
            break
        chunks.append(text[start : cut.start()])
        start = cut.end()
    return chunks


class ProbedText:
    """``analyze(text)``, read chunk by chunk where asked: ``count(term)`` is its count of
    ``term``, ``holds(term)`` whether it has it, ``terms()`` all of it in order.

    ``analyzed_chars`` counts the characters analyzed so far (each chunk at most once)."""

    def __init__(self, text: str, chunk_chars: int = CHUNK_CHARS) -> None:
        self._text = text
        self._chunks = _chunks(text, chunk_chars)
        forms = [probed_form(chunk) for chunk in self._chunks]
        # One string to search, the chunks' forms joined by a space: no probe holds one, so a
        # probe found is found inside one chunk's form, the one starting last before it.
        self._probed = " ".join(forms)
        self._starts = list(accumulate((len(form) + 1 for form in forms[:-1]), initial=0))
        self._analyzed: dict[int, list[str]] = {}
        self._written: list[str] | None = None
        self.analyzed_chars = 0

    def count(self, term: str) -> int:
        tokens = sum(self._chunk_terms(index).count(term) for index in self._chunks_probed(term))
        return tokens + (self._written_dates().count(term) if may_be_written_date(term) else 0)

    def holds(self, term: str) -> bool:
        if any(term in self._chunk_terms(index) for index in self._chunks_probed(term)):
            return True
        return may_be_written_date(term) and term in self._written_dates()

    def terms(self) -> Iterator[str]:
        """``analyze(text)``: the chunks' tokens' terms, then the written dates' ISO terms."""
        for index in range(len(self._chunks)):
            yield from self._chunk_terms(index)
        yield from self._written_dates()

    def _chunks_probed(self, term: str) -> Iterator[int]:
        """The chunks whose folded form holds ``term``'s probe (every chunk for a term without one)."""
        probe = term_probe(term)
        if not probe:
            yield from range(len(self._chunks))
            return
        at = self._probed.find(probe)
        while at != -1:
            index = bisect_right(self._starts, at) - 1
            yield index
            if index + 1 == len(self._starts):
                return
            at = self._probed.find(probe, self._starts[index + 1])

    def _chunk_terms(self, index: int) -> list[str]:
        terms = self._analyzed.get(index)
        if terms is None:
            chunk = self._chunks[index]
            terms = self._analyzed[index] = token_terms(chunk)
            self.analyzed_chars += len(chunk)
        return terms

    def _written_dates(self) -> list[str]:
        if self._written is None:
            self._written = written_date_terms(unicodedata.normalize("NFKC", self._text))
            self.analyzed_chars += len(self._text)
        return self._written


class TermSet(AbstractSet[str]):
    """``frozenset(analyze(text)) | extra``, answered from a ``ProbedText``: a membership test
    analyzes only the chunks that may hold the term; ``a <= b`` reads ``a``'s terms chunk by chunk
    and stops at the first one ``b`` lacks; ``a >= b`` and ``a & b`` test ``b``'s terms in ``a``.
    What needs every term (iterating, ``len``, ``-``, ``|``), or more than ``MAX_PROBED_LOOKUPS``
    tests, analyzes the whole text, once (the chunks analyzed already are not analyzed again)."""

    __slots__ = ("_all", "_extra", "_lookups", "_text")

    def __init__(self, text: ProbedText, extra: Iterable[str] = ()) -> None:
        self._text = text
        self._extra = frozenset(extra)
        self._all: frozenset[str] | None = None
        self._lookups = 0

    def with_terms(self, extra: Iterable[str]) -> TermSet:
        """This set with ``extra`` added (the same text, analyzed once for both)."""
        return TermSet(self._text, self._extra.union(extra))

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        if term in self._extra:
            return True
        self._lookups += 1
        if self._all is not None or self._lookups > MAX_PROBED_LOOKUPS:
            return term in self._every_term()
        return self._text.holds(term)

    def __iter__(self) -> Iterator[str]:
        return iter(self._every_term())

    def __len__(self) -> int:
        return len(self._every_term())

    def __bool__(self) -> bool:
        return bool(self._extra) or next(self._text.terms(), None) is not None

    def __le__(self, other: AbstractSet[Any]) -> bool:
        if not isinstance(other, AbstractSet):
            return NotImplemented
        if self._all is not None:
            return all(term in other for term in self._all)
        seen: set[str] = set()
        for term in chain(self._extra, self._text.terms()):
            if term not in seen:
                if term not in other:
                    return False
                seen.add(term)
        return True

    def __ge__(self, other: AbstractSet[Any]) -> bool:
        if not isinstance(other, AbstractSet):
            return NotImplemented
        return all(term in self for term in other)

    @classmethod
    def _from_iterable(cls, terms: Iterable[_T]) -> AbstractSet[_T]:
        """What the set operations return (``&``, ``-``, ``|``): a plain frozenset."""
        return frozenset(terms)

    def _every_term(self) -> frozenset[str]:
        if self._all is None:
            self._all = self._extra.union(self._text.terms())
        return self._all

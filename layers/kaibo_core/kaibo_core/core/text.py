"""The one text pipeline recall uses, at index time and at query time.

``docs/recall.md`` ("The text pipeline") specifies every rule; this module is the
reference implementation. It is pure: standard library plus ``snowballstemmer``.

    text --NFKC--> spans (CJK runs | compounds) --> tokens (whole + parts)
         --casefold--> stopwords dropped from words --> Snowball English stems
         --> terms longer than MAX_TERM_LENGTH dropped

``analyze`` gives the terms of a text in order, with repeats (what BM25's term
frequencies count); ``query_terms`` gives the distinct terms of a question.
Index entries store ``PIPELINE_VERSION`` so that a change here can be detected.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Protocol

#: Stored with index entries; bump it whenever any rule below changes a term.
PIPELINE_VERSION = 2

#: Terms longer than this many characters (after case folding and stemming) are
#: dropped, not truncated: such tokens are hashes, blobs or long URLs, and a
#: truncated prefix would only make false matches. The parts of a dropped compound
#: are still kept. 64 characters are at most 256 UTF-8 bytes, far below
#: DynamoDB's key limits (2048 bytes for a partition key, 1024 for a sort key).
MAX_TERM_LENGTH = 64

#: A modest English stopword list: articles, pronouns, auxiliaries, common
#: prepositions and conjunctions, and the interrogatives (a memory rarely contains
#: "when"; the question word describes the answer, not its content). Deliberately
#: NOT stopwords: negations ("not", "no", "never", "nor", "none", "nothing",
#: "without", and contractions such as "don't" -> "dont"), because "no longer"
#: and "not Tuesday" change what a memory says; temporal and ordering words
#: ("before", "after", "since", "until", "again", "first", "last", "more",
#: "most", "same", "other"), because questions turn on them. Matched against the
#: case-folded token with apostrophes removed, before stemming.
_STOPWORD_TEXT = """
a an the and or but if then else so than too very just also only
of at by for with about to from in on into onto up down out off over as
is am are was were be been being have has had having do does did doing
will would shall should can could may might must
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
im ive youre youve youll youd hes shes weve theyre theyve thats theres
this that these those there here
what which who whom whose when where why how
such some any each all both own
s t d ll m re ve
http https www
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

#: Characters of scripts written without spaces between words (CJK ideographs,
#: kana) and Hangul syllables. A run of them becomes overlapping bigrams.
_CJK_CHARS = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
)
#: A word character that is not CJK: Python's Unicode ``\w`` (letters, digits,
#: underscore) minus the CJK ranges above.
_W = rf"[^\W{_CJK_CHARS}]"
#: Connectors join word runs into one compound: ``foo-bar``, ``v1.2.3``,
#: ``a@b.com``, ``https://x/y``, ``10:30``, ``don't``, and a comma only between
#: digits (``1,000``).
_CONNECTOR = r"(?:[-.@/:+'’#~&=?%]+|(?<=\d),(?=\d))"
_SPAN = re.compile(rf"(?P<cjk>[{_CJK_CHARS}]+)|(?P<compound>{_W}+(?:{_CONNECTOR}{_W}+)*)")
_APOSTROPHE = re.compile(r"(?<=\w)['’](?=\w)")
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_ISO_DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
_RUN = re.compile(rf"{_W}+")


@dataclass(frozen=True, slots=True)
class Token:
    """A token before stopwords and stemming.

    ``word`` tokens follow the word rule (stopword check, then a stem when
    alphabetic); the others (whole compounds, numbers, dates, CJK bigrams) are
    kept verbatim.
    """

    text: str
    word: bool


def fold(text: str) -> str:
    """Case folding to a fixed point of ``NFKC(casefold(.))``."""
    for _ in range(4):
        folded = unicodedata.normalize("NFKC", text.casefold())
        if folded == text:
            break
        text = folded
    return text


def _case_parts(run: str) -> list[str]:
    """Split one run (no underscores) at case boundaries: ``CamelCase`` -> Camel, Case;
    ``HTTPServer`` -> HTTP, Server; ``iPhone`` -> i, Phone. Digits and uncased
    characters never start a part, so ``v1``, ``md5`` and ``01ABC`` stay whole."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(run)):
        prev, cur = run[i - 1], run[i]
        nxt = run[i + 1] if i + 1 < len(run) else ""
        if cur.isupper() and (prev.islower() or (prev.isupper() and nxt.islower())):
            parts.append(run[start:i])
            start = i
    parts.append(run[start:])
    return parts


def _run_tokens(run: str) -> Iterator[Token]:
    """One ``\\w`` run: ``snake_case`` is kept whole (verbatim) plus its parts;
    a run without underscores is a word, plus its case parts when it has any."""
    pieces = [piece for piece in run.split("_") if piece]
    if "_" in run and pieces:
        yield Token(run, word=False)
    for piece in pieces:
        yield Token(piece, word=True)
        parts = _case_parts(piece)
        if len(parts) > 1:
            for part in parts:
                yield Token(part, word=True)


def _compound_tokens(compound: str) -> Iterator[Token]:
    compound = _APOSTROPHE.sub("", compound)
    if _NUMBER.fullmatch(compound):
        yield Token(compound.replace(",", ""), word=False)
        return
    if _ISO_DATE.fullmatch(compound):
        yield Token(compound, word=False)
        return
    runs = _RUN.findall(compound)
    if len(runs) == 1:  # no connector left (``don't`` -> ``dont``)
        yield from _run_tokens(compound)
        return
    yield Token(compound, word=False)
    # Parts: ISO dates inside the compound stay one part; everything else splits
    # into runs at the connectors.
    position = 0
    for date in _ISO_DATE.finditer(compound):
        for run in _RUN.findall(compound[position : date.start()]):
            yield from _run_tokens(run)
        yield Token(date.group(), word=False)
        position = date.end()
    for run in _RUN.findall(compound[position:]):
        yield from _run_tokens(run)


def _cjk_tokens(run: str) -> Iterator[Token]:
    if len(run) == 1:
        yield Token(run, word=False)
        return
    for i in range(len(run) - 1):
        yield Token(run[i : i + 2], word=False)


def _plain_word(span: str) -> bool:
    """An ASCII word of letters, lower case after its first letter (``release``, ``Alice``):
    the common case, whose only token is the word itself, lower-cased (tested against the
    general rule)."""
    return span.isascii() and span.isalpha() and (span.islower() or span[1:].islower())


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` in order, case-folded, before stopwords and stems."""
    normalized = unicodedata.normalize("NFKC", text)
    tokens: list[Token] = []
    for span in _SPAN.finditer(normalized):
        cjk = span.group("cjk")
        if cjk is not None:
            tokens.extend(Token(fold(token.text), token.word) for token in _cjk_tokens(cjk))
            continue
        compound = span.group("compound")
        if _plain_word(compound):  # fast path: the same token the general rule gives
            tokens.append(Token(compound.lower(), word=True))
            continue
        tokens.extend(Token(fold(token.text), token.word) for token in _compound_tokens(compound))
    return tokens


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...  # noqa: N802 - snowballstemmer's name


#: Where snowballstemmer's English stemmer is loaded from, on its own (see ``_stemmer``).
_ENGLISH_ONLY: Final = "kaibo_core._snowball_english"


@lru_cache(maxsize=1)
def _stemmer() -> _Stemmer:
    """snowballstemmer's English stemmer (the same class ``snowballstemmer.stemmer("english")``
    gives without PyStemmer), loaded without the package's ``__init__``: that imports the
    stemmers of all 30-odd languages, ~50 ms of every cold start for the one we use. The
    package's modules are loaded under a private package name pointing at its directory, so
    ``snowballstemmer`` itself stays untouched for anyone else (tested equal on a word list)."""
    spec = importlib.util.find_spec("snowballstemmer")  # finds the package, does not run it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("snowballstemmer is not installed")
    package = sys.modules.get(_ENGLISH_ONLY)
    if package is None:
        package = types.ModuleType(_ENGLISH_ONLY)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_ENGLISH_ONLY] = package
    english = importlib.import_module(_ENGLISH_ONLY + ".english_stemmer")
    stemmer: _Stemmer = english.EnglishStemmer()
    return stemmer


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of an alphabetic, case-folded word; other tokens as they are."""
    if not word.isalpha():
        return word
    stemmed: str = _stemmer().stemWord(word)
    return stemmed or word


def _term(token: Token) -> str | None:
    term = token.text
    if token.word:
        if term in STOPWORDS:
            return None
        term = stem(term)
    if not term or len(term) > MAX_TERM_LENGTH:
        return None
    return term


_MONTH_NUMBERS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
#: Month names by number (index 0 unused).
_MONTH_NAMES = (
    "",
    *(name for name, number in _MONTH_NUMBERS.items() if len(name) > 4 or name in {"may", "june", "july"}),
)
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_WRITTEN_DATES = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}(?:,\s*|\s+){_YEAR}\b", re.IGNORECASE),
)


def written_date_terms(text: str) -> list[str]:
    """ISO terms for dates written out in English: ``8 May, 2023``, ``May 8th 2023`` ->
    ``2023-05-08`` and ``2023-05``; ``July 2023`` -> ``2023-07``. Each date once."""
    found: dict[tuple[int, int], str] = {}
    for pattern in _WRITTEN_DATES:
        for match in pattern.finditer(text):
            if match.start() in {start for start, _ in found}:
                continue
            month = _MONTH_NUMBERS[match.group("month").casefold()]
            year = int(match.group("year"))
            day = int(match.groupdict().get("day") or 0)
            if not 1000 <= year <= 2999 or day > 31:
                continue
            overlapping = [span for span in found if span[0] <= match.start() < span[1]]
            if overlapping:
                continue
            found[(match.start(), match.end())] = f"{year:04d}-{month:02d}" + (f"-{day:02d}" if day else "")
    terms: list[str] = []
    for _, iso in sorted(found.items()):
        terms.extend((iso, iso[:7]) if len(iso) == 10 else (iso,))
    return terms


#: The shape of the ISO terms ``written_date_terms`` gives: only a term of this shape can be one.
_WRITTEN_DATE_TERM = re.compile(r"[0-9]{4}-[0-9]{2}(?:-[0-9]{2})?")


def may_be_written_date(term: str) -> bool:
    """Can ``written_date_terms`` give ``term``?"""
    return _WRITTEN_DATE_TERM.fullmatch(term) is not None


def time_terms(year: int, month: int, day: int) -> list[str]:
    """The terms a memory gets from the date it became valid (UTC): ``2023-05-08``,
    ``2023-05``, ``2023`` and the month's name through the pipeline (``juli``; ``may`` is a
    stopword)."""
    return [f"{year:04d}-{month:02d}-{day:02d}", f"{year:04d}-{month:02d}", f"{year:04d}"] + [
        term for token in tokenize(_MONTH_NAMES[month]) if (term := _term(token)) is not None
    ]


def token_terms(text: str) -> list[str]:
    """The terms of ``text``'s tokens in order, with repeats: ``analyze`` without the ISO terms
    of written dates."""
    terms: list[str] = []
    for token in tokenize(text):
        term = _term(token)
        if term is not None:
            terms.append(term)
    return terms


def analyze(text: str) -> list[str]:
    """The terms of ``text`` in order, with repeats: what the index counts. Dates written
    out in English add their ISO terms at the end."""
    terms = token_terms(text)
    terms.extend(written_date_terms(unicodedata.normalize("NFKC", text)))
    return terms


def query_terms(text: str) -> list[str]:
    """The distinct terms of a question, in first-seen order."""
    return list(dict.fromkeys(analyze(text)))

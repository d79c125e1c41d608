"""The one conservative token-counting rule: ``budget``, ``tokens`` and ``usedTokens``.

Recall promises ``usedTokens <= budget`` for the caller's model, whose tokenizer
we do not know. So the count is an upper estimate for the common byte-level BPE
tokenizers (OpenAI cl100k/o200k, Llama 3, Claude) on ordinary text in English and
other scripts, built as the larger of two bounds (``docs/recall.md``, "Counting
tokens")::

    count(text) = max(ceil((ascii_bytes + 2 * other_bytes) / 3),
                      letter_runs + sum(ceil(len(digit_run) / 3)) + symbols)

* ``ascii_bytes / 3``: English runs at about 4 to 4.5 characters a token, so a
  third of a byte each leaves 25-50 % headroom.
* ``2 * other_bytes / 3``: non-ASCII text is tokenized less efficiently: two
  tokens a CJK/Devanagari/Thai character (3 bytes), 4/3 a Cyrillic, Greek,
  Arabic or Hebrew letter (2 bytes), 8/3 an emoji (4 bytes).
* the pre-token bound: these tokenizers never merge across a letter/digit or
  letter/symbol boundary, and split digit runs into groups of at most 3, so
  every letter run, every 3 digits and every symbol (any non-space character
  that is neither a letter nor a digit, ``_`` included) costs at least one token.
  This covers short-word text, punctuation and hex/base64 identifiers, where
  bytes/3 alone would undercount.

Guarantees (tested): ``count("") == 0``; ``count`` is **subadditive**,
``count(a + b) <= count(a) + count(b)``, hence, with ``count(" ") == 1`` and
``count("\\n") == 1``, ``count(a + " " + b) <= count(a) + count(b) + 1``: packing may
add the counts of items and separators and never undercount the joined text. It
is also **monotone**: ``count(a) <= count(a + b)`` and ``count(b) <= count(a + b)``.
"""

from __future__ import annotations

import re

_LETTER_RUN = re.compile(r"[^\W\d_]+")
_DIGIT_RUN = re.compile(r"\d+")
_SYMBOL = re.compile(r"[^\w\s]|_")


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def count_tokens(text: str) -> int:
    """A conservative (upper) estimate of how many LLM tokens ``text`` takes."""
    if not text:
        return 0
    utf8_bytes = len(text.encode("utf-8", "surrogatepass"))
    ascii_chars = len(text.encode("ascii", "ignore"))
    byte_bound = _ceil_div(ascii_chars + 2 * (utf8_bytes - ascii_chars), 3)
    pretoken_bound = (
        len(_LETTER_RUN.findall(text))
        + sum(_ceil_div(len(run), 3) for run in _DIGIT_RUN.findall(text))
        + len(_SYMBOL.findall(text))
    )
    return max(byte_bound, pretoken_bound)

"""Can recall by meaning's model tell an update from a look-alike? (#15, session 24)

For every pair of events in a scenario set (the later one, the earlier one), the cosine of the two
texts' vectors (all-MiniLM-L6-v2, the model `KAIBO_SEMANTIC_MODEL=mini6` runs), with the texts as
written and with their values masked (dates, times, amounts, numbers, emails and URLs replaced by
one word, so that only the subject is compared). A pair is an *update* when the scenario links
its two events, directly or through a chain; a *look-alike* when it is a distractor scenario's
(written to share the update's words and kind of value: another person, product, scope); every
other pair is *unrelated* (the other events of an update scenario). Printed: the area under the
ROC curve of updates against look-alikes and against every other pair (0.5 is chance), and, at
each threshold, the share of updates and of look-alikes at or above it.

    PYTHONPATH=.:local .venv/bin/python bench/structuring_meaning.py            # the tuning sets
    PYTHONPATH=.:local .venv/bin/python bench/structuring_meaning.py --sets tuning_oneline,tuning_distractors2

Tuning sets only by default: the held-out sets are for the structurer's figures, never for
choosing how it reads (docs/performance-structuring.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DATA: Final = Path(__file__).resolve().parent.parent / "tests" / "data"
TUNING_SETS: Final = (
    "tuning_blind",
    "tuning_blind2",
    "tuning_oneline",
    "tuning_oneline2",
    "tuning_distractors",
    "tuning_distractors2",
    "tuning_distractors3",
)
THRESHOLDS: Final = (0.5, 0.6, 0.7, 0.8)
_MONTH: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: What a value looks like: an email, a URL, a month and day, a weekday, a number with its unit.
_VALUE: Final = re.compile(
    rf"\S+@\S+|https?://\S+|\b{_MONTH}\b\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+\d{{4}})?"
    r"|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|[$£€]?\d(?:[\d,.:/-]*\d)?(?:\s*(?:am|pm|k|m)\b|%)?",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Pair:
    later: str
    earlier: str
    kind: str
    """``update``, ``look-alike`` or ``unrelated``."""


def masked(text: str) -> str:
    return _VALUE.sub("something", text)


def pairs_of(scenario: dict[str, Any]) -> list[Pair]:
    """Every (later, earlier) pair of the scenario's events, each of its kind."""
    texts = {event["key"]: event["text"] for event in scenario["events"]}
    keys = list(texts)
    group = {key: key for key in keys}

    def root(key: str) -> str:
        while group[key] != key:
            key = group[key]
        return key

    for newer, older, *_ in scenario["expect"].get("links", []):
        group[root(newer)] = root(older)
    other = "look-alike" if scenario["category"].startswith("distractor") else "unrelated"
    return [
        Pair(
            texts[keys[later]],
            texts[keys[earlier]],
            "update" if root(keys[later]) == root(keys[earlier]) else other,
        )
        for earlier, later in itertools.combinations(range(len(keys)), 2)
    ]


def auc(positives: list[float], negatives: list[float]) -> float:
    """The probability that an update scores above another pair (ties count half)."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sets", default=",".join(TUNING_SETS), help="scenario sets (tests/data/structuring_<set>.json)"
    )
    args = parser.parse_args()

    from kaibo_core.adapters.minilm_embedder import MiniLmEmbedder  # noqa: PLC0415 (numpy: only here)

    pairs = [
        pair
        for name in args.sets.split(",")
        for scenario in json.loads((DATA / f"structuring_{name}.json").read_text())["scenarios"]
        for pair in pairs_of(scenario)
    ]
    texts = sorted({text for pair in pairs for text in (pair.later, pair.earlier)})
    embedder = MiniLmEmbedder.from_package()
    count = {kind: sum(pair.kind == kind for pair in pairs) for kind in ("update", "look-alike", "unrelated")}
    print(
        f"{len(pairs)} event pairs of {args.sets}: " + ", ".join(f"{n} {kind}" for kind, n in count.items())
    )
    print()
    print(
        "| texts | AUC vs look-alikes | AUC vs every other pair | "
        + " | ".join(f"updates / look-alikes ≥ {t}" for t in THRESHOLDS)
        + " |"
    )
    print("|---|---:|---:|" + "---:|" * len(THRESHOLDS))
    for label, form in (("as written", str), ("values masked", masked)):
        vectors = dict(zip(texts, embedder.embed([form(text) for text in texts]), strict=True))
        cosine = {
            kind: [float(vectors[p.later] @ vectors[p.earlier]) for p in pairs if p.kind == kind]
            for kind in count
        }
        updates, alike = cosine["update"], cosine["look-alike"]
        shares = " | ".join(f"{_share(updates, t):.2f} / {_share(alike, t):.2f}" for t in THRESHOLDS)
        versus_all = auc(updates, alike + cosine["unrelated"])
        print(f"| {label} | {auc(updates, alike):.3f} | {versus_all:.3f} | {shares} |")


def _share(cosines: list[float], threshold: float) -> float:
    return sum(cosine >= threshold for cosine in cosines) / len(cosines)


if __name__ == "__main__":
    main()

"""Updates in other words, read with recall by meaning's model (#15 item 2, with the model on):
two statements the model finds close share their topic whatever their words, so a value replaced
still retires the older one; every other guard of "restated with a new value" still holds.

The model is a fixed cosine here (``meaning``): these tests pin the rules, not the model
(tests/unit/test_semantic_channel.py covers the channel; docs/structuring-rules.md, "Restated with
a new value").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kaibo_core.core.semantic.vectors import encode_vector
from kaibo_core.core.structuring.drafts import CandidateMemory, EventToStructure, Meaning
from kaibo_core.core.structuring.restated import (
    SAME_MEANING_COSINE,
    read,
    restated_candidates,
    settle_openings,
    swapped_word,
)
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime.settings import Settings
from kaibo_core.runtime.wiring import configured_structurer
from kaibo_core.services.semantic import SemanticChannel
from tests.unit.test_semantic_channel import TopicEmbedder, channel

CLOSE = SAME_MEANING_COSINE + 0.05
FAR = SAME_MEANING_COSINE - 0.05
AT = "2026-06-03T09:00:00.000Z"
EARLIER = "2026-06-01T09:00:00.000Z"
OTHER_WORDS = (
    "The Q3 business review is on October 14.",
    "Finance walks the board through the quarter's numbers on October 21.",
)


def cosine(value: float | None) -> Meaning:
    return lambda _text, _candidate: value


def candidate(content: str, vector: str | None = "placed") -> CandidateMemory:
    return CandidateMemory("mem_old", "fact", content, EARLIER, "s", vector=vector)


def restated(old: str, new: str, meaning: Meaning | None) -> bool:
    return bool(restated_candidates(new, None, "s", [candidate(old)], meaning))


def test_given_an_update_in_other_words_then_only_a_close_meaning_links_it() -> None:
    old, new = OTHER_WORDS
    assert not restated(old, new, None)  # words alone: too few shared
    assert not restated(old, new, cosine(FAR))
    assert not restated(old, new, cosine(None))  # the candidate has no vector of this model
    assert restated(old, new, cosine(CLOSE))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The release target is July 13.", "Move the release party to July 20."),  # another thing
        ("Ana's email is ana@acme.example.", "Ben's email is ben@acme.example."),  # two values changed
        ("Our budget is $40,000.", "Their budget is $60,000."),  # another holder
        ("The demo is on Thursday.", "The demo is at 4pm."),  # nothing of the same kind replaced
        ("The standup is at 9:15.", "The standup is at 9:15."),  # nothing replaced
    ],
)
def test_given_a_close_meaning_then_the_other_guards_still_refuse(old: str, new: str) -> None:
    assert not restated(old, new, cosine(0.99))


@pytest.mark.parametrize(
    ("old", "new", "swapped"),
    [
        ("The release target is July 13.", "Move the release party to July 20.", True),
        ("The mobile squad meets on Monday.", "The web squad meets on Tuesday.", True),
        (
            "The NSF budget justification is due March 12.",
            "We have until March 19 for the budget justification.",
            False,
        ),
        ("Ana owns the billing migration.", "The billing migration will be handled by Ben.", False),
    ],
)
def test_a_word_beside_a_shared_one_swapped_for_another_names_another_thing(
    old: str, new: str, swapped: bool
) -> None:
    settled_new, settled_old = settle_openings(read(new), read(old))
    assert swapped_word(settled_new, settled_old) is swapped


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The demo is at 4pm.", "The demo prep is at 2pm."),  # a short topic made narrower
        ("The kickoff is on Monday.", "The retro is on Tuesday."),  # one word for another
        ("The wifi password is maple42.", "The guest wifi password is birch77."),  # narrower
        ("The gym opens at 6am on weekdays.", "The gym opens at 8am on weekends."),  # another scope
        ("The Q3 report is due on September 30.", "The Q3 budget is due on September 15."),
        ("The budget for marketing is $40,000.", "The budget for sales is $55,000."),
        ("The iOS app version is 3.2.", "The Android app version is 3.4."),  # "iOS" is a name
        (  # a statement of a name and a value names no subject, whatever "URL" its value says
            "Staging: https://staging.kaibo.dev",
            "Staging URL for the docs preview is https://preview.kaibo.dev.",
        ),
        (  # whose value? The later statement does not say
            "Acme's contract value is $120k ARR, renewal in November.",
            "Contract value $95k ARR, 2-year term.",
        ),
    ],
)
def test_given_words_that_show_another_thing_then_a_close_meaning_does_not_overrule_them(
    old: str, new: str
) -> None:
    """The model finds these closer than many true updates (0.69-0.92): where the words tell
    the subjects apart, the words decide; the model only speaks where the words cannot tell."""
    assert not restated(old, new, cosine(0.99))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "TLS cert rotation for api.kaibo.dev must be completed before 2026-08-04.",
            "cert rotation for api.kaibo.dev, hard cutoff 2026-08-18, the CA extended the old intermediate.",
        ),
        (
            "Brightline lease: signature deadline July 1, 2026.",
            "Brightline's counsel confirmed we can sign by July 22, 2026.",
        ),
        (
            "Returns go to our warehouse at 77 Dock Rd, Newark NJ.",
            "Returns now go to 1200 Logistics Pkwy, Edison NJ.",
        ),
    ],
)
def test_given_a_statement_in_other_words_then_a_close_meaning_still_links_it(old: str, new: str) -> None:
    assert not restated(old, new, None)
    assert restated(old, new, cosine(0.99))


def test_given_a_guarded_statement_then_a_close_meaning_links_nothing() -> None:
    old, _ = OTHER_WORDS
    for new in (
        "Should finance walk the board through the numbers on October 21?",
        "Maybe finance walks the board through the quarter's numbers on October 21.",
    ):
        assert not links(old, new, cosine(0.99))


def links(old: str, new: str, meaning: Meaning | None) -> list[str]:
    olds = [candidate(old)]

    def search(_query: str) -> Sequence[CandidateMemory]:
        return olds

    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", new, AT)
    return [
        link.memory_id for draft in RuleStructurer(meaning).structure(event, search) for link in draft.links
    ]


def test_the_structurer_reads_updates_by_meaning_only_when_given_the_model() -> None:
    old, new = OTHER_WORDS
    assert links(old, new, None) == []
    assert links(old, new, cosine(CLOSE)) == ["mem_old"]


def test_given_the_channel_then_meaning_is_the_cosine_to_the_candidate_s_placed_vector() -> None:
    embedder = TopicEmbedder()
    semantic: SemanticChannel = channel(embedder)
    text = "the release date moved"
    vector = embedder.embed([text])[0]
    placed = candidate("the launch", vector=encode_vector(vector))
    calls = embedder.calls
    assert semantic.meaning(text, placed) == pytest.approx(float(np.dot(vector, vector)), abs=0.01)
    assert semantic.meaning(text, placed) == semantic.meaning(text, placed)
    assert embedder.calls == calls + 1  # one statement, one model call, however many candidates
    assert semantic.meaning(text, candidate("the launch", vector=None)) is None


class OneDirection:
    """Every text the same vector: every placed candidate as close as can be."""

    version = "one8"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 8), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows


def test_the_deployed_rules_read_by_meaning_only_when_the_model_is_on() -> None:
    settings = Settings(events_table="e", idempotency_table="i", projects_table="p")
    semantic = channel(OneDirection())
    placed = candidate(OTHER_WORDS[0], vector=encode_vector(semantic.embedder.embed(["x"])[0]))
    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", OTHER_WORDS[1], AT)
    for model, expected in ((None, []), (semantic, ["mem_old"])):
        drafts = configured_structurer(settings, model).structure(event, lambda _query: [placed])
        assert [link.memory_id for draft in drafts for link in draft.links] == expected

"""Facts corrected in words of their own (#15 item 2, facts corrected): a message that says
something said before was wrong retires the one earlier memory it shares a name and a subject word
with; a question, another numbered thing, nothing said otherwise or a tie retire nothing.

docs/structuring-rules.md, "Corrected".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.corrected import corrected_candidates, corrects
from kaibo_core.core.structuring.drafts import CandidateMemory
from tests.unit.test_structuring_restated import EARLIER, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # no value of a kind, no change word: "allergic" and "allergy" are one word
            "Note for the sitter: Milo is allergic to peanuts.",
            "Sorry, got that wrong: Milo's allergy is tree nuts (cashews, walnuts). PB is actually ok.",
        ),
        (
            "Zoe is allergic to peanuts, keep her away from the PB&J table.",
            "Zoe's mom clarified the allergy is tree nuts (cashews, walnuts). Peanut butter is fine for her.",
        ),
        (  # a value, and the correction's first word no subject
            "Mia's flight lands at 6:40pm on Saturday, I'll pick her up.",
            "Misread the itinerary, Mia gets in at 8:40pm Saturday. Terminal 2.",
        ),
        (
            "Mr. Petrov's date of birth on the intake form: 12 Aug 1958.",
            "Fixed Petrov's DOB, it's 21 Aug 1958 — digits got swapped at intake.",
        ),
    ],
)
def test_a_correction_retires_the_memory_it_corrects(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # the correction word in a question: it asks
            "Monthly rent for the Dock Street showroom is $6,200. Lease runs through 2028.",
            "Quick check on Dock Street. Are we paying $6,800 starting July, or is that a typo in the sheet?",
        ),
        (  # another numbered thing
            "Heads up: Quillpad 3.x reaches end of support on September 30.",
            "Correction from product: Quillpad 2.x end of support is now June 30, not August.",
        ),
        (  # no correction word: another allergy
            "Milo is allergic to peanuts.",
            "Milo's allergy clinic is on Elm Street.",
        ),
        (  # a name in common, no other subject word
            "Milo is allergic to peanuts.",
            "Sorry, got that wrong: Milo starts school on Monday.",
        ),
        (  # nothing said otherwise
            "Milo is allergic to peanuts.",
            "Sorry, I was wrong to worry: Milo is allergic to peanuts.",
        ),
        (  # no name in common: chat corrects itself too often to read it without one
            "The new hire is allergic to peanuts.",
            "Sorry, got that wrong: the new hire's allergy is tree nuts.",
        ),
    ],
)
def test_a_question_another_thing_or_nothing_different_is_no_correction(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_two_memories_as_close_are_a_tie_and_another_streams_is_apart() -> None:
    text = "Sorry, got that wrong: Milo's allergy is tree nuts."
    milo = CandidateMemory("mem_milo", "fact", "Milo is allergic to peanuts.", EARLIER, "s")
    again = CandidateMemory("mem_again", "fact", "Milo is allergic to sesame.", EARLIER, "s")
    assert corrected_candidates(text, text, "s", [milo]) == [milo]
    assert corrected_candidates(text, text, "s", [milo, again]) == []
    assert corrected_candidates(text, text, "other-stream", [milo]) == []


@pytest.mark.parametrize(
    ("text", "correcting"),
    [
        ("Misread the itinerary, Mia gets in at 8:40pm.", True),
        ("I typed the wrong drug.", True),
        ("I need to walk back the intake figure I sent Monday.", True),
        ("Earlier note was wrong.", True),
        ("What's wrong with the printer", False),  # something broken, not a statement corrected
        ("I actually love it.", False),
    ],
)
def test_a_correction_says_something_said_before_was_wrong(text: str, correcting: bool) -> None:
    assert corrects(text) is correcting

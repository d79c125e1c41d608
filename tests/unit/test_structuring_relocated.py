"""A thing given another place (#15 item 2, locations changed): a statement that puts a thing
somewhere retires the one earlier memory that puts the same thing elsewhere; another person's
thing, a place told in the past, the same place, a place of the speaker, an addition, a question or
hedge, an attachment's caption and a tie retire nothing.

docs/structuring-rules.md, "Relocated".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.relocated import places, puts_somewhere, relocated_candidates
from tests.unit.test_structuring_restated import EARLIER, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # two subject words in common outside the places; the weekday is a time, not a subject
            "Junior chess club is in room 12 on Thursdays after school.",
            "Thursday chess club is in the library annexe, same time.",
        ),
        (  # one subject word, and the old place named as no longer the place
            "Board dinner at the Harbour Room, 7pm.",
            "Dinner will be at Casa Lina from 7, the Harbour Room flooded on Monday.",
        ),
        (  # no subject word in common: the old place fell through, a new one is given
            "Book club meets at Fenwick's Café on the first Tuesday.",
            "Fenwick's lost our booking, we're doing it at the Old Mill taproom.",
        ),
        (  # a label says what the value is
            "Spring fair at Grove Park, Saturday 10am.",
            "Spring fair venue: St Anne's school field (Grove Park is closed for works).",
        ),
        (  # something put somewhere by a verb of putting
            "The first-aid kit is under the sink in the staff kitchen.",
            "Put the first-aid kit in the cupboard by reception, easier to find.",
        ),
        (  # a verb of moving, with an object of its own
            "The label printer sits in bay 4 next to packing.",
            "Ops relocated the label printer to the returns desk, bay 9.",
        ),
    ],
)
def test_a_thing_put_elsewhere_retires_its_old_place(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # another person's lessons
            "Emil's violin lessons are at the music school on Brook St.",
            "Clara's violin lessons are at the community hall on Mill Rd.",
        ),
        (  # another person's, even with a word that says the place changed
            "Emil's violin lessons are at the music school on Brook St.",
            "From next week Clara's violin lessons are at the community hall.",
        ),
        (  # another person, named at the start before another name
            "Jon Reyes sits at desk 2A-14 on the Madrid floor.",
            "Jonas Reyes moved to desk 3B-22.",
        ),
        (  # another thing: each names a word the other does not
            "Junior chess club is in room 12.",
            "Senior chess club is in the library annexe.",
        ),
        (  # told in the past
            "Book club meets at Fenwick's Café.",
            "Book club went to the Old Mill taproom for the holiday social.",
        ),
        (
            "Book club meets at Fenwick's Café.",
            "The book club was held at the Old Mill taproom.",
        ),
        (  # the same place restated
            "The first-aid kit is under the sink in the staff kitchen.",
            "The first-aid kit is still under the sink in the staff kitchen, by the way.",
        ),
        (  # the old place named, but not as gone
            "Book club meets at Fenwick's Café.",
            "Fenwick's does good coffee, we're heading to the Old Mill taproom for a drink.",
        ),
        (  # an attachment's caption
            "The farmers market is at the school car park.",
            "[attachment: a photo of a sign saying the market is at the town hall]",
        ),
        (  # an addition
            "The first-aid kit is under the sink in the staff kitchen.",
            "There's also a first-aid kit in the van glovebox.",
        ),
        (  # a question and a hedge
            "Board dinner at the Harbour Room, 7pm.",
            "Should the board dinner be at Casa Lina instead?",
        ),
        (
            "Board dinner at the Harbour Room, 7pm.",
            "If the Harbour Room floods again we might do the board dinner at Casa Lina.",
        ),
        (  # the speaker's own whereabouts
            "Book club meets at Fenwick's Café.",
            "I'm going to the book club at the library this week instead.",
        ),
    ],
)
def test_what_puts_nothing_elsewhere_retires_nothing(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_a_place_told_in_passing_or_in_a_caption_triggers_no_search() -> None:
    assert not puts_somewhere("Here's a pic of my family camping at the beach.")
    assert not puts_somewhere("[attachment: a photo of a basketball game in a large arena]")
    assert not puts_somewhere("I'm so proud of you for getting involved in the community.")
    assert not puts_somewhere("We had a great time at the pride event last month.")
    assert not puts_somewhere("I'm going to the pottery class at the community center this week.")
    assert puts_somewhere("From next week the sewing circle is in the parish hall.")


def test_times_and_idioms_are_no_places() -> None:
    (placed,) = places("Chess club is at the Grange on Thursdays at 5pm, in time for dinner.")
    assert placed.place == {"grang"}
    assert places("The report is on track and in review.") == []
    assert places("[attachment: a photo of a basketball game in a large arena]") == []


def test_two_earlier_places_as_close_retire_neither() -> None:
    both = [
        CandidateMemory("mem_a", "fact", "Chess club is in room 12.", EARLIER, "s"),
        CandidateMemory("mem_b", "fact", "Chess club is in room 14.", EARLIER, "s"),
    ]
    new = "Chess club is in the library annexe from now on."
    assert relocated_candidates(new, new, None, "s", both) == []
    assert [c.memory_id for c in relocated_candidates(new, new, None, "s", both[:1])] == ["mem_a"]


def test_another_stream_or_another_speaker_keeps_its_place() -> None:
    old = CandidateMemory("mem_a", "fact", "Chess club is in room 12.", EARLIER, "other")
    new = "Chess club is in the library annexe from now on."
    assert relocated_candidates(new, new, None, "s", [old]) == []
    said = CandidateMemory("mem_b", "fact", "Ana: Chess club is in room 12.", EARLIER, "s")
    assert relocated_candidates(new, new, "Ben", "s", [said]) == []

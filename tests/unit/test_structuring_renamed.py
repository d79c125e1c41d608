"""A thing given a new name (#15 item 2, services renamed): a statement that says a name is new, or
gives a made name (a channel, a path, a quoted name, a code) as the one now, retires the one
earlier memory that names the same thing otherwise; a rename asked for, another thing, nothing in
common, the same name, another stream or speaker and a tie retire nothing.

docs/structuring-rules.md, "Renamed".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.renamed import gives_new_name, renamed_candidates
from tests.unit.test_structuring_restated import EARLIER, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a word that says the name is new, and a subject word in common besides the names
            "The Thursday 7pm yoga class at Hillside Gym is called Flow Basics.",
            "Hillside rebranded their Thursday evening yoga session, it's Calm Core in the app now.",
        ),
        (
            "Our neighbourhood newsletter, The Lamplighter, comes out every other Friday.",
            "The neighbourhood newsletter has a new name: Elm Street Weekly.",
        ),
        (  # a made name given as the one now: two subject words in common, none added
            "The invoicing code lives in the acme/billpipe repo.",
            "Heads up: the invoicing repo is acme/invoicer now.",
        ),
        (  # a channel renamed
            "All warehouse incident reports go in #wh-incidents, tag the shift lead.",
            "The incident channel is now called #ops-incidents since the depots merged, same rules.",
        ),
    ],
)
def test_a_thing_given_a_new_name_retires_its_old_name(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a rename asked for is a task
            "Project Falcon uses Postgres.",
            "Rename the Falcon dashboard to Falcon Insights.",
        ),
        (  # a made name "now" with one subject word in common
            "The invoicing code lives in the acme/billpipe repo.",
            "The handbook is at acme/handbook now.",
        ),
        (  # apostrophes are no quotes, a number is no channel
            "Our flight to Oslo: SK 4410, leaves Oct 3 at 7:20am.",
            "Mum and Dad's flight got moved, they're now leaving Oct 4 at 1:05pm.",
        ),
        (
            "Route 7 is driven by Carla, truck #18.",
            "Route 9 truck is now #31 since the other is in the shop.",
        ),
        (  # a name given, not said to be new, with one word in common (found with `make run`: a
            # naming statement arriving after a relocation)
            "Wednesday swim class is at the Aquatic Center on Lakeshore Rd, same time.",
            "The Thursday 7pm yoga class at Hillside Gym is called Flow Basics.",
        ),
        (  # the same name restated
            "The neighbourhood newsletter from Elm Street is called The Lamplighter.",
            "Reminder: the neighbourhood newsletter is called The Lamplighter, send items by Friday.",
        ),
    ],
)
def test_what_names_nothing_anew_retires_nothing(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_a_new_name_is_said_by_a_renaming_word_or_a_made_name_now() -> None:
    assert gives_new_name("IT rebranded: it's Workplace Tech Support now, same people.")
    assert gives_new_name("Billing repo is acme/billing-core now, old links still redirect.")
    assert not gives_new_name("Please rename the channel to #ops-incidents.")
    assert not gives_new_name("We're now leaving at 1:05pm, see you at Gate 4.")
    assert not gives_new_name("Mum and Dad's flight got moved, they're now leaving at 1:05pm.")


def test_two_old_names_as_close_or_of_another_speaker_are_not_retired() -> None:
    new = "The yoga class is called Calm Core now."
    both = [
        CandidateMemory("mem_a", "fact", "The yoga class is called Flow Basics.", EARLIER, "s"),
        CandidateMemory("mem_b", "fact", "The yoga class is called Sun Salute.", EARLIER, "s"),
    ]
    assert renamed_candidates(new, new, None, "s", both) == []
    assert [c.memory_id for c in renamed_candidates(new, new, None, "s", both[:1])] == ["mem_a"]
    theirs = CandidateMemory("mem_c", "fact", "Ana: The yoga class is called Flow Basics.", EARLIER, "s")
    assert renamed_candidates(new, new, "Ben", "s", [theirs]) == []
    elsewhere = CandidateMemory("mem_d", "fact", "The yoga class is called Flow Basics.", EARLIER, "t")
    assert renamed_candidates(new, new, None, "s", [elsewhere]) == []

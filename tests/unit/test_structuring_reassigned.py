"""A piece of work handed to someone else (#15 item 2, owners reassigned): a statement that names
one new holder of a piece of work, with a word that says it changed, retires the one earlier memory
that gives the same work to another person; another person's thing, a name that holds nothing, two
new names, nothing in common, another stream and a tie retire nothing.

docs/structuring-rules.md, "Reassigned".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.reassigned import hands_over, reassigned_candidates
from tests.unit.test_structuring_restated import EARLIER, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # the old holder named as away: one subject word in common is enough
            "The Brightline migration runbook is Omar's to write.",
            "Omar's out sick, so Leila is on the Brightline runbook now.",
        ),
        (  # a word that says it changed, two subject words in common
            "Quarterly supplier review for the Hanley plant sits with Martin Grey.",
            "Priya Nair owns the Hanley supplier review going forward.",
        ),
        (
            "Tobias will be the mentor for our new apprentice Keira.",
            "Quick change: Marta is Keira's mentor instead.",
        ),
        (  # picked up "this time"
            "Kiko's handling the Q3 newsletter.",
            "Dmitri's picking up the Q3 newsletter this time, she's swamped with the launch.",
        ),
        (  # the speaker takes it
            "Simon's doing the Wednesday choir pickup this term.",
            "Hana: I'll cover Wednesday choir pickups from now on, his hours changed.",
        ),
    ],
)
def test_a_piece_of_work_handed_over_retires_its_old_holder(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a name that holds nothing: another person's own thing
            "Ben Carter's train gets in at 7:40 pm on Sunday.",
            "Ben Kaplan's train is late, now arriving at 9:05.",
        ),
        (
            "Our Leeds office opens at 8:30.",
            "After the refit the York office is now opening at 9:15.",
        ),
        (  # another new name besides the new holder: another person's work
            "Greg Holloway is the mentor for Aisha Bello's summer internship.",
            "Nadia Korsakova is the mentor for Aisha Bellamy's summer internship going forward.",
        ),
        (  # one subject word in common and nobody named away
            "Quarterly supplier review for the Hanley plant sits with Martin Grey.",
            "Priya Nair owns the Hanley plant budget going forward.",
        ),
        (  # one subject word in common, nobody named away
            "Quarterly supplier review for the Hanley plant sits with Martin Grey.",
            "Priya Nair owns the review going forward.",
        ),
        (  # nobody held it before
            "The runbook for brightline needs writing this week.",
            "Leila is on the brightline runbook now.",
        ),
        (  # chat: the speaker "now", no work taken
            "Gina: Since I lost my job at the bakery, things have been tough.",
            "Jon: Losing my job was hard, but I'm living my dreams now.",
        ),
    ],
)
def test_what_hands_nothing_over_retires_nothing(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_a_handover_says_who_and_that_it_changed() -> None:
    assert hands_over("Devon is point on the Acme renewal now.")
    assert hands_over("Kenji: I'm taking over the upgrade PR.")
    assert not hands_over("Devon is point on the Acme renewal.")
    assert hands_over("Dmitri's picking up the Q3 newsletter this time.")
    assert not hands_over("Dmitri's picking up the Q3 newsletter.")
    assert not hands_over("The office is now opening at 9:15.")


def test_two_earlier_holders_as_close_or_another_stream_are_not_retired() -> None:
    new = "Leila is on the Brightline runbook now."
    both = [
        CandidateMemory("mem_a", "task", "Omar is writing the Brightline runbook.", EARLIER, "s"),
        CandidateMemory("mem_b", "task", "Sven is writing the Brightline runbook.", EARLIER, "s"),
    ]
    assert reassigned_candidates(new, new, None, "s", both) == []
    assert [c.memory_id for c in reassigned_candidates(new, new, None, "s", both[:1])] == ["mem_a"]
    assert reassigned_candidates(new, new, None, "t", both[:1]) == []

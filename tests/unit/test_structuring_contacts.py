"""New contact details (#15 item 2, contacts updated): a phone, an email or an address given again
to the same holder, in a message that says it is new, supersedes the earlier one; another holder,
another qualifier, several earlier values or no word that it is new do not.

docs/structuring-rules.md, "New contact details".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.contacts import gives_new_contact, recontacted_candidates
from kaibo_core.core.structuring.drafts import CandidateMemory
from tests.unit.test_structuring_restated import EARLIER, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # the holder's name, no subject word in common ("number" and a bare phone)
            "Plumber Ray Duval: 0176 5523 9081, call before 8am.",
            "Ray's got a new number, 0152 448 1170 — the old one's disconnected.",
        ),
        (  # told in the past ("got"), the current value in fact
            "Plumber (Gus Kowal) cell: 0171 554 2093.",
            "Gus got a new mobile — 0176 318 4420, the old one's dead.",
        ),
        (  # the holder speaking, the value in its own sentence
            "Babysitter contact: Jolene Park, jolene.park@mailbox.org.",
            "Jolene: hi! new email btw — jo.parkcares@fastmail.com. Please use this one for bookings.",
        ),
        (  # the holder named by the message, the address in a sentence of its own
            "Grandma's address: 14 Elm Street, Portland, OR 97205.",
            "Grandma's all moved in! 220 Birch Ave, Apt 3, Beaverton, OR 97005. Mail birthday cards there.",
        ),
    ],
)
def test_a_new_contact_of_the_same_holder_supersedes_the_old_one(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # another holder, or a title shared by two people
        ("Dana's mobile: 0176 2234 8812.", "Dave's got a new number, 0152 448 1170."),
        ("Dana's mobile: 0176 2234 8812.", "Dave: new number is 0152 448 1170."),
        ("Ray Duval: 0176 5523 9081.", "Ray's wife Ana has a new number, 0152 448 1170."),  # Ana's
        ("Coach Dillon's email is dillon.k@harrowfc.org.", "Coach Dylan switched to dylan.coach@gmail.com."),
        # another qualifier: two contacts of one holder
        ("Ray's work email is ray@duvalplumbing.com.", "Ray's new personal email is ray.d@fastmail.com."),
        # nothing says the contact is new
        ("Ray Duval: 0176 5523 9081.", "Ray Duval: 0152 448 1170 for weekend call-outs."),
        # the earlier statement holds two values of the kind: whose changed?
        ("Ray: 0176 5523 9081, Ana: 0176 5523 7777.", "Ray's got a new number, 0152 448 1170."),
    ],
)
def test_another_holder_qualifier_or_no_word_of_change_links_nothing(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_without_a_word_that_it_is_new_or_with_only_a_title_in_common_nothing_is_replaced() -> None:
    ray = [CandidateMemory("mem_ray", "fact", "Ray Duval: 0176 5523 9081.", EARLIER, "s")]
    assert (
        recontacted_candidates("Ray Duval: 0152 448 1170.", "Ray Duval: 0152 448 1170.", None, "s", ray) == []
    )
    dillon = [
        CandidateMemory("mem_d", "fact", "Coach Dillon's email is dillon.k@harrowfc.org.", EARLIER, "s")
    ]
    text = "new email btw: dylan.coach@gmail.com (Coach Dylan)"
    assert recontacted_candidates(text, text, None, "s", dillon) == []


def test_two_holders_values_as_close_are_a_tie() -> None:
    candidates = [
        CandidateMemory("mem_ray", "fact", "Ray Duval's mobile: 0176 5523 9081.", EARLIER, "s"),
        CandidateMemory("mem_ray2", "fact", "Ray Okafor's mobile: 0176 5523 1111.", EARLIER, "s"),
    ]
    text = "Ray's got a new number, 0152 448 1170."
    assert recontacted_candidates(text, text, None, "s", candidates) == []
    assert recontacted_candidates(text, text, None, "s", candidates[:1]) == candidates[:1]
    assert recontacted_candidates(text, text, None, "other-stream", candidates[:1]) == []


@pytest.mark.parametrize(
    ("text", "message", "new"),
    [
        ("Ray's got a new number, 0152 448 1170.", "Ray's got a new number, 0152 448 1170.", True),
        ("220 Birch Ave, Apt 3.", "Grandma's all moved in! 220 Birch Ave, Apt 3.", True),
        ("Ray Duval: 0152 448 1170.", "Ray Duval: 0152 448 1170.", False),  # nothing says new
        ("Got a new laptop.", "Got a new laptop.", False),  # no contact value
    ],
)
def test_a_new_contact_is_a_contact_value_in_a_message_that_says_it_is_new(
    text: str, message: str, new: bool
) -> None:
    assert gives_new_contact(text, message) is new

"""A new value passed on by the one it comes from (#15 item 2): "Deb at the accountant's office says
we've got till Mar 6" moves the accountant's deadline; hearsay, doubt, another person of the same
first name, or a cancellation passed on gives nothing a new value.

docs/structuring-rules.md, "Relayed by the source".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.relayed import relayed_value
from kaibo_core.core.structuring.statements import split_statements
from tests.unit.test_structuring_restated import structured_links, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Accountant needs our receipts and W-2s by Feb 27 so they can file on time.",
            "Deb at the accountant's office says we've got till Mar 6 for the paperwork, they're swamped.",
        ),
        (  # "accounting" and "accountant": one word's stem; the value in its own clause
            "Accountant needs all our receipts for the LLC tax return by February 27.",
            "Ruth at the accounting office says they're swamped anyway, receipts can come as late as "
            "March 13.",
        ),
    ],
)
def test_a_value_passed_on_by_its_source_is_an_update(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # the source got in touch, then what they said
            "Prof. Okafor wants my full thesis draft by Sept 30.",
            "Okafor emailed back — Oct 14 is fine for the draft since she's at a conference anyway.",
        ),
    ],
)
def test_a_value_from_someone_who_got_in_touch_is_an_update(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # hearsay: the one who says it is not named by the earlier memory
            "The release target is July 13.",
            "Tom says the release target is July 20 now.",
        ),
        (  # someone else got in touch: not the source of the earlier value
            "Prof. Okafor wants my full thesis draft by Sept 30.",
            "Priya emailed back — Oct 14 is fine for the draft review.",
        ),
        (  # another person of the same first name
            "Tomas Reyes is taking the Saturday food bank shift from 9 to 1.",
            "Tomas Ferreira says he's now doing Saturdays 1 to 5 at the food bank.",
        ),
        (  # doubted, here or in another sentence of the message
            "Accountant needs our receipts by Feb 27.",
            "Deb at the accountant's office says we've got till Mar 6 now. Not official though.",
        ),
        (  # what is passed on was passed on to them: hearsay
            "Accountant needs our receipts by Feb 27.",
            "Deb at the accountant's office says the clerk told her it's till Mar 6 now.",
        ),
        (  # what is said is a hedge
            "Accountant needs our receipts by Feb 27.",
            "Deb at the accountant's office says we might get till Mar 6 now.",
        ),
        (  # a cancellation passed on gives nothing a new value
            "Ferrow Castings are sending two engineers to us on March 17 to look at the porosity problem "
            "on the gearbox housings. Book the small conference room and get the rejected parts tagged.",
            "Ferrow just told us they can't travel next week after all, so their visit is off. We'll send "
            "them the X-ray images and do a video call whenever they can make it.",
        ),
    ],
)
def test_hearsay_doubt_another_person_or_a_cancellation_passed_on_is_no_new_value(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_the_source_is_what_comes_before_the_verb_that_passes_the_value_on() -> None:
    statement = split_statements("Deb at the accountant's office says we've got till Mar 6.").statements[0]
    relayed = relayed_value(statement, statement.text)
    assert relayed is not None
    assert relayed.source == frozenset({"deb", "account"})  # "the", "at", "office" name no one
    assert relayed.name == frozenset({"deb"})
    assert relayed.said.text == "we've got till Mar 6"
    assert not relayed.said.guarded
    assert (
        structured_links("Deb says we've got till Mar 6?", "Accountant needs our receipts by Feb 27.") == []
    )
    # what is passed on was itself passed on (reported, hedged, negated): no one's word on it
    hearsay = split_statements("Deb at the accountant's office says the clerk told her it's till Mar 6.")
    assert relayed_value(hearsay.statements[0], hearsay.statements[0].text) is None

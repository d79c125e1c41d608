"""Typed slots (#15 items 2 and 3): a definite value's shape names the attribute it fills, subjects
match by overlap, and recall keeps only the newer of two active memories that disagree.

docs/structuring-rules.md, "Typed slots" and "Recall's safety net".
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kaibo_core.core.recall.conflicts import outdated, without_outdated
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.classify import statement_of_text
from kaibo_core.core.structuring.drafts import CandidateMemory, EventToStructure, Link, MemoryDraft
from kaibo_core.core.structuring.facts import Fact, parse_fact, subjects_match, value_shape
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.text import analyze, query_terms

AT = "2026-06-03T09:00:00.000Z"
EARLIER = "2026-06-01T09:00:00.000Z"


def stored(text: str) -> list[CandidateMemory]:
    """``text`` as the service stores it: the structurer's drafts."""
    event = EventToStructure("evt_0", "s", 1, "h" * 64, "message", text, EARLIER)
    drafts = RuleStructurer().structure(event, lambda _query: [])
    return [
        CandidateMemory(f"mem_old{index}", d.type, d.content, EARLIER, "s", d.subject)
        for index, d in enumerate(drafts)
    ]


def links(new: str, old: str) -> list[Link]:
    olds = stored(old)

    def search(query: str) -> Sequence[CandidateMemory]:
        return [c for c in olds if set(query_terms(query)) & set(analyze(c.content))]

    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", new, AT)
    drafts: list[MemoryDraft] = RuleStructurer().structure(event, search)
    return [link for draft in drafts for link in draft.links]


def fact(text: str) -> Fact:
    parsed = parse_fact(statement_of_text(text))
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("June 21 at 9:15am", "time"),
        ("October 22", "date"),
        ("555-0188", "phone"),
        ("+1 415 555 0177", "phone"),
        ("tom@newco.io", "email"),
        ("https://kaibo.example.org", "url"),
        ("$32,000", "money"),
        ("48 Oak Avenue, Springfield", "address"),
        ("150 people", "number peopl"),
        ("three weeks", "number week"),
        ("maple42", "code"),
        ("Paul Chen", "name"),
        ("really great", "other"),
    ],
)
def test_a_values_shape_names_its_slot(value: str, shape: str) -> None:
    assert value_shape(value) == shape


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a label and its value, no verb at all
        ("Board meeting: November 4 at 10am.", "Board meeting: November 11 at 10am."),
        ("The support hotline is 1-800-555-0100.", "Support hotline: 1-800-555-0199."),
        ("Headcount target for 2027: 80.", "Headcount target for 2027: 95."),
        # any present-tense verb with a typed value
        ("Code freeze starts December 12.", "Code freeze starts December 9 this year."),
        ("The venue holds 120 people.", "Correction: the venue holds 150 people."),
        ("The platform team has 12 engineers.", "The platform team has 15 engineers now."),
        (
            "My flight to Lisbon leaves on June 20 at 7:40am.",
            "My flight to Lisbon leaves June 21 at 9:15am now, the airline changed it.",
        ),
        ("We have 230 active customers.", "Correction: we have 203 active customers."),
        # slot words and "new" are not the subject: the value's shape says them
        ("Tom's email is tom@oldco.com.", "Tom's email address: tom@newco.io."),
        (
            "Priya's address is 12 Elm Street, Springfield.",
            "Priya's new address is 48 Oak Avenue, Springfield.",
        ),
        ("The launch is on March 3.", "Launch date is March 10."),
        # a task's due date, then the deadline stated as a fact
        ("We have to file the VAT return by July 20.", "The VAT return deadline is July 31."),
        # the subject's extra words said elsewhere in the newer statement
        ("The kickoff with Initech happens on May 7.", "Update on Initech: the kickoff is on May 9."),
        # one-letter values are values
        ("Standup is in Room A.", "Standup is in Room B now."),
    ],
)
def test_a_definite_value_for_the_same_subject_and_slot_supersedes(old: str, new: str) -> None:
    assert links(new, old) == [Link("supersedes", "mem_old0")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Maria's phone number is 555-0101.", "Mario's phone number is 555-0199."),
        ("The wifi password is maple42.", "The guest wifi password is birch77."),
        ("Maria's phone is 555-0101.", "Maria's work phone is 555-0177."),
        ("The iOS app release is on May 2.", "The Android app release is on May 9."),
        ("The storage quota is 50 GB per user.", "The upload limit is 2 GB per file."),
        ("The gym opens at 6am on weekdays.", "The gym opens at 8am on weekends."),
        ("Lea: My lunch break is at 12:30pm.", "Jin: My lunch break is at 1pm."),
        ("The annual plan costs $240.", "The annual plan would cost $199 if we drop support."),
        ("The annual plan costs $240.", "The annual plan was $180 originally."),
        ("The webinar starts at 5pm.", "Does the webinar start at 6pm?"),
        ("Maria's phone number is 555-0101.", "Maria also has a work phone: 555-0177."),
        ("The design review is on Thursday.", "The design review starts at 4pm."),
        ("Dana's number is 555-0142.", "Dana's badge number is 4471."),
    ],
)
def test_other_subjects_slots_and_guarded_statements_do_not_link(old: str, new: str) -> None:
    assert links(new, old) == []


def test_subjects_match_by_overlap_but_never_when_the_newer_adds_a_word() -> None:
    assert subjects_match(fact("VAT return: July 31."), fact("The VAT return filing is due on July 20."))
    assert not subjects_match(fact("The guest wifi password is b1."), fact("The wifi password is a1."))
    assert not subjects_match(fact("The Q3 report is due Sept 30."), fact("The Q2 report is due June 30."))


@pytest.mark.parametrize(
    ("task", "done"),
    [
        ("Need to buy concert tickets for Saturday.", "Bought the concert tickets."),
        ("I have to submit the visa application by Friday.", "Submitted the visa application."),
        (
            "We need to migrate the billing database to Postgres 16.",
            "The billing database migration is complete.",
        ),
    ],
)
def test_a_completed_task_closes_its_open_task(task: str, done: str) -> None:
    assert links(done, task) == [Link("supersedes", "mem_old0")]


def test_an_obligation_states_no_change_yet() -> None:
    drafts = stored("We need to migrate the billing database to Postgres 16.")
    assert drafts[0].type == "task"


# --- recall's safety net ---------------------------------------------------------------------------


def ranked(memory_id: str, score: float, text: str, valid_from_ms: int | None) -> Ranked:
    return Ranked(memory_id, score, frozenset(analyze(text)), text, valid_from_ms)


def test_recall_drops_the_older_of_two_memories_that_disagree() -> None:
    older = ranked("old", 3.0, "The launch is on March 3, 2026.", 1_000)
    newer = ranked("new", 2.0, "Launch date is March 10, 2026.", 2_000)
    kept, dropped = without_outdated([older, newer])
    assert [r.memory_id for r in kept] == ["new"]
    assert dropped == {"old": "new"}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Acme's renewal is due on March 1.", "Globex's renewal is due on March 8."),
        ("Lea: My flight is at 9am.", "Jin: My flight is at 11am."),
        ("The launch is on March 3.", "If the audit slips, the launch would move to March 17."),
        ("The demo is on Friday.", "The demo is at 4pm."),
    ],
)
def test_recall_keeps_memories_that_can_both_hold(first: str, second: str) -> None:
    assert outdated([ranked("a", 2.0, first, 1_000), ranked("b", 1.0, second, 2_000)]) == {}


def test_recall_without_validity_times_judges_nothing() -> None:
    a = ranked("a", 2.0, "The launch is on March 3.", None)
    b = ranked("b", 1.0, "The launch is on March 10.", None)
    assert outdated([a, b]) == {}
    assert without_outdated([a, b]) == ([a, b], {})

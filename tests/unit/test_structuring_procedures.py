"""Procedures replaced (#15 item 2): a later statement that routes a piece of work another way
("PTO requests go through Workday") supersedes the earlier way of doing it ("To request PTO, email
your manager …"); another piece of work, a narrower one, the same way, a one-off task or a plain
fact does not.

docs/structuring-rules.md, "Procedures replaced".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.models.memories import MemoryType
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.procedures import (
    announces_new_way,
    read_route,
    renewed_candidates,
    rerouted_candidates,
    reroutes,
)
from kaibo_core.core.structuring.statements import Statement, split_statements
from tests.unit.test_structuring_restated import EARLIER, structured_links, supersedes


def statement(text: str) -> Statement:
    return split_statements(text).statements[0]


def rerouted(new: str, old: str) -> bool:
    route = read_route(statement(new))
    return route is not None and reroutes(route, statement(old))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("To request PTO, email your manager with the dates.", "PTO requests go through Workday."),
        (  # an instruction under a label that names the work
            "Expense reports: email the receipts to finance by the 5th.",
            "Expenses are submitted in Ramp now.",
        ),
        (  # a word of the steps ("prod") may name the work
            "To deploy the API, run `make deploy ENV=prod` from your laptop.",
            "Prod deploys go through the release workflow in GitHub Actions.",
        ),
        (
            "How to order a laptop: open a ticket with IT and wait for the approval.",
            "Laptop orders are handled via the hardware portal.",
        ),
        ("Invoices: send them to billing@acme.com as PDFs.", "Invoices are submitted through Coupa."),
    ],
)
def test_a_piece_of_work_routed_another_way_replaces_the_way_it_was_done(old: str, new: str) -> None:
    assert rerouted(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a narrower piece of work: hotfixes may go their own way, the rest as before
            "To deploy the API, run `make deploy` from your laptop.",
            "Hotfix deploys go through the hotfix workflow.",
        ),
        (  # another piece of work that shares a word
            "To file a bug, open a ticket in Jira.",
            "Support tickets go through Zendesk.",
        ),
        (  # the same way said again: both hold
            "To request PTO, email your manager with the dates.",
            "PTO requests go through your manager.",
        ),
        (  # a one-off task whose label does not name the work tells no way of doing it
            "Open item from the security review: rotate the Stripe API keys.",
            "Stripe key rotations go through Vault.",
        ),
        (  # a label before a plain statement: no instruction, no way of doing something
            "Expense reports: the receipts are in the blue folder.",
            "Expense reports are submitted in Ramp.",
        ),
        (  # a plain fact is no way of doing something
            "The API is deployed on AWS.",
            "API deploys go through GitHub Actions.",
        ),
    ],
)
def test_another_narrower_or_the_same_way_and_no_way_at_all_are_not_replaced(old: str, new: str) -> None:
    assert not rerouted(new, old)


@pytest.mark.parametrize(
    "text",
    [
        "They go through Workday.",  # no work named
        "Everyone goes through onboarding in the first week.",
        "PTO requests went through Workday last year.",  # the past
        "PTO requests used to go through Workday.",
        "We go through the checklist every Friday.",
        "PTO is a benefit.",
    ],
)
def test_what_routes_no_work_is_not_read_as_a_route(text: str) -> None:
    assert read_route(statement(text)) is None


def test_a_route_names_its_work_and_its_way() -> None:
    route = read_route(statement("PTO requests now go through Workday."))
    assert route is not None
    assert route.work == frozenset({"pto", "request"})
    assert route.way == frozenset({"workday"})


def test_only_a_current_way_of_doing_the_work_is_a_candidate() -> None:
    def memory(memory_id: str, memory_type: MemoryType, content: str) -> CandidateMemory:
        return CandidateMemory(memory_id, memory_type, content, EARLIER, "s", None)

    route = read_route(statement("PTO requests go through Workday."))
    assert route is not None
    found = rerouted_candidates(
        route,
        [
            memory("way", "procedure", "To request PTO, email your manager with the dates."),
            memory("past", "procedure", "To request PTO, we used to email the manager."),
            memory("question", "procedure", "To request PTO, do I email my manager?"),
            memory("other", "procedure", "To book travel, use Navan."),
            memory("choice", "preference", "To request PTO, I prefer emailing my manager."),
        ],
    )
    assert [candidate.memory_id for candidate in found] == ["way"]


def test_the_structurer_links_a_procedure_replaced_in_words_of_its_own() -> None:
    old = "To request PTO, email your manager with the dates and add it to the team calendar."
    found = structured_links("PTO requests go through Workday. Managers approve there.", old)
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]


@pytest.mark.parametrize(
    "new",
    [
        "PTO requests might go through Workday next year.",  # a hedge
        "Do PTO requests go through Workday?",  # a question
        "Contractor PTO requests also go through Workday.",  # additive, and narrower
    ],
)
def test_a_guarded_route_replaces_nothing(new: str) -> None:
    old = "To request PTO, email your manager with the dates."
    assert structured_links(new, old) == []


# --- a new way announced (session 26) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # a new process named, and two subject words in common with the old way
            "Lost property: log each item in the red binder at the front desk and keep it a week.",
            "New process for lost property — items get scanned into the Lostfound app by whoever "
            "finds them, the binder is retired.",
        ),
        (  # the old way retracted: "no more", "don't … anymore"
            "Timesheets: print the weekly sheet and put it in Marta's tray by Friday.",
            "We're on Clockly for timesheets now, no more printing the weekly sheet.",
        ),
        (
            "Recycling: cardboard goes flat behind the bins in the yard.",
            "Don't leave cardboard behind the bins anymore, the council collects recycling "
            "from the kerbside box.",
        ),
        (  # a service that stopped a way
            "Prescription refills: phone the surgery and they send it to the pharmacy.",
            "Refills are requested in the NHS app now, the surgery stopped taking phone "
            "requests for prescriptions.",
        ),
    ],
)
def test_a_new_way_announced_replaces_the_old_way(old: str, new: str) -> None:
    assert supersedes(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # only a name in common: another thing of theirs
            "Bins at Alder Row: put them out on Sunday night by the gate.",
            "New process for parking at Alder Row: permits come from the site office.",
        ),
        (  # one word in common
            "Timesheets: print the weekly sheet and put it in Marta's tray by Friday.",
            "New process for holiday requests: no more printing, use the HR portal.",
        ),
        (  # chat: encouragement and loss, no way of doing anything
            "You're so dedicated to your garden, it's inspiring. Chase those dreams!",
            "Keep going with the garden and don't stop dreaming, it's inspiring!",
        ),
        (  # a question
            "Timesheets: print the weekly sheet and put it in Marta's tray by Friday.",
            "Is it true there's no more printing of weekly timesheets?",
        ),
    ],
)
def test_what_announces_no_new_way_for_that_work_replaces_nothing(old: str, new: str) -> None:
    assert not supersedes(new, old)


def test_a_new_way_is_announced_by_its_own_words_not_by_any_change() -> None:
    assert announces_new_way("New plan for the fish while we're away — an automatic feeder.")
    assert announces_new_way("No more IT tickets for this, they'll just be closed.")
    assert not announces_new_way("Caterer switched to Saltmarsh Kitchen starting Monday.")
    assert not announces_new_way("Keep going and don't stop dreaming!")


def test_two_old_ways_as_close_or_of_another_speaker_are_not_replaced() -> None:
    new = "No more paper timesheets: log hours in Clockly."
    both = [
        CandidateMemory("mem_a", "procedure", "Timesheets: fill the paper sheet weekly.", EARLIER, "s"),
        CandidateMemory("mem_b", "procedure", "Paper timesheets go in the tray.", EARLIER, "s"),
    ]
    assert renewed_candidates(new, new, None, "s", both) == []
    assert [c.memory_id for c in renewed_candidates(new, new, None, "s", both[:1])] == ["mem_a"]
    theirs = CandidateMemory(
        "mem_c", "procedure", "Ana: Timesheets: fill the paper sheet weekly.", EARLIER, "s"
    )
    assert renewed_candidates(new, new, "Ben", "s", [theirs]) == []

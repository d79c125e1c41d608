"""Conflicts without change words (#15): same subject and attribute, another value, supersedes.

docs/structuring-rules.md, "Conflicts without change words". A candidate memory is given as
the only search result; the new statement must link to it, or must not.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kaibo_core.core.models.memories import MemoryType
from kaibo_core.core.structuring.changes import detect_change
from kaibo_core.core.structuring.classify import statement_of_text
from kaibo_core.core.structuring.drafts import CandidateMemory, EventToStructure, Link, MemoryDraft
from kaibo_core.core.structuring.facts import (
    Fact,
    conflicts,
    evaluative,
    generic_subject,
    parse_fact,
    unresolved,
)
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.text import analyze, query_terms

AT = "2026-06-02T09:30:00.000Z"
EARLIER = "2026-06-01T09:00:00.000Z"


def candidate(content: str, type_: MemoryType = "fact") -> CandidateMemory:
    return CandidateMemory("mem_old", type_, content, EARLIER, "s")


def links(text: str, old: CandidateMemory) -> list[Link]:
    def search(query: str) -> Sequence[CandidateMemory]:
        return [old] if set(query_terms(query)) & set(analyze(old.content)) else []

    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", text, AT)
    drafts: list[MemoryDraft] = RuleStructurer().structure(event, search)
    return [link for draft in drafts for link in draft.links]


def fact(text: str) -> Fact | None:
    return parse_fact(statement_of_text(text))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a date or time, said with a copula or a scheduling verb
        ("The board meeting is on June 18.", "The board meeting will be on June 25."),
        (
            "The vendor demo is scheduled for Wednesday at 2pm.",
            "The vendor demo is set for Thursday at 11am.",
        ),
        ("The team offsite is on July 20.", "Team offsite takes place on August 3 this year."),
        (
            "The Acme tax filing is due on June 30.",
            "We got an extension, the Acme tax filing is due on July 15.",
        ),
        ("The hackathon is on July 9.", "We're holding the hackathon on July 16 instead."),
        # a person
        ("Marco owns the billing migration.", "Priya is taking over the billing migration."),
        ("The mobile squad is led by Farah.", "Omar leads the mobile squad now."),
        (
            "Kim is the point of contact for the Globex account.",
            "Raj is the point of contact for the Globex account.",
        ),
        ("Ana will review the security audit.", "Ben will review the security audit instead."),
        # a number, an amount, a code
        ("The Pro plan costs $29 a month.", "The Pro plan is $35 a month from July."),
        ("The sprint length is two weeks.", "Sprint length is three weeks starting next sprint."),
        ("The guest Wi-Fi password is otter11.", "The guest Wi-Fi password is otter12."),
        ("The support hotline is 0800 123 456.", "The support hotline is 0800 999 111."),
        # contact details and addresses
        ("Dana's phone number is 555-0142.", "New number for Dana: 555-0199."),
        ("Carlos's email is carlos@oldmail.com.", "Carlos has a new email: carlos@newmail.io."),
        ("The office address is 12 King Street.", "Our new office address is 88 Queen Street."),
        # a place
        ("Ravi sits in room 3A.", "Ravi lives in room 4B from now on."),
        ("Mia lives in Lisbon.", "Mia moved to Porto last month."),
        ("The all-hands is in the main auditorium.", "The all-hands is in the cafeteria this time."),
        # a route, a procedure
        ("Support escalations go to Hugo.", "Support escalations go to Mira now."),
        (
            "To deploy, run make deploy from the main branch.",
            "To deploy, run ./scripts/release.sh from now on.",
        ),
        ("To request leave, email your manager.", "To request leave, submit a form in Workday."),
        # a name
        ("Project Falcon starts in July.", "Project Falcon is now Project Osprey."),
        ("Our Slack channel for releases is #ship-it.", "#ship-it is now #releases."),
        ("The Ledger API handles invoices.", "The Ledger API goes by Billing API now."),
        # a number changed with an ordinary verb
        ("The marketing budget is $40,000.", "Marketing budget got bumped to $55,000."),
        ("The order minimum is 50 units.", "The order minimum went up to 80 units."),
        # a thing adjusted, changed or updated, then what it is now after a dash or a colon
        (
            "Milo's antibiotic: half a tablet twice a day.",
            "Vet adjusted Milo's antibiotic — one full tablet once a day, with food.",
        ),
        ("Rex's feeding: wet food in the morning.", "We updated Rex's feeding - dry food in the evening."),
        ("The dishwasher program: eco at 50 degrees.", "I changed the dishwasher program: quick wash at 65."),
        # an arrow, with or without the old value
        ("KB-412 (flaky login test) assigned to Wei.", "KB-412 → Olu."),
        ("The Q3 launch is on July 13.", "Q3 launch: July 13 -> July 17"),
        ("Maya leads the Atlas project.", "Atlas project lead → Ben"),
    ],
)
def test_a_new_value_for_the_same_subject_and_attribute_supersedes(old: str, new: str) -> None:
    assert links(new, candidate(old)) == [Link("supersedes", "mem_old")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # another person, product, client, city
        ("Dana's phone number is 555-0142.", "Dave's phone number is 555-0177."),
        ("The Pro plan costs $29 a month.", "The Team plan costs $49 a month."),
        ("The Globex renewal is due on June 30.", "The Initech renewal is due on July 15."),
        ("The Berlin office is at Torstrasse 10.", "The Munich office is at Leopoldstrasse 5."),
        ("Marco owns the billing migration.", "Priya owns the search rewrite."),
        ("Lea: My favorite editor is Vim.", "Jin: My favorite editor is Emacs."),
        ("Ivy: My mobile number is 555 0100.", "Leo: My mobile number is 555 0177."),
        ("Our budget is $40,000.", "Their budget is $60,000."),
        ("Mia lives in Porto.", "Mia's sister lives in Lisbon."),
        ("Dana's number is 555-0142.", "Dana's badge number is 4471."),
        # hypotheticals, proposals, questions, reported speech
        ("The offsite is on July 20.", "If we moved the offsite to August 3, more people could come."),
        ("The retro is on Friday.", "Maybe we should do the retro on Monday."),
        ("The demo is on Thursday.", "Is the demo still on Thursday?"),
        ("The deadline is June 20.", "Tom said the deadline is June 27."),
        # history
        ("The launch is on July 1.", "Last year the launch was moved to August."),
        ("Ravi sits in room 3A.", "Ravi used to sit in room 2C."),
        ("The standup is at 9am.", "The standup was at 8am last quarter."),
        ("The Pro plan costs $35 a month.", "The Pro plan cost $19 a month when we launched."),
        # additive or compatible values
        ("Sam: I like hiking.", "Sam: I also like climbing."),
        ("The demo is on Thursday.", "The demo is at 4pm."),
        ("Standup is at 9am on Mondays.", "Standup is at 10am on Fridays."),
        ("Anna lives in Berlin.", "Anna works in Munich."),
        ("The team uses Jira for tickets.", "The team uses Slack for chat."),
        ("To deploy, run make deploy.", "To deploy, also tag the release."),
        ("Tom went to Paris in May.", "Tom went to Berlin in June."),
        ("Ana will review the security audit.", "Ben will review the security audit."),
        ("KB-412 (flaky login test) assigned to Wei.", "KB-413 → Olu."),
        ("The Q3 launch is on July 13.", "Q4 launch: July 13 -> July 17"),
        ("Luna's food: one cup twice a day.", "Vet adjusted Milo's antibiotic — one full tablet a day."),
        ("Milo's antibiotic: half a tablet twice a day.", "Vet adjusted Milo's diet: no more kibble."),
    ],
)
def test_guards_keep_unrelated_or_compatible_statements_apart(old: str, new: str) -> None:
    assert links(new, candidate(old)) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Team lunch is on Friday at noon.", "Friday's team lunch is not happening."),
        ("The book club meeting is on June 14.", "The book club meeting is not going ahead."),
        ("My 1:1 with Priya is on Wednesday.", "My 1:1 with Priya won't happen this week."),
        ("The offsite dinner is on June 12 at 7pm.", "No offsite dinner this year."),
        (
            "The client sync with Initech is Tuesday at 2pm.",
            "The Initech client sync is called off this week.",
        ),
        ("The security workshop is on Monday at 1pm.", "We're dropping the security workshop."),
        # the cancellation is a clause after a label
        (
            "Book fair: Friday 6/12 in the gym, 3-5pm.",
            "Principal's note: the 6/12 book fair will not take place.",
        ),
        # a plan named by one name, for a day still to come
        ("Plan: Lisbon trip July 10–14, flights booked.", "We're not going to Lisbon after all."),
        # "no" the thing, after the reason
        (
            "Book club is Thursday at 7 at Jo's place.",
            "Jo has covid so no book club this week, sorry everyone!",
        ),
        # the thing named by another word of the same stem ("inspection", "inspector")
        (
            "Site visit at the Redbank warehouse with the fire inspector, Wed 10:00.",
            "Inspector's office called — the Redbank inspection is off, they'll be in touch to rebook.",
        ),
    ],
)
def test_a_meeting_that_is_not_happening_is_canceled(old: str, new: str) -> None:
    assert links(new, candidate(old)) == [Link("cancels", "mem_old")]


@pytest.mark.parametrize(
    ("task", "done"),
    [
        ("Action item: Lisa to update the pricing page.", "The pricing page is updated."),
        ("TODO: update the README.", "README updated."),
        ("Need to order new badges for the interns.", "Ordered the new badges for the interns."),
        ("Tom will write the onboarding guide.", "The onboarding guide is live now."),
        ("TODO: fix the flaky login test.", "The flaky login test is sorted."),
        ("Reminder: send the Q2 invoice to Globex.", "Done with the Globex invoice."),
        ("TODO: migrate the wiki to Notion.", "We finally shipped the wiki migration."),
        # the ticket's id and a completion word
        (
            "OPS-212: migrate the nightly backups off the old NAS.",
            "OPS-212 closed — backups have been running on the S3 bucket since last night.",
        ),
    ],
)
def test_a_completed_task_closes_its_open_task(task: str, done: str) -> None:
    assert links(done, candidate(task, "task")) == [Link("supersedes", "mem_old")]


def test_another_tickets_id_closes_nothing() -> None:
    task = candidate("OPS-212: migrate the nightly backups off the old NAS.", "task")
    assert links("OPS-213 closed — backups have been running on the S3 bucket since last night.", task) == []


def test_a_ticket_said_open_is_a_task_whatever_its_type() -> None:
    bug = "BUG-2210: CSV export drops rows with emoji in names — open, high priority."
    done = "BUG-2210 fixed in 4.8.1 and verified by QA, closing."
    assert links(done, candidate(bug, "episode")) == [Link("supersedes", "mem_old")]
    # a ticket named in a plain remark is no open task
    remark = candidate("BUG-2210 was the CSV export issue from last spring, see the postmortem.", "episode")
    assert links(done, remark) == []


def test_what_a_task_is_for_is_no_part_of_what_it_is() -> None:
    task = candidate("Still have to send the invoice to Delgado Builders for the March framing job.", "task")
    assert links("Delgado invoice went out this morning, net 30.", task) == [Link("supersedes", "mem_old")]
    # the invoice of another builder: "Delgado" is what the task is
    assert links("Harlow invoice went out this morning, net 30.", task) == []


def test_a_done_participle_needs_the_tasks_own_verb() -> None:
    assert links("The pricing page is translated.", candidate("TODO: update the pricing page.", "task")) == []


def test_a_task_label_is_still_to_do_not_a_change() -> None:
    assert links("TODO: move the demo to Friday.", candidate("The demo is on Thursday.")) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Noor: I prefer the dark theme.", "Noor: I switched to the light theme."),
        ("Sam: I prefer email for status updates.", "Sam: For status updates I prefer Slack now."),
        ("Maya: These days I prefer aisle seats.", "Maya: Actually I prefer window seats again."),
    ],
)
def test_a_preference_switch_supersedes_the_same_holders_preference(old: str, new: str) -> None:
    assert links(new, candidate(old, "preference")) == [Link("supersedes", "mem_old")]


def test_another_holders_switch_does_not_link() -> None:
    assert links("Omar: I switched to the light theme.", candidate("Noor: I prefer the dark theme.")) == []


@pytest.mark.parametrize(
    ("text", "subject", "attribute", "value"),
    [
        ("Dana's phone number is 555-0142.", "dana phone number", "be", "555-0142"),
        ("Marco owns the billing migration.", "billing migration", "owner", "Marco"),
        ("The mobile squad is led by Farah.", "mobile squad", "owner", "Farah"),
        ("Kim is the point of contact for Globex.", "point of contact for globex", "be", "Kim"),
        ("The vendor demo is scheduled for Wednesday.", "vendor demo", "when", "Wednesday"),
        ("Sprint length is three weeks starting next sprint.", "sprint length", "be", "three weeks"),
        ("To deploy, run make deploy.", "deploy", "procedure", "run make deploy"),
        ("The Pro plan costs $29 a month.", "pro plan", "price", "$29 a month"),
        ("Mia lives in Lisbon.", "mia", "where live", "Lisbon"),
    ],
)
def test_facts_read_subject_attribute_and_value(text: str, subject: str, attribute: str, value: str) -> None:
    parsed = fact(text)
    assert parsed is not None
    assert (parsed.subject, parsed.attribute, parsed.value) == (subject, attribute, value)


@pytest.mark.parametrize(
    "text",
    [
        "Maybe the budget is $60,000.",
        "Is the demo on Friday?",
        "Tom said the demo is on Friday.",
        "Back in 2024 the budget was $30,000.",
        "Send the invoice to Acme.",
    ],
)
def test_guarded_history_and_orders_state_no_fact(text: str) -> None:
    assert fact(text) is None


def test_an_order_with_a_date_states_when_its_object_is_due() -> None:
    parsed = fact("Send the invoice to Acme by June 5.")
    assert parsed is not None
    assert (parsed.subject, parsed.attribute, parsed.value) == ("invoice to acme", "due", "June 5")


def test_a_cue_lets_a_verb_attribute_conflict_and_none_does_not() -> None:
    old, new = fact("Support escalations go to Hugo."), fact("Support escalations go to Mira.")
    assert old is not None
    assert new is not None
    assert not conflicts(new, old, cued=False)
    assert conflicts(new, old, cued=True)


def test_resolved_dates_are_read_as_written() -> None:
    assert unresolved("The review is on Friday (June 5, 2026).") == "The review is on Friday."
    assert unresolved("Next week (week of June 8, 2026) it is.") == "Next week it is."


def test_a_rename_of_a_value_rewrites_the_fact_that_named_it() -> None:
    old = candidate("Our Slack channel for releases is #ship-it.")
    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", "#ship-it is now #releases.", AT)
    drafts = RuleStructurer().structure(event, lambda _query: [old])
    assert [d.content for d in drafts] == [
        "#ship-it is now #releases.",
        "Our Slack channel for releases is #releases.",
    ]
    assert drafts[1].links == (Link("supersedes", "mem_old"),)


@pytest.mark.parametrize(
    "text",
    [
        "Maria: I'm moving on from that job to something new.",
        "Melanie: I moved to Boston to be closer to her.",
    ],
)
def test_personal_statements_are_no_facts_and_keep_their_type(text: str) -> None:
    assert fact(text) is None
    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", text, AT)
    assert RuleStructurer().structure(event, lambda _query: [])[0].type == "episode"


# --- guards from real chat (LoCoMo): opinions, formulas and other speakers' generic subjects --------


def stored(text: str) -> CandidateMemory:
    """``text`` as the service stores it: the structurer's first draft, with its type and subject."""
    event = EventToStructure("evt_0", "s", 1, "h" * 64, "message", text, EARLIER)
    draft = RuleStructurer().structure(event, lambda _query: [])[0]
    return CandidateMemory("mem_old", draft.type, draft.content, EARLIER, "s", draft.subject)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Caroline: The colors are so bold and it really highlights the beauty of nature.",
            "Melanie: The colors are so bright and the flowers are so pretty.",
        ),
        (
            "Gina: Your studio is gonna make a huge difference.",
            "Gina: Your studio will be a go-to spot for self-expression.",
        ),
        (
            "John: My family is my motivation and they keep me going.",
            "John: Yeah, my family is awesome - me, the missus, and the kids.",
        ),
        (
            "John: Pets are the best for lifting our spirits.",
            "Maria: Pets are great at making you feel loved.",
        ),
        (
            "Nate: The game was called Counter-Strike: Global Offensive.",
            "Nate: Gaming has been my focus - practicing a lot and even winning a few tournaments.",
        ),
        ("John: Things are going well!", "Tim: Things have been great since we last talked."),
        ("Tim: No worries.", "John: No worries."),
        ("John: No worries.", "John: No worries!"),
        (
            "John: Basketball has been a part of my life ever since I was a kid.",
            "John: Basketball has been great to me, so I want to give something back.",
        ),
        (
            "John: The Wolves are my team for sure.",
            "Tim: The Wolves are solid and LeBron's skills and leadership are amazing.",
        ),
        ("John: And LeBron is the man - love his skills and leadership.", "Tim: LeBron is incredible."),
        (
            "Tim: Nature is indeed refreshing.",
            "Tim: Nature is really awesome - it makes us feel tiny but connected.",
        ),
        (
            "John: Finding the right balance was tricky, but I eventually got the hang of it.",
            "John: Finding the right balance is key and I'll keep that in mind.",
        ),
        (
            "John: Loving it when people are passionate about their work.",
            "John: Love being with people who are as passionate about Harry Potter as us!",
        ),
        ("John: Things have been wild!", "John: Things have been going great on the court."),
    ],
)
def test_opinions_formulas_and_generic_subjects_in_chat_do_not_link(old: str, new: str) -> None:
    assert links(new, stored(old)) == []


@pytest.mark.parametrize(
    "value",
    [
        "so bold and it really highlights the beauty of nature",
        "great",
        "awesome - me, the missus, and the kids",
        "incredible",
        "key",
        "solid and LeBron's skills and leadership are amazing",
        "a huge difference",
        "my motivation and they keep me going",
        "gonna make a huge difference",
        "going well",
        "indeed refreshing",
        "the best for lifting our spirits",
    ],
)
def test_evaluations_are_no_fact_values(value: str) -> None:
    assert evaluative(value)


@pytest.mark.parametrize(
    "value",
    [
        "June 25",
        "9am",
        "$35 a month",
        "Priya",
        "maple42",
        "the cafeteria",
        "room 4B",
        "three weeks",
        "casual",
    ],
)
def test_dates_names_amounts_codes_and_places_are_fact_values(value: str) -> None:
    assert not evaluative(value)


@pytest.mark.parametrize("text", ["No worries.", "No problem!", "No thanks.", "No big deal.", "No rush."])
def test_formulas_are_no_cancellations(text: str) -> None:
    change = detect_change(statement_of_text(f"John: {text}"))
    assert change is None or change.kind != "cancel"


@pytest.mark.parametrize(
    "old",
    [
        "Tom moved to Lisbon in May.",  # what happened, not a plan
        "Lisbon has the best pastries.",  # no day at all
        "Lisbon trip: May 10–14, loved it.",  # a day gone by
    ],
)
def test_a_plan_given_up_by_its_name_cancels_no_memory_of_the_past_or_without_a_day(old: str) -> None:
    assert links("We're not going to Lisbon after all.", candidate(old)) == []


def test_a_cancellation_does_not_cancel_a_statement_that_something_is_not_happening() -> None:
    old = CandidateMemory("mem_old", "decision", "Tim: No standup today.", EARLIER, "s", "standup")
    assert links("Tim: No standup tomorrow.", old) == []


@pytest.mark.parametrize("subject", ["things", "pets", "nature", "colors", "wolves"])
def test_general_words_and_bare_plurals_are_generic_subjects(subject: str) -> None:
    assert generic_subject(subject)


@pytest.mark.parametrize(
    "subject", ["standup", "all-hands", "dana phone number", "status", "billing migration"]
)
def test_specific_subjects_are_not_generic(subject: str) -> None:
    assert not generic_subject(subject)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a fact value of the same kind for the same specific subject
        ("Lea: The standup is at 9am.", "Tom: The standup is at 10am."),
        ("Lea: Dana's phone number is 555-0142.", "Tom: Dana's phone number is 555-0199."),
        ("Lea: The all-hands is in the main auditorium.", "Tom: The all-hands is in the cafeteria."),
        # a cue
        ("Lea: The offsite venue is the Hilton.", "Tom: The offsite venue is now the Marriott."),
        ("Lea: Marco owns the billing migration.", "Tom: Priya is taking over the billing migration."),
        ("Lea: Mia lives in Lisbon.", "Tom: Mia moved to Porto last month."),
    ],
)
def test_another_speakers_update_with_a_fact_value_or_a_cue_still_supersedes(old: str, new: str) -> None:
    assert links(new, candidate(old)) == [Link("supersedes", "mem_old")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Lea: The offsite venue is the Hilton.", "Tom: The offsite venue is the Marriott."),
        ("Lea: Tickets are $20.", "Tom: Tickets are $25."),
        ("Lea: The venue is great.", "Lea: The venue is now awful."),
    ],
)
def test_another_speakers_plain_or_generic_statement_and_opinions_do_not_link(old: str, new: str) -> None:
    assert links(new, candidate(old)) == []


def test_an_opinion_never_conflicts_even_with_a_cue() -> None:
    old, new = fact("Nature is refreshing."), fact("Nature is really awesome now.")
    assert old is not None
    assert new is not None
    assert not conflicts(new, old, cued=True)

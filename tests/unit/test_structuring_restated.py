"""Updates without a change word and tasks reported done in other words (#15 item 2): a later
statement that restates an earlier one with one value replaced supersedes it, a report that says
most of an open task with a completion closes it; recall's safety net drops the older of two
memories that answer a question about a current value differently (#15 item 3).

docs/structuring-rules.md, "Restated with a new value" and "Recall's safety net".
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kaibo_core.core.recall.answer_slots import asked_kinds, question_topic
from kaibo_core.core.recall.conflicts import outdated
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.completed import closed_tasks, reports_completion
from kaibo_core.core.structuring.drafts import CandidateMemory, EventToStructure, Link, MemoryDraft
from kaibo_core.core.structuring.facts import additive
from kaibo_core.core.structuring.restated import (
    clauses,
    read,
    replaces_value,
    restated_candidates,
    retired_together,
)
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.structuring.statements import split_statements
from kaibo_core.core.text import analyze, query_terms

AT = "2026-06-03T09:00:00.000Z"
EARLIER = "2026-06-01T09:00:00.000Z"


def restates(new: str, old: str) -> bool:
    return replaces_value(read(new), read(old))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The deadline for the grant report is June 20.", "Grant report deadline: June 27."),
        ("Headcount for the data team is 12.", "The data team headcount is 15."),
        ("Marco owns the billing migration.", "Priya owns the billing migration."),
        ("The standup is at 9:15.", "Scratch that, standup is at 9:45."),
        ("The vendor demo is on Wednesday at 2pm.", "The vendor demo is on Thursday at 11am."),
        ("The support hotline is 1-800-555-0100.", "Support hotline: 1-800-555-0199."),
        ("The sprint length is two weeks.", "The sprint length is three weeks."),
        ("Invoices go to billing@acme.example.", "Invoices go to ap@acme.example going forward."),
        ("Release notes are posted in #ship-it.", "Release notes are posted in #releases."),
        (
            "Nightly exports are written to s3://acme-exports.",
            "Nightly exports are written to s3://acme-data.",
        ),
    ],
)
def test_the_same_statement_with_one_value_replaced_is_an_update(old: str, new: str) -> None:
    assert restates(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The gym opens at 6am on weekdays.", "The gym opens at 8am on weekends."),  # another scope
        ("Ana's email is ana@acme.example.", "Ben's email is ben@acme.example."),  # another person
        ("Priya is the point of contact for Globex.", "Raj is the point of contact for Initech."),
        ("Our budget is $40,000.", "Their budget is $60,000."),  # another holder
        ("The demo is on Thursday.", "The demo is at 4pm."),  # a time added to a date
        ("The wifi password is maple42.", "The guest wifi password is birch77."),  # narrower
        ("Ana will review the security audit.", "Ben will review the security audit."),  # both may
        ("The launch is on July 1.", "The launch party is on July 8."),  # another thing
        ("The standup is at 9:15.", "The standup is at 9:15."),  # nothing replaced
    ],
)
def test_another_subject_scope_holder_or_role_is_not_an_update(old: str, new: str) -> None:
    assert not restates(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # an address is one value, and "address" is said by giving one
            "HQ mailing address: 500 Market St, Suite 200, San Francisco, CA 94105.",
            "Send HQ mail to 1 Ferry Building, Suite 50, San Francisco, CA 94111.",
        ),
        (
            "Grandma's address: 14 Elm Street, Portland, OR 97205.",
            "220 Birch Ave, Apt 3, Beaverton, OR 97005.",
        ),
        (  # "Lily's dose" and "Lily is …" name one person
            "Lily's ibuprofen dose is 5 ml every 6-8 hours.",
            "Lily is over 20 kg, so her ibuprofen dose is 7.5 ml every 6-8 hours.",
        ),
        (  # anchored by an identifier both name, with a word of the topic
            "Dr. Okafor's office number is 555-0142, they pick up after 8:30.",
            "Dr. Okafor's office: call 555-0199.",
        ),
        (
            "Quarterly VAT return for Q1 must be filed by 7 May 2026.",
            "Q1 VAT return can go in on 14 May 2026 without a penalty, extension granted.",
        ),
        (  # the same address written in more detail is not an address replaced
            "The landlord's phone is 555-0101, office at 12 Oak St, Apt 4.",
            "The landlord's phone is 555-0199, office at 12 Oak St, Apt 4, Springfield.",
        ),
    ],
)
def test_an_update_anchored_by_a_name_code_or_address_is_an_update(old: str, new: str) -> None:
    assert restates(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # another owner named
            "Grandma's address: 14 Elm Street, Portland, OR 97205.",
            "Uncle Bob's address: 220 Birch Ave, Beaverton, OR 97005.",
        ),
        ("The dentist is at 5 Main St.", "The gym is at 12 Oak Ave."),  # another place
        ("Lily's ibuprofen dose is 5 ml.", "Max's ibuprofen dose is 7.5 ml."),  # another person
        ("Invoice #4471 to Globex totals $12,400.", "Invoice #4472 to Globex totals $14,200."),
        ("Dr. Okafor's office number is 555-0142.", "Dr. Okafor's home number is 555-0199."),
        # the anchor is shared, the attribute is not: one word lost, others gained, little shared
        ("Invoice 4471 totals $12,400.", "Invoice 4471 deposit paid: $5,000."),
        # the anchor is shared, the subject (the first word of the topic) is not
        ("Q2 board deck is due June 5.", "Investor letter for Q2: due June 12."),
        (
            "api-gateway p99 latency target: 200ms.",
            "search-svc p99 latency target: 450ms (ranking is expensive).",
        ),
        # the anchor is shared, a word after a shared one was swapped ("renewal" → "signing")
        (
            "The Globex support contract renewal: June 3.",
            "The Globex support contract signing ceremony: June 10.",
        ),
    ],
)
def test_a_shared_anchor_with_another_subject_or_attribute_is_not_an_update(old: str, new: str) -> None:
    assert not restates(new, old)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Exports land in s3://kaibo-exports-prod.", ("url", "s3://kaibo-exports-prod")),
        ("Docs at https://docs.kaibo.dev/start.", ("url", "https://docs kaibo dev/start")),  # as compared
        ("Release chatter happens in #ship-it.", ("code", "#ship-it")),
        ("CI results are posted in #ci-builds.", ("code", "#ci-builds")),
    ],
)
def test_a_link_of_any_scheme_and_a_channel_are_one_value(text: str, value: tuple[str, str]) -> None:
    assert value in read(text).values


@pytest.mark.parametrize(
    ("text", "address"),
    [
        (
            "Send HQ mail to 1 Ferry Building, Suite 50, San Francisco, CA 94111.",
            "1 ferry building suite 50 san francisco ca 94111",
        ),
        ("Returns go to 77 Dock Rd, Newark NJ.", "77 dock rd newark nj"),
        ("The office moved to Hauptstraße 5, 10115 Berlin.", "hauptstraße 5 10115 berlin"),
    ],
)
def test_a_street_address_is_one_value_not_names_and_numbers(text: str, address: str) -> None:
    values = read(text).values
    assert ("address", address) in values
    assert not {kind for kind, _ in values} & {"number", "date"}
    # "Send" before "HQ" reads as a name; the parts of the address never do
    assert not {value for kind, value in values if kind == "name"} - {"send"}


def test_an_update_to_a_version_numbered_subject_is_read_as_one_statement() -> None:
    """ "4.2 code freeze …" starts with a number and a dot, but it is not a numbered list."""
    found = structured_links(
        "4.2 code freeze slipped a week to February 13 because of the auth regression.",
        "Code freeze for 4.2 is Friday February 6.",
    )
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]


def candidate(content: str, memory_type: str = "fact", stream: str = "s") -> CandidateMemory:
    return CandidateMemory("mem_old", memory_type, content, EARLIER, stream)  # type: ignore[arg-type]


def test_first_person_values_are_replaced_only_in_their_own_stream_and_by_their_speaker() -> None:
    mine = "My flight is at 9am."
    new = "My flight is at 11am."
    assert restated_candidates(new, None, "s", [candidate(mine)])
    assert not restated_candidates(new, None, "t", [candidate(mine)])
    assert not restated_candidates(new, "Lea", "s", [candidate(f"Jin: {mine}")])
    assert restated_candidates(new, "Jin", "s", [candidate(f"Jin: {mine}")])


def test_another_speakers_value_is_a_disagreement_not_an_update() -> None:
    old = candidate("Lea: The offsite venue is the Hilton.")
    assert not restated_candidates("The offsite venue is the Marriott.", "Tom", "s", [old])


@pytest.mark.parametrize(
    ("new", "old", "old_type"),
    [
        ("The launch is on July 8.", "The launch was on July 1.", "fact"),  # history
        ("The launch was on July 8.", "The launch is on July 1.", "fact"),
        ("The launch is on July 8.", "The launch is on July 1.", "episode"),  # a story, no value
        ("The launch is on July 8.", "Is the launch on July 1?", "fact"),  # a question
    ],
)
def test_history_past_tense_questions_and_episodes_are_never_replaced(
    new: str, old: str, old_type: str
) -> None:
    assert not restated_candidates(new, None, "s", [candidate(old, old_type)])


def structured_links(new: str, old: str) -> list[Link]:
    old_event = EventToStructure("evt_0", "s", 1, "h" * 64, "message", old, EARLIER)
    olds = [
        CandidateMemory(f"mem_old{i}", d.type, d.content, EARLIER, "s", d.subject)
        for i, d in enumerate(RuleStructurer().structure(old_event, lambda _query: []))
    ]

    def search(query: str) -> Sequence[CandidateMemory]:
        return [c for c in olds if set(query_terms(query)) & set(analyze(c.content))]

    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", new, AT)
    drafts: list[MemoryDraft] = RuleStructurer().structure(event, search)
    return [link for draft in drafts for link in draft.links]


def supersedes(new: str, old: str) -> bool:
    """The rule structurer, searching as the index does, links ``new`` to a memory of ``old``."""
    return any(link.kind == "supersedes" for link in structured_links(new, old))


def test_the_structurer_links_an_update_stated_without_a_change_word() -> None:
    found = structured_links(
        "Headcount for the data team: 15. Hiring closes Friday.", "The data team headcount is 12."
    )
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]


def test_a_plan_no_type_fits_gets_its_new_value_and_a_story_in_the_past_does_not() -> None:
    plan = "Team dinner Friday 7pm at Osteria Nino, table for 12."
    found = structured_links("Team dinner Friday 8pm at Osteria Nino, table for 12.", plan)
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]
    story = "We had the team dinner Friday at 7pm at Osteria Nino."
    assert structured_links("Team dinner Friday 8pm at Osteria Nino.", story) == []


def close(_text: str, _candidate: CandidateMemory) -> float:
    """The model finds them close."""
    return 0.99


def test_a_story_kept_as_one_episode_and_a_plain_report_of_the_past_replace_nothing() -> None:
    """LoCoMo, with the model on: a chat turn of several statements kept as one episode and a
    report of last Friday are no plan and no plan's new value."""
    plan = "Adoption agency interviews start on August 21, 2023."
    told = f"Hey Mel! Big week for me. {plan}"
    new = "Adoption agency interviews start on October 20, 2023!"
    assert restated_candidates(new, None, "s", [candidate(plan, "episode")], close)
    assert not restated_candidates(new, None, "s", [candidate(told, "episode")], close)
    assert not restated_candidates(
        "I passed the adoption agency interviews last Friday (October 20, 2023)!",
        None,
        "s",
        [candidate("The adoption agency interviews are on September 1, 2023.")],
        close,
    )


def test_a_change_naming_an_old_value_no_memory_holds_links_nothing() -> None:
    # "from July 10" names a value the stored memory does not hold: the change is about
    # something else, and the restatement reading must not link it either.
    assert (
        structured_links("Move the release target from July 10 to July 17.", "The release target is July 13.")
        == []
    )


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("When is the Q3 review?", {"date", "time"}),
        ("Who owns the billing migration?", {"name"}),
        ("How much does the Pro plan cost?", {"number", "amount"}),
        ("What is Dana's phone number?", {"phone"}),
        ("What is the support email?", {"email"}),
        ("When did we ship the beta?", set()),  # an event in the past, not a current value
        ("What does Sam like?", set()),
    ],
)
def test_a_question_about_a_current_value_names_the_kind_of_its_answer(
    question: str, kinds: set[str]
) -> None:
    assert asked_kinds(question) == kinds


def ranked(memory_id: str, text: str, valid_from_ms: int, memory_type: str = "fact") -> Ranked:
    return Ranked(memory_id, 1.0, frozenset(analyze(text)), text, valid_from_ms, memory_type)


def test_recall_drops_the_older_of_two_memories_that_answer_a_current_question_differently() -> None:
    older = ranked("old", "Runbook review for the DR drill: Hassan.", 1)
    newer = ranked("new", "Mei takes the DR drill runbook review.", 2)
    assert outdated([older, newer], "Who does the DR drill runbook review?") == {"old": "new"}
    # Without a question about a current value, the two are not compared that way.
    assert outdated([older, newer], "What happened at the DR drill?") == {}


@pytest.mark.parametrize(
    ("first", "second", "question"),
    [
        (
            "Acme's renewal is due on March 1.",
            "Globex's renewal is due on March 8.",
            "When is Acme's renewal due?",
        ),
        ("The demo is at 4pm.", "The demo prep is at 2pm.", "When is the demo?"),
        ("Dana: My flight is at 9am.", "Leo: My flight is at 11am.", "When is my flight?"),
        ("The launch was on July 1.", "The launch is on July 8.", "When is the launch?"),
    ],
)
def test_recall_keeps_answers_about_other_subjects_speakers_or_the_past(
    first: str, second: str, question: str
) -> None:
    assert outdated([ranked("a", first, 1), ranked("b", second, 2)], question) == {}


def test_only_value_holding_memory_types_are_compared_by_question() -> None:
    older = ranked("old", "Runbook review for the DR drill: Hassan.", 1, "episode")
    newer = ranked("new", "Mei takes the DR drill runbook review.", 2)
    assert outdated([older, newer], "Who does the DR drill runbook review?") == {}


def test_the_question_topic_leaves_out_question_words() -> None:
    assert question_topic("When is the Q3 review?") == frozenset(analyze("Q3 review"))


def test_a_fact_without_any_value_costs_no_search() -> None:
    searched: list[str] = []

    def search(query: str) -> Sequence[CandidateMemory]:
        searched.append(query)
        return []

    event = EventToStructure(
        "evt_1", "s", 2, "h" * 64, "message", "the staging cluster uses spot instances.", AT
    )
    drafts = RuleStructurer().structure(event, search)
    assert [draft.type for draft in drafts] == ["fact"]
    assert searched == []


def test_attachment_captions_state_no_value() -> None:
    # LoCoMo: two photos of turtles, months apart, are two photos, not an update of a count.
    old = candidate("Nate: [attachment: a photography of three turtles sitting on rocks in a pond]")
    new = "[attachment: a photography of two turtles sitting on a rock in a pond]"
    assert not restated_candidates(new, "Nate", "s", [old])


def task(content: str) -> CandidateMemory:
    return CandidateMemory("mem_task", "task", content, EARLIER, "s")


@pytest.mark.parametrize(
    ("open_task", "report"),
    [
        (
            "TODO: export the March invoices and send them to the accountant.",
            "Done with the invoice export, sent it over.",
        ),
        ("Open item: rotate the Stripe API keys.", "Stripe API keys rotated this morning."),
        ("Need to renew Leo's passport before the summer trip.", "Leo's passport renewal is done."),
        ("We still have to file the 1099s for the contractors.", "1099s filed for all contractors."),
        # another verb that does it, in a report about the task alone
        ("Pick up the dry cleaning Thursday (ticket 5521).", "Got the dry cleaning 👍"),
        ("Buy the Lizzo concert tickets.", "Got the Lizzo concert tickets!"),
        ("Call the bank about the mortgage rate lock.", "Talked to the bank about the mortgage rate lock."),
        # completions said as things moving: out, in, through, handed in, passed
        ("TODO: mail the Ridley deposit cheque.", "Ridley deposit cheque went out this morning."),
        ("Renew Mia's driving licence.", "Mia's new driving licence came in the post!"),
        ("Need to hand in the school trip form.", "School trip form handed in today."),
        ("Get the boiler safety inspection done.", "Boiler safety inspection passed, certificate on file."),
    ],
)
def test_a_task_reported_done_in_words_of_its_own_is_closed(open_task: str, report: str) -> None:
    assert closed_tasks(report, None, [task(open_task)])


@pytest.mark.parametrize(
    ("open_task", "report", "speaker"),
    [
        ("Rotate the Stripe API keys.", "We need to rotate the Stripe API keys soon.", None),  # still to do
        ("Rotate the Stripe API keys.", "Did anyone rotate the Stripe API keys?", None),  # a question
        ("Rotate the Stripe API keys.", "The AWS keys were rotated.", None),  # another thing
        ("Tim: I'll make sure to book the trip.", "We booked the trip.", "John"),  # another speaker's task
        ("Export the March invoices.", "Exported the holiday photos.", None),  # too little in common
        ("Pick up Ana from school at 3.", "Got Ana's message about school.", None),  # about something else
    ],
)
def test_plans_questions_other_things_and_other_speakers_tasks_close_nothing(
    open_task: str, report: str, speaker: str | None
) -> None:
    assert not closed_tasks(report, speaker, [task(open_task)])


def test_a_long_narrative_in_the_past_costs_no_search() -> None:
    narrative = "We played a top team last weekend and it was tough, but we fought hard and won the game."
    assert not reports_completion(narrative)
    assert reports_completion("Stripe keys rotated.")
    assert reports_completion("Done with the invoice export.")


def test_the_structurer_closes_an_open_task_reported_done_in_other_words() -> None:
    found = structured_links(
        "Stripe API keys rotated this morning, old ones revoked.", "Need to rotate the Stripe API keys."
    )
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]


def test_a_report_also_read_as_a_change_that_retires_nothing_still_closes_its_task() -> None:
    # "1099-NECs filed for … via Track1099" also reads as a conflict of facts, which finds no fact
    found = structured_links(
        "1099-NECs filed for all four contractors via Track1099.",
        "We still have to file 1099-NECs for the four contractors.",
    )
    assert [(link.kind, link.memory_id) for link in found] == [("supersedes", "mem_old0")]


def test_an_initial_after_a_name_is_part_of_the_name_not_a_topic_word() -> None:
    # "Tom R." and "Tom S." are two people; the initial is no word of what the statement is about.
    reading = read("On call this week for payments: Tom R.")
    assert ("name", "tom r") in reading.values
    assert "r" not in reading.topic
    assert read("Tom R. is on call.").values >= {("name", "tom r")}


@pytest.mark.parametrize(
    ("text", "adds"),
    [
        ("The Berlin office has a second entrance on Linienstrasse.", True),
        ("We're opening another office in Lisbon.", True),
        ("I also like climbing.", True),
        ("Summit budget raised to $65k to cover the second keynote.", False),  # one already known
        ("The garage sale is the second Saturday of May.", False),
    ],
)
def test_a_second_thing_adds_a_value_and_the_second_thing_does_not(text: str, adds: bool) -> None:
    assert additive(split_statements(text).statements[0]) is adds


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (  # the update is one clause among others that bring values of their own
            "Milo's vaccination: this Friday at 9:15.",
            "Clinic rang — Milo's vaccination is Monday at 17:45, vet is out Friday.",
        ),
        ("Invoice #4471 to Globex totals $12,400.", "Sorry, typo above — invoice 4471 is $14,200."),
        (  # what was done before a colon is a clause of its own
            "Prod runs Postgres 14, so no MERGE ... RETURNING.",
            "Checked the RDS console: prod is on Postgres 15.4.",
        ),
    ],
)
def test_a_clause_that_restates_a_clause_with_one_value_replaced_is_an_update(old: str, new: str) -> None:
    assert not restates(new, old)  # the whole statements differ in more than one thing
    assert restated_candidates(new, None, "s", [candidate(old)])


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the earlier clause says whose value it is, the later one does not name them
        ("Acme's contract value is $120k ARR, renewal in November.", "Contract value $95k ARR, 2-year term."),
        # a date's year is no clause of its own; "this week" alone is too little to tell
        (
            "Hey John, this week (week of August 21, 2023)'s been really busy for me.",
            "This week (week of November 13, 2023) has been swamped with exams for me but I'm coping.",
        ),
        ("Crazy days at work; this week: August 21.", "Exams all month; this week: November 13."),
    ],
)
def test_clauses_of_another_owner_or_too_short_to_tell_are_not_an_update(old: str, new: str) -> None:
    assert not restated_candidates(new, None, "s", [candidate(old)])


def test_a_sentence_splits_into_clauses_but_not_inside_an_address_or_a_date() -> None:
    assert clauses("Clinic rang — Milo's vaccination is Monday at 17:45, vet is out Friday.") == [
        "Clinic rang",
        "Milo's vaccination is Monday at 17:45",
        "vet is out Friday.",
    ]
    assert clauses("Grandma moved to 220 Birch Ave, Apt 3, Beaverton, OR 97005.") == [
        "Grandma moved to 220 Birch Ave, Apt 3, Beaverton, OR 97005."
    ]
    assert clauses("The launch is on August 21, 2023 in Berlin.") == [
        "The launch is on August 21, 2023 in Berlin."
    ]
    # what was done or heard before a colon is a clause; a label before a colon is not
    assert clauses("Checked the RDS console: prod is on Postgres 15.4.") == [
        "Checked the RDS console",
        "prod is on Postgres 15.4.",
    ]
    assert clauses("Milo's vaccination: this Friday at 9:15.") == ["Milo's vaccination: this Friday at 9:15."]


def test_a_label_names_what_the_statement_is_about() -> None:
    old = "Customer exports land in s3://kaibo-exports-prod."
    label = "Customer exports: s3://kaibo-data-exports-prod (renamed for the bucket naming policy)."
    assert restates(label, old)  # the label says what "land in" said, in words of its own
    assert not restates("Staff exports: s3://kaibo-data-exports-prod.", old)  # another thing
    # a label that leaves out where the earlier statement names its subject ("board") is another thing
    assert not restates("Deck: due June 12.", "Q2 board deck is due June 5.")
    # a date in the label is no topic word of it
    assert restates("Friday recital: 15 chairs are enough.", "For Friday's recital we need 12 chairs.")


def test_a_one_word_label_read_as_a_speaker_is_a_label_when_the_other_statement_says_it() -> None:
    # "Returns:" opens the later statement like a speaker's name; the earlier one says "Returns"
    old = candidate("Returns go to our warehouse at 77 Dock Rd, Newark NJ.")
    assert restated_candidates("ship to 1200 Logistics Pkwy, Allentown PA.", "Returns", "s", [old]) == [old]
    # and the other way round: the earlier memory's label
    label = candidate("Staging: https://staging.kaibo.dev")
    assert restated_candidates("Staging is https://stg.kaibo.dev now.", None, "s", [label]) == [label]
    # a speaker the other statement does not name stays a speaker: another person's value
    assert (
        restated_candidates(
            "Returns ship to 1200 Logistics Pkwy.", "Ana", "s", [candidate("Bo: Returns go to 77 Dock Rd.")]
        )
        == []
    )


def test_a_channel_that_says_the_subject_keeps_it_a_word_not_a_name() -> None:
    new = read("#payments-oncall topic: Pager +1 415 555 0187 (PagerDuty rotation).")
    # "Payments" opens the earlier statement; the channel says it: a shared word, not a name replaced
    assert replaces_value(new, read("Payments on-call pager: +1 415 555 0133."), same_meaning=True)


def test_an_earlier_label_and_value_is_restated_by_a_statement_opening_with_the_label() -> None:
    label = candidate("Staging: https://staging.kaibo.dev")
    assert restated_candidates(
        "Staging lives at https://stg.kaibo.dev behind the VPN.", None, "s", [label]
    ) == [label]
    # a noun after the label names a narrower thing; a label of its own names another
    assert restated_candidates("Staging database lives at https://db.kaibo.dev.", None, "s", [label]) == []
    assert restated_candidates("Staging database: https://db.kaibo.dev", None, "s", [label]) == []


def test_a_person_and_their_number_replaced_together_are_one_contact() -> None:
    old = "Emergency contact for the Berlin study trip: Tom Becker, +49 30 1234567."
    assert restates("Berlin study trip emergency contact is Sofia Wagner, +49 151 7654321.", old)
    # a name and a date replaced together are still two things
    assert not restates(
        "Berlin study trip emergency contact is Sofia Wagner from May 3.",
        "Emergency contact for the Berlin study trip: Tom Becker from April 28.",
    )


def test_a_negation_in_a_remark_after_a_dash_does_not_guard_the_statement() -> None:
    remark = split_statements("Trip contact is Sofia Wagner, +49 151 7654321 — Tom can't travel.").statements[
        0
    ]
    assert not remark.negated
    negated = split_statements("Trip contact is not Sofia Wagner — Tom stays on.").statements[0]
    assert negated.negated


def test_a_retired_memory_takes_along_its_events_memory_saying_the_same_and_nothing_else() -> None:
    def memory(memory_id: str, content: str, subject: str | None, at: str = EARLIER) -> CandidateMemory:
        return CandidateMemory(memory_id, "fact", content, at, "s", subject)

    gone = memory("fact", "The mobile launch is on March 9, 2026.", "mobile launch")
    said = memory("said", "App Store review is slow, mobile launch slips to March 9, 2026.", "mobile launch")
    assert retired_together([gone], [gone, said]) == [said]
    others = [
        memory(
            "other", "The mobile launch press kit is ready on March 9, 2026.", "press kit"
        ),  # another subject
        memory(
            "later", "App Store review is slow, mobile launch slips to March 9, 2026.", "mobile launch", AT
        ),
        memory("value", "The mobile launch is on March 10, 2026.", "mobile launch"),  # another value
        memory("words", "Launch party on March 9, 2026.", "mobile launch"),  # words of its own
    ]
    assert retired_together([gone], others) == []


def test_a_name_opening_both_statements_is_a_shared_word_whatever_its_possessive() -> None:
    # "Kenji" and "Kenji's" open the two statements: one subject, its address replaced
    assert restates("Kenji's new address: 12 Willow Ct, apt 3", "Kenji lives at 88 Cedar Ave")
    assert restates("Wen got a new phone: 415-555-0188", "Wen's number 415-555-0102")


def test_a_remark_in_the_past_after_the_new_value_does_not_make_the_statement_history() -> None:
    old = candidate("Warehouse B has 42 pallets of SKU 9931.")
    new = "Cycle count done: SKU 9931 in Warehouse B is 38 pallets, the other 4 were mislabeled 9913."
    assert restated_candidates(new, None, "s", [old]) == [old]
    # told in the past from its first clause, it is history
    assert (
        restated_candidates("SKU 9931 in Warehouse B was 38 pallets, the count says.", None, "s", [old]) == []
    )

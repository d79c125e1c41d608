"""Statement splitting, cues and classification of the rule structurer."""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.classify import (
    Classification,
    classify,
    parse_copula,
    parse_preference,
    subject_of,
    value_kind,
)
from kaibo_core.core.structuring.statements import (
    MAX_STATEMENTS,
    Statement,
    prepare,
    split_speaker,
    split_statements,
)


def texts(text: str) -> list[str]:
    return [statement.text for statement in split_statements(text).statements]


# --- splitting ----------------------------------------------------------------------------------------


def test_sentences_lines_and_semicolons_become_statements() -> None:
    assert texts(
        "The standup is at 9am. Bob will send the notes!\nAnything else? Yes; the retro is at 4pm."
    ) == [
        "The standup is at 9am.",
        "Bob will send the notes!",
        "Anything else?",
        "Yes",
        "the retro is at 4pm.",
    ]


def test_abbreviations_versions_and_times_do_not_end_a_sentence() -> None:
    assert texts("Dr. Smith reviews v1.2.3 at 10 a.m. Friday, e.g. the auth part. Done.") == [
        "Dr. Smith reviews v1.2.3 at 10 a.m. Friday, e.g. the auth part.",
        "Done.",
    ]
    assert texts("Prof. Amadi wants my full thesis draft by Oct 1. Rev. Ortiz signs it.") == [
        "Prof. Amadi wants my full thesis draft by Oct 1.",
        "Rev. Ortiz signs it.",
    ]


def test_a_numbered_list_stays_one_statement_with_its_header() -> None:
    split = split_statements("To deploy:\n1. Run the tests.\n2. Tag the release.\nThanks!")
    assert [s.text for s in split.statements] == [
        "To deploy:\n1. Run the tests.\n2. Tag the release.",
        "Thanks!",
    ]
    assert split.statements[0].numbered


def test_a_version_number_at_the_start_is_not_a_numbered_list() -> None:
    split = split_statements("4.2 code freeze slipped to February 13.\n1) Merge the fix.")
    assert [s.numbered for s in split.statements] == [False, True]


def test_the_speaker_is_taken_off_but_labels_are_not_speakers() -> None:
    assert split_speaker("Anna: I prefer tea.") == ("Anna", "I prefer tea.")
    assert split_speaker("Anna Lee: hi") == ("Anna Lee", "hi")
    assert split_speaker("TODO: write tests") == (None, "TODO: write tests")
    assert split_speaker("Note: the API is slow") == (None, "Note: the API is slow")
    statements = split_statements("Anna: Hi. I prefer tea.").statements
    assert [s.speaker for s in statements] == ["Anna", "Anna"]
    assert split_speaker("Mary-Jo O'Neil: hi") == ("Mary-Jo O'Neil", "hi")


def test_a_tickets_id_is_a_label_not_a_speaker() -> None:
    assert split_speaker("BUG-2210: CSV export drops rows with emoji.") == (
        None,
        "BUG-2210: CSV export drops rows with emoji.",
    )
    renew = split_statements("OPS-2291: Renew the wildcard cert for *.kestrel.app.").statements[0]
    assert (renew.speaker, renew.label, renew.core) == (
        None,
        "ops-2291",
        "Renew the wildcard cert for *.kestrel.app",
    )


def test_statement_count_is_capped_and_the_rest_kept_as_overflow() -> None:
    text = " ".join(f"Fact number {i} is true." for i in range(MAX_STATEMENTS + 5))
    split = split_statements(text)
    assert len(split.statements) == MAX_STATEMENTS
    assert split.overflow.startswith(f"Fact number {MAX_STATEMENTS} is true.")
    assert split.overflow.endswith(f"Fact number {MAX_STATEMENTS + 4} is true.")


# --- cues ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("Should we cancel the review?", "question"),
        ("Did we move the release", "question"),
        ("If we moved the release to July 20, QA would have time.", "hedged"),
        ("We might cancel the review.", "hedged"),
        ("Maybe the standup should be at 10am.", "hedged"),
        ("We are considering moving the offsite.", "hedged"),
        ("We may move the offsite to June.", "hedged"),
        ("May we move the offsite?", "hedged"),
        ("Anna said they moved the release.", "reported"),
        ("According to Raj, the standup is at 10am.", "reported"),
        ("We are not moving the release.", "negated"),
        ("We won't cancel the review.", "negated"),
        ("The other option is to push the offsite to June.", "hedged"),  # an option put forward
        ("One option: move the standup to 10.", "hedged"),
    ],
)
def test_guards(text: str, flag: str) -> None:
    statement = prepare(text)
    assert getattr(statement, flag)
    assert statement.guarded


@pytest.mark.parametrize(
    "text",
    [
        "Correction: the conference in Lisbon is on the 15th of May.",  # the month, not the verb
        "The launch moved to May 14.",
        "The offsite is in May this year.",
        "The VAT return can go in on 14 May without a penalty.",  # "without" negates nothing said
        "Oskar went vegan, please get him the plant-based option.",  # an option off a menu, chosen
    ],
)
def test_the_month_may_and_a_without_phrase_are_no_guards(text: str) -> None:
    assert not prepare(text).guarded


@pytest.mark.parametrize(
    "text",
    [
        "We no longer use Jenkins.",
        "We don't use Jenkins anymore.",
        "Move the release to May 5.",
        "Do it now.",
    ],
)
def test_change_wording_is_not_a_guard(text: str) -> None:
    assert not prepare(text).guarded


@pytest.mark.parametrize(
    ("text", "core", "cue"),
    [
        ("Actually, the standup is at 10am.", "the standup is at 10am", True),
        ("OK so actually the standup is at 10am", "the standup is at 10am", True),
        ("Correction: the venue is the Marriott.", "the venue is the Marriott", True),
        ("From now on, the sync is on Thursdays.", "the sync is on Thursdays", True),
        ("Update the docs.", "Update the docs", False),  # a verb, not a label
        ("No longer needed.", "No longer needed", False),
        ("Thanks, the standup is at 9am.", "the standup is at 9am", False),
    ],
)
def test_fillers_and_correction_cues_are_taken_off_the_core(text: str, core: str, cue: bool) -> None:
    statement = prepare(text)
    assert statement.core == core
    assert statement.correction_cue is cue


# --- classification -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The release target is July 13.", "fact"),
        ("Our CI runs on Jenkins.", "fact"),
        ("We decided to use Postgres.", "decision"),
        ("Let's go with the blue logo.", "decision"),
        ("Decision: ship on Friday.", "decision"),
        ("Alice will write the migration script.", "task"),
        ("TODO: update the onboarding guide.", "task"),
        ("Send the invoice to Acme by June 5.", "task"),
        ("Open item from the security review: rotate the Stripe API keys.", "task"),  # a label, then one
        ("We need to renew the certificate.", "task"),
        ("Pick up the dry cleaning Thursday.", "task"),
        ("Can you send me the report?", "task"),
        ("I prefer aisle seats.", "preference"),
        ("My favorite color is blue.", "preference"),
        ("Ben likes spicy food.", "preference"),
        ("To deploy, run make deploy and then check the dashboard.", "procedure"),
        ("First build the image, then push it.", "procedure"),
        ("We met the Acme team yesterday.", "episode"),
        ("I talked to Bob about the roadmap.", "episode"),
        ("Anna said the release might slip.", "episode"),
        ("What time is the standup?", "episode"),
    ],
)
def test_types(text: str, expected: str) -> None:
    classification = classify(prepare(text))
    assert classification is not None
    assert classification.type == expected
    assert 0.0 <= classification.confidence <= 1.0


@pytest.mark.parametrize("text", ["Plumber: Marco, 07700 900123.", "Spare key: under the blue planter."])
def test_a_value_after_a_label_is_no_instruction(text: str) -> None:
    classification = classify(prepare(text))
    assert classification is not None
    assert classification.type != "task"


@pytest.mark.parametrize("text", ["Hi!", "thanks", "Thank you so much!", "ok", "Good morning team", ":)"])
def test_chitchat_says_nothing(text: str) -> None:
    assert classify(prepare(text)) is None


def test_questions_are_less_certain_than_statements() -> None:
    question = classify(prepare("Is the standup at 9am?"))
    statement = classify(prepare("The standup is at 9am."))
    assert question == Classification("episode", 0.3)
    assert statement is not None
    assert statement.confidence > question.confidence


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("The release target is July 13.", "release target"),
        ("The standup is at 9am.", "standup"),
        ("My favorite color is blue.", "favorite color"),
        ("Bob's phone number is 555-0100.", "bob phone number"),
        ("Alice will write the migration script by Friday.", "migration script"),
        ("Eve is responsible for the vendor contract.", "vendor contract"),
        ("Fix the login bug on Safari.", "login bug"),
        ("I prefer window seats.", "seats preference"),
        ("It is what it is.", None),
        ("We met yesterday.", None),
    ],
)
def test_subjects(text: str, subject: str | None) -> None:
    statement = prepare(text)
    classification = classify(statement)
    assert classification is not None
    assert subject_of(statement, classification.type) == subject


def test_preference_subject_names_the_holder_when_known() -> None:
    statement: Statement = split_statements("Anna: I like my coffee black.").statements[0]
    preference = parse_preference(statement)
    assert preference is not None
    assert preference.subject == "anna coffee preference"
    assert parse_preference(prepare("I prefer coffee over tea.")) is not None


def test_copula_parts_and_value_kinds() -> None:
    copula = parse_copula("The standup is now at 10am")
    assert copula is not None
    assert (copula.subject, copula.prep, copula.value, copula.now, copula.kind) == (
        "standup",
        "at",
        "10am",
        True,
        "time",
    )
    assert value_kind("July 17, 2026") == "date"
    assert value_kind("$7,500") == "number"
    assert value_kind("Maya") == "name"
    assert value_kind("slow") == "other"
    assert parse_copula("It is late") is None


@pytest.mark.parametrize(
    "text",
    [
        "Treasurer floated bumping subs to £55.",
        "Subs go up to £55 next year, we'll vote on it at the AGM.",
        "Leo wants to try three-week sprints on Atlas from Q3.",
        "The venue is not confirmed yet.",
        "Offsite location TBD.",
        "Ops recommends trialling GLS for EU parcels out of Venlo.",
        "Jo keeps recommending her own walker, Tobias.",
        "Milo is lobbying hard for $15 a week.",
        "Thinking we try an 8:30 bedtime over the summer.",
        "It's worth switching to the 7:10 train.",
    ],
)
def test_what_is_floated_tried_or_not_decided_is_tentative(text: str) -> None:
    assert prepare(text).hedged


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Ruiz recommends 20 mg a day from now on.",
        "Meet in the lobby at 9:30.",
        "The 7:10 train is worth it.",
    ],
)
def test_a_recommendation_as_the_value_and_words_alike_are_not_tentative(text: str) -> None:
    assert not prepare(text).hedged


@pytest.mark.parametrize(
    "text",
    [
        "Proposal: standup moves to 10:00.",
        "Idea: standup at 9:45.",
        "Suggestion - move the retro to Fridays.",
        "What if: the offsite in Porto.",
    ],
)
def test_a_label_that_puts_something_forward_is_tentative_and_no_speaker(text: str) -> None:
    statements = split_statements(text).statements
    assert [s.speaker for s in statements] == [None]
    assert statements[0].hedged


@pytest.mark.parametrize(
    "text",
    [
        "Proposal review moved to Thursday.",
        "The grant proposal is due on May 3.",
        "The insurance claim deadline moved to May 10.",
        "Standup moved to 10:00, if anyone asks.",
        "If anyone asks, standup is at 10:00 now.",
        "Standup is at 10:00 now, in case you missed it.",
        "Rent goes up to $1,900 in June, if that helps with the budget.",
    ],
)
def test_a_proposal_or_claim_named_and_a_condition_on_telling_are_no_guards(text: str) -> None:
    assert not prepare(text).guarded


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("My proposal is to move standup to 10:00.", "hedged"),
        ("Standup moves to 10:00 if the client agrees.", "hedged"),
        ("If you can't make it, standup moves to 10:00.", "hedged"),
        ("If you need to reschedule, Friday at 3 works.", "hedged"),  # an offer
        ("Bob claims the claim deadline moved to May 10.", "reported"),
        ("Someone on the forum claims everyone switched to GitHub Actions.", "reported"),
        ("They claim the venue is booked.", "reported"),
        ("Dana's claim is that the launch moved to May 5.", "reported"),
        ("There's a claim that standup moved to 10:00.", "reported"),
        ("They claimed the venue is booked.", "reported"),
        ("Dana asks if standup moved to 10:00.", "reported"),
    ],
)
def test_a_proposal_a_condition_on_what_is_told_and_a_claim_still_guard(text: str, flag: str) -> None:
    assert getattr(prepare(text), flag)


def test_a_remark_that_nothing_is_decided_makes_its_whole_message_tentative() -> None:
    undecided = split_statements(
        "Leo wants three-week sprints on Atlas from Q3. Still under discussion, nothing agreed."
    )
    assert all(statement.hedged for statement in undecided.statements)
    # a statement with a subject of its own that is not decided leaves the others as they are
    decided = split_statements("The launch moved to May 3. Pricing not decided yet.")
    assert [statement.hedged for statement in decided.statements] == [False, True]


def test_a_negation_before_until_gives_a_new_time() -> None:
    assert not prepare("Tiles are backordered so the kitchen won't wrap up until May 22.").negated
    assert not prepare("Halden agreed to net-45, so #8812 isn't due till May 15.").guarded
    assert prepare("The kitchen won't be finished in May.").negated


@pytest.mark.parametrize(
    ("text", "negated"),
    [
        # the negation is in a remark beside the clause that holds the value
        ("Weekly eng all-hands is Tuesdays 17:00 CET, recorded for anyone who can't make it.", False),
        ("Public beta goes out 9 June 2026, assuming Play review doesn't drag.", False),
        ("Maddie gets $5 a week, chores or not.", False),
        # the clause that holds the value is negated
        ("The standup is not on the 5th, we moved it.", True),
        ("The standup is at 10, not 9.", True),
        ("We won't cancel the review, it's fine.", True),
    ],
)
def test_a_negation_in_a_remark_beside_the_value_does_not_negate_it(text: str, negated: bool) -> None:
    assert prepare(text).negated is negated

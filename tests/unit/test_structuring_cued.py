"""Updates told in other words (#15 item 2): a statement with a value of the kind an earlier memory
holds, and a cue that it changed, retires the one earlier memory that shares the most subject words
with the whole message; guards keep other subjects, other speakers, history and ties apart.

docs/structuring-rules.md, "Cued, in other words".
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kaibo_core.core.structuring.cued import _same_label, cued_candidates, cues_change, tells_change_done
from kaibo_core.core.structuring.drafts import CandidateMemory, EventToStructure
from kaibo_core.core.structuring.restated import read
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.structuring.statements import prepare, split_statements
from kaibo_core.core.text import analyze, query_terms

AT = "2026-06-02T09:30:00.000Z"
EARLIER = "2026-06-01T09:00:00.000Z"


def memories(*texts: str) -> list[CandidateMemory]:
    return [CandidateMemory(f"mem_{i}", "fact", text, EARLIER, "s") for i, text in enumerate(texts)]


def linked(message: str, *earlier: str) -> list[str]:
    """The ids of the earlier memories the rule structurer links ``message`` to."""
    candidates = memories(*earlier)

    def search(query: str) -> Sequence[CandidateMemory]:
        wanted = set(query_terms(query))
        return [c for c in candidates if wanted & set(analyze(c.content))]

    event = EventToStructure("evt_1", "s", 2, "h" * 64, "message", message, AT, "UTC")
    return [link.memory_id for draft in RuleStructurer().structure(event, search) for link in draft.links]


def queries_of(message: str) -> list[str]:
    """What the rule structurer searches with for ``message`` (a project with no memory yet)."""
    queries: list[str] = []

    def search(query: str) -> Sequence[CandidateMemory]:
        queries.append(query)
        return []

    RuleStructurer().structure(
        EventToStructure("evt_1", "s", 2, "h" * 64, "message", message, AT, "UTC"), search
    )
    return queries


def cued(message: str, *earlier: str) -> list[str]:
    """``cued_candidates`` for each statement of ``message`` (the caller's guards not applied)."""
    split = split_statements(message)
    found: list[str] = []
    for statement in split.statements:
        found += [
            c.memory_id
            for c in cued_candidates(
                statement.text, message, memories(*earlier), speaker=statement.speaker, stream="s"
            )
        ]
    return found


@pytest.mark.parametrize(
    ("message", "earlier"),
    [
        (
            "Heads up — the audit firm asked for more time. Evidence upload cutoff is now May 1.",
            "Priya: reminder that all SOC 2 evidence needs to be uploaded to Vanta by April 17.",
        ),
        ("Rent's $1,975 starting July, ugh.", "Rent for the Maple St apartment is $1,850, due on the 1st."),
        (
            "We raised the public API upload cap to 100 MB per file for the video customers.",
            "Max upload size on the public API is 25 MB per file.",
        ),
        (
            "Pricing committee landed on $15 per seat for the Team plan after the win/loss review.",
            "Decided in pricing sync: Team plan will be $12/user/month at launch.",
        ),
    ],
)
def test_an_update_in_other_words_retires_the_memory_it_gives_another_value(
    message: str, earlier: str
) -> None:
    assert linked(message, earlier) == ["mem_0"]


def test_the_other_sentences_of_the_message_name_what_a_short_one_is_about() -> None:
    earlier = "Quarantine pallets from the Brenner recall: aisle 14."
    assert cued("Aisle 14 is needed for peak overflow. The Brenner recall pallets now sit in bay 3.", earlier)
    assert not cued("They now sit in bay 3.", earlier)


def test_one_shared_word_is_enough_only_with_a_cue_and_where_both_name_their_subject() -> None:
    earlier = "Rent for the Maple St apartment is $1,850, due on the 1st."
    assert cued("Rent's $1,975 starting July, ugh.", earlier)
    assert not cued("Rent's $1,975, ugh.", earlier)  # no cue
    assert not cued(
        "The parking spot adds $75 to the rent starting July.", earlier
    )  # not what it names first


@pytest.mark.parametrize(
    "message",
    [
        "He'll come to fix the shower on Thursday instead.",
        "Plumber texted, he's stuck on a job. He'll come to fix the shower on Thursday instead.",
    ],
)
def test_a_pronoun_with_a_contracted_verb_is_no_word_of_the_subject(message: str) -> None:
    # Read as a name, "He'll" was a subject of its own the plumber's visit never names.
    assert linked(message, "Plumber is coming to fix the shower on Tuesday.") == ["mem_0"]


def test_a_statement_opening_with_a_pronoun_names_its_subject_in_its_message_s_first_sentence() -> None:
    earlier = "Plumber is coming on June 3 between 8 and 10 to look at the dripping shower valve."
    update = "He'll come Thursday morning instead, same window."
    assert linked(f"Plumber just texted, he's stuck on an emergency job across town. {update}", earlier)
    assert not linked(update, earlier)  # one word in common, and nothing says whose it is
    assert not linked(f"Electrician just texted, he's stuck on a job. {update}", earlier)
    assert not linked(f"Dana called about the plumber. {update}", earlier)  # Dana is the subject


def test_a_value_of_another_kind_retires_nothing() -> None:
    assert not cued("Evidence upload cutoff is now 3 files per team.", "Evidence upload cutoff is May 1.")
    assert cued("Evidence upload cutoff is now May 8.", "Evidence upload cutoff is May 1.")


@pytest.mark.parametrize(
    ("message", "earlier"),
    [
        # the later statement names its subject, a name the earlier one does not say
        (
            "Android release target is now June 11, about a week behind iOS.",
            "The iOS app release is scheduled for June 4.",
        ),
        # the earlier value is someone's, and the message does not name them
        (
            "Globex closed! Contract value is now $95k ARR, 2-year term.",
            "Acme's contract value is $120k ARR.",
        ),
        # a person in a role: the earlier role's scope is not repeated
        ("Sarah Kim (no relation!) is the new tech lead for billing.", "Sara Kim is tech lead for search."),
        ("Dana Lee is now the point of contact for Initech.", "Kim Osei is the point of contact for Globex."),
        # history told in the past
        (
            "In the 2024 price list the Team plan was €19 per seat, now archived.",
            "Team plan is €35 per seat per month.",
        ),
        # how long something went on is no value of it; "one" is no number
        (
            "Tim: I've been playing for about four months now and it's been an amazing adventure.",
            "Tim: I love playing songs on the piano, but my favorite one to jam to is a movie theme.",
        ),
    ],
)
def test_guards_keep_another_subject_history_and_durations_apart(message: str, earlier: str) -> None:
    assert cued(message, earlier) == []


def test_another_period_is_another_subject_unless_the_change_starts_from_it() -> None:
    earlier = "FY2026 marketing budget is approved at $2.3M."
    assert not cued("First pass at the FY2027 marketing budget: now asking for $2.9M.", earlier)
    assert not cued("Summer hours kick in June 1. Opening is now 4pm.", "Winter hours: opening is 5pm.")
    assert cued("The marketing budget is now $2.9M.", earlier)
    term = "Spring term lunch price at Marlow Primary is £2.60 per meal."
    assert cued("From the summer term the Marlow lunch price is now £2.85 per meal.", term)
    # a date's year is a day, not a period
    assert cued("Letter home today (June 2, 2026): Marlow spring term lunch price is now £2.85.", term)


def test_a_new_thing_opened_beside_the_earlier_one_replaces_nothing() -> None:
    earlier = "Dr. Lindqvist's physio practice is at 212 Alder Street, second floor."
    assert not cued(
        "Dr. Lindqvist is opening a new physio practice at 48 Quarry Road starting in April.", earlier
    )
    assert cued("Dr. Lindqvist's physio practice is now at 48 Quarry Road.", earlier)


def test_a_statement_without_a_cue_must_name_part_of_the_subject_itself() -> None:
    earlier = "Pickup for Lila when Rosa works late: aunt Rosa picks her up from school at 4pm."
    assert not cued(
        "Grandpa Walt can pick Lila up from school when Rosa works late. He gets back at 3:30.", earlier
    )
    assert cued(
        "Grandpa Walt can pick Lila up from school when Rosa works late. He now gets back at 3:30.", earlier
    )


def test_how_long_something_went_on_and_the_word_one_are_no_values() -> None:
    assert not cued(
        "Tim has been playing piano for about four months now.", "Tim plays piano 3 evenings a week."
    )
    assert cued("Tim now plays piano 4 evenings a week.", "Tim plays piano 3 evenings a week.")
    earlier = "Tim: my favorite one to jam to on the piano is a movie theme."
    assert not cued("Tim: the piano jam sessions are 3 nights a week now.", earlier)
    assert not cued("Tim now plays piano 4 evenings a week.", "Tim plays piano three evenings a week.")


def test_a_person_given_a_role_retires_its_earlier_holder() -> None:
    assert cued(
        "Dana Lee is now the point of contact for Globex.", "Kim Osei is the point of contact for Globex."
    )


def test_another_speakers_value_is_a_disagreement_not_an_update() -> None:
    earlier = "Ana: the evidence upload cutoff is April 17."
    assert cued("Ana: heads up, the upload cutoff for the evidence is now May 1.", earlier)
    assert not cued("Ben: heads up, the upload cutoff for the evidence is now May 1.", earlier)


def test_two_memories_as_close_are_a_tie_and_neither_is_retired() -> None:
    message = "Heads up: the evidence upload cutoff is now May 1."
    assert cued(message, "Evidence upload cutoff for SOC 2: April 17.") == ["mem_0"]
    assert (
        cued(
            message,
            "Evidence upload cutoff for SOC 2: April 17.",
            "Evidence upload cutoff for ISO: April 20.",
        )
        == []
    )


def test_only_memories_of_the_same_stream_are_retired() -> None:
    text = "Evidence upload cutoff is now May 1."
    other = CandidateMemory("mem_x", "fact", "Evidence upload cutoff is April 17.", EARLIER, "other")
    same = CandidateMemory("mem_y", "fact", "Evidence upload cutoff is April 17.", EARLIER, "s")
    assert cued_candidates(text, text, [other], speaker=None, stream="s") == []
    assert cued_candidates(text, text, [same], speaker=None, stream="s") == [same]


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("Evidence upload cutoff is now May 1.", True),
        ("They've put us down for August 15 instead.", True),
        ("Vuln reports go to disclosure@brambling.io from now on.", True),
        ("The cleanup volunteers are Carla's responsibility from here on.", True),
        ("Evidence upload cutoff is May 1.", False),
        ("Dr. Lindqvist is opening a new satellite clinic.", False),  # a new thing, not a new value
        ("Brightlane agreed to push the renewal to June 15.", True),  # pushed to, said in the present
        ("Please push your branch before the review.", False),  # push without a "to": no move
        ("Freeze is delayed till Friday EOD.", True),
        ("The board review is postponed to May 3.", True),
        ("UA 418 delayed to infinity.", False),  # delayed, with no new time: a flight's number is no value
    ],
)
def test_a_change_cue_is_a_word_that_says_a_value_changed(text: str, cue: bool) -> None:
    assert cues_change(text) is cue


@pytest.mark.parametrize(
    ("text", "done"),
    [
        ("We raised the public API upload cap to 100 MB per file.", True),
        ("Finance cut the travel budget to $40k.", True),
        ("We raised three kids in that house.", False),
        ("I moved here in 2019.", False),
    ],
)
def test_a_change_told_in_the_past_with_its_new_value_is_read(text: str, done: bool) -> None:
    assert tells_change_done(text) is done


@pytest.mark.parametrize(
    ("text", "negated"),
    [
        # the negation is in the reason, which holds no value: the statement still says its value
        (
            "Rosa's renovation won't be finished in time, so Christmas is at my parents' place in Porto.",
            False,
        ),
        ("The all-hands is on Wednesdays at 16:00 so the SF folks don't have to dial in early.", False),
        # the negation is in the part that holds a value, or in every part
        ("The standup is not at 10, so keep your calendar.", True),
        ("Christmas is not at Rosa's.", True),
    ],
)
def test_a_negation_in_a_reason_or_purpose_does_not_negate_the_statement(text: str, negated: bool) -> None:
    assert prepare(text).negated is negated


def test_a_claim_someone_swears_or_insists_on_is_reported_speech() -> None:
    assert prepare("Gus next door swears the trash fee went up to $40 a quarter.").reported
    assert prepare("Dana insists the offsite is in Lisbon.").reported


def test_without_a_cue_three_subject_words_in_common_are_needed() -> None:
    earlier = "The team offsite budget is $40k."
    assert cued("Offsite budget for the whole team: $55k.", earlier)
    assert not cued("Offsite budget for sales: $55k.", earlier)


def test_a_day_of_the_month_is_a_date_and_a_version_a_number() -> None:
    assert cued(
        "Brightlane agreed to push the contract renewal to June 15.",
        "Contract renewal with Brightlane is on the 31st.",
    )
    assert cued(
        "The quarrydb release manager will cut 3.3 instead.", "The quarrydb release manager will cut v3.2."
    )


def test_an_earlier_question_or_hedge_holds_no_value_to_retire() -> None:
    assert not cued("Evidence upload cutoff is now May 1.", "Is the evidence upload cutoff April 17?")
    assert not cued("Evidence upload cutoff is now May 1.", "The evidence upload cutoff might be April 17.")


def test_a_role_given_to_someone_else_needs_most_of_the_earlier_roles_words() -> None:
    earlier = "Kim Osei is the release coordinator and on-call lead for the payments platform."
    assert cued("Dana Lee is now the release coordinator and on-call lead for payments.", earlier)
    assert not cued("Dana Lee is now on-call for payments.", earlier)


def test_a_statement_that_says_a_value_changed_is_searched_with_its_whole_message() -> None:
    earlier = "Quarantine pallets from the Brenner recall are in aisle 14."
    message = "The Brenner recall pallets had to make room for peak overflow. They now sit in bay 3."
    assert linked(message, earlier) == ["mem_0"]
    assert linked("They now sit in bay 3.", earlier) == []


def test_the_whole_message_is_searched_once_and_only_for_a_statement_with_a_change_cue() -> None:
    message = "The pallets had to make room. They now sit in bay 3. The forklift now parks in bay 4."
    assert queries_of(message).count(message) == 1
    uncued = "The pallets had to make room. They sit in bay 3."
    assert uncued not in queries_of(uncued)  # no cue: no search of the message
    queries = queries_of("They now sit in bay 3.")  # the message is the statement: searched once
    assert len(queries) == len(set(queries))


def test_a_value_for_another_thing_is_another_subject() -> None:
    earlier = "Autopay for the mortgage comes out of joint checking on the 3rd of every month."
    assert not cued("New autopay date for the savings transfer is the 10th.", earlier)
    assert cued("New autopay date for the mortgage is the 10th.", earlier)


def test_another_thing_named_first_is_another_attribute() -> None:
    earlier = "Rent on the Elm Street flat is £1,150 a month."
    assert not cued("Updated: the Elm Street deposit is now £1,725.", earlier)
    assert cued("Updated: the Elm Street rent is now £1,225.", earlier)
    # a verb first names no thing
    phone = "Paws & Whiskers vet: 0171 552 3098, ask for Dr. Ferreira."
    assert cued("FYI Paws & Whiskers went to a new phone system, you reach them on 0171 552 7410 now.", phone)


def test_one_word_qualified_by_another_the_other_never_says_is_another_subject() -> None:
    car = "Car insurance with Bramblegate renews March 14, $612 for six months."
    assert not cued("Heads up, the home insurance renewal moved to April 2 and the premium's now $940.", car)
    assert cued("Heads up, the car insurance renewal moved to April 2.", car)
    junior = "Junior membership at Rowan Kayak Club costs £85 for the whole season."
    assert not cued("Ugh, adult membership at Rowan just went up to £140 this season.", junior)
    assert cued("Ugh, junior membership at Rowan just went up to £95 this season.", junior)


def test_a_thing_named_by_a_word_and_another_number_is_another_thing() -> None:
    boiler = "Boiler service for flat 3 at Harwell Court is booked with Dunmore Heating on March 4."
    assert not cued("Dunmore rang, they've moved flat 7's boiler service to March 11, same building.", boiler)
    assert cued("Dunmore rang, they've moved flat 3's boiler service to March 11, same building.", boiler)
    # the numbered thing is the value that changed: the gate of one flight
    assert cued("Flight BA117 now boards at gate 14.", "Flight BA117 boards at gate 12.")


def test_a_statement_opening_with_the_earlier_subjects_word_and_a_verb_names_it() -> None:
    offsite = "Team offsite is set for May 14."
    assert cued("Offsite pushed to May 21, the venue double-booked us.", offsite)
    assert not cued("Offsite dinner pushed to May 21.", offsite)  # a second noun: another thing
    launch = "Ridgeline app launch is set for August 12."
    assert not cued("Launch party moved to August 14 at the rooftop bar, invites going out Monday.", launch)


@pytest.mark.parametrize(
    "text",
    [
        "Gym raised the monthly to €56, ugh.",
        "Adult membership went up to £140.",
        "Standup relocating to the Maple room on 5.",
        "Tiles are backordered so the kitchen won't wrap up until May 22.",
        "#8812 isn't due till May 15.",
        # more time granted (session 25)
        "Helen is traveling, so chapter 4 to her by November 16 works fine.",
        "Osprey gave us till the 29th for the wireframes, their PM is away.",
        "Receipts can come as late as March 13.",
    ],
)
def test_a_value_raised_or_a_delay_is_a_change_cue(text: str) -> None:
    assert cues_change(text)


def test_a_name_where_a_thing_goes_and_a_day_of_the_week_name_no_subject() -> None:
    standup = "Daily standup is in the Birch room on 3."
    assert cued("Standup relocating to the Maple room on 5 while facilities redo the third floor.", standup)
    assert not cued("Maple room standup relocating to floor 5.", standup)  # Maple names the standup
    crit = "Design crit is Tuesdays at 11."
    assert cued("Design crit now happens Wednesdays at 3, Tuesday kept clashing with sprint planning.", crit)


def test_one_value_said_twice_is_retired_in_both_memories() -> None:
    """A change and its rewritten fact hold one value: as close, and no tie."""
    message = "Heads up: the evidence upload cutoff is now May 1."
    said_twice = (
        "Evidence upload cutoff for SOC 2: April 17.",
        "Evidence upload cutoff for SOC 2 is April 17.",
    )
    assert cued(message, *said_twice) == ["mem_0", "mem_1"]


def test_an_arrows_left_side_of_another_kind_names_the_subject_not_the_old_value() -> None:
    earlier = "Parents' evening for Year 4 is next Tuesday, October 6, 6pm, in the school hall."
    assert linked("School app ping: Year 4 parents' evening → Wed 14 Oct instead, same time.", earlier) == [
        "mem_0"
    ]


def test_a_remark_about_the_past_beside_a_current_value_does_not_make_it_history() -> None:
    earlier = "Finn's swimming lesson is Mondays at 4:30pm."
    assert cued(
        "Finn's lesson is Saturdays 9:15am starting this week — better honestly, Mondays were chaos.", earlier
    )
    assert not cued("Finn's lesson was Saturdays 9:15am last year.", earlier)


def test_without_a_cue_two_words_are_enough_when_the_statement_opens_with_them() -> None:
    earlier = "Passport photos appointment on May 28 at the CVS on Main."
    assert cued("Passport photos: June 2 at the Walgreens on Elm, 10:30.", earlier)
    assert not cued("At the Walgreens on Elm the passport photos are June 2, 10:30.", earlier)


def test_a_value_trimmed_is_a_change_told_with_its_new_value() -> None:
    assert tells_change_done("CFO trimmed the customer summit budget to $58k, no second keynote.")
    assert cues_change("CFO trimmed the customer summit budget to $58k.")


def test_a_speaker_giving_their_own_contact_is_searched_with_their_name() -> None:
    earlier = "Lena's mobile: 0176 2234 8812"
    assert linked(
        "Lena: got a new SIM with the work contract, I'm on 0151 4409 2276 from today", earlier
    ) == ["mem_0"]
    # another value told by the speaker is searched with its own words only: a chat turn costs no
    # extra Query for its speaker's name
    queries = queries_of("Lena: I'm on the 2026 plan from today")
    assert queries
    assert not any("Lena" in query for query in queries)
    # someone else's contact is theirs, not the speaker's
    queries = queries_of("Lena: Tom's number is 0151 4409 2276")
    assert queries
    assert not any("Lena" in query for query in queries)


def test_a_statement_that_a_value_did_not_change_retires_nothing() -> None:
    sdk = "Checkout service pins the payments SDK at 4.2.1."
    assert not cued("Payments SDK pinned at 5.0.0 now, the checkout service is untouched.", sdk)
    assert cued("Payments SDK pinned at 5.0.0 now in the checkout service.", sdk)
    support = "Quillpad end of support is September 30."
    assert not cued("Quillpad 4.x end of support is unaffected, now March 31.", support)


def test_a_name_that_opens_a_statement_of_its_state_is_its_subject() -> None:
    earlier = "Noor gets picked up from Larkspur Primary at 3:15 on Tuesdays."
    assert not cued("Idris now gets picked up at 2:40 on Tuesdays, early dismissal for his class.", earlier)
    assert cued("Noor now gets picked up at 2:40 on Tuesdays, early dismissal for her class.", earlier)


def test_a_name_qualifying_the_subject_word_and_a_coded_thing_are_other_subjects() -> None:
    pro = "Pricing sync notes: Pro tier costs $49 per seat per month."
    assert not cued("Pricing update: Team tier is now $29 per seat.", pro)
    assert cued("Pricing update: Pro tier is now $59 per seat.", pro)
    room = "Meeting room 4B on the second floor seats 12 people max."
    assert not cued("Room 4C updated: it now seats 20 since facilities took the partition wall out.", room)
    blender = "Vantora X2 blender is priced at $149 on the shop floor."
    assert not cued("Vantora X3 blender is now $189, I updated the shelf tag.", blender)
    assert cued("Vantora X2 blender is now $189, I updated the shelf tag.", blender)


def test_a_capitalized_verb_before_a_name_is_no_part_of_the_name() -> None:
    earlier = "Petrov's date of birth on the intake form: 12 Aug 1958."
    assert cued("Fixed Petrov's date of birth, it's now 21 Aug 1958.", earlier)
    assert not cued("Ivanov's date of birth, it's now 21 Aug 1958.", earlier)  # another person


def test_a_thing_named_by_its_own_name_needs_not_its_owner() -> None:
    vet = "Pepper's vet, Greenway Animal Clinic, is at 42 Linden Ave."
    assert cued("Greenway relocated to 1180 Harbor Rd — bigger space and actual parking.", vet)
    # another owner named, or a name the earlier statement does not give its thing: apart
    assert not cued("Rex's vet relocated to 1180 Harbor Rd.", vet)
    assert not cued("Brookside relocated to 1180 Harbor Rd — bigger space.", vet)
    booked = "Car's booked in at Halvorsen Motors on 14 July for its service."
    assert cued("Halvorsen rang, their lift is broken — service is the 21st of July instead.", booked)


def test_a_job_someone_picks_up_or_covers_is_a_role_one_person_holds() -> None:
    swim = "Dad picks up the kids from swim on Thursdays at 5:45."
    assert linked("Thursday swim pickup is Aunt Rosa's job starting next week, Dad has evening shifts.", swim)
    praise = "Caroline: You're doing an awesome job looking after yourself and your family!"
    assert not linked("Melanie: Wow, Caroline, you're doing an awesome job of inspiring others.", praise)


def test_a_word_of_the_earlier_code_said_plainly_names_it() -> None:
    channel = "Post incident updates in #ops-firefighting please."
    assert cued("The firefighting channel is now called #incident-response.", channel)


def test_more_time_granted_moves_a_deadline() -> None:
    draft = "Chapter 4 draft goes to Helen (editor) on November 2."
    assert cued(
        "Helen is traveling the first half of November, so chapter 4 to her by November 16 works fine.", draft
    )


def test_a_version_both_name_their_thing_by_is_a_subject_word() -> None:
    release = "Mobile release 3.4 is targeting May 5."
    assert linked("3.4 slips a week to May 12, still waiting on App Store review.", release) == ["mem_0"]
    # the same version of another product: a name beside the number the earlier one never says
    ledgerline = "Priya: Ledgerline 4.2 goes out to customers on Thursday March 12."
    assert linked("Heads up all, the 4.2 release for Orbit moved to March 19 instead.", ledgerline) == []
    # a plain count said in both is a quantity, not a label; a number with parts is one
    assert not _same_label(read("3 interns start on May 5."), read("3 new hires start May 12 now."))
    assert _same_label(read("Release 3.4 is on May 5."), read("3.4 slips to May 12.")) == frozenset(
        {"3", "4"}
    )


def test_a_change_that_cancels_nothing_is_still_read_as_an_update() -> None:
    quote = "Quote from Ridgeway Roofing: $14,200 for the full reroof."
    # "dropped the skylight" reads as a cancellation, which finds nothing to cancel
    assert linked("Ridgeway revised the roof quote to $12,900 after we dropped the skylight.", quote) == [
        "mem_0"
    ]


def test_a_messages_heading_names_its_subject_but_parts_nothing_the_guards_part() -> None:
    rep = "Our account manager at Northfield Paper is Colette Marsh, colette.marsh@northfieldpaper.com."
    new_rep = "Northfield Paper: new rep for our account is Bilal Haddad, bilal.h@northfieldpaper.com."
    assert linked(new_rep, rep) == ["mem_0"]
    # the heading's words count as subject words, not as what the message says of the earlier one's
    # first thing: "first response" and "resolution target" stay two targets of one SLA
    sla = "Support SLA for Platinum customers: first response within 1 hour, around the clock."
    assert (
        linked("Updated Platinum SLA: resolution target is now 8 business hours as of this month.", sla) == []
    )


def test_the_clause_that_says_the_change_is_read_without_the_reasons_values() -> None:
    demo = "Sprint demo is tomorrow (June 3, 2026) at 2pm."  # as stored: its date resolved
    # "tomorrow" in the reason is the old date: the move is to Friday
    assert linked("Demo's pushed to Friday, half the team is out tomorrow.", demo) == ["mem_0"]

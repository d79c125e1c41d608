"""Choices restated (#15 item 2): a later preference or standing instruction of the same holder
about the same thing, with another choice and no change word, supersedes the earlier one; a
liking, another holder, a narrower thing or nothing replaced does not.

docs/structuring-rules.md, "Choices restated".
"""

from __future__ import annotations

import pytest

from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.preferred import (
    chooses_otherwise,
    preferred_candidates,
    read_choice,
    renews_kept_choice,
    states_choice,
)
from kaibo_core.core.structuring.statements import Statement, split_statements
from tests.unit.test_structuring_restated import EARLIER, structured_links


def statement(text: str) -> Statement:
    return split_statements(text).statements[0]


def chooses(new: str, old: str, same_stream: bool = True) -> bool:
    return chooses_otherwise(statement(new), statement(old), same_stream)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I take my coffee with oat milk, no sugar.", "Black coffee for me these days, no milk at all."),
        (  # an instruction, then a preference: "rather"
            "Please send me meeting summaries as bullet points.",
            "Actually, I'd rather get meeting summaries as one short paragraph.",
        ),
        (  # the named person, then that person speaking: one holder
            "Aria prefers window seats on flights.",
            "Aria: aisle seats from here on please, my knee needs the room.",
        ),
        (  # a modifier swapped before a shared word is the choice itself
            "Ops team wants the dark theme on the wall dashboard.",
            "Ops wall dashboard: light theme please, the projector washes out dark backgrounds.",
        ),
        (  # a label that is a plain word of the other statement names no one
            "Notify me about production deploys by email.",
            "Deploy notifications: Slack DM only.",
        ),
        ("I like my standups short and in the morning.", "Put my standups after lunch."),
        (  # "please" is no part of what is chosen, shared or not
            "Please send me summaries as bullet points.",
            "Summaries as one short paragraph please.",
        ),
    ],
)
def test_the_same_holders_choice_given_again_with_another_one_is_an_update(old: str, new: str) -> None:
    assert chooses(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a liking is not exclusive: both may be true
        ("I love painting landscapes.", "I love painting portraits."),
        # another holder: two speakers, two named people
        ("Maya: I prefer aisle seats.", "Leo: I prefer window seats."),
        ("Anna Lee prefers morning meetings.", "Anne Li prefers afternoon meetings, after 2."),
        # a narrower thing: a word of its own before a shared one where the earlier had none
        (
            "Please send me summaries as bullet points.",
            "Please send me design review summaries as one paragraph.",
        ),
        # nothing of the earlier choice replaced: the same choice, with more said
        ("I prefer aisle seats.", "I prefer aisle seats please."),
        # only a common verb shared
        ("Please put the boxes in the garage.", "Put my bike in the shed please."),
        # a statement about the listener is no one's choice
        ("Thanks for sharing your love for dairy-free desserts.", "I'd rather have dairy-free desserts."),
        # only the holder's name shared: what is chosen differs
        ("Ben is vegetarian, no meat for him.", "FYI Ben runs marathons these days, book him early."),
    ],
)
def test_a_liking_another_holder_a_narrower_thing_or_nothing_replaced_is_not_an_update(
    old: str, new: str
) -> None:
    assert not chooses(new, old)


def test_a_statement_without_a_choice_word_or_an_own_instruction_states_no_choice() -> None:
    assert not states_choice(statement("I love climbing."))
    assert not states_choice(statement("The bullets were hard to skim on my phone."))
    assert not states_choice(statement("Writing has been such a blessing for me."))  # one weak word
    assert not states_choice(statement("Instead of getting stuck, I worked hard to get better."))
    assert states_choice(statement("Black coffee for me these days."))  # two
    assert states_choice(statement("Put my meetings after lunch."))
    assert states_choice(statement("Reply to me in Spanish."))


def test_the_speakers_own_choices_are_replaced_only_in_their_own_stream() -> None:
    old, new = "I take my coffee with oat milk.", "Black coffee for me these days."
    assert chooses(new, old, same_stream=True)
    assert not chooses(new, old, same_stream=False)
    assert chooses(f"Jin: {new}", f"Jin: {old}", same_stream=False)  # one speaker, named
    assert not chooses(f"Lea: {new}", f"Jin: {old}", same_stream=True)
    # a label that is a plain word keeps its speaker
    label = "Deploy notifications: Slack DM only."
    instruction = "Notify me about production deploys by email."
    assert chooses(f"Jin: {label}", f"Jin: {instruction}", same_stream=False)


def test_statements_about_the_listener_are_no_ones_choices() -> None:
    old = "Thanks for sharing your love for dairy-free desserts."
    new = "You'd rather have dairy-free desserts these days, not cake."
    assert read_choice(statement(new)).holder[0] == "you"  # "You'd" is no name
    assert not chooses(new, old)


def candidate(content: str, memory_type: str = "preference") -> CandidateMemory:
    return CandidateMemory("mem_old", memory_type, content, EARLIER, "s")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "old_type"),
    [
        ("I took my coffee with oat milk back then.", "preference"),  # the past
        ("Do I take my coffee with oat milk?", "preference"),  # a question
        ("I take my coffee with oat milk.", "episode"),  # told as a story: kept with others
        ("The cafe serves its coffee with oat milk.", "fact"),  # a plain fact: no one's choice
    ],
)
def test_the_past_a_question_or_a_story_is_never_replaced(old: str, old_type: str) -> None:
    old_text = old if old_type != "episode" else f"{old} Then we walked to the park."
    new = statement("Black coffee for me these days.")
    assert not preferred_candidates(new, "s", [candidate(old_text, old_type)])


def test_the_structurer_links_a_choice_restated_and_not_one_added() -> None:
    old = "Reply to me in Spanish, with short answers."
    linked = structured_links("Replies in English for me please, short answers still.", old)
    assert [(link.kind, link.memory_id) for link in linked] == [("supersedes", "mem_old0")]
    assert structured_links("Please also reply in English, short answers too.", old) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "Grandpa Ed always wants an aisle seat when he flies.",
            "Ed says window seats from now on, he likes the view.",
        ),
        (
            "Ines likes the weekly dashboard numbers as PDF attachments every Monday.",
            "Ines asked for the weekly numbers as a live Google Sheet link going forward, no more PDFs.",
        ),
    ],
)
def test_a_holders_own_choice_told_by_someone_else_is_an_update(old: str, new: str) -> None:
    assert [link.kind for link in structured_links(new, old)] == ["supersedes"]


@pytest.mark.parametrize(
    "new",
    [
        "Priya says Tom wants window seats from now on.",  # told by the holder's name? no: Priya's
        "Someone in sales says Tom wants window seats from now on.",  # hearsay, no one named first
        "Tom reckons Ana wants window seats from now on.",  # a guess about another, not what he said
        "Tom says he might want window seats from now on.",  # a hedge
        "Did Tom say window seats from now on?",  # a question
    ],
)
def test_hearsay_a_hedge_or_a_question_told_by_someone_else_replaces_nothing(new: str) -> None:
    assert structured_links(new, "Tom always wants an aisle seat when he flies.") == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a diet, a coffee, a seat: one kind of kept choice, another one of its kind now
        ("Ben is vegetarian, no meat for him.", "FYI Ben eats fish again, he's pescatarian these days."),
        (
            "Retreat catering: Oskar eats everything, no restrictions.",
            "Oskar went vegan last month, please get him the plant-based option.",
        ),
        (
            "Nadia takes her coffee as an oat flat white, no sugar.",
            "FYI Nadia's off oat milk — she just wants a plain black americano these days.",
        ),
        (
            "Dad always wants an aisle seat on long flights, bad knee.",
            "Dad says window seat this time, he wants to sleep the whole way.",
        ),
        (  # told by someone else, who names the holder
            "For the team dinner: Arjun is vegetarian, eats eggs and dairy.",
            "Arjun mentioned he's gone fully vegan since the summer, so no cheese board for him.",
        ),
    ],
)
def test_a_kept_choice_renewed_with_another_of_its_kind_is_an_update(old: str, new: str) -> None:
    assert renews_kept_choice(statement(new))
    assert [link.kind for link in structured_links(new, old)] == ["supersedes"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the same choice said again: nothing of its kind replaced
        (
            "I'm lactose intolerant, so I'll just need the dairy-free recipe!",
            "I'm trying out dairy-free options now, like coconut.",
        ),
        # a kind the earlier statement does not name: not the choice it holds
        ("I love when you try something new and it works out.", "I'm tempted to try dairy-free flavors now!"),
        # another holder of the same kind ("Sam's sister"), and "she's on a different table" is no choice
        (
            "Dietary list for the gala: Sam Whitfield is coeliac, needs gluten-free everything.",
            "Samira Whitfield (Sam's sister, she's on a different table) is vegan.",
        ),
        ("Maya is vegetarian.", "Leo went vegan last month."),
    ],
)
def test_a_kept_choice_said_again_of_another_kind_or_holder_is_no_update(old: str, new: str) -> None:
    assert structured_links(new, old) == []


def test_on_or_off_is_a_renewed_choice_only_before_a_choice_of_its_kind() -> None:
    assert renews_kept_choice(statement("Sam's on oat flat whites, the doctor's orders."))
    assert not renews_kept_choice(statement("Samira is vegan, she's on a different table."))
    assert not renews_kept_choice(statement("Ben is vegetarian."))  # no word that it is another now

"""Recall's recency rule (core/recall/recency.py; docs/recall.md, "Newer first"): of two memories that
answer a question about now about equally well, the newer ranks first and the older is named, and
nothing else moves: another subject, a story of the past, an addition, a proposal, a question."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kaibo_core.core.recall import recency
from kaibo_core.core.recall.recency import RecencyParams, naming_terms, newer_first
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.text import analyze

DAY_MS = 86_400_000


def memory(memory_id: str, text: str, day: int, score: float = 1.0, memory_type: str = "fact") -> Ranked:
    return Ranked(memory_id, score, frozenset(analyze(text)), text, day * DAY_MS, memory_type)


def weights_of(question: str) -> dict[str, float]:
    return dict.fromkeys(analyze(question), 1.0)


def ordered(
    question: str, *memories: Ranked, weights: dict[str, float] | None = None
) -> tuple[list[str], dict[str, str]]:
    order, older = newer_first(list(memories), question, {**weights_of(question), **(weights or {})})
    return [m.memory_id for m in order], older


def test_the_newer_of_two_answers_ranks_first_at_the_older_score_and_the_older_is_named() -> None:
    question = "What is Grandma's address?"
    old = memory("old", "Grandma's address: 14 Elm Street, Portland.", 1, score=11.6)
    new = memory("new", "Grandma's address is now 220 Birch Ave, Beaverton.", 100, score=8.9)
    order, older = newer_first([old, new], question, weights_of(question))
    assert [m.memory_id for m in order] == ["new", "old"]
    assert order[0].score == pytest.approx(11.6)
    assert older == {"old": "new"}


def test_an_update_phrased_without_the_attribute_word_still_ties_on_the_subject() -> None:
    question = "When is the 4.2 code freeze?"
    old = memory("old", "Code freeze for 4.2 is Friday February 6, 2026.", 1, score=15.9)
    new = memory("new", "4.2 code freeze slipped a week to February 13, 2026.", 6, score=15.3)
    assert ordered(question, old, new) == (["new", "old"], {"old": "new"})


def test_already_first_the_newer_stays_and_the_older_is_still_named() -> None:
    question = "When is the 4.2 code freeze?"
    new = memory("new", "4.2 code freeze slipped a week to February 13, 2026.", 6, score=16.0)
    old = memory("old", "Code freeze for 4.2 is Friday February 6, 2026.", 1, score=15.0)
    assert ordered(question, new, old) == (["new", "old"], {"old": "new"})


def test_of_three_versions_the_last_comes_first() -> None:
    question = "Which tool do we use for Orion client calls?"
    first = memory("v1", "Orion client calls are on Zoom.", 1, score=3.0)
    second = memory("v2", "Orion client calls are on Google Meet now.", 10, score=2.9)
    third = memory("v3", "Orion client calls are on Microsoft Teams now.", 20, score=2.8)
    order, older = ordered(question, first, second, third)
    assert order[0] == "v3"
    assert older == {"v1": "v3", "v2": "v3"}


def test_a_question_about_the_past_orders_by_rank_only() -> None:
    question = "When did the INC-77 outage start?"
    old = memory("old", "INC-77: the outage started at 14:05 UTC.", 1, score=2.0)
    new = memory("new", "INC-77 outage start: first errors at 13:52 UTC.", 2, score=1.9)
    assert ordered(question, old, new) == (["old", "new"], {})


#: The question word the newer memory lacks weighs little here (a common word), so that only the
#: guard under test keeps the two apart.
LIGHT = 0.2


@pytest.mark.parametrize(
    ("question", "old_text", "new_text"),
    [
        # another subject named in the question (the older holds it, the newer does not)
        (
            "When does the Acme contract renew?",
            "The Acme contract renews August 1.",
            "The Globex contract renews September 3.",
        ),
        # a value added, none replaced
        ("Which countries do we ship to?", "We ship to the US and Canada.", "We now ship to Mexico too!"),
        # a question, a proposal, a negation: nothing stated now
        (
            "When does Mia's flight land?",
            "Mia's flight lands at 8:40pm.",
            "Did Mia's flight land at 9 or so?",
        ),
        (
            "What is the kids' bedtime?",
            "Kids' bedtime is 8pm.",
            "Maybe we should try a 9pm bedtime for the kids?",
        ),
        # the question's verb told in the past: a story, not the current value
        ("Where does Mia live?", "Mia lives in Porto.", "Mia lived in Lisbon for five years."),
        # another one of the same kind: the question's word before it swapped for another
        ("What is Dana's work number?", "Dana's work number is 555-0142.", "Dana's home number is 555-0188."),
        # a longer subject that starts with the question's ("the demo prep" is not "the demo")
        ("When is the demo?", "The demo is at 4pm.", "The demo prep is at 2pm."),
        # another object of the question's preposition ("for billing" is not "for search")
        (
            "Who is tech lead for search?",
            "Sara Kim is tech lead for search.",
            "Sarah Kim is the new tech lead for billing.",
        ),
        (
            "Who is on call for payments this week?",
            "On call this week for payments: Tom R.",
            "On call this week for infra: Tom S.",
        ),
        # the question asks a date; the newer gives none
        ("When is the offsite?", "The offsite is on June 15.", "The offsite agenda is in the shared drive."),
    ],
)
def test_a_newer_memory_that_answers_something_else_does_not_move(
    question: str, old_text: str, new_text: str
) -> None:
    old = memory("old", old_text, 1, score=2.0)
    new = memory("new", new_text, 50, score=1.9)
    light = dict.fromkeys(old.terms - new.terms, LIGHT)
    assert ordered(question, old, new, weights=light) == (["old", "new"], {})


def test_a_newer_memory_holding_much_less_of_the_question_does_not_tie() -> None:
    question = "Who writes the conclusion of the history project?"
    old = memory("old", "History project: Noah writes the conclusion.", 1, score=2.0)
    new = memory("new", "Ava is on the project now.", 7, score=1.0)
    assert ordered(question, old, new) == (["old", "new"], {})


def test_a_newer_memory_saying_less_of_the_question_ties_when_it_says_what_is_asked_about() -> None:
    question = "Who is Aiko's onboarding buddy?"
    old = memory("old", "Aiko's onboarding buddy is Marcus.", 1, score=2.0)
    # "Aiko" and "buddy" (2 of 3 terms, under tie_share) and "buddy" ends the question's phrase
    new = memory("new", "Renata's going to be Aiko's buddy instead.", 9, score=1.2)
    assert ordered(question, old, new) == (["new", "old"], {"old": "new"})
    # the same share without the word asked about: "onboarding" only qualifies "buddy"
    other = memory("other", "Aiko's onboarding is with Renata now.", 9, score=1.2)
    assert ordered(question, old, other) == (["old", "other"], {})
    # the word asked about, under asked_word_share of the older's weight
    heavy = {"onboard": 3.0}
    assert ordered(question, old, new, weights=heavy) == (["old", "new"], {})


def test_by_meaning_an_older_memory_close_to_the_question_answers_it_in_other_words() -> None:
    question = "Where is the team retreat being held?"
    # "offsite" for "retreat": its words hold a third of the question, its meaning is close
    old = replace(
        memory("old", "Team offsite is at Lakeview Lodge in Harrowgate.", 1, score=2.0), cosine=0.55
    )
    new = memory(
        "new", "We're doing the team retreat at the Copperworks space downtown instead.", 30, score=1.5
    )
    assert ordered(question, old, new) == (["new", "old"], {"old": "new"})
    # not close enough in meaning either: no answer to the question, nothing moves
    far = replace(old, cosine=0.45)
    assert ordered(question, far, new) == (["old", "new"], {})


def test_recency_params_keep_the_asked_word_share_under_the_tie_share() -> None:
    with pytest.raises(ValueError, match="asked_word_share"):
        RecencyParams(tie_share=0.5, asked_word_share=0.6)
    with pytest.raises(ValueError, match="answer_cosine"):
        RecencyParams(answer_cosine=0.0)


def test_memories_valid_from_the_same_instant_or_without_one_are_never_rivals() -> None:
    question = "What is Grandma's address?"
    old = memory("old", "Grandma's address: 14 Elm Street.", 3, score=2.0)
    same = memory("same", "Grandma's address: 220 Birch Ave.", 3, score=1.9)
    unknown = Ranked(
        "unknown", 1.8, frozenset(analyze("Grandma's address: 9 Oak Road.")), "Grandma's address: 9 Oak Road."
    )
    assert ordered(question, old, same, unknown) == (["old", "same", "unknown"], {})


def test_naming_terms_are_the_question_names_and_numbers_not_its_first_word() -> None:
    assert naming_terms("When does the Acme contract renew?") == frozenset(analyze("Acme"))
    assert naming_terms("What is the total of invoice 4471?") == frozenset(analyze("4471"))
    assert naming_terms("Where is the spare key?") == frozenset()


def test_tie_share_must_lie_in_the_unit_interval() -> None:
    for wrong in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="tie_share"):
            RecencyParams(tie_share=wrong)


# With recall by meaning: a newer memory close in meaning to the older one is a rival even when it
# says the question's words less (``alike``: the cosine of the two memories' vectors).


def by_meaning(
    question: str, cosine: float, *memories: Ranked, params: RecencyParams | None = None
) -> tuple[list[str], dict[str, str]]:
    def alike(first: str, second: str) -> float | None:
        return cosine if {first, second} == {"old", "new"} else None

    order, older = newer_first(
        list(memories), question, weights_of(question), params or RecencyParams(), alike
    )
    return [m.memory_id for m in order], older


GRANDMA = "What is Grandma's address?"
GRANDMA_OLD = memory("old", "Grandma's address: 14 Elm Street, Portland, OR 97205.", 1, score=9.0)
#: The update does not say "address": by words alone it holds too little of the question.
GRANDMA_NEW = memory("new", "Grandma's all moved in! 220 Birch Ave, Apt 3, Beaverton.", 100, score=4.0)


def test_by_meaning_an_update_without_the_question_words_ranks_first() -> None:
    assert ordered(GRANDMA, GRANDMA_OLD, GRANDMA_NEW) == (["old", "new"], {})
    assert by_meaning(GRANDMA, 0.72, GRANDMA_OLD, GRANDMA_NEW) == (["new", "old"], {"old": "new"})


def test_by_meaning_not_close_enough_nothing_moves() -> None:
    assert by_meaning(GRANDMA, 0.55, GRANDMA_OLD, GRANDMA_NEW) == (["old", "new"], {})
    lower = RecencyParams(same_meaning=0.5)
    assert by_meaning(GRANDMA, 0.55, GRANDMA_OLD, GRANDMA_NEW, params=lower) == (
        ["new", "old"],
        {"old": "new"},
    )


@pytest.mark.parametrize(
    ("question", "old_text", "new_text"),
    [
        # a swapped word: another thing, however close in meaning
        (
            "When is the release target?",
            "The release target is July 13, 2026.",
            "The release party is on July 20, 2026.",
        ),
        # another scope of the same role
        (
            "Who is on call for payments this week?",
            "On call this week for payments: Tom R.",
            "On call this week for infra: Tom S.",
        ),
        # the question's names must be in the newer
        ("What is the iOS app version?", "The iOS app version is 3.2.", "The Android app version is 3.4."),
    ],
)
def test_by_meaning_close_in_meaning_but_another_subject_nothing_moves(
    question: str, old_text: str, new_text: str
) -> None:
    old = memory("old", old_text, 1, score=9.0)
    new = memory("new", new_text, 5, score=4.0)
    assert by_meaning(question, 0.95, old, new) == (["old", "new"], {})


def test_by_meaning_a_proposal_or_a_question_states_nothing_now() -> None:
    question = "What is the kids' bedtime?"
    old = memory("old", "Kids' bedtime is 8pm on school nights.", 1, score=9.0)
    for text in ("Should we move bedtime to 8:30?", "Maybe we could try 8:30 over the summer."):
        new = memory("new", text, 5, score=4.0)
        assert by_meaning(question, 0.8, old, new) == (["old", "new"], {}), text


def test_by_meaning_without_vectors_nothing_moves() -> None:
    def unknown(first: str, second: str) -> float | None:
        return None

    order, older = newer_first(
        [GRANDMA_OLD, GRANDMA_NEW], GRANDMA, weights_of(GRANDMA), RecencyParams(), unknown
    )
    assert ([m.memory_id for m in order], older) == (["old", "new"], {})


def test_words_with_a_capital_inside_name_the_subject() -> None:
    assert naming_terms("What is the iOS app version?") == frozenset(analyze("iOS"))


def test_by_meaning_only_typed_values_chat_turns_about_one_topic_are_no_updates() -> None:
    # Two chat turns close in meaning ("Melanie: … painting …", "Caroline: … painted …") are a
    # conversation, not one value replaced: only facts, decisions, preferences and tasks rival.
    question = "What has Melanie painted?"
    old = memory(
        "old", "Melanie: Painting's a fun way to express my feelings. I painted a lake sunrise.", 1, 9.0
    )
    new = memory("new", "Caroline: Thanks, Melanie! I painted this after I visited a center.", 5, 4.0)
    turns = [replace(old, memory_type="episode"), replace(new, memory_type="episode")]
    assert by_meaning(question, 0.8, *turns) == (["old", "new"], {})
    assert by_meaning(question, 0.8, replace(old, memory_type="episode"), new) == (["old", "new"], {})


def test_by_meaning_another_speaker_s_reply_is_no_update() -> None:
    question = "What is the art show painting about?"
    old = memory("old", "Caroline: My painting for the art show is about my transition.", 1, 9.0)
    reply = memory("new", "Melanie: Caroline, your painting is awesome! The colors are vivid.", 2, 4.0)
    assert by_meaning(question, 0.8, old, reply) == (["old", "new"], {})
    own = memory("new", "Caroline: The art show painting is now about my grandma's garden.", 9, 4.0)
    assert by_meaning(question, 0.8, old, own) == (["new", "old"], {"old": "new"})


# -- stored text that is long, or made to be slow -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("The release-target is July 13.", ["The", "release-target", "is", "July", "13"]),
        ("'tis Mia's flight… -- ok.", ["'tis", "Mia's", "flight", "ok"]),
        ("--a.b-- c' ---", ["--a.b", "c"]),
    ],
)
def test_given_punctuation_inside_and_around_words_then_a_word_keeps_the_inside_only(
    text: str, words: list[str]
) -> None:
    assert [word for word, _ in recency._words(text)] == words


def test_given_stored_text_with_a_run_of_hyphens_and_letters_then_it_is_read_in_one_pass() -> None:
    # Each of these took minutes when a pattern backtracked through the run from every letter in
    # it (quadratic); the suite's per-test timeout fails a return of that.
    run = "a-" * 100_000
    assert len(recency._words(run)) == 1
    assert list(recency._SUBJECT_HEAD.finditer(run + " prep is")) != []
    assert recency._words("-" * 200_000) == []


def test_given_a_long_memory_then_only_its_opening_is_compared() -> None:
    long = "x " * recency.MAX_COMPARED_CHARS + "The release target is July 13."
    memory = Ranked("mem_1", 1.0, frozenset(), long, valid_from_ms=1)
    opening = recency._opening(memory)
    assert len(opening.text) <= recency.MAX_COMPARED_CHARS
    assert "release" not in opening.text
    assert recency._opening(replace(memory, text="short")).text == "short"

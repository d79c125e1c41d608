"""bench/structuring_meaning.py: which event pairs are updates and look-alikes, and its AUC."""

from __future__ import annotations

import pytest

from bench.structuring_meaning import DATA, TUNING_SETS, Pair, auc, masked, pairs_of


def test_events_joined_by_a_chain_are_updates_and_a_distractor_s_pairs_are_look_alikes() -> None:
    chain = {
        "category": "chain_of_three",
        "events": [{"key": "e1", "text": "A"}, {"key": "e2", "text": "B"}, {"key": "e3", "text": "C"}],
        "expect": {"links": [["e2", "e1", "supersedes"], ["e3", "e2", "supersedes"]]},
    }
    assert pairs_of(chain) == [Pair("B", "A", "update"), Pair("C", "A", "update"), Pair("C", "B", "update")]
    distractor = {
        "category": "distractor_other_subject",
        "events": [{"key": "e1", "text": "A"}, {"key": "e2", "text": "B"}],
        "expect": {"links": []},
    }
    assert pairs_of(distractor) == [Pair("B", "A", "look-alike")]
    aside = {**chain, "expect": {"links": [["e2", "e1", "supersedes"]]}}
    assert [pair.kind for pair in pairs_of(aside)] == ["update", "unrelated", "unrelated"]


def test_auc_is_one_when_every_update_scores_higher_and_half_on_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.5], [0.5]) == pytest.approx(0.5)
    assert auc([0.1], [0.9]) == 0.0


def test_values_are_masked_and_the_subject_is_kept() -> None:
    assert masked("The offsite moved to May 21, 2026 at 9:30am, $450 a head.") == (
        "The offsite moved to something at something, something a head."
    )
    assert masked("Email ana@acme.com by Friday.") == "Email something by something."


def test_the_default_sets_are_tuning_sets_in_the_repository() -> None:
    assert all(name.startswith("tuning") for name in TUNING_SETS)
    assert all((DATA / f"structuring_{name}.json").is_file() for name in TUNING_SETS)

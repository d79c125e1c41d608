"""Long texts read where a question looks (docs/recall.md, step 5 "Authority" and "Long texts"):
``ProbedText`` and ``TermSet`` answer as ``analyze`` would, and recall's rescoring of long memories
gives the same answers as analyzing them whole, for a bounded part of the work."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.adapters.dynamodb_memories import memory_from_item, memory_item
from kaibo_core.adapters.memory_memories import InMemoryMemoryStore
from kaibo_core.api.mapping import recall_query
from kaibo_core.api.models import RecallRequest
from kaibo_core.core.clock import format_instant
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.models.recall import RecallAnswer, RecallCandidate
from kaibo_core.core.recall import long_texts
from kaibo_core.core.recall.long_texts import ProbedText, TermSet
from kaibo_core.core.recall.selection import Ranked, collapse_near_duplicates
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import PIPELINE_VERSION, analyze, query_terms, token_terms, written_date_terms
from kaibo_core.services import recall as recall_service
from kaibo_core.services.recall import RecallService
from tests.fixtures.long_file import long_file

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True)

#: Words, and pieces that test where a text may be cut: written dates across a line break or
#: spaces, years in other digits, full-width punctuation that NFKC makes a connector, combining
#: marks and compatibility characters next to whitespace, negations, numbers, compounds.
WORDS = [
    "Alice", "tea", "release", "review", "reviews", "moved", "the", "Friday", "vendor", "not",
    "never", "v1.2.3", "東京", "привет", "naïve", "don't", "HTTPServer", "1,000", "snake_case_id",
    "happily", "dying", "2023-05-08", "May 8, 2023", "8 May\n2023", "July   2023", "March 3rd\t2024",
    "May ٢٠٢٣", "May", "2023", "１，０００", "abc？def", "ｘ：ｙ", " \u0301e", "\xa0", "\u00a8", "ß",
    "İstanbul", "ﬁle", "…", "—", "e\u0301", "Ⅻ", "x\u2028y", "a\x1cb",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", ". ", ", ", "\n", "\n\n", "。", "? ", "\t", "\u3000"]
PIECE = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(SEPARATORS),
    st.text(st.characters(codec="utf-8"), max_size=4),
)
TEXT = st.lists(PIECE, max_size=60).map("".join)
QUESTION_TERMS = sorted({term for word in WORDS for term in analyze(word)} | {"2023-05", "2024-03-03"})


def reference_terms(text: str) -> list[str]:
    return analyze(text)


@PROPERTY
@given(TEXT, st.integers(min_value=0, max_value=40))
def test_a_probed_text_counts_every_term_as_analyze_does(text: str, chunk_chars: int) -> None:
    probed = ProbedText(text, chunk_chars)
    expected = Counter(reference_terms(text))
    for term in sorted(expected.keys() | set(QUESTION_TERMS)):
        assert probed.count(term) == expected[term], term
        assert probed.holds(term) == (term in expected), term
    assert list(probed.terms()) == reference_terms(text)


@PROPERTY
@given(TEXT, TEXT, st.integers(min_value=0, max_value=40), st.sets(st.sampled_from(QUESTION_TERMS)))
def test_a_term_set_compares_as_the_frozenset_of_its_terms(
    text: str, other_text: str, chunk_chars: int, extra: set[str]
) -> None:
    one = TermSet(ProbedText(text, chunk_chars), extra)
    other = TermSet(ProbedText(other_text, chunk_chars))
    one_set, other_set = frozenset(analyze(text)) | extra, frozenset(analyze(other_text))
    question = frozenset(QUESTION_TERMS[::3])
    assert bool(one) == bool(one_set)
    assert (one <= other) == (one_set <= other_set)
    assert (one <= other_set) == (one_set <= other_set)
    assert (other_set <= one) == (other_set <= one_set)  # frozenset <= TermSet: TermSet.__ge__
    assert (question <= one) == (question <= one_set)
    assert one & question == one_set & question
    assert question & one == question & one_set
    assert all((term in one) == (term in one_set) for term in QUESTION_TERMS)
    assert len(one) == len(one_set)
    assert frozenset(one) == one_set
    assert all((term in one) == (term in one_set) for term in QUESTION_TERMS)  # now built whole
    assert frozenset(one.with_terms({"tea"})) == one_set | {"tea"}
    with mock.patch.object(long_texts, "MAX_PROBED_LOOKUPS", 2):  # built whole after two tests
        asked = TermSet(ProbedText(text, chunk_chars), extra)
        assert all((term in asked) == (term in one_set) for term in QUESTION_TERMS)


def ranked(memory_id: str, terms: frozenset[str] | TermSet, text: str) -> Ranked:
    return Ranked(memory_id, 1.0, terms, text)


@PROPERTY
@given(st.lists(st.tuples(TEXT, st.booleans()), min_size=1, max_size=5))
def test_near_duplicates_are_the_same_with_term_sets(texts: list[tuple[str, bool]]) -> None:
    # Near-duplicates of texts made of one another's pieces, some as TermSets, some as frozensets.
    rng = random.Random(len(texts))
    pool = [text for text, _ in texts]
    pool += [" ".join(rng.sample(pool, rng.randint(1, len(pool)))) + rng.choice(["", " not"]) for _ in pool]
    plain = [ranked(f"m{i}", frozenset(analyze(text)), text) for i, text in enumerate(pool)]
    probed = [
        ranked(f"m{i}", TermSet(ProbedText(text, 3)) if i % 2 else frozenset(analyze(text)), text)
        for i, text in enumerate(pool)
    ]
    kept, dropped = collapse_near_duplicates(plain)
    probed_kept, probed_dropped = collapse_near_duplicates(probed)
    assert [r.memory_id for r in probed_kept] == [r.memory_id for r in kept]
    assert probed_dropped == dropped


# --- recall: the same answers as analyzing each memory whole ---------------------------------

PROJECT = ProjectId("prj_long")
NOW = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
SENTENCE_WORDS = [word for word in WORDS if word.strip()] + [
    "Lena's", "phone", "number", "0176 2234 8812", "email", "lena@example.com", "contract", "payment",
    "terms", "budget", "meeting", "Thursday", "is", "at", "and", "to", "the", "release", "review",
]  # fmt: skip
QUESTIONS = [
    "When is the release review?",
    "What is Lena's phone number?",
    "What happened in May 2023?",
    "What did the vendor contract say about the payment terms?",
    "Is the review not on Friday?",
    "東京 naïve HTTPServer v1.2.3",
    "What about 1,000 dying snake_case_id?",
    "When is the budget meeting in July 2023?",
    "Which submarine sank?",
    "What did the vendor say in June 2026?",
    "Which release reviews were in 2025?",
]


def sentences(rng: random.Random, count: int) -> list[str]:
    return [
        " ".join(rng.choice(SENTENCE_WORDS) for _ in range(rng.randint(3, 14)))
        + rng.choice([". ", "! ", "? ", "\n", "。", ", "])
        for _ in range(count)
    ]


class ProjectOf:
    """A project of short and long memories; long ones with copies that are near-duplicates."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.store = InMemoryMemoryStore()
        self.count = 0
        for _ in range(rng.randint(2, 6)):
            self.add(rng, "".join(sentences(rng, rng.randint(1, 4))))
        for _ in range(rng.randint(1, 3)):
            parts = sentences(rng, rng.randint(100, 220))
            text = "".join(parts)
            self.add(rng, text)
            if rng.random() < 0.5:  # the same text again, a part of it, or it with a negation
                copy = rng.choice([text, "".join(parts[: len(parts) // 2]), text + " It is not so."])
                self.add(rng, copy)
            if rng.random() < 0.3:  # a short memory saying nothing the long one does not
                self.add(rng, " ".join(parts[:2]))
            if rng.random() < 0.3:  # a long version retired by a short one
                successor = self.add(rng, "".join(sentences(rng, 2)), status="active", valid_from=at(-5))
                self.add(
                    rng,
                    text + " Old.",
                    status="superseded",
                    valid_from=at(-40),
                    valid_to=at(-5),
                    superseded_by=(successor.id,),
                )

    def add(self, rng: random.Random, text: str, **fields: Any) -> MemoryRecord:
        self.count += 1
        number = f"{self.count:026d}"
        memory = MemoryRecord(
            project_id=PROJECT,
            id=f"mem_{number}",
            status=fields.pop("status", rng.choice(["provisional", "active"])),
            type=fields.pop("type", rng.choice(["episode", "fact"])),
            content=text,
            valid_from=fields.pop("valid_from", at(-rng.randint(1, 400))),
            valid_to=fields.pop("valid_to", None),
            confidence=0.5,
            stream="chat-1",
            source_events=(SourceEventRef(f"evt_{number}", "chat-1", self.count, "ab" * 32),),
            created_at=at(-30),
            **fields,
        )
        assert self.store.index_new(memory)
        return memory


def at(days: float) -> str:
    return format_instant(NOW + timedelta(days=days))


class LengthsUnknown:
    """The store's memory items as items written before they recorded their length: recall
    analyzes each text whole (the reference)."""

    def __init__(self, store: InMemoryMemoryStore) -> None:
        self._store = store

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        found = self._store.get_many(project, memory_ids)
        return {memory_id: replace(memory, indexed_length=None) for memory_id, memory in found.items()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def recalled(
    service: RecallService, question: str, **body: Any
) -> tuple[RecallAnswer, list[RecallCandidate]]:
    heard: list[RecallCandidate] = []
    query = recall_query(RecallRequest.model_validate({"question": question, **body}))
    answer, _ = service.recall(PROJECT, query, on_candidates=heard.extend)
    return answer, heard


def scores(answer: RecallAnswer) -> list[tuple[str, float]]:
    return [(hit.memory.id, hit.score) for hit in answer.items]


@pytest.mark.parametrize("probed_above", [64, recall_service._CACHED_TEXT_CHARS])
@pytest.mark.parametrize("seed", range(12))
def test_recall_answers_as_if_every_long_memory_were_analyzed_whole(
    seed: int, probed_above: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a project of short and long memories (near-duplicates, negations, written dates,
    # numbers, other scripts, versions), some longer than ``probed_above`` characters
    monkeypatch.setattr(recall_service, "_CACHED_TEXT_CHARS", probed_above)
    project = ProjectOf(seed)
    assert any(len(m.content or "") > probed_above for m in project.store.memories.values())
    probed = RecallService(project.store, project.store, clock=lambda: NOW)
    whole = RecallService(project.store, LengthsUnknown(project.store), clock=lambda: NOW)
    for question in QUESTIONS:
        for body in ({"budget": 300}, {"budget": 40, "includeSuperseded": True}):
            # When it is recalled with long texts probed, and with every text analyzed whole
            answer, candidates = recalled(probed, question, **body)
            expected, expected_candidates = recalled(whole, question, **body)
            # Then the items, their order, forms, texts, scores (to the float) and abstains are equal,
            assert answer == expected, (question, body)
            assert scores(answer) == scores(expected)
            # and so are the candidates and their scores.
            assert [(c.memory.id, c.score) for c in candidates] == [
                (c.memory.id, c.score) for c in expected_candidates
            ]


def test_a_long_memorys_rescoring_analyzes_only_where_the_question_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a 250 KB file remembered as one memory, the question's words in two of its sentences
    file = long_file()
    text = file.text
    assert len(text) > 250_000
    store = InMemoryMemoryStore()
    store.index_new(
        MemoryRecord(PROJECT, "mem_file", "active", "episode", text, at(-3), None, 0.5, "files", (), at(-3))
    )
    analyzed: list[int] = []

    def counted(analysis: Any) -> Any:
        def analyzing(piece: str) -> Any:
            analyzed.append(len(piece))
            return analysis(piece)

        return analyzing

    monkeypatch.setattr(recall_service, "analyze", counted(analyze))
    monkeypatch.setattr(long_texts, "token_terms", counted(token_terms))
    monkeypatch.setattr(long_texts, "written_date_terms", counted(written_date_terms))
    question = file.question
    assert set(query_terms(question)) == {"releas", "review"}
    # When it is recalled, its length known from its item
    answer, _ = recalled(RecallService(store, store, clock=lambda: NOW), question)
    probed_chars = sum(analyzed)
    analyzed.clear()
    expected, _ = recalled(RecallService(store, LengthsUnknown(store), clock=lambda: NOW), question)
    # Then the answer is the one analyzing it whole gives,
    assert answer == expected
    assert [hit.memory.id for hit in answer.items] == ["mem_file"]
    # and its rescoring analyzed the chunks holding the question's words, not the 250 KB
    # (the whole analysis did).
    assert 0 < probed_chars <= 2 * 2 * long_texts.CHUNK_CHARS
    assert sum(analyzed) >= len(text)


def test_an_items_length_counts_only_under_the_pipeline_that_indexed_it() -> None:
    memory = MemoryRecord(
        PROJECT, "mem_a", "active", "fact", "Tea at five.", at(-1), None, 0.5, "s", (), at(-1)
    )
    item = memory_item(memory, 7)
    assert memory_from_item(PROJECT, item).indexed_length == 7
    # Another pipeline version counted other terms: recall analyzes the text itself.
    assert memory_from_item(PROJECT, {**item, "pv": {"N": str(PIPELINE_VERSION - 1)}}).indexed_length is None
    # A purged memory has no text to score.
    assert memory_from_item(PROJECT, memory_item(replace(memory, content=None), 7)).indexed_length is None

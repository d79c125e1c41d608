"""recall: the smallest cited set of memories that answers a question within a budget, or abstain.

    question --pipeline--> terms --parallel bounded postings reads--> BM25 over visible postings
      --> the top candidates' memory items (BatchGetItem; the authority on status and validity)
      --> near-duplicates collapsed --> smallest covering set --> packed into the budget
      --> items with citations, or ``abstain`` with a documented reason.

docs/recall.md documents every parameter of ``RecallParams`` and every abstain reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from kaibo_core.core.clock import Clock, epoch_ms, format_instant, instant_ms, parse_instant, utc_now
from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.indexing import date_terms
from kaibo_core.core.models.memories import (
    HISTORICAL_STATUSES,
    STAGED,
    CorpusStats,
    MemoryRecord,
    TermRead,
)
from kaibo_core.core.models.recall import AbstainReason, RecallAnswer, RecallCandidate, RecallHit, RecallQuery
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.ranking import DEFAULT_PARAMS, Bm25Params
from kaibo_core.core.recall.answer_slots import asked_kinds, holds_value_of, kind_words
from kaibo_core.core.recall.asked_back import answers_before_questions
from kaibo_core.core.recall.conflicts import without_outdated
from kaibo_core.core.recall.context import ContextParams, Location, context_scores, neighbour_locations
from kaibo_core.core.recall.long_texts import ProbedText, TermSet
from kaibo_core.core.recall.packing import pack
from kaibo_core.core.recall.recency import DEFAULT_RECENCY, RecencyParams, newer_first
from kaibo_core.core.recall.scoring import (
    Candidate,
    RecallFilters,
    coverage,
    exact_score,
    score_postings,
    successions,
    term_weights,
    visible,
)
from kaibo_core.core.recall.selection import Ranked, SelectionParams, collapse_near_duplicates, smallest_set
from kaibo_core.core.semantic.scoring import fused_score, memories_alike, memory_cosine, semantic_candidates
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import analyze, query_terms
from kaibo_core.ports import EventLocator, MemoryReader, TermIndex

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaibo_core.services.semantic import SemanticChannel


@dataclass(frozen=True, slots=True)
class RecallParams:
    """The frozen parameters of recall (docs/recall.md, "Parameters")."""

    #: Postings read per term and side, strongest impact first.
    postings_per_term: int = 200
    #: A question's distinct terms beyond this are ignored (first ones kept).
    max_question_terms: int = 32
    #: Memory items fetched: budget / tokens_per_fetched_item, clamped to [min_fetch, max_fetch].
    min_fetch: int = 16
    max_fetch: int = 64
    tokens_per_fetched_item: int = 16
    #: Abstain (``below_threshold``) when the best candidate covers less of the question's idf weight.
    min_coverage: float = 0.3
    bm25: Bm25Params = DEFAULT_PARAMS
    selection: SelectionParams = field(default_factory=SelectionParams)
    #: ``smallest``: the greedy covering set; ``fill``: every candidate in rank order until the
    #: budget is full (the benchmark's comparison; not exposed by the API).
    strategy: Literal["smallest", "fill"] = "smallest"
    #: The best candidates' neighbours in their streams (core/recall/context.py); None: without.
    context: ContextParams | None = field(default_factory=ContextParams)
    #: Of two memories answering a question about now about equally well, the newer first
    #: (core/recall/recency.py); None: rank order only.
    recency: RecencyParams | None = DEFAULT_RECENCY
    #: A question in an earlier version's words finds the version that retired it (the history
    #: side read at every asOf: one more Query per term); False: only at a past asOf or in an audit.
    follow_versions: bool = True

    def fetch_count(self, budget: int) -> int:
        return max(self.min_fetch, min(self.max_fetch, budget // self.tokens_per_fetched_item))


@dataclass
class RecallStats:
    """What one recall read and decided (logged as numbers only: never text)."""

    terms: int = 0
    postings_read: int = 0
    truncated_terms: int = 0
    candidates: int = 0
    fetched: int = 0
    replacements_fetched: int = 0  # structured memories read for a replaced provisional one
    authority_dropped: int = 0
    duplicates_collapsed: int = 0
    #: Older memories dropped because a newer active one gives their attribute another value.
    outdated_dropped: int = 0
    older_marked: int = 0
    selected: int = 0
    #: Recall by meaning: cells read, their postings, and the candidates they gave.
    cells: int = 0
    cell_postings_read: int = 0
    semantic_candidates: int = 0
    #: Context: neighbour events read, and the memories of theirs that became candidates.
    context_events: int = 0
    context_candidates: int = 0
    #: Current versions found through an earlier version the question matched, and the items read
    #: to follow a chain of versions (a version retired again since).
    successors: int = 0
    successors_followed: int = 0


#: Called once per recall with the confirmed candidates, before packing (the SSE ``candidates`` event).
CandidatesListener = Callable[[list[RecallCandidate]], None]


class RecallService:
    def __init__(
        self,
        index: TermIndex,
        memories: MemoryReader,
        clock: Clock = utc_now,
        params: RecallParams | None = None,
        semantic: SemanticChannel | None = None,
        *,
        events: EventLocator | None = None,
    ) -> None:
        self._index = index
        self._memories = memories
        self._clock = clock
        self.params = params or RecallParams()
        #: Recall by meaning (docs/recall.md): None, lexical recall only.
        self._semantic = semantic
        #: Where context finds a memory's neighbours (docs/recall.md, "Context"): None, no context.
        self._events = events

    def recall(
        self,
        project: ProjectId,
        query: RecallQuery,
        on_candidates: CandidatesListener | None = None,
    ) -> tuple[RecallAnswer, RecallStats]:
        """The answer of ``POST /v1/recall`` (API.md) and what it cost."""
        params = self.params
        stats = RecallStats()
        now = self._clock()
        as_of = _as_of(query.as_of, now)
        as_of_ms = epoch_ms(as_of)
        answer = _Answer(query.budget, format_instant(as_of))
        terms = query_terms(query.question)[: params.max_question_terms]
        stats.terms = len(terms)
        if not terms:
            return answer.abstain("no_terms", on_candidates), stats
        filters = RecallFilters(
            as_of_ms=as_of_ms,
            streams=query.streams or None,
            types=query.types or None,
            include_superseded=query.include_superseded,
        )
        # The history side is read at every asOf: a question in an earlier version's words finds
        # the version that retired it (``successions``; docs/recall.md, "Found through an earlier version").
        history = params.follow_versions or query.include_superseded or as_of_ms < epoch_ms(now)
        semantic = self._semantic
        question = None if semantic is None else semantic.question(query.question)
        reads, cell_reads, corpus = self._read(project, terms, history, question, stats)
        stats.truncated_terms = sum(1 for r in reads if r.truncated)
        weights = term_weights({r.term: r.doc_freq for r in reads}, corpus)
        postings = {r.term: r.postings for r in reads}
        candidates, invalid_at_as_of = score_postings(postings, weights, corpus, filters, params.bm25)
        through = (
            successions(postings, weights, corpus, filters, params.bm25) if params.follow_versions else {}
        )
        candidates = _with_successors(candidates, through)
        stats.successors = len(through)
        stats.candidates = len(candidates)
        top = candidates[: params.fetch_count(query.budget)]
        fuse: Fusion | None = None
        if semantic is not None and question is not None:
            top = _with_nearby(
                top, semantic_candidates(cell_reads, question[0], filters, semantic.params), stats
            )
            fuse = _fusion(semantic, question[0])
        if not top:
            reason: AbstainReason = "nothing_valid_at_asof" if invalid_at_as_of else "no_match"
            return answer.abstain(reason, on_candidates), stats

        top, found = self._items(project, top, stats, through)
        stats.fetched = len(found)
        confirmed = _authoritative(top, found, filters, weights, corpus, params.bm25, fuse, through)
        ranked = [c.ranked for c in confirmed]
        stats.authority_dropped = len(top) - len(ranked)
        # Whether to answer is decided on the candidates the question found, before context.
        below = bool(ranked) and max(coverage(r.terms, weights) for r in ranked) < params.min_coverage
        if below and _close_enough(semantic, ranked):
            below = False
        if below and _covered_with_kind(ranked, query.question, weights, params.min_coverage):
            below = False
        if ranked and not below:
            scoring = _Scoring(filters, weights, corpus, params.bm25, fuse)
            confirmed = self._with_context(project, confirmed, found, scoring, stats)
            ranked = [c.ranked for c in confirmed]
        if on_candidates is not None:
            on_candidates([RecallCandidate(found[r.memory_id], r.score) for r in ranked])
        if not ranked:
            return answer.abstain("no_match", on_candidates=None), stats
        if below:
            return answer.abstain("below_threshold", on_candidates=None), stats

        via = {c.ranked.memory_id: c.via for c in confirmed if c.via is not None}
        return self._packed(answer, query, terms, weights, confirmed, found, stats, via), stats

    def _packed(  # noqa: PLR0917 - what the last steps of a recall need
        self,
        answer: _Answer,
        query: RecallQuery,
        terms: list[str],
        weights: Mapping[str, float],
        confirmed: list[_Confirmed],
        found: Mapping[str, MemoryRecord],
        stats: RecallStats,
        via: Mapping[str, str],
    ) -> RecallAnswer:
        """Near-duplicates collapsed, outdated values dropped, the smallest set packed."""
        params = self.params
        older_than: dict[str, str] = {}
        kept = _collapse(confirmed)
        stats.duplicates_collapsed = len(confirmed) - len(kept)
        if not query.include_superseded:
            # Two active memories giving one subject's attribute different values (an update the
            # structurer did not link): the older is not presented as current
            # (core/recall/conflicts.py). An audit (includeSuperseded) asked for every version.
            kept, outdated = without_outdated(kept, query.question)
            stats.outdated_dropped = len(outdated)
            # Of two memories that answer it about equally well, the newer first and the older
            # marked (core/recall/recency.py): updates neither the structurer nor the net could read.
            if params.recency is not None:
                alike = None
                if self._semantic is not None:
                    placements = {r.memory_id: found[r.memory_id].semantic for r in kept}
                    alike = memories_alike(placements, self._semantic.version)
                kept, older_than = newer_first(kept, query.question, weights, params.recency, alike)
        # A memory that only asks ("Did Mia's flight land on time?") is no answer: the best memory
        # below it about the same thing comes first (core/recall/asked_back.py).
        kept = answers_before_questions(kept, weights)
        chosen = smallest_set(kept, weights, params.selection) if params.strategy == "smallest" else kept
        stats.selected = len(chosen)
        packing = pack([(r.memory_id, r.text) for r in chosen], terms, weights, query.budget)
        if not packing.items:
            return answer.abstain("budget_too_small", on_candidates=None)
        scores = {r.memory_id: r.score for r in chosen}
        packed = {p.memory_id for p in packing.items}
        marked = {older: newer for older, newer in older_than.items() if older in packed and newer in packed}
        stats.older_marked = len(marked)
        items = [
            RecallHit(
                found[p.memory_id],
                p.form,
                p.text,
                p.tokens,
                scores[p.memory_id],
                marked.get(p.memory_id),
                via.get(p.memory_id),
            )
            for p in packing.items
        ]
        return answer.answered(items, packing.used_tokens)

    def _read(
        self,
        project: ProjectId,
        terms: list[str],
        history: bool,
        question: tuple[NDArray[np.float32], list[str]] | None,
        stats: RecallStats,
    ) -> tuple[Sequence[TermRead], Sequence[TermRead], CorpusStats]:
        """The question's terms' postings and, by meaning, its cells' (one parallel wave)."""
        cells = [] if question is None else question[1]
        cell_limit = 0 if self._semantic is None else self._semantic.params.postings_per_cell
        everything, corpus = self._index.read(
            project, terms, self.params.postings_per_term, history, cells=cells, cell_limit=cell_limit
        )
        reads, cell_reads = everything[: len(terms)], everything[len(terms) :]
        stats.postings_read = sum(len(r.postings) for r in reads)
        stats.cells = len(cell_reads)
        stats.cell_postings_read = sum(len(r.postings) for r in cell_reads)
        return reads, cell_reads, corpus

    def _with_context(
        self,
        project: ProjectId,
        confirmed: list[_Confirmed],
        found: dict[str, MemoryRecord],
        scoring: _Scoring,
        stats: RecallStats,
    ) -> list[_Confirmed]:
        """``confirmed`` with the best candidates' neighbours in their streams, every score moved
        toward its best neighbour's (core/recall/context.py), ranked again. ``found`` gains the
        neighbours' memory items."""
        context = self.params.context
        if context is None or self._events is None:
            return confirmed
        locations = {c.ranked.memory_id: _locations(found[c.ranked.memory_id]) for c in confirmed}
        wanted = neighbour_locations(
            (locations[c.ranked.memory_id] for c in confirmed[: context.anchors]),
            (location for held in locations.values() for location in held),
            context.span,
        )
        if wanted:
            event_ids = self._events.event_ids(project, wanted)
            stats.context_events = len(event_ids)
            memory_ids = [provisional_memory_id(e) for e in event_ids.values()]
            memory_ids = [m for m in dict.fromkeys(memory_ids) if m not in found]
            if memory_ids:
                extra, more = self._items(
                    project, [Candidate(m, 0.0, frozenset(), 0) for m in memory_ids], stats
                )
                extra = [c for c in extra if c.memory_id not in found]
                found.update((m, memory) for m, memory in more.items() if m not in found)
                neighbours = _authoritative(extra, found, *scoring)
                stats.context_candidates = len(neighbours)
                confirmed = confirmed + neighbours
                locations.update((m, _locations(found[m])) for m in (n.ranked.memory_id for n in neighbours))
        scores = context_scores(
            {c.ranked.memory_id: c.ranked.score for c in confirmed}, locations, context.span, context.weight
        )
        return _ranked_again(confirmed, scores)

    def _items(
        self,
        project: ProjectId,
        candidates: list[Candidate],
        stats: RecallStats,
        through: dict[str, Candidate] | None = None,
    ) -> tuple[list[Candidate], dict[str, MemoryRecord]]:
        """The candidates' memory items, with the replacements of those structured since, each pair
        of a provisional memory and its replacement judged from one read (``one_of_each_pair``),
        and the current versions of successors retired again since (``through`` follows them)."""
        found = self._memories.get_many(project, [c.memory_id for c in candidates])
        candidates, found = self._with_replacements(project, candidates, found, stats)
        if through:
            candidates, found = self._following(project, candidates, found, through, stats)
        return candidates, one_of_each_pair(found)

    def _following(
        self,
        project: ProjectId,
        top: list[Candidate],
        found: dict[str, MemoryRecord],
        through: dict[str, Candidate],
        stats: RecallStats,
    ) -> tuple[list[Candidate], dict[str, MemoryRecord]]:
        """A successor retired again since (a chain of versions: A, then B, then C) stands for the
        version that retired it, read in one more request per step (only then; at most
        ``MAX_VERSION_HOPS``). ``through`` is updated to name the later version."""
        for _ in range(MAX_VERSION_HOPS):
            moved = {
                memory_id: memory.superseded_by[-1]
                for memory_id, memory in found.items()
                if memory_id in through and memory.status in HISTORICAL_STATUSES and memory.superseded_by
            }
            if not moved:
                break
            missing = [later for later in dict.fromkeys(moved.values()) if later not in found]
            if missing:
                found = {**found, **self._memories.get_many(project, missing)}
                stats.successors_followed += len(missing)
            present = {c.memory_id for c in top}
            for earlier, later in moved.items():
                candidate = through.pop(earlier)
                if later not in through or through[later].score < candidate.score:
                    through[later] = candidate
                if later not in present:
                    top = [*top, Candidate(later, candidate.score, candidate.matched, 0)]
                    present.add(later)
        return top, found

    def _with_replacements(
        self,
        project: ProjectId,
        top: list[Candidate],
        found: dict[str, MemoryRecord],
        stats: RecallStats,
    ) -> tuple[list[Candidate], dict[str, MemoryRecord]]:
        """``top`` and ``found`` with the replacements ``replacements_to_fetch`` names, read in one
        more request (only then) and rescored like every candidate, from their items."""
        missing = replacements_to_fetch(found)
        if not missing:
            return top, found
        more = self._memories.get_many(project, missing)
        stats.replacements_fetched += len(more)
        extra = [Candidate(memory_id, 0.0, frozenset(), 0) for memory_id in missing if memory_id in more]
        return [*top, *extra], {**found, **more}


#: Versions followed from an earlier version's successor to the current one (A → B → C …).
MAX_VERSION_HOPS: Final = 3


def _with_successors(candidates: list[Candidate], through: Mapping[str, Candidate]) -> list[Candidate]:
    """``candidates`` with each successor (``successions``) scored at least as its earlier version,
    ranked again (ties: newer first, then id)."""
    if not through:
        return candidates
    by_id = {c.memory_id: c for c in candidates}
    for successor, earlier in through.items():
        own = by_id.get(successor)
        if own is None or own.score < earlier.score:
            matched = earlier.matched | (own.matched if own is not None else frozenset())
            valid_from = own.valid_from_ms if own is not None else 0
            by_id[successor] = Candidate(successor, earlier.score, matched, valid_from)
    return sorted(by_id.values(), key=lambda c: (-c.score, -c.valid_from_ms, c.memory_id))


def replacements_to_fetch(found: Mapping[str, MemoryRecord]) -> list[str]:
    """The structured memories that replaced a fetched provisional memory, when none of them was
    fetched with it: its postings were read before structuring indexed them, its item after the
    switch, so without them recall would show neither of the pair."""
    missing: list[str] = []
    for memory in found.values():
        if memory.status == "replaced" and not any(m in found for m in memory.replaced_by):
            missing.extend(m for m in memory.replaced_by if m not in missing)
    return missing


def one_of_each_pair(found: dict[str, MemoryRecord]) -> dict[str, MemoryRecord]:
    """Never both, never neither: a provisional memory and the structured memories replacing it,
    judged from one read of their items.

    Structuring switches them in one transaction (provisional -> replaced, staged -> active),
    but a BatchGetItem reads items one by one, so it may see one side before the switch and
    the other after. Whichever item shows the switch decides for the pair: a staged memory
    whose provisional memory reads ``replaced`` is on; a provisional memory whose replacement
    reads switched on is off (docs/structuring.md, "Provisional to structured").
    """
    switched: dict[str, MemoryRecord] | None = None
    for memory in found.values():
        provisional = found.get(memory.replaces) if memory.replaces is not None else None
        if provisional is None:
            continue
        if memory.status == STAGED and provisional.status == "replaced" and memory.becomes is not None:
            switched = switched if switched is not None else dict(found)
            switched[memory.id] = replace(memory, status=memory.becomes, becomes=None)
        elif memory.status != STAGED and provisional.status == "provisional":
            switched = switched if switched is not None else dict(found)
            switched[provisional.id] = replace(provisional, status="replaced", replaced_by=(memory.id,))
    return found if switched is None else switched


def _locations(memory: MemoryRecord) -> tuple[Location, ...]:
    return tuple((ref.stream, ref.seq) for ref in memory.source_events)


def _ranked_again(confirmed: Sequence[_Confirmed], scores: Mapping[str, float]) -> list[_Confirmed]:
    """``confirmed`` with each score replaced by ``scores``', best first (ties as in ``_authoritative``:
    newer ``validFrom``, then id)."""
    rescored = []
    for c in confirmed:
        score = scores[c.ranked.memory_id]
        lift = score - c.ranked.score
        rescored.append(
            replace(
                c,
                ranked=replace(c.ranked, score=score, context_lift=lift),
                textual=replace(c.textual, score=score, context_lift=lift),
            )
        )
    return sorted(
        rescored, key=lambda c: (-c.ranked.score, -(c.ranked.valid_from_ms or 0), c.ranked.memory_id)
    )


def _as_of(text: str | None, now: datetime) -> datetime:
    if text is None:
        return now
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise UnprocessableError(
            "invalid_timestamp",
            f"asOf: {exc}",
            {"field": "asOf", "asOf": text},
        ) from exc


def _with_nearby(
    top: list[Candidate], nearby: list[tuple[str, float]], stats: RecallStats
) -> list[Candidate]:
    """The lexical candidates, then the semantic candidates they do not hold (fetched alike)."""
    stats.semantic_candidates = len(nearby)
    listed = {c.memory_id for c in top}
    return top + [
        Candidate(memory_id, 0.0, frozenset(), 0) for memory_id, _ in nearby if memory_id not in listed
    ]


def _covered_with_kind(
    ranked: Sequence[Ranked], question: str, weights: Mapping[str, float], min_coverage: float
) -> bool:
    """A memory covers enough of the question once the words that name the kind of value asked for
    count as said by a value of that kind ("Lena's mobile: 0176 2234 8812" for "What is Lena's phone
    number?"), when it says every other word of the question. Read only for a question that would
    otherwise abstain."""
    named, kinds = kind_words(question), asked_kinds(question)
    if not named:
        return False
    others = weights.keys() - named  # every other word of the question must be said: "What's my
    # sister's phone number?" is not answered by a brother's phone
    return any(
        others <= r.terms
        and coverage(named.union(term for term in weights if term in r.terms), weights) >= min_coverage
        and holds_value_of(r.text, kinds)
        for r in ranked
    )


def _close_enough(semantic: SemanticChannel | None, ranked: Sequence[Ranked]) -> bool:
    """Does a confirmed memory mean what the question asks, words or not (no ``below_threshold``)?
    Its cosine was computed with its fused score."""
    if semantic is None:
        return False
    return any((r.cosine or 0.0) >= semantic.params.confident_cosine for r in ranked)


#: A memory's fused score and its cosine to the question, from its BM25 score and its item.
Fusion = Callable[[MemoryRecord, float], tuple[float, float]]


def _fusion(semantic: SemanticChannel, question: NDArray[np.float32]) -> Fusion:
    def fused(memory: MemoryRecord, bm25: float) -> tuple[float, float]:
        cosine = memory_cosine(memory.semantic, semantic.version, question)
        return fused_score(bm25, cosine, semantic.params), cosine

    return fused


def _authoritative(  # noqa: PLR0917 - the inputs of the exact rescoring
    top: Sequence[Candidate],
    found: Mapping[str, MemoryRecord],
    filters: RecallFilters,
    weights: Mapping[str, float],
    corpus: CorpusStats,
    bm25: Bm25Params,
    fuse: Fusion | None = None,
    through: Mapping[str, Candidate] | None = None,
) -> list[_Confirmed]:
    """The candidates whose memory items confirm them (status, validity, filters), rescored
    exactly from the items' own terms and ranked again.

    Postings are read bounded, so a candidate may have missed a frequent term's contribution
    past the cut; its item has every term. Ties: newer ``validFrom``, then id. A current version
    found through an earlier one (``through``) scores as the better of the two and counts the
    question terms the earlier one matched.
    """
    confirmed: list[tuple[float, int, str, _Confirmed]] = []
    for candidate in top:
        memory = found.get(candidate.memory_id)
        if memory is None or memory.content is None:
            continue
        valid_from = instant_ms(memory.valid_from)
        valid_to = None if memory.valid_to is None else instant_ms(memory.valid_to)
        if not visible(memory.status, valid_from, valid_to, memory.stream, memory.type, filters):
            continue
        terms, text_terms, lexical = _rescored(memory, memory.content, weights, corpus, bm25)
        earlier = None if through is None else through.get(memory.id)
        via = None
        if earlier is not None and earlier.score > lexical:
            lexical, via = earlier.score, earlier.memory_id
            terms = (
                terms.with_terms(earlier.matched) if isinstance(terms, TermSet) else terms | earlier.matched
            )
        score, cosine = (lexical, None) if fuse is None else fuse(memory, lexical)
        # With recall by meaning, each channel's own score is kept beside the fused one.
        own_lexical = None if fuse is None else lexical
        entry = _Confirmed(
            Ranked(
                memory.id,
                score,
                terms,
                memory.content,
                valid_from,
                memory.type,
                own_lexical,
                cosine,
            ),
            Ranked(
                memory.id,
                score,
                text_terms,
                memory.content,
                valid_from,
                memory.type,
                own_lexical,
                cosine,
            ),
            via,
        )
        confirmed.append((-score, -valid_from, memory.id, entry))
    return [entry for *_, entry in sorted(confirmed, key=lambda item: item[:3])]


def _rescored(
    memory: MemoryRecord,
    content: str,
    weights: Mapping[str, float],
    corpus: CorpusStats,
    bm25: Bm25Params,
) -> tuple[AbstractSet[str], AbstractSet[str], float]:
    """The memory's terms (its text's and its date's), its text's terms, and its exact BM25 score.

    A text longer than ``_CACHED_TEXT_CHARS`` whose length in terms its item records is not
    analyzed whole (~240 ms for a 250 KB file): BM25 needs only the question terms' counts and that
    length, and its term sets answer what they are asked chunk by chunk (core/recall/long_texts.py);
    the scores and sets are the same."""
    dates = date_terms(memory)
    if len(content) > _CACHED_TEXT_CHARS and memory.indexed_length is not None:
        text = ProbedText(content)
        counts = {term: text.count(term) + dates.count(term) for term in weights}
        lexical = exact_score(counts, memory.indexed_length, weights, corpus, bm25)
        return TermSet(text, dates), TermSet(text), lexical
    text_terms = _text_terms(content)
    terms = text_terms + dates
    lexical = exact_score(Counter(terms), len(terms), weights, corpus, bm25)
    return frozenset(terms), frozenset(text_terms), lexical


#: Texts up to this long have their terms cached (a container recalls the same popular
#: memories again and again); the cache holds at most ~2048 x 4 KB of text. Longer texts are
#: probed where asked (``_rescored``).
_CACHED_TEXT_CHARS: Final = 4096


@lru_cache(maxsize=2048)
def _cached_terms(text: str) -> tuple[str, ...]:
    return tuple(analyze(text))


def _text_terms(text: str) -> list[str]:
    return list(_cached_terms(text)) if len(text) <= _CACHED_TEXT_CHARS else analyze(text)


class _Scoring(NamedTuple):
    """What ``_authoritative`` scores a candidate's item with, after ``top`` and ``found``."""

    filters: RecallFilters
    weights: Mapping[str, float]
    corpus: CorpusStats
    bm25: Bm25Params
    fuse: Fusion | None


@dataclass(frozen=True, slots=True)
class _Confirmed:
    ranked: Ranked  # all the memory's terms: what coverage and the smallest set count
    textual: Ranked  # its text's terms only: what near-duplicate detection compares
    #: The earlier version it was found through (it matched the question better than this one).
    via: str | None = None


def _collapse(confirmed: Sequence[_Confirmed]) -> list[Ranked]:
    """Near-duplicates judged on the texts alone (not the date terms: a fact restated another
    day is still the same fact)."""
    kept, _ = collapse_near_duplicates([c.textual for c in confirmed])
    by_id = {c.ranked.memory_id: c.ranked for c in confirmed}
    return [by_id[r.memory_id] for r in kept]


@dataclass(frozen=True, slots=True)
class _Answer:
    budget: int
    as_of: str

    def abstain(self, reason: AbstainReason, on_candidates: CandidatesListener | None) -> RecallAnswer:
        if on_candidates is not None:
            on_candidates([])
        return RecallAnswer([], 0, self.budget, self.as_of, abstain_reason=reason)

    def answered(self, items: list[RecallHit], used_tokens: int) -> RecallAnswer:
        return RecallAnswer(items, used_tokens, self.budget, self.as_of)

"""The deterministic rule-based structurer (docs/structuring-rules.md).

For a message: split into statements, classify each, resolve its dates, detect
changes and link them to the earlier memories the search returns. Other kinds
(tool calls, files, commits) become one draft with the whole text. Every
non-empty text yields at least one draft, so nothing drops out of recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Final

from kaibo_core.core.models.memories import MemoryType
from kaibo_core.core.structuring.changes import Change, accepted_candidates, detect_change, rewritten_fact
from kaibo_core.core.structuring.classify import (
    CHANGE_DECISION,
    COPULA_FACT,
    FALLBACK_EPISODE,
    PAST_EPISODE,
    Classification,
    classify,
    speaker_label,
    subject_of,
    tells_the_past,
)
from kaibo_core.core.structuring.completed import closed_tasks, reports_completion
from kaibo_core.core.structuring.contacts import CONTACT_KINDS, gives_new_contact, recontacted_candidates
from kaibo_core.core.structuring.corrected import corrected_candidates, corrects
from kaibo_core.core.structuring.cued import cued_candidates, cues_change, tells_change_done
from kaibo_core.core.structuring.dates import local_date, resolve_dates
from kaibo_core.core.structuring.drafts import (
    MAX_DRAFTS_PER_EVENT,
    MAX_LINKS_PER_EVENT,
    CandidateMemory,
    CandidateSearch,
    EventToStructure,
    Link,
    LinkKind,
    Meaning,
    MemoryDraft,
)
from kaibo_core.core.structuring.facts import additive, history
from kaibo_core.core.structuring.preferred import (
    preferred_candidates,
    relays_own_choice,
    renews_kept_choice,
    states_choice,
)
from kaibo_core.core.structuring.procedures import (
    announces_new_way,
    read_route,
    renewed_candidates,
    rerouted_candidates,
)
from kaibo_core.core.structuring.reassigned import hands_over, reassigned_candidates
from kaibo_core.core.structuring.relayed import naming_source, relayed_value
from kaibo_core.core.structuring.relocated import puts_somewhere, relocated_candidates
from kaibo_core.core.structuring.renamed import gives_new_name, renamed_candidates
from kaibo_core.core.structuring.restated import (
    clauses,
    has_value,
    read,
    restated_candidates,
    retired_together,
)
from kaibo_core.core.structuring.statements import Statement, split_statements

#: Confidence of the one draft of a tool call, file or commit, and of an overflow episode.
WHOLE_TEXT_CONFIDENCE: Final = 0.6
#: Confidence of a task-completion episode ("I finished the migration script").
TASK_DONE_CONFIDENCE: Final = 0.7
_WHOLE_TEXT_TYPES: Final[dict[str, MemoryType]] = {
    "tool_call": "episode",
    "commit": "episode",
    "file": "fact",
}


@dataclass(slots=True)
class _Plan:
    """Drafts of one event under construction, with the link budget."""

    drafts: list[MemoryDraft] = field(default_factory=list)
    linked: set[str] = field(default_factory=set)
    #: Consecutive plain episode statements, kept together as one memory (see ``flush_episodes``).
    episodes: list[tuple[Statement, str, float]] = field(default_factory=list)
    occurred_at: str = ""
    #: The whole message: its other sentences name what a short one is about.
    message: str = ""
    #: A statement of the message, no question or hedge, says something said before was wrong.
    correcting: bool = False

    def flush_episodes(self) -> None:
        """One episode for a run of consecutive narrative statements: a story told in three
        sentences is one memory, not three (fewer, fuller memories: cheaper to index, and
        each keeps its context for recall)."""
        if not self.episodes:
            return
        first = self.episodes[0][0]
        text = " ".join(content for _, content, _ in self.episodes)
        content = f"{first.speaker}: {text}" if first.speaker else text
        confidence = min(confidence for _, _, confidence in self.episodes)
        self.drafts.append(MemoryDraft("episode", content, self.occurred_at, confidence))
        self.episodes.clear()

    @property
    def full(self) -> bool:
        return len(self.drafts) >= MAX_DRAFTS_PER_EVENT

    def links_for(self, kind: LinkKind, memory_ids: list[str]) -> tuple[Link, ...]:
        """Links to the ids not linked yet by this event, within MAX_LINKS_PER_EVENT."""
        links: list[Link] = []
        for memory_id in memory_ids:
            if memory_id in self.linked or len(self.linked) >= MAX_LINKS_PER_EVENT:
                continue
            self.linked.add(memory_id)
            links.append(Link(kind, memory_id))
        return tuple(links)


class RuleStructurer:
    """Rules only: no I/O besides the ``search`` it is given. Deterministic. With ``meaning``
    (recall by meaning's model, when on), an update in other words can still be read as one."""

    name = "rules"

    def __init__(self, meaning: Meaning | None = None) -> None:
        self._meaning = meaning

    def structure(self, event: EventToStructure, search: CandidateSearch) -> list[MemoryDraft]:
        text = event.text.strip()
        if not text:
            return []
        plan = _Plan()
        explicit = self._explicit_links(event, plan)
        if event.kind == "message":
            self._message_drafts(event, text, search, plan)
        if not plan.drafts:
            plan.drafts.append(self._whole_text_draft(event, text))
        if explicit:
            first = plan.drafts[0]
            plan.drafts[0] = replace(first, links=explicit + first.links)
        return plan.drafts[:MAX_DRAFTS_PER_EVENT]

    @staticmethod
    def _explicit_links(event: EventToStructure, plan: _Plan) -> tuple[Link, ...]:
        return plan.links_for("supersedes", list(event.supersedes)) + plan.links_for(
            "cancels", list(event.cancels)
        )

    @staticmethod
    def _whole_text_draft(event: EventToStructure, text: str) -> MemoryDraft:
        if event.kind == "message":
            return MemoryDraft("episode", text, event.occurred_at, FALLBACK_EPISODE)
        kind = _WHOLE_TEXT_TYPES.get(event.kind, "episode")
        return MemoryDraft(kind, text, event.occurred_at, WHOLE_TEXT_CONFIDENCE)

    def _message_drafts(
        self, event: EventToStructure, text: str, search: CandidateSearch, plan: _Plan
    ) -> None:
        today = local_date(event.occurred_at, event.time_zone)
        split = split_statements(text)
        plan.occurred_at = event.occurred_at
        plan.message = " ".join(statement.text for statement in split.statements)
        plan.correcting = any(
            corrects(statement.text)
            for statement in split.statements
            if not (statement.question or statement.hedged)
        )
        search = _searched_once(search)
        for statement in split.statements:
            if plan.full:
                break
            self._statement_drafts(event, statement, today, search, plan)
        plan.flush_episodes()
        if split.overflow and plan.drafts:
            overflow = MemoryDraft("episode", split.overflow, event.occurred_at, WHOLE_TEXT_CONFIDENCE)
            if plan.full:
                plan.drafts[-1] = overflow  # keep the text findable rather than a late statement
            else:
                plan.drafts.append(overflow)

    def _statement_drafts(
        self, event: EventToStructure, statement: Statement, today: date, search: CandidateSearch, plan: _Plan
    ) -> None:
        classification = classify(statement)
        if classification is None:
            return
        change = detect_change(statement)
        if change is None and self._task_closed(event, statement, today, search, plan):
            return
        if change is None and classification.type == "episode":
            # A plain statement no type fits may still give a plan a new value ("Team lunch at
            # Ramen Taka" after "Team lunch at Sushi Ko"); an episode told in the past never does.
            # "Gus got a new mobile — 0176 318 4420": told in the past, the current value in fact.
            plain = (
                classification.confidence == FALLBACK_EPISODE
                or tells_change_done(statement.text)
                or gives_new_contact(statement.text, statement.text)
                or relays_own_choice(statement)
                or renews_kept_choice(statement)
                or relayed_value(statement, plan.message) is not None
                or gives_new_name(statement.text)
            )
            links = self._restated(event, statement, today, search, plan) if plain else ()
            if not links:
                text = resolve_dates(statement.text, today, past=tells_the_past(statement)).text
                plan.episodes.append((statement, text, classification.confidence))
                return
            plan.flush_episodes()
            content = resolve_dates(_with_speaker(statement), today).text
            plan.drafts.append(
                MemoryDraft("episode", content, event.occurred_at, classification.confidence, None, links)
            )
            return
        plan.flush_episodes()
        told = change is None and tells_the_past(statement)  # "I painted it on Sunday": the last one
        content = resolve_dates(_with_speaker(statement), today, past=told).text
        if change is None:
            subject = subject_of(statement, classification.type)
            links = self._restated(event, statement, today, search, plan)
            plan.drafts.append(
                MemoryDraft(
                    classification.type, content, event.occurred_at, classification.confidence, subject, links
                )
            )
            return
        retired = self._retired(change, search, today, content, plan)
        # A change that retires nothing may still report a task done in words of its own ("Stripe
        # keys rotated and the old ones revoked at 16:20 UTC" also reads as a conflict of facts).
        if not retired and self._task_closed(event, statement, today, search, plan):
            return
        main_type, confidence = _change_type(change, classification)
        fact_text = rewritten_fact(change, retired, today)
        links = plan.links_for(change.link, [candidate.memory_id for candidate in retired])
        # A cancellation that finds nothing may be a reason told beside an update ("Ridgeway revised
        # the roof quote to $12,900 after we dropped the skylight"): read it as one when a cue says so.
        renewed = change.link == "supersedes" or cues_change(statement.text)
        if not retired and renewed and not _names_old_value(change):
            links = self._restated(event, statement, today, search, plan)
        # The links go on the rewritten fact when there is room for it, else on the statement.
        fact_fits = len(plan.drafts) + 2 <= MAX_DRAFTS_PER_EVENT
        main_links = () if fact_text is not None and fact_fits else links
        # A conflict found by reading the statement as a fact keeps the statement's own subject.
        subject = (subject_of(statement, main_type) if change.kind == "conflict" else None) or change.subject
        plan.drafts.append(
            MemoryDraft(main_type, content, event.occurred_at, confidence, subject, main_links)
        )
        if fact_text is not None and fact_fits:
            plan.drafts.append(
                MemoryDraft("fact", fact_text, event.occurred_at, COPULA_FACT, change.subject, links)
            )

    @staticmethod
    def _retired(
        change: Change, search: CandidateSearch, today: date, content: str, plan: _Plan
    ) -> list[CandidateMemory]:
        if len(plan.linked) >= MAX_LINKS_PER_EVENT:
            return []
        query = change.query()
        if not query:
            return []
        candidates = [candidate for candidate in search(query) if candidate.memory_id not in plan.linked]
        retired = accepted_candidates(change, candidates, today, content)
        return retired + retired_together(retired, candidates) if retired else []

    @staticmethod
    def _task_closed(
        event: EventToStructure, statement: Statement, today: date, search: CandidateSearch, plan: _Plan
    ) -> bool:
        """A statement that reports an open task done in words of its own (``completed``): one
        episode closing it. False (nothing drafted) when it closes none."""
        if len(plan.linked) >= MAX_LINKS_PER_EVENT or statement.guarded or not statement.parseable:
            return False
        if not reports_completion(statement.text):
            return False  # no completion word, no short report in the past: no search
        candidates = [c for c in search(statement.text) if c.memory_id not in plan.linked]
        closed = closed_tasks(statement.text, statement.speaker, candidates)
        links = plan.links_for("supersedes", [task.memory_id for task in closed])
        if not links:
            return False
        plan.flush_episodes()
        content = resolve_dates(_with_speaker(statement), today).text
        plan.drafts.append(
            MemoryDraft("episode", content, event.occurred_at, TASK_DONE_CONFIDENCE, None, links)
        )
        return True

    def _restated(
        self, event: EventToStructure, statement: Statement, today: date, search: CandidateSearch, plan: _Plan
    ) -> tuple[Link, ...]:
        """Links to earlier memories this statement restates with one value replaced, when no
        change rule matched (``restated``: updates without a change word)."""
        if len(plan.linked) >= MAX_LINKS_PER_EVENT or history(statement):
            return ()
        if additive(statement) or not statement.parseable:
            return ()
        passed_on = self._relayed(event, statement, today, search, plan)
        if passed_on:
            return passed_on
        if statement.guarded:
            if not relays_own_choice(statement):
                return ()
            candidates = [c for c in search(_search_text(statement)) if c.memory_id not in plan.linked]
            relayed = preferred_candidates(statement, event.stream, candidates, relayed=True)
            return plan.links_for("supersedes", [candidate.memory_id for candidate in relayed])
        text = resolve_dates(statement.text, today).text
        valued, choice, route = has_value(text), states_choice(statement), read_route(statement)
        otherwise = _unvalued_readings(text, plan)
        if not (valued or choice or route or otherwise):
            return ()  # nothing to replace another memory's value, choice, way, place or name with: no search
        candidates = [c for c in search(_search_text(statement)) if c.memory_id not in plan.linked]
        found = restated_candidates(text, statement.speaker, event.stream, candidates, self._meaning)
        if choice:
            found += preferred_candidates(statement, event.stream, candidates)
        if route is not None:
            found += rerouted_candidates(route, candidates)
        if not found and valued:
            wider = self._wider(statement, candidates, search, plan)
            found = cued_candidates(
                text,
                plan.message,
                wider,
                speaker=statement.speaker,
                stream=event.stream,
                meaning=self._meaning,
            ) or recontacted_candidates(text, plan.message, statement.speaker, event.stream, wider)
        for reading in otherwise:
            if found:
                break
            found = reading(text, plan.message, statement.speaker, event.stream, candidates)
        if found:
            found += retired_together(found, candidates)
        return plan.links_for("supersedes", [candidate.memory_id for candidate in found])

    def _relayed(
        self, event: EventToStructure, statement: Statement, today: date, search: CandidateSearch, plan: _Plan
    ) -> tuple[Link, ...]:
        """Links for a statement that passes a value on from its source, said ("Deb at the
        accountant's office says …") or brought by someone who got in touch ("Okafor emailed back —
        …"; ``relayed``): the cued reading of what they said, among the memories that name them."""
        relayed = relayed_value(statement, plan.message)
        if relayed is None:
            return ()
        said = relayed.said
        change = detect_change(said)
        if change is not None and change.link == "cancels":
            return ()  # "Ferrow just told us … their visit is off": no new value
        valued = [clause for clause in clauses(resolve_dates(said.text, today).text) if has_value(clause)]
        if not valued:
            return ()
        # "they're swamped anyway, receipts can come as late as March 13": the clause with the value
        text = ", ".join(valued)
        candidates = [c for c in search(statement.text) if c.memory_id not in plan.linked]
        found = cued_candidates(
            text,
            plan.message,
            naming_source(relayed, candidates),
            speaker=said.speaker,
            stream=event.stream,
            meaning=self._meaning,
            from_source=True,
        )
        return plan.links_for("supersedes", [candidate.memory_id for candidate in found])

    @staticmethod
    def _wider(
        statement: Statement, candidates: list[CandidateMemory], search: CandidateSearch, plan: _Plan
    ) -> list[CandidateMemory]:
        """``candidates`` and, for a statement that says a value changed, those its whole message
        finds (its other sentences name the subject: "Greenline can't do the 8th anymore. They've
        put us down for August 15 instead."): one more search, once per message (``_searched_once``:
        a message of one statement is not searched again)."""
        if not cues_change(statement.text) and not gives_new_contact(statement.text, plan.message):
            return candidates
        seen = {candidate.memory_id for candidate in candidates} | plan.linked
        return candidates + [c for c in search(plan.message) if c.memory_id not in seen]


#: A reading that needs no value of a kind: (statement text, message, speaker, stream, candidates) ->
#: the candidates it retires.
_Reading = Callable[[str, str, str | None, str, list[CandidateMemory]], list[CandidateMemory]]


def _unvalued_readings(text: str, plan: _Plan) -> list[_Reading]:
    """The readings that need no value of a kind whose words the statement (or, for a correction,
    its message) says, in the order they are tried: a correction, a place, a name, a new way."""
    readings: list[_Reading] = []
    if plan.correcting:
        readings.append(_corrected)
    if puts_somewhere(text):
        readings.append(relocated_candidates)
    if gives_new_name(text):
        readings.append(renamed_candidates)
    if announces_new_way(text):
        readings.append(renewed_candidates)
    if hands_over(text):
        readings.append(reassigned_candidates)
    return readings


def _corrected(
    text: str, message: str, _speaker: str | None, stream: str, candidates: list[CandidateMemory]
) -> list[CandidateMemory]:
    """``corrected_candidates`` as a ``_Reading`` (a correction is read across speakers)."""
    return corrected_candidates(text, message, stream, candidates)


def _searched_once(search: CandidateSearch) -> CandidateSearch:
    """``search`` answering a query it already answered for this event from memory: a statement
    is searched with its own text by both the completion and the restatement readings."""
    answers: dict[str, Sequence[CandidateMemory]] = {}

    def remembered(query: str) -> Sequence[CandidateMemory]:
        if query not in answers:
            answers[query] = search(query)
        return answers[query]

    return remembered


def _search_text(statement: Statement) -> str:
    """What a statement is searched with: its text, and an instruction's one-word label read as a
    speaker ("Returns: ship to 1200 Logistics Pkwy …" is about returns)."""
    label = speaker_label(statement) or _own_contact(statement)
    return f"{label} {statement.text}" if label else statement.text


#: A speaker telling their own number, address or email ("Lena: … I'm on 0151 4409 2276 from today").
_FIRST_PERSON: Final = re.compile(r"\b(?:i|i'm|im|my|me)\b", re.IGNORECASE)


def _own_contact(statement: Statement) -> str | None:
    """The speaker, when the statement gives their own contact ("Lena: I'm on 0151 …", "Jolene:
    new email btw — …"): what an earlier memory of it names ("Lena's mobile: 0176 2234 8812").
    Only then, so that a chat turn costs no extra Query."""
    if not statement.speaker:
        return None
    if not _FIRST_PERSON.search(statement.text) and not gives_new_contact(statement.text, statement.text):
        return None
    kinds = {kind for kind, _ in read(statement.text).values}
    return statement.speaker if kinds & CONTACT_KINDS else None


def _names_old_value(change: Change) -> bool:
    """The change names the value it replaces ("from July 10 to July 17"): when no memory holds it,
    the change is about something else. An arrow's left side of another kind names the subject
    ("Year 4 parents' evening → Wed 14 Oct"), not the old value."""
    if change.old is None:
        return False
    kinds = {kind for kind, _ in read(change.old).values if kind != "name"}
    return bool(kinds & {kind for kind, _ in read(change.new or "").values})


def _with_speaker(statement: Statement) -> str:
    return f"{statement.speaker}: {statement.text}" if statement.speaker else statement.text


def _change_type(change: Change, classification: Classification) -> tuple[MemoryType, float]:
    if change.kind == "task_done":
        return "episode", TASK_DONE_CONFIDENCE
    if change.draft_type is not None:
        confidence = CHANGE_DECISION if change.draft_type == "decision" else classification.confidence
        return change.draft_type, confidence
    if classification.type == "episode" and classification.confidence < PAST_EPISODE:
        return "fact", COPULA_FACT
    return classification.type, classification.confidence

"""Change statements: what changed, and which earlier memory it retires (docs/structuring-rules.md).

``detect_change`` reads one prepared statement and returns a ``Change`` (or None);
``accepted_candidates`` keeps only the candidates that are provably about the same
subject. Wrong supersession is far worse than a missed one, so every rule here
errs towards *no link*: guarded statements (questions, hedges, reported speech,
negations) never change anything, a subject must match, and a stated old value
("from July 13") must be found in the candidate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Final, Literal

from kaibo_core.core.models.memories import MemoryType
from kaibo_core.core.structuring.classify import (
    Copula,
    Preference,
    candidate_subject,
    classify,
    is_favorite,
    key_terms,
    object_subject,
    parse_copula,
    parse_preference,
    statement_of_text,
    subject_key,
    value_kind,
)
from kaibo_core.core.structuring.dates import dates_named, resolve_dates
from kaibo_core.core.structuring.drafts import CandidateMemory, LinkKind
from kaibo_core.core.structuring.facts import (
    Fact,
    across_speakers,
    additive,
    conflicts,
    distinct_scopes,
    evaluative,
    history,
    parse_fact,
    unresolved,
    value_kind_has,
    value_terms,
    without_qualifier,
)
from kaibo_core.core.structuring.restated import clauses, read
from kaibo_core.core.structuring.statements import Statement

ChangeKind = Literal[
    "move", "postpone", "reassign", "cancel", "rename", "switch", "replace", "change", "instead",
    "no_longer", "correction", "restatement", "preference", "task_done", "conflict",
]  # fmt: skip

#: Most candidates one change statement may retire (an event has MAX_LINKS_PER_EVENT in all).
MAX_LINKS_PER_CHANGE: Final = 3

_DETERMINERS: Final = ("the", "our", "my", "this", "that", "these", "those", "a", "an")
_DET = rf"(?P<det>(?:{'|'.join(_DETERMINERS)})\s+)?"
#: A verb starts a word that is not part of a compound ("hands" in "all-hands" is no verb).
_START = r"(?<![\w'’-])"
_NOT_OBJECT_WORDS = r"from|to|into|due|because|since|as|for|after|until|by"
_NOT_OBJECT = rf"(?!(?:{_NOT_OBJECT_WORDS})\b)"
_OBJ_WORDS = r"[\w'’#&:./+-]+(?:\s+[\w'’#&:./+-]+){0,6}?"
_OBJ = rf"(?P<obj>{_NOT_OBJECT}{_OBJ_WORDS})"
_PARTICLE_WORDS = r"back|out|forward|up|ahead|in"
#: The object of an active move verb is never a particle ("pulled in to Tuesday", "moving on to").
_NOT_MOVE_OBJECT = rf"(?!(?:{_NOT_OBJECT_WORDS}|{_PARTICLE_WORDS}|on|off|over|away|along|around|together)\b)"
_MOVE_OBJ = rf"(?P<obj>{_NOT_MOVE_OBJECT}{_OBJ_WORDS})"
_OLD = r"(?P<old>\S.*?)"
_NEW = r"(?P<new>\S.*?)"
_END = r"[\s.!]*$"
_ARROW = r"(?:→|⟶|->|=>)"
_BE = r"(?:is|are|was|were|has\s+been|have\s+been|will\s+be|got|gets|is\s+being)"
_NAME = r"(?-i:[A-Z])[\w'’-]+"
_PARTICLE = rf"(?:\s+(?P<p1>{_PARTICLE_WORDS}))?"
_PARTICLE_2 = rf"(?:\s+(?P<p2>{_PARTICLE_WORDS}))?"
_MOVE_VERB = (
    r"(?P<verb>mov(?:e|es|ed|ing)|postpon(?:e|es|ed|ing)|reschedul(?:e|es|ed|ing)|push(?:es|ed|ing)?"
    r"|delay(?:s|ed|ing)?|shift(?:s|ed|ing)?|bump(?:s|ed|ing)?|pull(?:s|ed|ing)?|bring(?:s|ing)?|brought)"
)
#: A name or handle as a whole subject or new name ("Project Falcon", "#ship-it", "@ops").
_HANDLE = r"(?-i:[A-Z#@])[\w'’#@-]*(?:\s+(?-i:[A-Z])[\w'’-]*){0,2}"
#: Verbs an amount changes with ("went up to", "dropped to", "was raised to").
_AMOUNT_VERB = (
    r"(?:(?:has\s+|have\s+)?(?:went|gone|goes|go)\s+(?:up|down)|(?:has\s+|have\s+|was\s+|were\s+|got\s+|gets\s+"
    r"|has\s+been\s+|have\s+been\s+)?(?:increased"
    r"|decreased|rose|risen|fell|fallen|dropped|grew|grown|climbed|jumped|raised|lowered|reduced|cut))"
)
#: Words that start a time, never a cancelled thing ("called off this week").
_WHEN_WORDS = r"(?:this|next|today|tomorrow|tonight|for|until|again|last)"
_MOVED = r"(?P<verb>moved|postponed|rescheduled|pushed|delayed|shifted|bumped|pulled|brought)"
_CANCEL_VERB = (
    r"(?:cancel(?:s|led|ed|ling|ing)?|call(?:s|ed|ing)?\s+off|scrap(?:s|ped|ping)?"
    r"|drop(?:s|ped|ping)?(?!\s+(?:off|by|in|out|over|down|back|to|into|me|us|you|him|her|them|it)\b)"
    r"|kill(?:s|ed|ing)?(?!\s+(?:it|time|me|us|you|him|her|them|the\s+mood)\b))"
)
_CANCELLED = r"(?:cancell?ed|called\s+off|scrapped|off)"
_REASON = r"(?:\s+(?:for|this|today|tomorrow|next|until|due\s+to|because|since|as|after)\b.*)?"
#: A remark after a cancellation, set off by a comma, a dash or a bracket ("Scrap Friday's dinner,
#: half the team has the flu"; "the design sync is off — Lara's team is away").
_REMARK = r"(?:\s*(?:,|\(|\s[—–-]|—|–)\s*\S.*)?"
_POSTPONE_TAIL = r"(?:\s+(?:by|for|indefinitely|until\s+further\s+notice)\b.*)?"
_FROM_TO = rf"(?:\s+from\s+{_OLD})?\s+to\s+{_NEW}"


def _compile(*parts: str) -> re.Pattern[str]:
    return re.compile("".join(parts), re.IGNORECASE)


# Each entry: the kind of change and a pattern over the statement's core. Tried in order.
_PATTERNS: Final[tuple[tuple[ChangeKind, re.Pattern[str]], ...]] = (
    ("cancel", _compile(_START, _CANCEL_VERB, rf"\s+(?!{_WHEN_WORDS}\b){_DET}{_OBJ}{_REMARK}{_END}")),
    ("cancel", _compile(_START, rf"call(?:s|ed|ing)?\s+{_DET}{_OBJ}\s+off{_REMARK}{_END}")),
    ("cancel", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+(?:now\s+|officially\s+)?", _CANCELLED, _REASON, _REMARK,
                        _END)),
    ("cancel", _compile(rf"^{_DET}{_OBJ}\s+(?:cancell?ed|called\s+off|scrapped)", _REASON, _REMARK, _END)),
    ("rename", _compile(_START, rf"renam(?:e|es|ed|ing)\s+{_DET}{_OBJ}", _FROM_TO, _END)),
    ("rename", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+",
                        r"(?:renamed(?:\s+to)?|now\s+(?:renamed(?:\s+to)?|called|named))",
                        rf"\s+{_NEW}{_END}")),
    ("rename", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+(?:called|named|known\s+as)\s+{_NEW}\s+now{_END}")),
    ("rename", _compile(rf"^{_DET}{_OBJ}\s+(?:now\s+)?(?:goes|will\s+go)\s+by\s+{_NEW}{_END}")),
    ("rename", _compile(rf"^(?P<obj>{_HANDLE})\s+(?:is|are)\s+now\s+(?P<new>{_HANDLE}){_END}")),
    ("reassign", _compile(_START,
                          r"(?:re-?assign(?:s|ed|ing)?|hand(?:s|ed|ing)?(?:\s+over)?|transfer(?:s|red|ring)?)",
                          rf"\s+{_DET}{_OBJ}(?:\s+over)?", _FROM_TO, _END)),
    ("reassign", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+",
                          r"(?:re-?assigned|handed\s+over|transferred|now\s+assigned)", _FROM_TO, _END)),
    ("reassign", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+now\s+owned\s+by\s+{_NEW}{_END}")),
    ("reassign", _compile(rf"^(?P<new>{_NAME}(?:\s+{_NAME})?)\s+",
                          r"(?:will\s+|is\s+going\s+to\s+|now\s+|has\s+|is\s+|are\s+)?(?:take[sn]?|took|taking)",
                          rf"\s+over\s+{_DET}{_OBJ}(?:\s+from\s+{_OLD})?{_REMARK}{_END}")),
    ("reassign", _compile(rf"^{_DET}{_OBJ}\s+",
                          r"(?:will\s+(?:now\s+)?be|is\s+(?:now\s+)?being|is\s+now|are\s+now)\s+",
                          r"(?:handled|owned|run|led|managed|driven|covered|done|taken\s+care\s+of)\s+by\s+",
                          rf"(?P<new>{_NAME}(?:\s+{_NAME})?)(?:\s+(?:from\s+now\s+on|going\s+forward|now))?",
                          rf"{_REMARK}{_END}")),
    ("reassign", _compile(rf"^(?P<new>{_NAME})\s+",
                          r"(?:now\s+owns|is\s+now\s+responsible\s+for|now\s+leads|now\s+handles|is\s+now\s+in\s+charge\s+of)",
                          rf"\s+{_DET}{_OBJ}{_END}")),
    ("switch", _compile(_START, r"(?:switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing)|mov(?:e|es|ed|ing))",
                        rf"\s+(?:over\s+)?from\s+{_OLD}\s+to\s+{_NEW}{_END}")),
    ("replace", _compile(_START, rf"replac(?:e|es|ed|ing)\s+{_DET}{_OLD}\s+with\s+{_NEW}{_END}")),
    ("replace", _compile(rf"^{_DET}{_OLD}\s+{_BE}\s+(?:now\s+)?replaced\s+(?:by|with)\s+{_NEW}{_END}")),
    ("replace", _compile(rf"^{_NEW}\s+",
                         r"(?:replaces|replaced|will\s+replace|is\s+replacing|now\s+replaces)",
                         rf"\s+{_DET}{_OLD}{_END}")),
    ("switch", _compile(_START, r"(?:switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing))\s+(?:over\s+)?",
                        r"(?P<det>(?:the|our|my)\s+)",
                        rf"{_OBJ}\s+(?:from\s+{_OLD}\s+)?to\s+{_NEW}{_END}")),
    ("switch", _compile(_START, rf"switch(?:es|ed|ing)?\s+(?:over\s+)?to\s+{_NEW}",
                        rf"(?:\s+(?:from|instead\s+of)\s+{_OLD})?{_END}")),
    ("change", _compile(_START, rf"chang(?:e|es|ed|ing)\s+{_DET}{_OBJ}\s+from\s+{_OLD}\s+to\s+{_NEW}{_END}")),
    ("change", _compile(rf"^{_DET}{_OBJ}\s+(?:has\s+|have\s+|was\s+|is\s+|got\s+)?changed", _FROM_TO, _END)),
    # an arrow: "Standup: 9:00 → 9:30", "KB-412 → Olu"
    ("change", _compile(rf"^{_DET}{_OBJ}:\s+{_OLD}\s*{_ARROW}\s*{_NEW}{_END}")),
    ("change", _compile(rf"^{_DET}{_OBJ}\s*{_ARROW}\s*{_NEW}{_END}")),
    ("change", _compile(_START, r"(?:adjust|revis|updat|chang)(?:e|es|ed|ing)?",
                        rf"\s+{_DET}{_OBJ}\s*(?:[—–:]|\s-)\s*{_NEW}{_END}")),
    ("move", _compile(_START, _MOVE_VERB, _PARTICLE, rf"\s+{_DET}{_MOVE_OBJ}{_PARTICLE_2}",
                      rf"(?:\s+from\s+{_OLD})?\s+(?:to|until|till|til|into)\s+{_NEW}{_END}")),
    ("move", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+(?:now\s+|officially\s+)?", _MOVED, _PARTICLE,
                      rf"(?:\s+from\s+{_OLD})?\s+(?:to|until|till)\s+{_NEW}{_END}")),
    ("move", _compile(rf"^{_DET}{_OBJ}\s+(?:(?:is|are)\s+)?(?:now\s+)?",
                      r"(?P<verb>moves|moved|moving|slips|slipped|slipping|shifts|shifted)",
                      rf"\s+(?:from\s+{_OLD}\s+)?to\s+{_NEW}{_END}")),
    ("move", _compile(rf"^{_DET}{_OBJ}\s+", _AMOUNT_VERB, rf"\s+(?:from\s+{_OLD}\s+)?to\s+{_NEW}{_END}")),
    ("postpone", _compile(_START, r"(?:postpon(?:e|es|ed|ing)|delay(?:s|ed|ing)?|push(?:es|ed|ing)?\s+back)",
                          rf"\s+{_DET}{_OBJ}", _POSTPONE_TAIL, _END)),
    ("postpone", _compile(rf"^{_DET}{_OBJ}\s+{_BE}\s+(?:now\s+|officially\s+)?",
                          r"(?:postponed|delayed|pushed\s+back)", _POSTPONE_TAIL, _END)),
)  # fmt: skip

#: Where and when a thing done was done ("booked at Valley Toyota for Tuesday 8am"): no part of it.
_DONE_DETAILS = r"(?:\s+(?:at|for|on|with|via|through|in)\s+[^,;]*?)?"
#: The patterns that read a clause from its start ("^"): the only ones a later clause can match
#: that the whole statement did not (the others search anywhere, up to the statement's end).
_ANCHORED: Final = tuple((kind, pattern) for kind, pattern in _PATTERNS if pattern.pattern.startswith("^"))

_DONE_PATTERNS: Final = (
    _compile(
        r"^(?:[\w'’-]+\s+){0,2}?(?:(?:have|has|had|just|'ve|finally|already)\s+)*(?:finished|completed"
        r"|wrapped\s+up|closed|resolved|shipped|fixed|merged|deployed|sent|submitted|published|done\s+with"
        r"|delivered|wrote|written|booked|paid|filed|uploaded|renewed|rotated|finish|complete)"
        rf"\s+{_DET}{_OBJ}{_END}"
    ),
    _compile(
        rf"^{_DET}{_OBJ}\s*(?:(?:is|are|was|has\s+been|have\s+been)\s+)?(?:now\s+|finally\s+|all\s+)?"
        rf"(?:done|finished|complete|completed|fixed|merged|shipped|resolved|closed|submitted|deployed"
        rf"|booked|paid|sent|filed|renewed|live|sorted|handled|taken\s+care\s+of|in\s+place|up\s+and\s+running)"
        rf"(?:\s+now)?{_DONE_DETAILS}{_END}"
    ),
)
#: "The pricing page is updated": a task's own verb, done (checked against the task's words).
_DONE_PARTICIPLE: Final = _compile(
    rf"^{_DET}{_OBJ}\s+(?:is|are|was|were|has\s+been|have\s+been)\s+(?:now\s+|finally\s+|all\s+)?"
    rf"(?P<verb>(?-i:[a-z]+ed)){_END}"
)
#: "README updated", "Ordered the new badges": a past participle with its object.
_DONE_VERB_FIRST: Final = _compile(
    r"^(?:(?:i|we)\s+)?(?:(?:just|finally|already)\s+)?(?P<verb>[a-z]+ed|bought|built|made|wrote|sent|paid|took"
    rf"|gave|found|sold|ran|set\s+up|signed|met)\s+{_DET}{_OBJ}{_END}"
)
#: The present of irregular pasts ("Bought the tickets" closes "buy the tickets").
#: Past forms that do not end in -ed, to their verb (also read by ``completed``).
IRREGULAR_PASTS: Final[dict[str, str]] = {
    "bought": "buy", "built": "build", "made": "make", "wrote": "write", "written": "write", "sent": "send",
    "paid": "pay", "took": "take", "taken": "take", "gave": "give", "given": "give", "found": "find",
    "sold": "sell", "got": "get", "did": "do", "done": "do", "ran": "run", "met": "meet", "set up": "set",
}  # fmt: skip
_DONE_VERB_LAST: Final = _compile(
    rf"^{_DET}{_OBJ}\s+(?:now\s+|finally\s+)?(?P<verb>(?-i:[a-z]+ed))(?:\s+now)?{_END}"
)
#: Negated statements that cancel ("X is not happening", "X won't happen this week").
_NOT_HAPPENING: Final = _compile(
    rf"^{_DET}{_OBJ}\s+(?:is\s+not|isn't|isnt|are\s+not|aren't|won't|will\s+not)\s+"
    r"(?:happening|going\s+ahead|taking\s+place|happen|go\s+ahead|take\s+place)",
    _REASON,
    _END,
)
#: "No offsite dinner this year", "No standup tomorrow", "Jo has covid so no book club this week".
_NO_EVENT: Final = _compile(
    rf"^(?:.+?,?\s+so\s+)?no\s+{_OBJ}(?:\s+(?:today|tomorrow|tonight|this|next|on|until)\b.*)?{_END}"
)
#: A short label before a colon, then a clause of its own ("School email: the … will not take place").
_CLAUSE_AFTER_LABEL: Final = re.compile(r"^[^:]{1,40}:\s+(\S.*)$")
#: "We're not going to Asheville after all": a plan given up.
_NOT_AFTER_ALL: Final = _compile(
    r"^(?:we're|we’re|we\s+are|i'm|i’m|i\s+am|we|i)\s+(?:not|no\s+longer)\s+"
    rf"(?:going\s+to|doing|having|holding|taking)\s+{_DET}{_OBJ}\s+after\s+all{_END}"
)
#: "I switched to the light theme": a preference of the speaker, the old one unnamed.
_SWITCHED_TO: Final = _compile(
    rf"^(?:i|we)\s+(?:have\s+|'ve\s+|just\s+)*(?:switched|changed)\s+(?:over\s+)?to\s+{_NEW}{_END}"
)
_PAST_COPULA: Final = _compile(r"\s(?:was|were)\s")
#: Pattern families whose statement may also be read as a fact and matched as one.
_FACT_FAMILIES: Final = frozenset({"move", "reassign", "change", "switch"})
_TASK_LABELS: Final = frozenset({"todo", "to-do", "task", "action item", "action items", "reminder"})
#: A statement of what is still to do states no change yet ("We need to migrate the database to
#: Postgres 16", "Remember to move the demo to Friday"), like a statement labelled TODO.
_OBLIGATION: Final = _compile(
    r"^(?:(?:[\w'’-]+\s+){0,3}?(?:needs?\s+to|has\s+to|have\s+to|must|got\s+to|gotta|should)\b"
    r"|(?:please|pls|remember\s+to|don't\s+forget\s+to|dont\s+forget\s+to|make\s+sure\s+to)\b)"
)
_NOT_DONE: Final = _compile(r"\b(?:almost|nearly|half|partially|partly|mostly|not\s+yet|soon)\b")
_INSTEAD: Final = _compile(rf"^(?P<head>\S.*?)\s+instead\s+of\s+{_OLD}{_END}")
_NO_LONGER: Final = (
    _compile(rf"^(?P<pre>\S.*?)\s+no\s+longer\s+(?P<rest>\S.*?){_END}"),
    _compile(
        r"^(?P<pre>\S.*?)\s+(?:don't|doesn't|do\s+not|does\s+not|isn't|aren't|is\s+not|are\s+not|won't"
        rf"|will\s+not|dont|doesnt|isnt|arent)\s+(?P<rest>\S.*?)\s+any\s*more{_END}"
    ),
)
#: Where a new or old value ends: a reason, a purpose or a second clause.
#: A comma before a time of day is no end of the value ("bumped to Thursday, 4pm").
_TIME_AFTER_COMMA = r"(?!\s*(?:at\s+)?\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\s*\d{1,2}:\d{2}\b)"
_VALUE_TAIL: Final = _compile(
    rf"\s*(?:,(?!\d{{3}}\b){_TIME_AFTER_COMMA}|[;(]|\s(?:because|since|so\s+that|so|as|due\s+to|in\s+order|for|to\s+give|to\s+allow"
    r"|and\s+(?:tell|let|inform|notify|update|please))\b).*$"
)
_FOR_TOPIC: Final = _compile(r"\s+for\s+(?P<topic>\S.*)$")
_TIME_WORDS: Final = frozenset(
    ["today", "tomorrow", "tonight", "yesterday", "this", "next", "week", "month", "on", "at", "in", "for"]
)
_USE_TERMS: Final = frozenset({"use", "run", "host", "adopt", "store"})
_RELATIVE_START: Final = _compile(r"(?:next|this|last|coming|tomorrow|today|tonight|in\s)\b")
_NAMING_TERMS: Final = frozenset({"call", "name", "codenam", "renam"})
_TARGET_WORDS: Final = frozenset(["target", "deadline", "date", "due", "eta", "cutoff", "cut-off"])


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


#: A move stated with these verbs needs a date, time, weekday or part of the day as its new or
#: old value: "bring joy to us", "push each other to improve", "my focus shifted to art" are no moves.
_SCHEDULE_ONLY: Final = ("push", "pull", "bring", "brought", "shift", "bump", "slip")
#: The particle a verb needs to be a move at all ("": none): "pull in", "bring forward".
_NEEDED_PARTICLES: Final[dict[str, frozenset[str]]] = {
    "push": frozenset({"", "back", "out", "forward", "up", "ahead"}),
    "pull": frozenset({"in", "forward", "ahead"}),
    "bring": frozenset({"forward", "ahead"}),
    "brought": frozenset({"forward", "ahead"}),
}
#: How a schedulable value starts, after its modifiers: "July 17", "4pm", "Friday", "next week",
#: "the afternoon", "end of the month", "Q3", "a later date".
_SCHEDULE_VALUE: Final = _compile(
    r"^(?:(?:the|a|an|next|this|coming|following|same|early|late|mid|end\s+of|start\s+of|after|before"
    r"|later|later\s+this|around|about|roughly|sometime|sometime\s+in)\s+|mid-)*"
    r"(?:[$€£]?\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d"
    r"|(?:january|february|march|april|june|july|august|september|october|november|december)\b"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|today\b|tomorrow\b|tonight\b|morning\b"
    r"|afternoon\b|evening\b|night\b|noon\b|midday\b|midnight\b|lunch(?:time)?\b|eod\b|eow\b"
    r"|week(?:end)?\b|month\b|quarter\b|year\b|sprint\b|q[1-4]\b|h[12]\b|(?:later\s+)?date\b"
    r"|day\b|later\b)"
)
#: Words a subject may not contain: personal and reflexive pronouns ("push each other", "moved me").
_PRONOUN_WORDS: Final = _word_set(
    "i me you he him she it we us they them myself yourself himself herself itself ourselves yourselves"
    " themselves one another each"
)
#: Words a subject may not start with (after its determiner): quantifiers, intensifiers, particles,
#: conjunctions, prepositions, pronoun-like words ("so much joy", "more attention", "on from that job").
_NOT_SUBJECT_START: Final = _word_set(
    "so such very really too much many more most less least few some any all both every lot lots bit"
    " plenty enough several no none own same other another and or but nor on off out up down back over"
    " away along around together in into with about of at by for from to get got make let just even also"
    " still always never here there what which who whom whose how why when where whatever everything"
    " something anything nothing everyone someone anyone everybody somebody anybody nobody this that these"
    " those things thing stuff"
)
#: Abstract or filler words that never make a subject on their own ("joy", "the ideas", "a lot").
_FILLER_WORDS: Final = _word_set(
    "joy love fun happiness magic attention memories memory tears closer life lot lots bit bits thing"
    " things stuff way ways time times comfort support hope energy vibes positivity peace gratitude"
    " inspiration smile smiles laughter kindness warmth passion motivation strength courage confidence"
    " ideas idea feelings feeling best better good great"
)
_FUNCTION_WORDS: Final = (
    _PRONOUN_WORDS
    | _NOT_SUBJECT_START
    | _word_set(
        "the a an my our your his her their its is are was were be been being am do does did have has had not"
    )
)
#: Formulas that say "no" to nothing planned ("No worries", "No problem", "No big deal"): never a
#: cancellation, which needs an event, plan or task.
_FORMULAS: Final = _word_set(
    "worries worry problem problems prob probs thanks thank way doubt doubts idea clue wonder kidding"
    " joke rush hurry pressure biggie big sweat offense offence harm need comment excuse excuses shame"
    " regrets regret complaints complaint judgment judgement judging pun surprise chance matter"
)
#: Words that make a subject a clause ("people who ...", "it when ...").
_CLAUSE_WORDS: Final = _word_set("who whom whose which when whenever where wherever if because while")
#: Verbs that start an infinitive of purpose, never a new place or time ("moved to improve").
_PURPOSE_VERBS: Final = _word_set(
    "be get make do have see help improve reach experience tackle try keep work learn go take give find"
    " become start stay feel show share create build grow pursue achieve explore follow live enjoy"
    " spend focus celebrate remember say tell talk think know"
)


def _word(token: str) -> str:
    """A token as a lower-case word without punctuation or contraction ("I'm" -> "i")."""
    return token.lower().replace("’", "'").split("'")[0].strip('.,!?;:"()')


def plausible_subject(words: str) -> bool:
    """The object of a change reads as a noun phrase: it does not start with a quantifier,
    intensifier, particle, preposition or pronoun-like word, holds no personal pronoun, and has a
    word that is neither a function word, an -ly adverb nor filler ("so much joy", "each other")."""
    tokens = [token for token in map(_word, words.split()) if token]
    if not tokens or tokens[0] in _NOT_SUBJECT_START:
        return False
    if any(token in _PRONOUN_WORDS for token in tokens):
        return False
    return any(
        token not in _FUNCTION_WORDS and token not in _FILLER_WORDS and not token.endswith("ly")
        for token in tokens
    )


def _schedulable(value: str | None) -> bool:
    """A value that starts as a date, time, weekday, month or part of the day ("July 17",
    "tomorrow morning", "next week"); "win this year" is no schedulable value."""
    return value is not None and _SCHEDULE_VALUE.match(value) is not None


def _move_allowed(match: re.Match[str], old: str | None, new: str | None) -> bool:
    """A move verb reads as a move: push/pull/bring only with their particle, and those and
    shift/bump/slip only towards (or from) a schedulable value; no purpose infinitive
    ("moved to improve") after any move verb."""
    groups = match.groupdict()
    verb = (groups.get("verb") or "").lower()
    particle = (groups.get("p1") or groups.get("p2") or "").lower()
    if new and _word(new.split()[0]) in _PURPOSE_VERBS:
        return False
    stem = next((stem for stem in _SCHEDULE_ONLY if verb.startswith(stem)), None)
    if stem is None:
        return True
    needed = _NEEDED_PARTICLES.get(stem)
    if needed is not None and particle not in needed:
        return False
    return _schedulable(new) or _schedulable(old)


#: Draft type of each kind of change; None: keep the statement's own classification.
DRAFT_TYPES: Final[dict[ChangeKind, MemoryType | None]] = {
    "move": "decision", "postpone": "decision", "reassign": "decision", "cancel": "decision",
    "rename": "decision", "switch": "decision", "replace": "decision", "change": "decision",
    "instead": None, "no_longer": None, "correction": None, "restatement": None, "preference": "preference",
    "task_done": "episode", "conflict": None,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Change:
    """One change a statement states: its subject, the old value it names, the new value."""

    kind: ChangeKind
    link: LinkKind
    subject: str | None
    subject_words: str = ""  # the object as written ("release target"), for the rewritten fact
    determiner: str = ""
    old: str | None = None
    new: str | None = None
    verb: str = ""  # a completed task's own verb ("updated"), to be found in the task
    context: str = ""  # words a candidate must share when there is no subject (instead of, no longer)
    single: bool = False  # retire at most one candidate (the best)
    copula: Copula | None = None
    preference: Preference | None = None
    fact: Fact | None = None  # the statement read as subject, attribute and value
    cued: bool = False  # the statement has a correction or "now" cue
    holder: str = ""  # the speaker, lower case ("my favorite editor" is the speaker's)

    @property
    def draft_type(self) -> MemoryType | None:
        return DRAFT_TYPES[self.kind]

    def query(self) -> str:
        """What to search earlier memories for: the subject words, plus the old value."""
        parts = [self.subject or "", self.context]
        if self.fact is not None and self.fact.subject != self.subject:
            parts.append(self.fact.subject)
        if self.old and key_terms(self.old) - key_terms(self.subject or ""):
            parts.append(self.old)
        if self.preference is not None:
            parts.append(self.preference.value)
        return " ".join(part for part in parts if part).strip()


def _clean_value(value: str | None) -> str | None:
    if value is None:
        return None
    cleaned = _VALUE_TAIL.sub("", value).strip(" .!,;:\"'")
    return cleaned or None


def _clean_subject(words: str) -> str | None:
    kept = [word for word in words.split() if word.lower() not in _TIME_WORDS]
    return subject_key(" ".join(kept))


def _from_pattern(kind: ChangeKind, match: re.Match[str]) -> Change | None:
    groups = match.groupdict()
    obj = (groups.get("obj") or "").strip()
    determiner = (groups.get("det") or "").strip().lower()
    if ": " in obj:  # "Letter home from school: the Ashby trip has been called off": after the colon
        obj = obj.rsplit(": ", 1)[1].strip()
        first, _, rest = obj.partition(" ")
        if first.lower() in _DETERMINERS and rest:
            determiner, obj = first.lower(), rest
    old = _clean_value(groups.get("old"))
    raw_new = groups.get("new")
    new = _clean_value(raw_new)
    if kind in {"switch", "replace"} and not obj:
        topic = _FOR_TOPIC.search(raw_new or "")
        if old is None:
            return None
        return Change(kind, "supersedes", None, old=old, new=new,
                      context=topic.group("topic") if topic else "", single=True)  # fmt: skip
    if kind == "rename":
        if not plausible_subject(obj):
            return None
        subject = _clean_subject(obj)
        if old is None:  # "Rename Falcon to Osprey": the object is the old name
            old = obj
        return Change(kind, "supersedes", subject, obj, determiner, old, new, single=True)
    if kind == "move" and not _move_allowed(match, old, new):
        return None
    if not plausible_subject(obj):
        return None
    subject = object_subject(obj) if kind == "task_done" else _clean_subject(obj)
    if subject is None:
        return None
    link: LinkKind = "cancels" if kind == "cancel" else "supersedes"
    return Change(kind, link, subject, obj, determiner, old, new)


def _task_done(statement: Statement) -> Change | None:
    if _NOT_DONE.search(statement.core):
        return None
    if statement.label in {"done", "finished", "completed"}:
        subject = object_subject(statement.core)
        return Change("task_done", "supersedes", subject, statement.core) if subject else None
    for pattern in _DONE_PATTERNS:
        match = pattern.match(statement.core)
        if match and plausible_subject(match.group("obj")):
            subject = object_subject(match.group("obj"))
            if subject is not None:
                return Change("task_done", "supersedes", subject, match.group("obj"))
    return None


_DONE_FORMS: Final = (_DONE_PARTICIPLE, _DONE_VERB_LAST, _DONE_VERB_FIRST)


def _done_participle(statement: Statement) -> Change | None:
    """ "The pricing page is updated": done when an open task says the same verb (checked later)."""
    participle = next((m for p in _DONE_FORMS if (m := p.match(statement.core))), None)
    if (
        participle is None
        or _NOT_DONE.search(statement.core)
        or not plausible_subject(participle.group("obj"))
    ):
        return None
    subject = object_subject(participle.group("obj"))
    if subject is None:
        return None
    return Change("task_done", "supersedes", subject, participle.group("obj"), verb=participle.group("verb"))


def _instead(match: re.Match[str]) -> Change | None:
    """ "Use GitHub Actions instead of Jenkins for CI": the old value is Jenkins; the context a
    candidate must share is the head's common words (names are the new value) and the tail."""
    old = _clean_value(match.group("old"))
    if old is None:
        return None
    head_words = match.group("head").split()
    common = [head_words[0], *(word for word in head_words[1:] if not word[:1].isupper())]
    raw_old = match.group("old")
    tail = raw_old[raw_old.find(old) + len(old) :]
    return Change(
        "instead", "supersedes", None, old=old, context=" ".join([*common, tail]).strip(), single=True
    )


def _no_longer(statement: Statement) -> Change | None:
    for pattern in _NO_LONGER:
        match = pattern.match(statement.core)
        if match:
            pre = subject_key(match.group("pre")) or ""
            return Change("no_longer", "supersedes", None, context=f"{pre} {match.group('rest')}".strip(),
                          single=True)  # fmt: skip
    return None


#: "Please welcome Olivia Grant, our new Head of Sales" and "Olivia Grant is our new Head of Sales":
#: the role is the subject, the person its new value.
_NEW_IN_ROLE: Final = re.compile(
    rf"^(?:please\s+)?(?:welcome\s+|say\s+hi\s+to\s+)?(?P<name>{_NAME}(?:\s+{_NAME}){{0,2}}),?\s+(?:is\s+|as\s+)?"
    r"(?P<det>our|the|my)\s+new\s+(?P<role>[^,.;!—–()]+?)[\s.!]*$",
    re.IGNORECASE,
)


#: Roles one person holds for someone ("our new accountant"); a role named with capitals ("Head of
#: Sales") is one too. "Luna is my new kitten" names no role: a second kitten retires no first.
_ROLE_WORDS: Final = frozenset({
    "manager", "lead", "head", "director", "owner", "contact", "coordinator", "officer", "chair",
    "president", "accountant", "lawyer", "doctor", "dentist", "pediatrician", "vet", "plumber",
    "electrician", "landlord", "editor", "assistant", "advisor", "therapist", "tutor", "coach",
    "teacher", "babysitter", "nanny", "rep", "representative",
})  # fmt: skip


def _role_first(statement: Statement) -> Statement:
    """A person announced in a role, said with the role first ("Our new Head of Sales is Olivia Grant")."""
    match = _NEW_IN_ROLE.match(statement.core)
    if match is None:
        return statement
    words = match.group("role").split()
    if not any(word[:1].isupper() or word.lower() in _ROLE_WORDS for word in words):
        return statement
    core = f"{match.group('det')} new {match.group('role')} is {match.group('name')}"
    return replace(statement, core=core[:1].upper() + core[1:], now_cue=True)


def _restatement(statement: Statement) -> Change | None:
    change = _copula_or_fact(statement)
    if change is None or not statement.speaker:
        return change
    return replace(change, holder=statement.speaker.lower())


def _copula_or_fact(statement: Statement) -> Change | None:
    copula = parse_copula(statement.core)
    fact = None if additive(statement) else parse_fact(statement)
    cued = statement.correction_cue or statement.now_cue
    if copula is not None and not cued and _PAST_COPULA.search(statement.core):
        return None  # "The standup was at 8am last quarter" tells history
    if copula is not None and fact is not None and key_terms(fact.subject) != key_terms(copula.subject):
        copula = None  # the fact reads better: "Eve is responsible for the contract" is about the contract
    if copula is not None:
        if cued or copula.now:
            return Change("correction", "supersedes", copula.subject, copula.subject_words, copula.determiner,
                          new=copula.value, copula=copula, fact=fact, cued=True)  # fmt: skip
        if copula.kind != "other" or is_favorite(copula.subject) or fact is not None:
            return Change("restatement", "supersedes", copula.subject, copula.subject_words,
                          copula.determiner, new=copula.value, copula=copula, fact=fact)  # fmt: skip
        return None
    preference = parse_preference(statement)
    if preference is not None and (cued or preference.old):
        return Change("preference", "supersedes", preference.subject, old=preference.old,
                      new=preference.value, preference=preference)  # fmt: skip
    if fact is not None and preference is None:
        return Change("conflict", "supersedes", fact.subject, new=fact.value, fact=fact, cued=cued)
    return None


def _negated_cancel(statement: Statement) -> Change | None:
    """ "The book club meeting is not going ahead": a negation that cancels (a plain negation only;
    no question, hedge or reported speech)."""
    if statement.question or statement.hedged or statement.reported or not statement.parseable:
        return None
    core = statement.core
    # A clause after a label first: "School email: the 4/22 conferences will not take place".
    labelled = _CLAUSE_AFTER_LABEL.match(core)
    match = (labelled and _not_happening(labelled.group(1))) or _not_happening(core)
    if match is None or not plausible_subject(match.group("obj")) or _formula(match.group("obj")):
        return None
    subject = _clean_subject(match.group("obj"))
    return Change("cancel", "cancels", subject, match.group("obj")) if subject else None


def _not_happening(core: str) -> re.Match[str] | None:
    return _NOT_HAPPENING.match(core) or _NO_EVENT.match(core) or _NOT_AFTER_ALL.match(core)


def _formula(words: str) -> bool:
    """ "worries" in "No worries", "big deal" in "No big deal": a formula, not a planned thing."""
    first = words.split(maxsplit=1)[0] if words.strip() else ""
    return _word(first) in _FORMULAS


def _says_not_happening(content: str) -> bool:
    """A memory that itself says something is not happening ("No worries.", "No standup today"):
    nothing a cancellation can cancel."""
    core = statement_of_text(content).core
    return _NOT_HAPPENING.match(core) is not None or _NO_EVENT.match(core) is not None


def _switched_preference(statement: Statement) -> Change | None:
    """ "I switched to the light theme": the speaker's preference, with the new value's head noun."""
    match = _SWITCHED_TO.match(statement.core)
    if match is None or not statement.speaker:
        return None
    value = _clean_value(match.group("new"))
    head = subject_key(value or "")
    if value is None or head is None:
        return None
    holder = statement.speaker.lower()
    preference = Preference(f"{holder} {head.split()[-1]} preference", holder, "prefer", value, None)
    return Change("preference", "supersedes", preference.subject, new=value, preference=preference)


def detect_change(statement: Statement) -> Change | None:
    """The change a statement states, or None (also for every guarded statement)."""
    statement = _role_first(statement)
    if statement.label in _TASK_LABELS or history(statement) or _OBLIGATION.match(statement.core):
        return None  # "TODO: move the demo to Friday" is still to do; "used to" is history
    cancel = _negated_cancel(statement)
    if cancel is not None:
        return cancel
    if statement.guarded or not statement.parseable:
        return None
    switched = _switched_preference(statement)
    if switched is not None:
        return switched
    done = _task_done(statement)
    if done is not None:
        return done
    for part, patterns in (
        (statement, _PATTERNS),
        *((clause, _ANCHORED) for clause in _later_clauses(statement)),
    ):
        for kind, pattern in patterns:
            match = pattern.search(part.core)
            if match:
                change = _from_pattern(kind, match)
                return (
                    None
                    if change is None
                    else _first_person_named(replace(change, fact=parse_fact(part)), statement)
                )
    instead = _INSTEAD.match(statement.core)
    if instead:
        return _instead(instead)
    no_longer = _no_longer(statement)
    if no_longer is not None:
        return no_longer
    return _done_participle(statement) or _restatement(statement)


_FIRST_PERSON: Final = re.compile(r"(?P<who>i|we)(?:['’](?:m|ll|re|ve|d))?", re.IGNORECASE)


def _first_person_named(change: Change, statement: Statement) -> Change:
    """ "I'm taking over the PR": the new holder is the speaker; "we" or no speaker, unknown
    ("assigned to I'm" is no fact)."""
    first_person = None if change.new is None else _FIRST_PERSON.fullmatch(change.new)
    if first_person is None:
        return change
    return replace(change, new=statement.speaker if first_person.group("who").lower() == "i" else None)


def _later_clauses(statement: Statement) -> list[Statement]:
    """The clauses after the first, each as a statement of its own: a change told after its
    reason ("App Store review is slow, mobile launch slips to March 9")."""
    parts = [_CONNECTIVE.sub("", part) for part in clauses(statement.core)[1:]]
    return [replace(statement, text=part, core=part) for part in parts if part]


#: A word that joins a consequence to its reason ("…, so the Fernway release slips to June 29").
_CONNECTIVE: Final = re.compile(
    r"^(?:so|and so|which means|meaning|hence|therefore|and|but)\s+", re.IGNORECASE
)


# --- matching candidates -----------------------------------------------------------------------------


def _old_found(old: str, content_terms: frozenset[str], today: date) -> bool:
    terms = key_terms(old)
    if terms and terms <= content_terms:
        return True
    return any(day.isoformat() in content_terms for day in resolve_dates(old, today).dates)


def _subject_fits(subject_terms: frozenset[str], candidate: CandidateMemory, content_terms: frozenset[str],
                  old_found: bool) -> bool:  # fmt: skip
    """Same subject: equal keys, or the statement is more specific and the candidate says all of it;
    a broader statement ("the release" vs "release target") only when its old value was found."""
    stored = candidate_subject(candidate.content, candidate.subject)
    candidate_terms = key_terms(stored) if stored else frozenset()
    if not subject_terms:
        return False
    if candidate_terms:
        if candidate_terms == subject_terms:
            return True
        if candidate_terms < subject_terms:
            return subject_terms <= content_terms
        return subject_terms < candidate_terms and old_found
    return (len(subject_terms) >= 2 or old_found) and subject_terms <= content_terms


_HARD_KINDS: Final = frozenset({"date", "time", "amount", "number", "email", "url", "phone", "address"})


def _value_replaced(change: Change, candidate: CandidateMemory) -> bool:
    """The new value is of a kind the memory holds another value of ("raised to $65k" and
    "Budget for the customer summit: $50k"): the memory's value is the one replaced, as if named."""
    if change.new is None:
        return False
    new = {value for value in read(change.new).values if value[0] in _HARD_KINDS}
    old = {value for value in read(unresolved(candidate.content)).values if value[0] in _HARD_KINDS}
    return bool(new) and not new & old and {kind for kind, _ in new} <= {kind for kind, _ in old}


def _says_all_of(subject: str | None, content_terms: frozenset[str]) -> bool:
    """The memory says every word of the cancelled thing, and it has two or more."""
    terms = key_terms(subject or "")
    return len(terms) >= 2 and all(said_by_stem(term, content_terms) for term in terms)


#: Letters two stems of one word share at the least ("inspect" of "inspection", "inspector").
_MIN_SHARED_STEM: Final = 5


def said_by_stem(term: str, content_terms: frozenset[str]) -> bool:
    """``term`` is among ``content_terms``, or a word of the same stem is ("the Redbank inspection"
    and "with the fire inspector")."""
    if term in content_terms:
        return True
    return len(term) >= _MIN_SHARED_STEM and any(
        len(other) >= _MIN_SHARED_STEM and (other.startswith(term) or term.startswith(other))
        for other in content_terms
    )


def _plan_named(subject: str | None, content: str, content_terms: frozenset[str], today: date) -> bool:
    """The memory is a plan for a day still to come that says the cancelled thing's one word
    ("Asheville"); a memory of what happened ("Tom moved to Asheville in May") is no plan."""
    terms = key_terms(subject or "")
    if len(terms) != 1 or not terms <= content_terms:
        return False
    return any(day >= today for day in dates_named(content, today))


def _overlap(words: str, content_terms: frozenset[str]) -> float:
    terms = key_terms(words)
    return len(terms & content_terms) / len(terms) if terms else 0.0


def _restates(change: Change, candidate: CandidateMemory) -> bool:
    """A copula restatement: the candidate says the same subject has another value."""
    assert change.copula is not None
    candidate_statement = statement_of_text(candidate.content)
    old = parse_copula(candidate_statement.core)
    if (
        old is None
        or candidate_statement.guarded
        or key_terms(old.subject) != key_terms(change.copula.subject)
    ):
        return False
    if _same_value(old.value, change.copula.value):
        return False
    if change.kind == "correction":
        return True
    return old.prep == change.copula.prep and (old.kind == change.copula.kind or is_favorite(old.subject))


def _prefers_otherwise(change: Change, candidate: CandidateMemory, content_terms: frozenset[str],
                       today: date) -> bool:  # fmt: skip
    assert change.preference is not None
    candidate_statement = statement_of_text(candidate.content)
    classified = classify(candidate_statement)
    if candidate.type != "preference" and (classified is None or classified.type != "preference"):
        return False
    old = parse_preference(candidate_statement)
    if old is None or old.holder != change.preference.holder:
        return False
    if change.old is not None:
        return _old_found(change.old, content_terms, today)
    same_subject = key_terms(old.subject) == key_terms(change.preference.subject)
    return same_subject and (old.verb, key_terms(old.value)) != (
        change.preference.verb,
        key_terms(change.preference.value),
    )


def _accepts(change: Change, candidate: CandidateMemory, today: date) -> bool:
    content_terms = frozenset(key_terms(candidate.content))
    old_found = change.old is not None and _old_found(change.old, content_terms, today)
    if change.old is not None and not old_found:
        return False
    if change.kind in {"correction", "restatement", "conflict"}:
        return _retires_fact(change, candidate)
    if change.kind == "cancel" and _says_not_happening(candidate.content):
        return False
    if change.kind == "cancel" and (
        _says_all_of(change.subject, content_terms)  # "called off the October 8 all-hands"
        or _plan_named(change.subject, candidate.content, content_terms, today)  # "not going to Asheville"
    ):
        return True
    if change.kind == "preference":
        return _prefers_otherwise(change, candidate, content_terms, today)
    if change.kind == "task_done":
        return _closes_task(change, candidate, content_terms)
    if change.kind in {"switch", "replace"} and change.subject is None:
        uses = candidate.type in {"decision", "preference"} or bool(content_terms & _USE_TERMS)
        return uses and (not change.context or key_terms(change.context) <= content_terms)
    if change.kind == "instead":
        return _overlap(change.context, content_terms) >= 1 / 3
    if change.kind == "no_longer":
        return _overlap(change.context, content_terms) >= 2 / 3 and len(key_terms(change.context)) >= 2
    if change.new is not None and _already_says(change.new, candidate):
        return False
    if change.kind == "rename" and old_found and (content_terms & _NAMING_TERMS or _names(change, candidate)):
        return True
    if change.kind in _FACT_FAMILIES and _fact_conflict(change, _candidate_fact(candidate)):
        return True  # "Mia moved to Porto" retires "Mia lives in Lisbon"
    return _subject_fits(
        key_terms(change.subject or ""),
        candidate,
        content_terms,
        old_found or _value_replaced(change, candidate),
    )


def _other_holder(change: Change, candidate: CandidateMemory) -> bool:
    """ "Lea: My favorite editor is Vim" and "Jin: My favorite editor is Emacs" are two people's."""
    if change.copula is None or change.copula.determiner != "my":
        return False
    statement = statement_of_text(candidate.content)
    old = parse_copula(statement.core)
    return old is not None and old.determiner == "my" and (statement.speaker or "").lower() != change.holder


def _retires_fact(change: Change, candidate: CandidateMemory) -> bool:
    """A correction, restatement or conflict: the same holder and scope, a thing for a subject, no
    opinion on either side, the same speaker or a cue or a fact value; then the facts conflict or
    the copulas restate."""
    old = _candidate_fact(candidate)
    if _other_holder(change, candidate) or (
        change.fact and old and distinct_scopes(change.fact, old, change.cued)
    ):
        return False
    if not _thing_subject(change) or _evaluation(change, candidate, old):
        return False
    if not _speakers_agree(change, candidate, old):
        return False
    return _fact_conflict(change, old) or (change.kind != "conflict" and _restates(change, candidate))


def _thing_subject(change: Change) -> bool:
    """The subject names a thing, not a clause: "Loving it when people ..." and "Love being with
    people who ..." are no subjects a value belongs to."""
    words = change.subject_words or change.subject or ""
    tokens = {_word(token) for token in words.split()}
    return plausible_subject(words) and not tokens & _CLAUSE_WORDS


def _evaluation(change: Change, candidate: CandidateMemory, old: Fact | None) -> bool:
    """Either side is an opinion ("The colors are so bold", "LeBron is incredible"), not a fact
    value: opinions do not retire each other."""
    new_values = [change.new, change.fact.value if change.fact else None]
    copula = parse_copula(statement_of_text(unresolved(candidate.content)).core)
    old_values = [old.value if old else None, copula.value if copula else None]
    return any(value is not None and evaluative(value) for value in new_values + old_values)


def _speakers_agree(change: Change, candidate: CandidateMemory, old: Fact | None) -> bool:
    """Another speaker's statement retires a memory only with a cue, or with a fact value of the
    same kind for the same specific subject (facts.across_speakers): "Pets are great" by Maria
    is no update of John's "Pets are the best"."""
    speaker = (statement_of_text(candidate.content).speaker or "").lower()
    if not change.holder or not speaker or speaker == change.holder:
        return True
    if change.cued or (change.fact is not None and change.fact.cued):
        return True
    return change.fact is not None and old is not None and across_speakers(change.fact, old)


def _candidate_fact(candidate: CandidateMemory) -> Fact | None:
    return parse_fact(statement_of_text(unresolved(candidate.content)))


def _fact_conflict(change: Change, old: Fact | None) -> bool:
    """The candidate states a fact the change's fact gives another value (facts.conflicts)."""
    return change.fact is not None and old is not None and conflicts(change.fact, old, change.cued)


def _closes_task(change: Change, candidate: CandidateMemory, content_terms: frozenset[str]) -> bool:
    """A completed task closes a task with the same subject; with its own verb done ("is
    updated"), the task must use that verb."""
    if candidate.type != "task":
        return False
    subject_terms = key_terms(change.subject or "")
    verb = IRREGULAR_PASTS.get(change.verb.lower(), change.verb)
    if verb and not key_terms(verb) <= content_terms:
        return False
    if _subject_fits(subject_terms, candidate, content_terms, False):
        return True
    return len(subject_terms) >= 2 and subject_terms <= content_terms


def _names(change: Change, candidate: CandidateMemory) -> bool:
    """The candidate names the old name: as its subject ("Ledger API handles ...") or value."""
    old = (change.old or "").lower()
    statement = statement_of_text(candidate.content)
    copula = parse_copula(statement.core)
    if copula is not None and copula.value.lower().strip(" .") == old:
        return True
    core = statement.core.lower()
    return core.startswith((f"{old} ", f"the {old} ", f"our {old} "))


def _same_value(first: str, second: str) -> bool:
    """One value says all the other does ("July 13" and "July 13, 2026"): not a change."""
    first_terms, second_terms = value_terms(first), value_terms(second)
    return first_terms <= second_terms or second_terms <= first_terms


def _already_says(new: str, candidate: CandidateMemory) -> bool:
    copula = parse_copula(statement_of_text(candidate.content).core)
    return copula is not None and _same_value(copula.value, new)


def accepted_candidates(change: Change, candidates: Sequence[CandidateMemory], today: date,
                        content: str) -> list[CandidateMemory]:  # fmt: skip
    """The candidates the change retires, best first (search order), at most MAX_LINKS_PER_CHANGE."""
    limit = 1 if change.single else MAX_LINKS_PER_CHANGE
    accepted: list[CandidateMemory] = []
    for candidate in candidates:
        if candidate.content.strip() == content.strip() or any(
            candidate.memory_id == kept.memory_id for kept in accepted
        ):
            continue
        if _accepts(change, candidate, today):
            accepted.append(candidate)
            if len(accepted) == limit:
                break
    return accepted


# --- the rewritten fact ------------------------------------------------------------------------------


_POSSESSIVES: Final = frozenset({"his", "her", "their", "your", "its"})


def _display_subject(change: Change) -> str:
    words = without_qualifier(change.subject_words.strip())
    if change.determiner in {"our", "my", "their", "his", "her"}:
        words = f"{change.determiner} {words}"
    elif not any(word[:1].isupper() for word in words.split()) and (
        _word(words.split()[0]) not in _POSSESSIVES  # "her appointment" takes no "the"
    ):
        words = f"the {words}"
    return words[:1].upper() + words[1:]


def _preposition(change: Change, new: str, retired: Sequence[CandidateMemory]) -> str | None:
    """The preposition before the new value: the retired memory's, else one that fits the value
    ("at" a time, "on" a date, none for a target date); None when nothing fits."""
    for candidate in retired:
        copula = parse_copula(statement_of_text(candidate.content).core)
        if copula is not None and key_terms(copula.subject) == key_terms(change.subject or ""):
            return copula.prep
    kind = value_kind(new)
    if kind == "time":
        return "on" if value_kind_has(new, "date") else "at"  # "on Thursday, 4pm"
    if kind == "date":
        relative = _RELATIVE_START.match(new) is not None  # "next week", "tomorrow": no preposition
        return "" if relative or set((change.subject or "").split()) & _TARGET_WORDS else "on"
    return None


def rewritten_fact(change: Change, retired: Sequence[CandidateMemory], today: date) -> str | None:
    """The statement as a plain current fact ("The release target is July 17, 2026."), if it has one."""
    if change.new is None or not change.subject_words or not plausible_subject(change.subject_words):
        return None
    # The new value followed "to" in the statement: resolve it there ("to Friday" is a date).
    new = resolve_dates(f"to {change.new}", today).text.removeprefix("to ")
    subject = _display_subject(change)
    if change.kind in {"move", "switch", "change"}:
        prep = _preposition(change, change.new, retired)
        if prep is None:
            return f"{subject} moved to {new}." if change.kind == "move" else f"{subject} is {new}."
        return f"{subject} is {prep} {new}." if prep else f"{subject} is {new}."
    if change.kind == "reassign":
        return f"{subject} is assigned to {new}."
    if change.kind == "rename":
        return _renamed_value(change, retired, new) or f"{subject} is now called {new}."
    return None


def _renamed_value(change: Change, retired: Sequence[CandidateMemory], new: str) -> str | None:
    """ "Our Slack channel for releases is #releases." when the retired memory had the old name
    as its value ("... is #ship-it"): the question that found the old name finds the new one."""
    old = (change.old or "").lower()
    for candidate in retired:
        copula = parse_copula(statement_of_text(unresolved(candidate.content)).core)
        if copula is not None and copula.value.lower().strip(" .") == old:
            words = f"{copula.determiner} {copula.subject_words}".strip()
            return f"{words[:1].upper()}{words[1:]} is {new}."
    return None

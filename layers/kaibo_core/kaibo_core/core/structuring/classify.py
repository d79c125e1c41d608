"""The type, confidence and subject of one statement (docs/structuring-rules.md, "Types").

Rules are tried in a fixed order; the first that fires decides. The subject is a
normalized lowercase key ("release target", "favorite color", "seats preference")
that later statements are matched against by their stemmed terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from kaibo_core.core.models.memories import PREFERENCE_SUBJECT_WORD, MemoryType
from kaibo_core.core.structuring.statements import MAX_PARSED_CHARS, Statement, prepare, split_speaker
from kaibo_core.core.text import analyze

# Confidence of each rule (documented in docs/structuring-rules.md).
LABELLED: Final = 0.85
CHANGE_DECISION: Final = 0.85
COPULA_FACT: Final = 0.8
PREFERENCE: Final = 0.8
DECISION: Final = 0.8
TASK: Final = 0.75
PROCEDURE: Final = 0.75
PAST_EPISODE: Final = 0.65
PLAIN_FACT: Final = 0.55
REPORTED: Final = 0.5
FALLBACK_EPISODE: Final = 0.4
QUESTION: Final = 0.3

ValueKind = Literal["time", "date", "number", "name", "code", "other"]


@dataclass(frozen=True, slots=True)
class Classification:
    type: MemoryType
    confidence: float


@dataclass(frozen=True, slots=True)
class Copula:
    """``<subject> is [now] [<prep>] <value>``: "The standup is at 9am"."""

    subject: str
    subject_words: str  # as written, without the determiner: "standup"
    determiner: str  # "the", "our", "" ...
    prep: str  # "at", "on", "" ...
    value: str  # "9am"
    now: bool  # "is now ..."

    @property
    def kind(self) -> ValueKind:
        return value_kind(self.value)


@dataclass(frozen=True, slots=True)
class Preference:
    subject: str
    holder: str
    verb: str
    value: str
    old: str | None  # "over <old>", "instead of <old>", "rather than <old>"


_DETERMINERS: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "our",
        "my",
        "your",
        "his",
        "her",
        "their",
        "its",
        "this",
        "that",
        "these",
        "those",
        "today's",
        "tomorrow's",
        "tonight's",
        "yesterday's",
        "next",
        "upcoming",
        "coming",
        "current",
        "new",
        "old",
    ]
)
_PRONOUNS: Final = frozenset(
    [
        "i",
        "me",
        "we",
        "us",
        "you",
        "he",
        "him",
        "she",
        "her",
        "it",
        "they",
        "them",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "everything",
        "something",
        "anything",
        "nothing",
        "everyone",
        "someone",
        "one",
    ]
)
_KEY_WORD: Final = re.compile(r"[\w#@+-]+(?::\d+)?")

_COPULA: Final = re.compile(
    r"^(?P<np>[\w'’#&.-]+(?:\s+[\w'’#&:.-]+){0,5}?)\s+"
    r"(?P<verb>is|are|was|were|will\s+be|has\s+been|have\s+been|remains|stays)\s+"
    r"(?P<now>(?:now|still|currently|officially|actually)\s+)?(?P<value>\S.*?)[\s.!]*$",
    re.IGNORECASE,
)
_PREP: Final = re.compile(
    r"^(?P<prep>at|on|in|by|from|until|before|after|with|for|due)\s+(?P<rest>\S.*)$", re.I
)
_TIME_VALUE: Final = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b", re.I
)
_DATE_VALUE: Final = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s+\d{1,2}\b|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)|\b\d{4}-\d{2}-\d{2}\b|\b(?:monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday|today|tomorrow|tonight|next week|next month)\b",
    re.I,
)
#: A number, an amount, a phone number or an address with a few words after it ("$29 a month",
#: "0800 123 456", "88 Queen Street", "three weeks").
_NUMBER_VALUE: Final = re.compile(
    r"^(?:[$€£+]?\d[\d,.]*(?:[\s-]\d[\d,.]*)*|(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven"
    r"|twelve|twenty|thirty|forty|fifty|hundred)\b)\s*[%\w]{0,12}(?:\s+[\w/]+){0,3}$",
    re.IGNORECASE,
)
#: One token that is an identifier: an email, a handle, a channel, a password, a version ("maple42").
_CODE_VALUE: Final = re.compile(r"^(?=\S*[\d@#/])[\w@#./:+-]+$")
_NAME_VALUE: Final = re.compile(r"^[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2}$")

_PREFERENCE: Final = re.compile(
    r"^(?P<holder>i|we|(?:the|my|our)\s+(?:user|customer|client|boss|manager|team|wife|husband|partner"
    r"|son|daughter|mom|dad|mother|father|family|kids)|[A-Z][\w'’-]+)\s+(?:(?:now|really|still|actually|also|much|definitely|strongly"
    r"|generally|usually|always|would|do|kind of)\s+)*"
    r"(?P<verb>prefer(?:s|red)?|like[sd]?|love[sd]?|hate[sd]?|dislike[sd]?|enjoy(?:s|ed)?|rather|'d\s+rather)"
    r"\s+(?P<object>\S.*?)[\s.!]*$",
    re.IGNORECASE,
)
_PREFERENCE_OLD: Final = re.compile(
    r"\s+(?:over|instead\s+of|rather\s+than|more\s+than)\s+(?P<old>\S.*)$", re.I
)
_PREFERENCE_TAIL: Final = re.compile(
    r"(?:,?\s+(?:now|anymore|any\s+more|these\s+days|from\s+now\s+on|going\s+forward|instead|too|again))+$",
    re.I,
)
_FRONTED_TOPIC: Final = re.compile(
    r"^(?P<topic>(?:for|in|at|during|when)\s+[^,]{1,40}?),?\s+(?P<rest>(?:i|we)\s+\S.*)$", re.I
)
_PREFERENCE_TOPIC: Final = re.compile(r"\s+(?:for|in|during|when|at|on)\s+(?P<topic>\S.*)$", re.I)
#: "my coffee black": the possessed noun is the subject ("coffee"), not the last word.
_POSSESSED: Final = re.compile(r"^(?:my|our|his|her|their|your)\s+(?P<noun>[\w-]+)", re.I)
_FAVORITE: Final = re.compile(r"\bfavou?rite\b", re.I)

_TASK: Final = re.compile(
    r"^(?:(?:[\w'’-]+(?:\s+[\w'’-]+)?)\s+(?:will|needs?\s+to|has\s+to|have\s+to|must|is\s+going\s+to"
    r"|are\s+going\s+to|is\s+to|'ll)\s+|(?:please|pls|remember\s+to|don't\s+forget\s+to|make\s+sure\s+to"
    r"|we\s+need\s+to|i\s+need\s+to|need\s+to|we\s+have\s+to|i\s+have\s+to|we\s+must|i\s+must)\s+)?"
    r"(?P<verb>[a-z]+)\s+(?P<object>\S.*?)[\s.!]*$",
    re.IGNORECASE,
)
#: "X owns Y", "X is responsible for Y": the subject is Y.
_OWNER: Final = re.compile(
    r"\b(?:owns|will\s+own|leads|handles|will\s+handle|'ll\s+handle|is\s+responsible\s+for"
    r"|are\s+responsible\s+for|is\s+in\s+charge\s+of|takes\s+care\s+of|will\s+take\s+care\s+of)\s+"
    r"(?P<object>\S.*?)[\s.!]*$",
    re.IGNORECASE,
)
#: Where an object noun phrase ends: a preposition or a time phrase.
OBJECT_END: Final = re.compile(
    r"\s+(?:by|before|until|till|on|at|tomorrow|today|tonight|next|this|for|to|from|with|asap|eod"
    r"|yesterday|earlier|last|in\s+\d|in\s+(?:a|an|one|two|three)\s|because|since|so|and\s+then|now"
    r"|first|again|already|later)\b.*$",
    re.IGNORECASE,
)

_CHITCHAT: Final = re.compile(
    r"^(?:hi|hello|hey|yo|thanks|thank you|thx|ty|ok|okay|k|cool|great|sure|yes|yep|yeah|no|nope|lol|bye"
    r"|good morning|good night|good evening|got it|sounds good|nice|awesome|perfect|welcome|you're welcome"
    r"|np|no problem|cheers|hmm+|ah|oh|wow|done|ack|noted|agreed|quick update|update|fyi|heads up|\W*)"
    r"(?:\s+(?:team|all|everyone|there|again|so much|a lot))?[\s!.,:)(;-]*$",
    re.IGNORECASE,
)
_PROCEDURE: Final = re.compile(
    r"^(?:to\s+\w+(?:\s+\S+){0,6}?,\s+|how\s+to\b|steps?\b|first,?\s+.+\bthen\b|procedure\b)"
    r"|\b(?:step\s+\d|run\s+`|then\s+run\b|always\s+run\b|make\s+sure\s+you\s+run\b)",
    re.IGNORECASE,
)
_PREFERENCE_CUE: Final = re.compile(
    r"\b(?:prefers?|preferred|preference|favou?rite|likes?|loves?|hates?|dislikes?|would\s+rather"
    r"|'d\s+rather|can't\s+stand|enjoys?|please\s+(?:always|never|don't)|i\s+want\s+(?:my|the)\b)",
    re.IGNORECASE,
)
_DECISION_CUE: Final = re.compile(
    r"\b(?:decided|decide|decision|agreed|we(?:'ll|\s+will)\s+go\s+with|going\s+with|chose|chosen"
    r"|settled\s+on|let's|lets|we(?:'ll|\s+will)\s+use|approved|finali[sz]ed|we(?:'re|\s+are)\s+going\s+to"
    r"|the\s+plan\s+is)\b",
    re.IGNORECASE,
)
_TASK_CUE: Final = re.compile(
    r"\b(?:todo|to-do|need\s+to|needs\s+to|have\s+to|has\s+to|must|remember\s+to|don't\s+forget"
    r"|make\s+sure|action\s+item|follow\s+up|assigned\s+to|is\s+responsible\s+for|deadline|due\s+(?:by|on)"
    r"|can\s+you|could\s+you|please)\b"
    r"|\b\w+(?:\s+will|'ll|’ll)\s+(?:write|send|fix|prepare|review|update|draft|call|email|book|set\s+up|create"
    r"|finish|handle|own|take\s+care|look\s+into|investigate|deploy|ship|test|check|organi[sz]e)\b",
    re.IGNORECASE,
)
IMPERATIVE: Final = re.compile(
    r"^(?:write|send|fix|prepare|review|update|draft|call|email|book|schedule|create|add|remove|check"
    r"|ask|follow|finish|file|set\s+up|investigate|look\s+into|buy|order|deploy|ship|test|clean|refactor"
    r"|merge|submit|upload|document|migrate|rotate|renew|pay|reply|ping|remind|assign|invite|organi[sz]e"
    r"|plan|book|confirm|share|publish|release|install|upgrade|configure|archive|delete|backup|back\s+up"
    r"|pick\s+up|drop\s+off|collect)\b",
    re.IGNORECASE,
)
_PAST_CUE: Final = re.compile(
    r"\b(?:yesterday|last\s+(?:week|night|month|year|monday|tuesday|wednesday|thursday|friday|saturday"
    r"|sunday)|this\s+morning|earlier\s+today|ago|just\s+now|happened)\b"
    r"|^(?:i|we|(?!(?:the|a|an|our|my|this|that|its|their)\b)[A-Z][a-z]+)\s+(?:just\s+)?(?:\w+ed|met|went|had|saw|spoke|got|came|made|took|ran|did"
    r"|found|told|gave|began|built|wrote|sent|left|bought|won|lost|flew|drove|ate|read)\b",
    re.IGNORECASE,
)
_FACT_VERB: Final = re.compile(
    r"\b(?:is|are|was|were|has|have|uses|use|runs|lives|works|owns|contains|supports|requires|costs"
    r"|means|includes|belongs|depends|returns|stores|lives)\b",
    re.IGNORECASE,
)
_LABEL_TYPES: Final[dict[str, MemoryType]] = {
    "todo": "task", "to-do": "task", "task": "task", "action item": "task", "action items": "task",
    "reminder": "task", "decision": "decision", "decided": "decision", "preference": "preference",
    "procedure": "procedure", "steps": "procedure", "note": "fact", "fyi": "fact",
}  # fmt: skip


def subject_key(words: str) -> str | None:
    """A normalized subject: lower case, no determiner or possessive, at most six words."""
    lowered = words.lower().replace("’", "'").replace("'s ", " ").replace("' ", " ")
    lowered = lowered.removesuffix("'s")
    tokens = [token.strip("-.") for token in _KEY_WORD.findall(lowered)]
    tokens = [token for token in tokens if token]
    while tokens and tokens[0] in _DETERMINERS:
        tokens.pop(0)
    if not tokens or all(token in _PRONOUNS for token in tokens):
        return None
    return " ".join(tokens[:6])


@lru_cache(maxsize=4096)
def key_terms(text: str) -> frozenset[str]:
    """The stemmed terms of a subject key or value (kaibo_core.core.text.analyze, as recall sees them)."""
    return frozenset(analyze(text))


def value_kind(value: str) -> ValueKind:
    if _TIME_VALUE.search(value):
        return "time"
    if _DATE_VALUE.search(value):
        return "date"
    if _NUMBER_VALUE.match(value):
        return "number"
    if _NAME_VALUE.match(value):
        return "name"
    if _CODE_VALUE.match(value):
        return "code"
    return "other"


def parse_copula(core: str) -> Copula | None:
    match = _COPULA.match(core)
    if match is None:
        return None
    np_words = match.group("np").split()
    if np_words[0].lower() in _PRONOUNS or len(np_words) > 6:
        return None
    determiner = np_words[0].lower() if np_words[0].lower() in _DETERMINERS else ""
    subject_words = " ".join(np_words[1:] if determiner else np_words)
    subject = subject_key(subject_words)
    if subject is None:
        return None
    value = match.group("value")
    prep_match = _PREP.match(value)
    prep, value = (prep_match.group("prep").lower(), prep_match.group("rest")) if prep_match else ("", value)
    return Copula(subject, subject_words, determiner, prep, value, bool(match.group("now")))


def _holder(word: str, speaker: str | None) -> str:
    lowered = word.lower()
    if lowered == "i":
        return speaker.lower() if speaker else ""
    return lowered


def _topic_last(core: str) -> str:
    """ "For status updates I prefer Slack" -> "I prefer Slack for status updates"."""
    fronted = _FRONTED_TOPIC.match(core)
    return f"{fronted.group('rest')} {fronted.group('topic')}" if fronted else core


def parse_preference(statement: Statement) -> Preference | None:
    match = _PREFERENCE.match(_topic_last(statement.core))
    if match is None:
        return None
    value = _PREFERENCE_TAIL.sub("", match.group("object"))
    old_match = _PREFERENCE_OLD.search(value)
    old = None
    if old_match:
        old = _PREFERENCE_TAIL.sub("", old_match.group("old")).strip() or None
        value = value[: old_match.start()]
    topic_match = _PREFERENCE_TOPIC.search(value)
    possessed = _POSSESSED.match(value)
    head_source = topic_match.group("topic") if topic_match else value
    head_words = possessed.group("noun").lower() if possessed else subject_key(head_source)
    if head_words is None:
        return None
    holder = _holder(match.group("holder"), statement.speaker)
    subject = " ".join(part for part in (holder, head_words.split()[-1], PREFERENCE_SUBJECT_WORD) if part)
    verb = match.group("verb").lower().replace("'d ", "").strip()
    return Preference(subject, holder, verb, value.strip(), old)


def object_subject(words: str) -> str | None:
    """The subject of a verb's object: ``the migration script by Friday`` -> ``migration script``."""
    return subject_key(OBJECT_END.sub("", words))


def task_subject(core: str) -> str | None:
    owner = _OWNER.search(core)
    if owner is not None:
        return object_subject(owner.group("object"))
    match = _TASK.match(core)
    if match is None:
        return None
    return object_subject(match.group("object"))


def subject_of(statement: Statement, kind: MemoryType) -> str | None:
    """The subject key of a statement that is not a change (changes carry their own)."""
    if not statement.parseable:
        return None
    if _OWNER.search(statement.core):
        return task_subject(statement.core)
    copula = parse_copula(statement.core)
    if copula is not None:
        return copula.subject
    if kind == "preference":
        preference = parse_preference(statement)
        if preference is not None:
            return preference.subject
    if kind == "task":
        return task_subject(statement.core)
    return None


def tells_the_past(statement: Statement) -> bool:
    """The statement tells what happened ("yesterday", "I went", "we met"): its weekdays lie behind."""
    return _PAST_CUE.search(statement.core) is not None


def classify(statement: Statement) -> Classification | None:
    """The type and confidence of a statement; None for chit-chat that says nothing."""
    core = statement.core
    if _CHITCHAT.match(core) or _CHITCHAT.match(statement.text):
        return None
    if statement.question:
        task_like = re.match(r"^(?:can|could|would|will)\s+you\b", core, re.IGNORECASE)
        return Classification("task", TASK - 0.15) if task_like else Classification("episode", QUESTION)
    if statement.label in _LABEL_TYPES:
        return Classification(_LABEL_TYPES[statement.label], LABELLED)
    if statement.numbered or _PROCEDURE.search(core):
        return Classification("procedure", PROCEDURE)
    if statement.reported:
        return Classification("episode", REPORTED)
    if _PREFERENCE_CUE.search(core):
        return Classification("preference", PREFERENCE)
    if _DECISION_CUE.search(core):
        return Classification("decision", DECISION)
    instruction = IMPERATIVE.match(core) or IMPERATIVE.match(_after_label(core))
    if _TASK_CUE.search(core) or (instruction and not statement.hedged):
        return Classification("task", TASK)
    if _PAST_CUE.search(core):
        return Classification("episode", PAST_EPISODE)
    if parse_copula(core) is not None:
        return Classification("fact", COPULA_FACT)
    if _FACT_VERB.search(core) and len(core.split()) >= 3:
        return Classification("fact", PLAIN_FACT)
    return Classification("episode", FALLBACK_EPISODE)


#: A short label before a colon ("Open item from the security review: rotate the Stripe API keys").
_LABEL: Final = re.compile(r"^([^:]{1,60}):\s+(?=[a-z])")


def _after_label(core: str) -> str:
    """``core`` without a label before a colon when what follows starts in lower case, as an
    instruction does ("…: rotate the keys"); a value after a label ("Staging: https://…",
    "Plumber: Marco, …") keeps it."""
    return _LABEL.sub("", core, count=1)


def instruction_label(core: str) -> str | None:
    """The label an instruction is given under ("Expense reports: email the receipts …" →
    "Expense reports"), or None."""
    label = _LABEL.match(core)
    return label.group(1) if label is not None and IMPERATIVE.match(core[label.end() :]) else None


def speaker_label(statement: Statement) -> str | None:
    """The one-word label the splitter read as a speaker, when the statement is an instruction
    under it ("Invoices: send them to billing@…", "Returns: ship to …"), or None."""
    return statement.speaker if statement.speaker and IMPERATIVE.match(statement.core) else None


#: A stored memory read back as a candidate is read up to here: well past what a statement may be
#: to be parsed at all (MAX_PARSED_CHARS), so a longer one still reads as unparseable, and no
#: further: reading a long episode's every date and name cost seconds for each new statement.
MAX_CANDIDATE_CHARS: Final = 4 * MAX_PARSED_CHARS


@lru_cache(maxsize=4096)
def statement_of_text(text: str) -> Statement:
    """A stored memory's content read back as one statement (for candidates; cached, as
    ``candidate_subject``: a Statement is frozen)."""
    speaker, rest = split_speaker(text.strip()[:MAX_CANDIDATE_CHARS])
    return prepare(rest, speaker)


@lru_cache(maxsize=4096)
def candidate_subject(content: str, stored: str | None) -> str | None:
    """A candidate's subject: the one stored with it, else read from its content (cached: every
    statement of an event asks again for the same candidates)."""
    if stored:
        return stored
    statement = statement_of_text(content)
    classification = classify(statement)
    return subject_of(statement, classification.type) if classification else None


def is_favorite(subject: str) -> bool:
    return bool(_FAVORITE.search(subject))

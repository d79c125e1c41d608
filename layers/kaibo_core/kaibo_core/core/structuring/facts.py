"""Facts: a statement read as *subject*, *attribute* and *value* (docs/structuring-rules.md, "Conflicts").

Two statements conflict when they give the same subject and the same attribute different
values: "Dana's phone number is 555-0142" and "New number for Dana: 555-0199", "Marco owns
the billing migration" and "Priya is taking over the billing migration". ``parse_fact``
normalizes the ordinary ways of saying a fact (a copula, "X has a new Y: V", an owner verb,
a location verb, a scheduling verb, a passive "approved by", a procedure "To X, do Y") into
one ``Fact``; ``conflicts`` decides whether a newer fact retires an older one. Pure and
linear: every pattern is compiled at import and runs on a statement of at most 400 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

from kaibo_core.core.structuring.classify import ValueKind, key_terms, parse_copula, subject_key, value_kind
from kaibo_core.core.structuring.statements import Statement

_I = re.IGNORECASE
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_PERIOD = r"(?:week|month|year|sprint|quarter|cycle|release)"
#: A resolved date the structurer added ("(June 3, 2026)", "(week of June 8, 2026)", "(2027)").
_RESOLVED: Final = re.compile(r"\s+\((?:week of\s+)?(?:[A-Z][a-z]+\s+)?(?:\d{1,2},\s+)?\d{4}\)")
#: When a value holds from, written after it: "is 2.5 as of today", "is in the cafeteria this time".
_QUALIFIER: Final = re.compile(
    r"(?:,?\s+(?:now|these\s+days|nowadays|from\s+now\s+on|going\s+forward|this\s+time|instead|again"
    r"|for\s+now|for\s+me|anymore|any\s+more|as\s+of\s+(?:now|today|tomorrow|\w+(?:\s+\d{1,2})?)"
    rf"|(?:starting|effective|from|beginning)\s+(?:now|today|tomorrow|(?:this|next)\s+\w+|{_MONTHS}\b(?:\s+\d{{1,2}})?"
    rf"|{_DAYS})|(?:this|next|last)\s+{_PERIOD}|last\s+month))+[\s.!]*$",
    _I,
)
#: Words that make a statement history, not the current state ("used to", "back in 2024").
_HISTORY: Final = re.compile(
    r"\b(?:used\s+to|back\s+in|back\s+then|last\s+year|years?\s+ago|previously|originally|formerly"
    r"|in\s+the\s+past|at\s+the\s+time|historically|when\s+we\s+(?:launched|started|began)|until\s+recently)\b",
    _I,
)
#: Words that add a value rather than replace one ("I also like climbing", "a second entrance"; not
#: "the second keynote", one already known).
_ADDITIVE: Final = re.compile(
    r"\b(?:also|too|as\s+well|additionally|another|(?:a|one)\s+second|extra|alternatively|in\s+addition)\b",
    _I,
)
_CUE: Final = re.compile(
    r"\b(?:now|these\s+days|nowadays|from\s+now\s+on|going\s+forward|this\s+time|instead|again|as\s+of"
    r"|starting|effective|new)\b",
    _I,
)
#: Scheduling verbs that say what a copula says ("takes place on", "is scheduled for").
_EVENT_VERB: Final = re.compile(
    r"\s+(?:(?:will\s+)?takes?\s+place|is\s+taking\s+place|(?:is|are)\s+happening|happens|will\s+happen"
    r"|(?:is|are|will\s+be)\s+(?:now\s+)?(?:scheduled|set|planned|held|booked|slated))\s+(?=(?:on|at|for|in)\s)",
    _I,
)
_WILL_NOW_BE: Final = re.compile(r"\s+will\s+now\s+be\s+", _I)
_NP: Final = r"(?P<np>[\w'’#&.@-]+(?:\s+[\w'’#&.@-]+){0,5}?)"
_NAME_NP: Final = r"(?P<name>(?-i:[A-Z])[\w'’-]+(?:\s+(?-i:[A-Z])[\w'’-]+)?)"
_END: Final = r"[\s.!]*$"
#: "We're holding the hackathon on July 16", "We'll do the retro at 3pm".
_WE_HOLD: Final = re.compile(
    r"^(?:we|i)(?:'re|'m|'ll|\s+are|\s+am|\s+will)?\s+(?:now\s+)?(?:holding|having|doing|running|hosting"
    r"|hold|have|do|run|host)\s+(?P<object>(?:the|our|my)\s+[\w'’#&-]+(?:\s+[\w'’#&-]+){0,4}?)\s+"
    rf"(?P<prep>on|at|in)\s+(?P<value>\S.*?){_END}",
    _I,
)
#: "Carlos has a new email: carlos@newmail.io", "Ivy got a new mobile number, +1 415 555 0177".
_HAS_NEW: Final = re.compile(
    rf"^{_NP}\s+(?:has|have|got|gets|'s\s+got)\s+(?:a\s+)?new\s+(?P<attr>[\w-]+(?:\s+[\w-]+){{0,2}}?)"
    rf"(?:\s*[:,–-]\s*|\s+(?=[\d+@#$(]))(?P<value>\S.*?){_END}",
    _I,
)
#: "New number for Dana: 555-0199".
_NEW_FOR: Final = re.compile(
    rf"^new\s+(?P<attr>[\w-]+(?:\s+[\w-]+){{0,2}}?)\s+(?:for|of)\s+{_NP}\s*[:,–-]\s*(?P<value>\S.*?){_END}",
    _I,
)
_OWNER_VERBS: Final = (
    r"owns|leads|handles|runs|manages|maintains|is\s+(?:now\s+)?(?:handling|leading|running|managing"
    r"|owning|taking\s+over|in\s+charge\s+of|responsible\s+for)|(?:will\s+|now\s+)?(?:takes?|took)\s+over"
    r"|has\s+taken\s+over|will\s+(?:own|lead|handle|run|manage)"
)
#: "Marco owns the billing migration", "Priya is taking over the billing migration".
_OWNER: Final = re.compile(rf"^{_NAME_NP}\s+(?:now\s+)?(?:{_OWNER_VERBS})\s+(?P<object>\S.*?){_END}", _I)
#: The stems of owner verbs in a passive: "is led by Farah", "owned by", "run by".
_OWNER_STEMS: Final = frozenset({"own", "led", "lead", "handl", "run", "manag", "maintain"})
#: "Mia lives in Lisbon", "Ravi sits in room 3A", "Mia moved to Porto".
_LOCATION: Final = re.compile(
    rf"^{_NP}\s+(?:now\s+|still\s+|currently\s+)?(?P<verb>lives|sits|works|stays|resides|is\s+based"
    rf"|is\s+located|is\s+sitting|is\s+living|moved|has\s+moved|relocated)\s+(?P<prep>in|at|to|from|out\s+of)\s+(?P<value>\S.*?){_END}",
    _I,
)
#: "Ana will review the security audit", "Ben is drafting the press release".
_AGENT: Final = re.compile(
    rf"^{_NAME_NP}\s+(?:will|is\s+going\s+to|'ll|is)\s+(?P<verb>[a-z]+)\s+(?P<object>(?:the|our|a|an)\s+\S.*?){_END}",
    _I,
)
#: "Support escalations go to Hugo", "Expense reports go through Concur", "The Pro plan costs $29".
_VERB_FACT: Final = re.compile(
    rf"^{_NP}\s+(?:(?:now|still|currently|usually|always|will)\s+)*(?P<verb>(?-i:[a-z]+))"
    rf"\s+(?P<prep>to|through|via|in|at|on|into|with|from)\s+(?P<value>\S.*?){_END}",
    _I,
)
#: "The Pro plan costs $29 a month" (a present "costs": "cost" may be the past).
_COSTS: Final = re.compile(rf"^{_NP}\s+(?:now\s+|still\s+)?costs\s+(?P<value>\S.*?){_END}", _I)
#: "To deploy, run make deploy", "How to request leave: email your manager".
_PROCEDURE: Final = re.compile(
    r"^(?:how\s+)?to\s+(?P<goal>[\w'’#&.@/-]+(?:\s+[\w'’#&.@/-]+){0,7}?)\s*[,:]\s+(?P<value>\S.*?)" + _END, _I
)
#: "Board meeting: November 11 at 10am", "Support hotline: 1-800-555-0199": a label and its value.
_COLON: Final = re.compile(
    rf"^(?P<np>[\w'’#&.@-]+(?:\s+[\w'’#&.@-]+){{0,7}}?)\s*:\s+(?P<value>\S.*?){_END}", _I
)
#: "Code freeze starts December 9", "The venue holds 150 people", "My flight leaves on June 21 at
#: 9:15am", "The platform team has 15 engineers": a present-tense verb and a typed value.
_VERB_VALUE: Final = re.compile(
    rf"^(?P<det>(?:the|a|an|our|my|your|his|her|their|this|that)\s+)?{_NP}\s+(?:(?:now|still|currently|usually|always|officially|also)\s+)*"
    r"(?P<verb>(?-i:[a-z]+s)|has|have)"
    r"(?:\s+(?P<prep>on|at|in|for|from|to|by|around|about|until|till|through|with|of))?"
    rf"\s+(?P<value>\S.*?){_END}",
    _I,
)
#: "Carla reviews all pull requests for the payments service": a person and what they do.
_AGENT_PRESENT: Final = re.compile(
    rf"^{_NAME_NP}\s+(?:now\s+|still\s+|currently\s+)?(?P<verb>(?-i:[a-z]+s))\s+"
    rf"(?P<object>(?:the|our|all|every|each|a|an)\s+\S.*?){_END}",
    _I,
)
#: "We have to file the VAT return by July 20", "Submit the visa form before June 3": the object's
#: due date (the whole object: "the report to Acme" and "the report to Globex" are two tasks).
_DUE_BY: Final = re.compile(
    r"^(?:(?:[\w'’-]+\s+){0,3}?(?:needs?\s+to|has\s+to|have\s+to|must|will|'ll|is\s+to|are\s+to"
    r"|is\s+going\s+to|are\s+going\s+to)\s+)?(?P<verb>(?-i:[a-z]+)|[A-Z][a-z]+)\s+"
    rf"(?P<object>(?:the|our|my|a|an|this|that)\s+[^,;:]+?)\s+(?:by|before|no\s+later\s+than)\s+(?P<value>\S.*?){_END}",
    _I,
)
#: A value that is a clause of its own ("the webinar starts at 3pm"), not a label's value.
_CLAUSE_VALUE: Final = re.compile(
    r"^(?:the|our|my|we|i|it|they|this|that)\s+\S+(?:\s+\S+){0,5}?\s+(?:is|are|was|were|will|has|have"
    r"|(?-i:[a-z]+s))\s+\S",
    _I,
)
_HAS_VERB: Final = re.compile(r"\s(?:is|are|was|were|will|has|have|had|'s\s+been)\s", _I)
#: A second clause after a value ("June 21 at 9:15am now, the airline changed it").
_VALUE_CLAUSE: Final = re.compile(
    r",\s+(?:the|we|i|they|he|she|it|so|but|and|because|as|since|which|who|that|this|our|my)\b.*$", _I
)
_PARTICIPLE: Final = re.compile(
    r"^(?P<verb>[a-z]+(?:ed|en)|led|run|held|kept|paid|sent|built|set|done|made)\s+(?P<prep>by|in|at|to"
    r"|through|via|on|from|for|as|with)\s+(?P<value>\S.*)$",
)
_NAMING: Final = re.compile(r"^(?:called|named|known\s+as|codenamed)\s+(?P<value>\S.*)$", _I)
_WHEN_PREPS: Final = frozenset({"", "on", "at", "for", "in"})
_PLACE_PREPS: Final = frozenset({"in", "at", "on"})
#: Attributes one subject has one value of at a time: a different value replaces it, no cue needed.
SINGLE_VALUED: Final = frozenset({"when", "due", "where", "owner", "price", "name", "procedure", "contact"})
_MID_DETERMINERS: Final = frozenset({"the", "a", "an", "our", "my", "your", "their", "this", "that"})
_PREPOSITIONS: Final = frozenset({"for", "of", "in", "at", "on", "with", "from", "to", "by", "about"})
_PERSONAL: Final = frozenset({"i", "you", "he", "she", "it", "we", "they", "me", "us", "them"})
_OTHER_POSSESSIVES: Final = frozenset({"your", "his", "her", "their", "its"})
#: Habits ("at 9am on Mondays"): two values for different weekdays are both true.
_HABIT_DAYS: Final = re.compile(rf"\b(?:{_DAYS}s|weekdays|weekends|weeknights|holidays)\b", _I)
_FUNCTION_VERBS: Final = frozenset(
    {"is", "are", "was", "were", "be", "been", "has", "have", "had", "do", "does", "did", "will", "would"}
    | {"can", "could", "should", "may", "might", "must"}
)
_PAST_COPULA: Final = re.compile(r"\s(?:was|were)\s", _I)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that grade a quality ("so bold", "really awesome", "indeed refreshing"): what follows is an
#: evaluation, never a fact value.
_INTENSIFIERS: Final = _words(
    "so such really very pretty quite too super totally absolutely truly indeed incredibly extremely"
    " especially seriously insanely awfully fairly kinda sorta"
)
#: Opinions and evaluations ("great", "key", "a huge difference", "my motivation", "the man"): a
#: judgement of the subject, not a value it has. Two people's, or one person's two, both hold.
_EVALUATIONS: Final = _words(
    "great awesome amazing incredible key solid good bad best worst better worse nice cool fun"
    " fantastic wonderful beautiful lovely perfect huge tough hard tricky easy important crucial"
    " essential vital refreshing exciting thrilling inspiring stunning gorgeous adorable cute sweet"
    " brilliant excellent terrible awful horrible special unique rewarding challenging difficult"
    " overwhelming stressful scary sad happy glad proud grateful thankful excited fine okay ok well"
    " interesting boring crazy wild insane epic impressive remarkable outstanding superb fabulous"
    " terrific phenomenal marvelous magical vivid vibrant bright bold calm peaceful relaxing soothing"
    " fulfilling meaningful powerful helpful hilarious funny tiring exhausting worth greatest biggest"
    " coolest nicest finest toughest hardest man blast dream joy pleasure treat blessing gift"
    " lifesaver game-changer go-to motivation inspiration passion focus everything world rock hero"
)
#: Words that start a predicate, not a value ("gonna make a huge difference", "going well").
_PREDICATE_STARTS: Final = _words("gonna going gotta wanna getting making doing feeling looking must")
_NOT_PLURAL_ENDINGS: Final = ("ss", "us", "is", "ics", "news", "series")
_VALUE_DETERMINERS: Final = _words("a an the my our your his her their its")
#: Subjects too general to be one thing two people state values of ("Things", "Pets", "Nature").
_GENERIC_SUBJECTS: Final = _words(
    "things thing stuff everything life nature pets colors colours people everyone world art music"
    " family friends kids work time weather food sports games gaming winning"
)


@dataclass(frozen=True, slots=True)
class Fact:
    """``subject``'s ``attribute`` is ``value`` ("dana phone number", "be", "555-0142")."""

    subject: str
    attribute: str
    value: str
    holder: str = ""  # the speaker of a first-person subject ("my favorite editor"), else ""
    cued: bool = False  # the statement says the value is new ("now", "from now on", "a new")
    #: Every stemmed term of the statement the fact was read from: words said around the subject
    #: ("Update on Initech: the kickoff is on May 7" names Initech outside the subject).
    context: frozenset[str] = frozenset()

    @property
    def kind(self) -> ValueKind:
        return value_kind(self.value)


def unresolved(text: str) -> str:
    """``text`` without the dates the structurer added in parentheses ("Friday (June 5, 2026)")."""
    return _RESOLVED.sub("", text)


def _clean(value: str) -> tuple[str, bool]:
    """The value without a trailing qualifier ("now", "as of today"), and whether there was one."""
    cleaned = _QUALIFIER.sub("", value).strip(" .!,;:\"'")
    return cleaned or value.strip(" .!"), cleaned != value.strip(" .!,;:\"'")


def without_qualifier(words: str) -> str:
    """``words`` without a trailing qualifier of when ("the scanner rollout as of today")."""
    return _clean(words)[0]


def _subject(words: str) -> str | None:
    """The subject key of an object, without a trailing qualifier ("the mobile squad now")."""
    return subject_key(_clean(words)[0])


def _personal(subject: str) -> bool:
    """A subject that is a personal pronoun ("I'm moving on ..."): no fact about a thing."""
    first = subject.split(maxsplit=1)[0].replace("’", "'").split("'")[0]
    return first in _PERSONAL


def _fact(
    subject: str | None, attribute: str, value: str, holder: str = "", cued: bool = False
) -> Fact | None:
    if subject is None or not value or _personal(subject):
        return None
    cleaned, qualified = _clean(value)
    return Fact(subject, attribute, cleaned, holder, cued or qualified)


def _copula_attribute(prep: str, value: str, kind: ValueKind) -> tuple[str, str]:
    """The attribute a copula's preposition and value name, and the value itself."""
    if prep == "due":
        return "due", value
    if kind in {"time", "date"} and prep in _WHEN_PREPS:
        return "when", value
    if prep in _PLACE_PREPS:
        return "where", value
    participle = _PARTICIPLE.match(value)
    if participle is not None:
        stems = key_terms(participle.group("verb"))
        if participle.group("prep") == "by" and stems & _OWNER_STEMS:
            return "owner", participle.group("value")
        return f"{' '.join(sorted(stems))} {participle.group('prep')}", participle.group("value")
    naming = _NAMING.match(value)
    if naming is not None:
        return "name", naming.group("value")
    if value[:1] in "$€£" and not prep:
        return "price", value
    return f"be {prep}".strip(), value


def _holder(determiner: str, speaker: str | None) -> str:
    """Whose the subject is: the speaker's for "my", another party's for "their", "his" ..."""
    if determiner == "my":
        return (speaker or "").lower()
    return determiner if determiner in _OTHER_POSSESSIVES else ""


def _from_copula(core: str, speaker: str | None) -> Fact | None:
    copula = parse_copula(core)
    if copula is None or (_PAST_COPULA.search(f" {core} ") and not copula.now):
        return None  # "The budget was $30,000" tells history
    value, qualified = _clean(copula.value)
    inverted = _inverted(copula.subject_words, copula.determiner, copula.prep, value)
    if inverted is not None:
        return Fact(inverted[0], "be", inverted[1], "", copula.now or qualified)
    attribute, value = _copula_attribute(copula.prep, value, value_kind(value))
    holder = _holder(copula.determiner, speaker)
    return _fact(copula.subject, attribute, value, holder, copula.now or qualified)


def _inverted(subject_words: str, determiner: str, prep: str, value: str) -> tuple[str, str] | None:
    """ "Kim is the point of contact for Globex": the subject is the role, the value the name."""
    if determiner or prep or not re.fullmatch(_NAME_NP, subject_words):
        return None
    words = value.split()
    if len(words) < 2 or words[0].lower() != "the" or len(words) > 10:
        return None
    role = subject_key(value)
    return (role, subject_words) if role else None


def _from_clause(core: str, speaker: str | None) -> Fact | None:
    """The first reading that fits: the specific forms, then a copula, then any verb and preposition,
    then a label with a typed value, a verb with a typed value, a person and what they do."""
    for parse in (_has_new, _owner, _location, _procedure, _price, _scheduled, _agent):
        fact = parse(core)
        if fact is not None:
            return fact
    return (
        _from_copula(core, speaker)
        or _verb_fact(core)
        or _colon(core, speaker)
        or _verb_value(core, speaker)
        or _agent_present(core)
        or _due_by(core)
    )


def _due_by(core: str) -> Fact | None:
    """ "We have to file the VAT return by July 20": the VAT return is due July 20."""
    match = _DUE_BY.match(core)
    if match is None or match.group("verb").lower() in _FUNCTION_VERBS | _MID_DETERMINERS:
        return None
    value = _typed_value(match.group("value"))
    if value is None or value_shape(value) not in {"date", "time"}:
        return None
    return _fact(subject_key(match.group("object")), "due", value)


def _typed_value(value: str) -> str | None:
    """The value without a second clause, when it is a definite value (a date, time, number,
    amount, contact detail, address, code; a name of at most three words): else None."""
    value = _VALUE_CLAUSE.sub("", value).strip(" .!,;")
    cleaned, _ = _clean(value)
    if not cleaned or len(cleaned) > 80 or _HAS_VERB.search(f" {cleaned} "):
        return None  # "Lena's birthday is May 13" is a clause, not a value
    shape = value_shape(cleaned)
    return cleaned if shape in DEFINITE_SHAPES or shape.startswith("number") or shape == "name" else None


def _subject_holder(np: str, speaker: str | None) -> tuple[str | None, str]:
    words = np.split()
    determiner = words[0].lower() if words else ""
    return subject_key(np), _holder(determiner, speaker)


def _colon(core: str, speaker: str | None) -> Fact | None:
    """ "Board meeting: November 11 at 10am": the label is the subject, a typed value its value."""
    match = _COLON.match(core)
    if match is None or not _noun_phrase(match.group("np")) or _personal(match.group("np")):
        return None
    value = _typed_value(match.group("value"))
    if value is None or _CLAUSE_VALUE.match(value):
        return None  # "Sorry, typo: the webinar starts at 3pm" is a clause, read on its own
    subject, holder = _subject_holder(match.group("np"), speaker)
    attribute, value = _copula_attribute("", value, value_kind(value))
    qualified = _clean(match.group("value"))[1]
    return _fact(subject, attribute, value, holder, qualified)


def _verb_value(core: str, speaker: str | None) -> Fact | None:
    """ "Code freeze starts December 9", "The venue holds 150 people": the verb is the attribute,
    the value a typed one (never free text: "The team uses Slack for chat" states no value)."""
    match = _VERB_VALUE.match(core)
    if match is None or not _noun_phrase(match.group("np")):
        return None
    verb = match.group("verb").lower()
    if verb in _FUNCTION_VERBS - {"has", "have"} or verb.endswith("ss"):
        return None
    value = _typed_value(match.group("value"))
    if value is None:
        return None
    shape = value_shape(value)
    if verb in {"has", "have"} and not shape.startswith("number"):
        return None  # "The team has Slack" states no value; "has 15 engineers" a count
    if shape == "name":
        return None  # "Anna works with Ben": a name after any verb is no value of the subject
    stems = " ".join(sorted(key_terms(verb))) or verb
    np = f"{match.group('det') or ''}{match.group('np')}"
    if verb in {"has", "have"} and np.lower() in {"we", "i"}:
        return _count(value, np, speaker)
    subject, holder = _subject_holder(np, speaker)
    qualified = _clean(match.group("value"))[1]
    return _fact(subject, f"{stems} {match.group('prep') or ''}".strip(), value, holder, qualified)


def _count(value: str, np: str, speaker: str | None) -> Fact | None:
    """ "We have 230 active customers": the count of active customers (ours, or the speaker's)."""
    number, _, things = value.partition(" ")
    subject = subject_key(things)
    if subject is None:
        return None
    holder = (speaker or "").lower() if np.lower() == "i" else ""
    return _fact(subject, "count", number, holder)


def _agent_present(core: str) -> Fact | None:
    """ "Carla reviews all pull requests for the payments service": who does it (a verb's own
    attribute: another person replaces Carla only with a cue, "Ben reviews ... now")."""
    match = _AGENT_PRESENT.match(core)
    if match is None:
        return None
    verb = match.group("verb").lower()
    if verb in _FUNCTION_VERBS or verb.endswith("ss"):
        return None
    stems = " ".join(sorted(key_terms(verb)))
    return _fact(_subject(match.group("object")), f"by {stems}", match.group("name")) if stems else None


def _scheduled(core: str) -> Fact | None:
    """ "We're holding the hackathon on July 16": the hackathon is on July 16."""
    match = _WE_HOLD.match(core)
    if match is None:
        return None
    value, _ = _clean(match.group("value"))
    attribute, value = _copula_attribute(match.group("prep").lower(), value, value_kind(value))
    return _fact(_subject(match.group("object")), attribute, value)


def _has_new(core: str) -> Fact | None:
    match = _HAS_NEW.match(core) or _NEW_FOR.match(core)
    if match is None:
        return None
    return _fact(
        subject_key(f"{match.group('np')} {match.group('attr')}"), "contact", match.group("value"), cued=True
    )


def _owner(core: str) -> Fact | None:
    match = _OWNER.match(core)
    if match is None:
        return None
    taking_over = re.search(r"\bt(?:ake|akes|aking|ook|aken)\s+over\b", match.group(0), _I) is not None
    return _fact(_subject(match.group("object")), "owner", match.group("name"), cued=taking_over)


def _location(core: str) -> Fact | None:
    match = _LOCATION.match(core)
    if match is None or match.group("prep").lower() in {"from", "out of"}:
        return None
    moved = re.search(r"\b(?:moved|relocated)\b", match.group(0), _I) is not None
    verb = " ".join(sorted(key_terms(match.group("verb"))))
    return _fact(subject_key(match.group("np")), f"where {verb}", match.group("value"), cued=moved)


def _procedure(core: str) -> Fact | None:
    match = _PROCEDURE.match(core)
    if match is None:
        return None
    return _fact(subject_key(match.group("goal")), "procedure", match.group("value"))


def _agent(core: str) -> Fact | None:
    match = _AGENT.match(core)
    if match is None or match.group("verb").lower() in _FUNCTION_VERBS:
        return None
    verb = " ".join(sorted(key_terms(match.group("verb"))))
    return _fact(_subject(match.group("object")), f"by {verb}", match.group("name"))


def _price(core: str) -> Fact | None:
    match = _COSTS.match(core)
    return None if match is None else _fact(subject_key(match.group("np")), "price", match.group("value"))


def _noun_phrase(words: str) -> bool:
    """A subject, not a verb and its object: a determiner only first or after a preposition
    ("Send the invoice" is an order; "Applications for the design role" a subject)."""
    tokens = words.lower().split()
    if any(token in _FUNCTION_VERBS for token in tokens):
        return False
    return not any(
        token in _MID_DETERMINERS and tokens[index - 1] not in _PREPOSITIONS
        for index, token in enumerate(tokens)
        if index > 0
    )


def _verb_fact(core: str) -> Fact | None:
    """ "<subject> <verb> <preposition> <value>": the verb and preposition are the attribute."""
    match = _VERB_FACT.match(core)
    if match is None or match.group("verb").lower() in _FUNCTION_VERBS or not _noun_phrase(match.group("np")):
        return None
    stems = " ".join(sorted(key_terms(match.group("verb"))))
    if not stems:
        return None
    return _fact(
        subject_key(match.group("np")), f"{stems} {match.group('prep').lower()}", match.group("value")
    )


def _clauses(core: str) -> list[str]:
    """The statement, then its last clause after a comma or colon ("We got an extension, the
    filing is due on July 15"; "I was wrong earlier: the limit is 300")."""
    clauses = [core]
    for separator in (": ", ", "):
        head, found, tail = core.rpartition(separator)
        if found and head and len(tail.split()) >= 3:
            clauses.append(tail)
    head, found, _ = core.partition(", ")
    if found and len(head.split()) >= 3:
        clauses.append(head)  # "The flight leaves June 21 now, the airline changed it"
    return clauses


def parse_fact(statement: Statement) -> Fact | None:
    """The fact a statement states, or None (guarded statements, history and additions state none)."""
    if statement.guarded or not statement.parseable or _HISTORY.search(statement.core):
        return None
    core = _WILL_NOW_BE.sub(" is now ", _EVENT_VERB.sub(" is ", unresolved(statement.core)))
    for clause in _clauses(core):
        fact = _from_clause(clause, statement.speaker)
        if fact is not None:
            return replace(fact, context=key_terms(core))
    return None


def history(statement: Statement) -> bool:
    """The statement tells how things were ("used to", "back in 2024", "last year"), not a change."""
    return _HISTORY.search(statement.core) is not None


def additive(statement: Statement) -> bool:
    """The statement adds a value ("also", "too", "a second ...") rather than replacing one."""
    return _ADDITIVE.search(statement.core) is not None


def _word(token: str) -> str:
    return token.lower().replace("’", "'").split("'")[0].strip('.,!?;:"()-')


def evaluative(value: str) -> bool:
    """An opinion, not a fact value: a graded quality ("so bold"), an evaluation ("great",
    "key", "a huge difference", "my motivation") or a predicate ("gonna make ...", "going well").
    Dates, times, numbers, names and codes never are."""
    if value_kind(value) != "other":
        return False
    for token in filter(None, map(_word, value.split())):
        if token in _INTENSIFIERS:
            return True
        if token not in _VALUE_DETERMINERS:
            return token in _EVALUATIONS or token in _PREDICATE_STARTS
    return False


def _typed(fact: Fact) -> bool:
    """An attribute that says what its value is: a date, an owner, a place, a price ..."""
    return fact.attribute in SINGLE_VALUED or fact.attribute.startswith("where")


def generic_subject(subject: str) -> bool:
    """One general word ("things", "pets", "nature") or a bare plural: no one thing's value."""
    words = subject.split()
    if len(words) != 1:
        return False
    word = words[0]
    plural = word.isalpha() and word.endswith("s") and not word.endswith(_NOT_PLURAL_ENDINGS)
    return word in _GENERIC_SUBJECTS or plural


def across_speakers(new: Fact, old: Fact) -> bool:
    """Without a cue, one speaker's fact retires another speaker's only with a fact value of the
    same kind (the same typed attribute, or two dates, two names ...) for a specific subject."""
    if generic_subject(new.subject) or evaluative(new.value) or evaluative(old.value):
        return False
    if _typed(new) or _typed(old):
        return new.attribute == old.attribute
    return new.kind == old.kind != "other"


def _same_subject(new: Fact, old: Fact) -> bool:
    """Same stemmed terms; or, for a fact said to be new, the narrower key with the same head
    noun ("dana number" for "dana phone number")."""
    new_terms, old_terms = key_terms(new.subject), key_terms(old.subject)
    if not new_terms or new.holder != old.holder:
        return False
    if new_terms == old_terms:
        return True
    same_head = new.subject.split()[-1] == old.subject.split()[-1]
    return new.cued and same_head and len(new_terms) >= 2 and new_terms < old_terms


_LETTER: Final = re.compile(r"(?<![\w'’])(?-i:[A-Z]|\d)(?![\w'’])")


def value_terms(value: str) -> frozenset[str]:
    """A value's stemmed terms, with the single capital letters and digits stemming drops ("Room A",
    "Gate 5"): "Room A" and "Room B" are two values."""
    return key_terms(value) | {token.lower() for token in _LETTER.findall(value)}


def _same_value(first: str, second: str) -> bool:
    first_terms, second_terms = value_terms(first), value_terms(second)
    return first_terms <= second_terms or second_terms <= first_terms


def _comparable_kinds(new: Fact, old: Fact) -> bool:
    """Without a cue: a time replaces a time, a date a date ("on Friday" and "at 4pm" are both
    true of one meeting); an attribute of one value replaces its value; a plain copula needs
    two values of the same definite kind. A verb's own attribute ("uses", "go to") needs a cue."""
    if new.attribute in {"when", "due"}:
        return new.kind == old.kind
    if new.attribute in SINGLE_VALUED or new.attribute.startswith("where"):
        return True
    return new.attribute.split()[0] == "be" and new.kind == old.kind and new.kind != "other"


def _same_attribute(new: Fact, old: Fact, cued: bool) -> bool:
    """Equal attributes; "contact" and a copula ("has a new email" and "'s email is"); with a cue,
    any two places ("lives in room 4B from now on" after "sits in room 3A")."""
    if new.attribute == old.attribute or {new.attribute, old.attribute} <= {"contact", "be"}:
        return True
    places = new.attribute.startswith("where") and old.attribute.startswith("where")
    return places and cued


def _different_habits(first: str, second: str) -> bool:
    days = {match.lower() for match in _HABIT_DAYS.findall(first)}
    other_days = {match.lower() for match in _HABIT_DAYS.findall(second)}
    return bool(days or other_days) and days != other_days


def distinct_scopes(new: Fact, old: Fact, cued: bool) -> bool:
    """Two facts that can both hold: different owners ("our budget", "their budget"), or, without
    a cue, habits on different weekdays ("at 9am on Mondays", "at 10am on Fridays")."""
    if new.holder != old.holder:
        return True
    return not (cued or new.cued) and _different_habits(new.value, old.value)


# --- typed slots: a value's shape says which attribute it fills ------------------------------------

#: Shapes of values that are one definite thing (never an opinion, never free text).
DEFINITE_SHAPES: Final = frozenset({"time", "date", "phone", "email", "url", "money", "address", "code"})
_EMAIL: Final = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_URL: Final = re.compile(r"^(?:https?://|www\.)\S+$", _I)
_PHONE: Final = re.compile(r"^\+?\(?\d[\d\s().-]{5,}\d(?:\s*(?:ext\.?|x)\s*\d+)?$", _I)
_MONEY: Final = re.compile(
    r"^(?:[$€£]\s?\d|\d[\d,.]*\s*(?:k|m|usd|eur|gbp|chf|dollars?|euros?|pounds?|bucks)\b)", _I
)
_STREET: Final = (
    r"(?:St|Street|Ave|Avenue|Rd|Road|Blvd|Boulevard|Dr|Drive|Ln|Lane|Way|Pkwy|Parkway|Ct|Court|Pl|Place|"
    r"Sq|Square|Ter|Terrace|Hwy|Highway|Plaza|Building|Circle|Row|Crescent|Close|Gardens|"
    r"Strasse|Straße|Allee|Platz)"
)
_PLACE_NAME: Final = r"[A-Z][\w.'’-]*"
#: A street address, one value from its number to its postcode ("220 Birch Ave, Apt 3, Beaverton,
#: OR 97005"; "Hauptstraße 5, 10115 Berlin"): its parts are not names and numbers of their own.
STREET_ADDRESS: Final = re.compile(
    rf"\b\d{{1,6}}[A-Za-z]?\s+(?:{_PLACE_NAME}\s+){{0,3}}{_STREET}\b\.?"
    rf"(?:,?\s+(?:Suite|Ste|Apt|Unit|Floor|Fl|Room|#)\.?\s*[\w-]+)?"
    rf"(?:,\s*{_PLACE_NAME}(?:\s+{_PLACE_NAME}){{0,2}})?(?:,?\s+[A-Z]{{2}}\b)?(?:,?\s+\d{{4,5}}(?:-\d{{4}})?\b)?"
    rf"|\b{_PLACE_NAME}(?:stra(?:ß|ss)e|weg|gasse|platz|allee|straat|laan|gade|vej)\s+\d{{1,4}}[a-z]?\b"
    rf"(?:,\s*\d{{4,5}}\s+{_PLACE_NAME})?"
)
_NUMBER_UNIT: Final = re.compile(r"^[$€£+]?\d[\d,.]*%?\s*(?:(?:a|an|per|of)\s+)?(?P<unit>[a-z]+)?", _I)
_WORD_NUMBER: Final = re.compile(
    r"^(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty"
    r"|hundred)\s+(?P<unit>[a-z]+)",
    _I,
)
#: Words of a subject that only name the slot its value fills ("launch date", "Tom's email
#: address", "Maria's phone number"): the value's shape says the same, so they are not compared.
SLOT_WORDS: Final[dict[str, frozenset[str]]] = {
    "when": key_terms("date time day deadline schedule timing"),
    "phone": key_terms("phone number mobile cell telephone tel contact"),
    "email": key_terms("email e-mail mail address contact"),
    "url": key_terms("url link website site address"),
    "address": key_terms("address location"),
    "money": key_terms("price cost fee amount"),
}
#: Words that say a value is new, not which subject it belongs to ("Priya's new address").
_NOISE_WORDS: Final = key_terms("new current updated latest revised actual correct right final update")


def value_shape(value: str) -> str:
    """What kind of definite value ``value`` is: ``time``, ``date``, ``phone``, ``email``, ``url``,
    ``money``, ``address``, ``number <unit>`` ("120 people" -> ``number peopl``), ``code``; else
    ``name`` or ``other`` (free text)."""
    text = value.strip(" .!,;")
    if _EMAIL.match(text):
        return "email"
    if _URL.match(text):
        return "url"
    kind = value_kind(text)
    if kind in {"time", "date"}:
        return kind
    if _PHONE.match(text) and sum(char.isdigit() for char in text) >= 7:
        return "phone"
    if _MONEY.match(text):
        return "money"
    if STREET_ADDRESS.match(text):
        return "address"
    number = _NUMBER_UNIT.match(text) or _WORD_NUMBER.match(text)
    if kind == "number" and number is not None:
        unit = " ".join(sorted(key_terms(number.group("unit") or "")))
        return f"number {unit}".strip()
    return kind


def _slot_class(shape: str) -> str:
    return "when" if shape in {"time", "date"} else shape


def _family(attribute: str) -> str:
    """Attributes that say the same as a copula ("is due", "is on", "has a new", "costs")."""
    if attribute in {"when", "due", "contact", "price", "name", "be"} or attribute.startswith("be "):
        return "be"
    if attribute in SINGLE_VALUED or attribute.startswith(("where", "by ")):
        return attribute
    return attribute.split(maxsplit=1)[0]  # a verb's own: "leaves on June 20" and "leaves June 21"


def core_terms(fact: Fact) -> frozenset[str]:
    """The subject's stemmed terms without the words that name the value's slot or say it is new."""
    terms = key_terms(fact.subject)
    core = terms - _NOISE_WORDS - SLOT_WORDS.get(_slot_class(value_shape(fact.value)), frozenset())
    return core or terms


def subjects_match(new: Fact, old: Fact) -> bool:
    """Same subject, by overlap: the same core terms; or each side's extra terms said elsewhere in
    the other statement ("the kickoff" in "Update on Initech: the kickoff is on May 7" and "the
    kickoff with Initech"); or the newer one names fewer of the older one's words, at least two
    ("vat return" after "vat return filing"). Never across holders, never when the newer adds a
    word ("the guest wifi password" after "the wifi password"), never two different names on each
    side ("Maria's phone" and "Mario's phone", "the Q2 report" and "the Q3 report")."""
    if new.holder != old.holder:
        return False
    first, second = core_terms(new), core_terms(old)
    if first == second:
        return bool(first)
    if not first & second:
        return False
    extra_new, extra_old = first - second, second - first
    if extra_new <= old.context and extra_old <= new.context and old.context and new.context:
        return True
    # The newer statement may name its subject more briefly ("the VAT return" for "the VAT return
    # filing"); one that adds a word names another thing ("the guest wifi password").
    return not extra_new and len(first) >= 2


def _when_parts(value: str) -> tuple[bool, bool]:
    return value_kind_has(value, "date"), value_kind_has(value, "time")


def value_kind_has(value: str, kind: str) -> bool:
    """Whether ``value`` names a date (``kind="date"``) or a time of day (``"time"``)."""
    if kind == "time":
        return value_kind(value) == "time"
    without_time = _TIME_ONLY.sub(" ", value)
    return value_kind(without_time) == "date"


_TIME_ONLY: Final = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b", _I
)


def _shapes_compete(new: str, old: str) -> bool:
    """Two values that cannot both hold for one slot: the same definite shape; a date and a date
    (with or without a time); a time and a time of day on no other day ("on Friday" and "at 4pm" are
    both true of one meeting)."""
    new_shape, old_shape = value_shape(new), value_shape(old)
    if _slot_class(new_shape) == "when" == _slot_class(old_shape):
        new_date, new_time = _when_parts(new)
        old_date, old_time = _when_parts(old)
        return (new_date and old_date) or (new_time and old_time)
    if new_shape != old_shape:
        return False
    return new_shape in DEFINITE_SHAPES or new_shape.startswith("number")


def typed_conflict(new: Fact, old: Fact, cued: bool) -> bool:
    """The same subject (``subjects_match``) and attribute, and two definite values of one slot:
    a date for a date, a phone number for a phone number, 150 people for 120 people. No cue is
    needed: a subject has one value of such a slot at a time (habits on other days aside)."""
    if _family(new.attribute) != _family(old.attribute) or _same_value(new.value, old.value):
        return False
    if not _shapes_compete(new.value, old.value) or distinct_scopes(new, old, cued):
        return False
    return subjects_match(new, old)


def conflicts(new: Fact, old: Fact, cued: bool) -> bool:
    """``new`` gives ``old``'s subject and attribute another value: it retires ``old``. Without a cue
    the attribute must take one value at a time (a date, an owner, a place ...) or both values be
    of the same definite kind (a time, a date, a number, a name, a code). An opinion ("great",
    "so bold", "key") is never a value: it neither retires nor is retired. Two definite values of
    one slot conflict without a cue for subjects that match by overlap (``typed_conflict``)."""
    if typed_conflict(new, old, cued):
        return True
    if not _same_subject(new, old) or _same_value(new.value, old.value):
        return False
    if evaluative(new.value) or evaluative(old.value):
        return False  # "Nature is really awesome" does not retire "Nature is indeed refreshing"
    if distinct_scopes(new, old, cued):
        return False
    cued = cued or new.cued
    return _same_attribute(new, old, cued) and (cued or _comparable_kinds(new, old))

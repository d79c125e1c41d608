"""Updates stated without a change word: a later statement that says the same thing as an
earlier one with one value replaced (docs/structuring-rules.md, "Restated with a new value").

"The Q3 review is on Oct 14." … "Q3 review: Oct 21, room 4B." carries no "moved", "now" or
"instead", yet the second retires the first. Phrase rules cannot list every way to say that, so
this reads the *difference* between the two statements instead of their phrasing:

- they share the topic: most of the earlier statement's words (stemmed, as recall sees them)
  are in the later one, or, with recall by meaning on, the model finds them close (cosine ≥
  ``SAME_MEANING_COSINE``: "The marketing budget for Q3 is …" → "Q3 spend on marketing is capped
  at …") and no word beside a shared one was swapped for another;
- the earlier statement's value is gone and the later one has a value of the same kind in
  its place (a date, a time, a number, an amount, an address, a name, a code);
- exactly one thing differs: if a name *and* another value both changed, the statements are
  about two subjects ("Ana's email is …" and "Ben's email is …"); if a word of the earlier
  statement's scope is gone ("on weekdays" vs "on weekends"), they describe two scopes.

When the whole statements differ in more than one thing, their clauses are read against each
other the same way, by words (``clauses``): "Clinic rang — Milo's vaccination is Monday at 17:45,
vet is out Friday." restates "Milo's vaccination: this Friday at 9:15.".

Pure: no I/O. The guards of the statement (questions, hedges, proposals, reported speech,
history, "also") are checked by the caller's ``Statement`` flags before this runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Final, Literal

from kaibo_core.core.structuring.classify import FALLBACK_EPISODE, classify, statement_of_text
from kaibo_core.core.structuring.drafts import CandidateMemory, Meaning
from kaibo_core.core.structuring.facts import SLOT_WORDS, STREET_ADDRESS, history
from kaibo_core.core.structuring.statements import Statement, split_statements
from kaibo_core.core.text import analyze

ValueKind = Literal["date", "time", "amount", "number", "email", "url", "phone", "address", "name", "code"]
Values = frozenset[tuple[ValueKind, str]]

_MONTH: Final = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY: Final = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
#: Kinds in the order they are tried: the first that matches a span claims it.
_VALUE_PATTERNS: Final[tuple[tuple[ValueKind, re.Pattern[str]], ...]] = (
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    (  # any scheme: "https://…", "s3://kaibo-exports-prod"
        "url",
        re.compile(r"\b(?:[a-z][a-z\d+.-]*://|www\.)\S+|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|app)\b"),
    ),
    ("address", STREET_ADDRESS),
    (
        "date",
        re.compile(
            rf"\b(?:{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
            rf"{_MONTH}(?:,?\s+\d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|{_WEEKDAY}|{_MONTH}\s+\d{{4}})\b",
            re.IGNORECASE,
        ),
    ),
    (
        "time",
        re.compile(
            r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b", re.IGNORECASE
        ),
    ),
    ("phone", re.compile(r"(?<![\w.])\+?\d[\d\s().-]{6,}\d\b")),
    (
        "amount",
        re.compile(
            r"[$€£¥]\s?\d[\d,.]*\s?[kmb]?\b|\b\d[\d,.]*\s?(?:usd|eur|gbp|dollars|euros)\b", re.IGNORECASE
        ),
    ),
    ("code", re.compile(r"#(?<![\w#&]#)[a-z][\w-]*[a-z\d]", re.IGNORECASE)),  # a channel: "#releases"
    (
        "code",
        re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[a-z])[\w]+(?:[-_.][\w]+)+\b|\b[a-z]+\d[\w]*\b", re.IGNORECASE),
    ),
    (
        "number",
        re.compile(
            r"\b\d[\d,.]*(?:st|nd|rd|th|\s?%)?|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|"
            r"eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)\b",
            re.IGNORECASE,
        ),
    ),
)
_WORD: Final = re.compile(r"[\w'’-]+|[^\w\s]")
_POSSESSIVE: Final = re.compile(r"\b(my|our|his|her|their|your)\b", re.IGNORECASE)
_POSSESSIVE_END: Final = re.compile(r"['’]s$")
_UPPER: Final = "A-ZÀ-ÖØ-Þ"
_LOWER: Final = "a-zß-öø-ÿ"
_CAPITALIZED_WORD: Final = rf"[{_UPPER}][{_LOWER}'’-]*[{_LOWER}]"
_FIRST_WORD: Final = re.compile(rf"\s*({_CAPITALIZED_WORD})\b(?!\s+[{_UPPER}])")
#: A name written with a capital inside ("iOS", "macOS", "eBay") is a name too; an initial after a
#: name is part of it ("Tom R.").
_CAPITALIZED: Final = re.compile(
    rf"\b(?:{_CAPITALIZED_WORD}|[{_LOWER}]+[{_UPPER}][\w]*)(?:\s+{_CAPITALIZED_WORD})*"
    rf"(?:\s+[{_UPPER}]\.(?!\w)|\b)"
)
#: Capitalized words that are not names: sentence openers, pronouns, days and months are dates.
_OPENERS: Final = (
    "the a an i we you he she they it our my your their his her its this that these those there "
    "here please thanks thank ok okay yes no so and but or also just update note fyi correction "
    "actually done finished hi hey team all everyone when what where who how why which will can "
    "could should would let lets it's i'm we're new next last today tomorrow monday tuesday "
    "wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december scratch sorry heads up reminder going starting from as "
    "of effective"
)
#: A pronoun with a verb contracted onto it is no name either ("He'll come Thursday instead").
_CONTRACTED: Final = tuple(
    f"{pronoun}{apostrophe}{verb}"
    for pronoun in ["i", "you", "he", "she", "it", "we", "they", "that", "there", "who", "what"]
    for apostrophe in "'’"
    for verb in ("ll", "d", "s", "re", "ve", "m")
)
NOT_NAMES: Final = frozenset((*_OPENERS.split(), *_CONTRACTED))
#: Words that say *that* something changed, not *what* it is about: no part of the topic.
_CUE_WORDS: Final = frozenset(
    analyze(
        "now new newly current currently updated update actually sorry correction scratch instead "
        "going forward anymore longer today starting effective latest revised reminder fyi"
    )
)

#: Roles one person holds at a time: a new name in one of them retires the old one.
_SOLE_ROLES: Final = frozenset(
    analyze(
        "own owner owns lead leads led handle handles handled run runs manage manager charge responsible "
        "assigned assignee point contact driving drives take takes taking minutes approvals sign signs "
        "on-call primary rep representative coordinator organizer host chair"
    )
)
#: Words that name a kind of value ("Grandma's address: …" and "… 220 Birch Ave"): a statement
#: holding a value of that kind says the word in its own way (the fact rules' slot words).
_KIND_WORDS: Final[dict[ValueKind, frozenset[str]]] = {
    "date": SLOT_WORDS["when"],
    "time": SLOT_WORDS["when"],
    "amount": SLOT_WORDS["money"],
    "phone": SLOT_WORDS["phone"],
    "email": SLOT_WORDS["email"],
    "url": SLOT_WORDS["url"],
    "address": SLOT_WORDS["address"],
}
#: Memory types that hold a value a later statement can replace (episodes tell what happened).
VALUE_TYPES: Final = frozenset({"fact", "decision", "preference", "task"})
_FIRST_PERSON: Final = re.compile(r"\b(i|i'm|i’m|my|me|we|our|us)\b", re.IGNORECASE)
#: Past tense that tells history rather than the current value ("was", "last year").
_ATTACHMENT: Final = re.compile(r"\s*\[(?:attachment|image|file)\b", re.IGNORECASE)
_PAST: Final = re.compile(
    rf"\b(was|were|used to|previously|yesterday|ago"
    rf"|last (?:year|month|week|weekend|night|time|{_WEEKDAY}))\b",
    re.IGNORECASE,
)

#: Share of the earlier statement's topic words the later one must repeat.
MIN_TOPIC_SHARE: Final = 0.75
#: At least this many topic words in common (names included).
MIN_TOPIC_WORDS: Final = 2
#: Topic words and shared identifiers that make two statements about one thing (``_anchored``).
ANCHORED_WORDS: Final = 2
_IDENTIFIERS: Final = frozenset({"name", "code", "url", "email", "address"})
#: With recall by meaning on, two statements at least this close (all-MiniLM-L6-v2's cosine) share
#: their topic whatever their words; tuned on tests/data/structuring_tuning_blind.json only
#: (docs/performance-structuring.md, session 13).
SAME_MEANING_COSINE: Final = 0.6


@dataclass(frozen=True, slots=True)
class Reading:
    """A statement split into its topic words (stemmed) and its values (by kind)."""

    topic: frozenset[str]
    values: frozenset[tuple[ValueKind, str]]
    #: Possessives ("our", "their", "his"): whose value it is.
    holders: frozenset[str] = frozenset()
    #: Stems of two words written one after the other ("guest", "wifi"): the first may modify the second.
    pairs: frozenset[tuple[str, str]] = frozenset()
    #: A capitalized first word ("Headcount", "Ana"): a name unless the other statement has it in lower case.
    opening: str | None = None
    #: Names written as owners ("Acme's contract"); among the values without their "'s" ("acme").
    owners: frozenset[str] = frozenset()
    #: Topic words it holds only because its values say them (``_with_kind_words``): no subject.
    said: frozenset[str] = frozenset()
    #: The stems of the word after an opening word settled as a topic word ("lives" of "Staging lives at").
    after_opening: frozenset[str] = frozenset()
    #: The stems of the first topic word, where a statement usually names its subject ("board" of
    #: "Q2 board deck is due …").
    lead: frozenset[str] = frozenset()
    #: The topic words of a label the statement opens with ("Returns: ship to …"): what it is about.
    label: frozenset[str] = frozenset()

    def words(self, kinds: Collection[str] | None = None) -> frozenset[str]:
        """What the statement is about: its topic words, and the stemmed words of its opening and
        of its values (those of ``kinds`` only, if given)."""
        values = " ".join(value for kind, value in self.values if kinds is None or kind in kinds)
        return self.topic | frozenset(analyze(f"{self.opening or ''} {values}"))


def _normal(value: str) -> str:
    return re.sub(r"[\s,.]+", " ", value.lower()).strip()


def _name(words: str) -> tuple[str, bool]:
    """A name as a value, without its possessive ("Lily's dose" and "Lily is …" name one person),
    and whether it was written as an owner."""
    name = _normal(words)
    bare = _POSSESSIVE_END.sub("", name)
    return bare, bare != name


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """The topic words and values of one statement (its speaker prefix removed by the caller).
    Cached: a candidate's text is read again for every statement of an event (a Reading is frozen)."""
    values: set[tuple[ValueKind, str]] = set()
    rest = text
    for kind, pattern in _VALUE_PATTERNS:
        for match in pattern.finditer(rest):
            values.add((kind, _normal(match.group(0))))
        rest = pattern.sub(" , ", rest)
    opening = None
    first = _FIRST_WORD.match(rest)
    if first is not None and first.group(1).lower() not in NOT_NAMES:
        opening = first.group(1)
        rest = rest[first.end() :]
    owners: set[str] = set()
    for match in _CAPITALIZED.finditer(rest):
        words = [w for w in match.group(0).split() if w.lower() not in NOT_NAMES]
        if words:
            name, owner = _name(" ".join(words))
            values.add(("name", name))
            if owner:
                owners.add(name)
            rest = rest.replace(match.group(0), " , ", 1)
    topic = frozenset(analyze(rest)) - _CUE_WORDS
    holders = frozenset(m.lower() for m in _POSSESSIVE.findall(text))
    labelled = _LABEL.match(text)
    label = frozenset(analyze(labelled.group(1))) - _CUE_WORDS if labelled else frozenset()
    if label:  # its topic words, not its dates or names
        label &= topic | frozenset(analyze(opening or ""))
    return Reading(
        topic,
        frozenset(values),
        holders,
        _pairs(rest),
        opening,
        frozenset(owners),
        lead=_lead(rest),
        label=label,
    )


#: A short label before a colon that opens a statement, with no digit in it ("Returns: …").
_LABEL: Final = re.compile(r"^\s*([A-Za-z][\w'’ -]{0,40}?):\s+\S")


def _lead(text: str) -> frozenset[str]:
    """The stems of the first word of ``text`` that is not a cue word (``Reading.lead``)."""
    for word in _WORD.findall(text):
        stems = frozenset(analyze(word)) - _CUE_WORDS
        if stems:
            return stems
    return frozenset()


def _pairs(text: str) -> frozenset[tuple[str, str]]:
    terms = [analyze(word) for word in _WORD.findall(text.lower())]
    return frozenset((first[0], second[0]) for first, second in pairwise(terms) if first and second)


def _settle_opening(reading: Reading, other: Reading) -> Reading:
    """The opening word is a name ("Ana will …") unless the other statement uses it as a plain
    word; when both open with it ("Kenji lives …", "Kenji's new address …"), it is simply a word
    they share."""
    if reading.opening is None:
        return reading
    terms = frozenset(analyze(reading.opening))
    if not terms or terms & (other.topic | _opening_words(other) | _code_words(other)):
        lead = terms or reading.lead
        return replace(
            reading, topic=reading.topic | terms, opening=None, lead=lead, after_opening=reading.lead
        )
    name, owner = _name(reading.opening)
    owners = reading.owners | {name} if owner else reading.owners
    return replace(reading, values=reading.values | {("name", name)}, opening=None, owners=owners)


def _opening_words(reading: Reading) -> frozenset[str]:
    """The stems of a reading's opening word ("Kenji's" says "kenji", as "Kenji" does)."""
    return frozenset(analyze(reading.opening)) if reading.opening else frozenset()


def _code_words(reading: Reading) -> frozenset[str]:
    """The words a reading's codes say ("#payments-oncall" says "payments")."""
    codes = [value for kind, value in reading.values if kind == "code"]
    return frozenset(analyze(" ".join(codes))) if codes else frozenset()


def settle_openings(new: Reading, old: Reading) -> tuple[Reading, Reading]:
    """Both readings with their opening words settled against each other's originals, and each
    one's topic holding the other's words that name a kind of its own values."""
    new, old = _settle_opening(new, old), _settle_opening(old, new)
    new, old = _one_address(new, old), _one_address(old, new)
    return _with_kind_words(new, old), _with_kind_words(old, new)


def _one_address(reading: Reading, other: Reading) -> Reading:
    """``reading`` with an address written in more detail than one of ``other`` ("12 Oak St, Apt 4,
    Springfield" and "12 Oak St, Apt 4") as the other writes it: one address, not one replaced."""
    theirs = [value for kind, value in other.values if kind == "address"]
    detailed: dict[tuple[ValueKind, str], tuple[ValueKind, str]] = {
        ("address", value): ("address", shorter)
        for kind, value in reading.values
        if kind == "address"
        for shorter in theirs
        if value.startswith(f"{shorter} ")
    }
    if not detailed:
        return reading
    return replace(reading, values=frozenset(detailed.get(value, value) for value in reading.values))


def _with_kind_words(reading: Reading, other: Reading) -> Reading:
    """``reading`` with the words of ``other`` that name a kind of value it holds ("address" for
    its street address, "phone" for its phone number)."""
    named = frozenset().union(*(_KIND_WORDS.get(kind, frozenset()) for kind, _ in reading.values))
    words = (other.topic & named) - reading.topic
    return replace(reading, topic=reading.topic | words, said=reading.said | words) if words else reading


def replaces_value(new: Reading, old: Reading, same_meaning: bool = False) -> bool:
    """True when ``new`` restates ``old`` with one value replaced (see the module docstring);
    ``same_meaning``: the model finds the two statements close, whatever their words."""
    new, old = settle_openings(new, old)
    gone = old.values - new.values
    added = new.values - old.values
    if not gone or not added:
        return False
    if new.holders and old.holders and not new.holders & old.holders:
        return False  # "our budget" and "their budget"
    topic = topic_verdict(new, old)
    if topic == "other":
        return False
    slot = _replaced_slot(gone, added)
    if slot is None:
        return False  # nothing of the same kind, or two things changed (a name and an email): two subjects
    if topic == "unknown" and not _same_meaning(new, old, slot, same_meaning):
        return False
    if slot != "name":
        return True
    if _count(gone, "name") > 1 or _count(added, "name") > 1:
        return False  # "Priya … Globex" and "Raj … Initech": two names, two subjects
    # A person replaced: only in a role one person holds ("Ana will review" and "Ben will review"
    # may both be true; "Ben owns it" retires "Ana owns it").
    return bool(old.topic & new.topic & _SOLE_ROLES)


def _same_meaning(new: Reading, old: Reading, slot: str, close: bool) -> bool:
    """The model's word where the words cannot tell: close, and no word of the earlier statement
    swapped for another, and no owner of its value left unnamed."""
    return close and not swapped_word(new, old) and not _owner_dropped(new, old, slot)


def _owner_dropped(new: Reading, old: Reading, slot: str) -> bool:
    """The earlier statement says whose value it is ("Acme's contract value is $120k") and the
    later one does not name them ("Contract value $95k"): perhaps another client's. Only the words
    can tell who a statement is about; the model finds the two close either way."""
    if slot == "name":
        return False
    words = new.words()
    return any(not frozenset(analyze(owner)) & words for owner in old.owners)


TopicVerdict = Literal["same", "other", "unknown"]


def topic_verdict(new: Reading, old: Reading) -> TopicVerdict:
    """Whether two statements are about the same thing, by their words: ``same`` when most of the
    earlier statement's words are repeated; ``other`` when the words show another thing (a short
    topic made narrower, a word put before a shared one, one word of the earlier statement swapped
    for another: "on weekdays" → "on weekends", "the mobile squad" → "the web squad"); ``unknown``
    when they share too few words to tell (only then may the model's meaning decide)."""
    shared = old.topic & new.topic
    names = {v for k, v in old.values & new.values if k == "name"}
    lost, gained = old.topic - new.topic, new.topic - old.topic
    if new.label and new.label <= old.topic and old.lead <= new.label and not narrower(new, old):
        return "same"  # "Returns: ship to …" is about what "Returns go to …" is about
    own = old.topic - old.said  # "Staging: https://…" names no subject, whatever "URL" its value says
    if old.label and own <= old.label and old.label <= new.lead and _label_is_subject(new, old.label):
        return "same"  # "Staging: https://…" was all label and value; "Staging lives at …" opens with it
    if len(own) <= 1 and gained:
        beside = any((a in shared and b in gained) or (a in gained and b in shared) for a, b in new.pairs)
        if not own or len(new.topic) <= 2 or beside:
            return "other"  # "the demo" vs "the demo prep", "the kickoff" vs "the retro"
        return "unknown"  # one word against a statement in other words: too little to tell
    if narrower(new, old):
        return "other"  # "the wifi password" vs "the guest wifi password": a narrower subject
    if len(shared) + len(names) < MIN_TOPIC_WORDS and not (old.topic and old.topic <= new.topic):
        if shared and len(lost) == 1 and len(gained) == 1:
            return "other"  # "the Q3 report" vs "the Q3 budget": the one word that differs is the subject
        return _anchored(new, old)
    if not lost:
        return "same"
    if len(lost) == 1:
        if len(shared) >= MIN_TOPIC_SHARE * len(old.topic):
            return "same"
        if len(gained) == 1:
            return "other"  # one word swapped for one other: another scope
    return _anchored(new, old)


#: Verbs that follow a subject and say where or what it is ("Staging lives at …"), not a noun that
#: makes it narrower ("Staging DB …").
_WHERE_VERBS: Final = frozenset(analyze("lives runs sits points goes moved moves stays resides hosted hosts"))


def _label_is_subject(new: Reading, label: frozenset[str]) -> bool:
    """``new`` opens with the earlier label as its whole subject: a word after it is a verb, not a
    noun that names a narrower thing."""
    after = {second for first, second in new.pairs if first in label} | new.after_opening
    return not after - _WHERE_VERBS


def _anchored(new: Reading, old: Reading) -> TopicVerdict:
    """``same`` when the two statements share a word of their topic and an identifier (a name, a
    code, an address, a number of three digits or more: "invoice 4471", "the Q1 VAT return",
    "Dr. Okafor's office"), the later one keeps the earlier one's first topic word (where it names
    its subject: "Q2 board deck" and "Investor letter for Q2" are two things) and no word beside a
    shared one was swapped; else ``unknown``."""
    if old.lead and not old.lead & new.words():
        return "unknown"
    shared = old.topic & new.topic
    if len(shared) < ANCHORED_WORDS and old.topic - new.topic and new.topic - old.topic:
        # "Invoice 4471 totals …" and "Invoice 4471 deposit paid: …": the word that differs is the attribute
        return "unknown"
    anchors = [
        value
        for kind, value in old.values & new.values
        if kind in _IDENTIFIERS or (kind == "number" and sum(c.isdigit() for c in value) >= 3)
    ]
    if anchors and shared and not swapped_word(new, old):
        return "same"
    return "unknown"


def swapped_word(new: Reading, old: Reading) -> bool:
    """A word beside a shared one was swapped for another ("release target" → "release party",
    "the mobile squad" → "the web squad"): another thing, however close the model finds them."""
    shared, lost, gained = old.topic & new.topic, old.topic - new.topic, new.topic - old.topic
    followed = {a for a, b in old.pairs if a in shared and b in lost}  # "release" of "release target"
    preceded = {b for a, b in old.pairs if b in shared and a in lost}  # "squad" of "mobile squad"
    return any((a in followed and b in gained) or (b in preceded and a in gained) for a, b in new.pairs)


def narrower(new: Reading, old: Reading) -> bool:
    """``new`` puts a word of its own before a shared one: "the guest wifi password" is a
    narrower subject than "the wifi password"."""
    shared, gained = old.topic & new.topic, new.topic - old.topic
    return any(first in gained and second in shared for first, second in new.pairs)


def _count(values: Iterable[tuple[ValueKind, str]], kind: ValueKind) -> int:
    return sum(1 for k, _ in values if k == kind)


def _replaced_slot(
    gone: frozenset[tuple[ValueKind, str]], added: frozenset[tuple[ValueKind, str]]
) -> str | None:
    """The one kind of value that was replaced, or None when none or several were. A date and
    a time replaced together are one "when" (Wednesday at 2pm → Thursday at 11am); a date
    followed by a time is not a replacement (on Thursday → at 4pm)."""
    replaced = {kind for kind, _ in gone} & {kind for kind, _ in added}
    if replaced == {"date", "time"}:
        return "when"
    if "name" in replaced and replaced - {"name"} in ({"phone"}, {"email"}):
        return "name"  # a person and their number (or address) replaced together: one contact
    return next(iter(replaced)) if len(replaced) == 1 else None


def replaceable(memory_type: str, statement: Statement) -> bool:
    """A memory holding a value a later statement can replace: a fact, decision, preference or
    task, or a plain statement no type fits ("Team dinner Friday 7pm at Osteria Nino": a plan, its
    time may change), never an episode told in the past ("We met on Friday") nor several statements
    kept together as one episode (a story)."""
    if memory_type in VALUE_TYPES:
        return True
    if memory_type != "episode" or len(split_statements(statement.text).statements) != 1:
        return False  # several statements kept together as one episode are a story
    classification = classify(statement)
    return classification is not None and classification.confidence == FALLBACK_EPISODE


def has_value(text: str) -> bool:
    """The statement holds a value another memory's could be replaced by: a date, a number, an
    address ... or a person in a role one person holds. Chat is full of names, so a name alone
    does not count (and costs no search). An attachment's caption states no value ("a photo of
    three turtles" and, later, "a photo of two turtles" are two photos)."""
    return not is_attachment(text) and _holds_value(read(text))


def _holds_value(reading: Reading) -> bool:
    """``has_value`` of a statement already read."""
    kinds = {kind for kind, _ in reading.values}
    if kinds - {"name"}:
        return True
    has_name = bool(kinds) or reading.opening is not None
    return has_name and bool((reading.topic | frozenset(analyze(reading.opening or ""))) & _SOLE_ROLES)


def is_attachment(text: str) -> bool:
    """An attachment's caption ("[attachment: a photo of …]"): it describes a file, states no value."""
    return _ATTACHMENT.match(text) is not None


def past(text: str) -> bool:
    """The statement tells how things were ("was", "used to", "last year"), not a current value."""
    return _PAST.search(text) is not None


def restated_candidates(
    text: str,
    speaker: str | None,
    stream: str,
    candidates: Iterable[CandidateMemory],
    meaning: Meaning | None = None,
) -> list[CandidateMemory]:
    """The candidates that ``text`` (one statement, dates resolved, no speaker prefix) restates
    with one value replaced. A first-person statement only replaces its own speaker's values, in
    its own stream ("my flight" in two people's streams are two flights)."""
    if past(clauses(text)[0]) or not has_value(text):
        return []  # a later clause may tell the past ("…, the other 4 were mislabeled"): a remark
    new = read(text)
    new_clauses = _clause_readings(text)
    first_person = _FIRST_PERSON.search(text) is not None
    new_words = frozenset(analyze(text))
    found = []
    for candidate in candidates:
        old_statement = current_value(candidate)
        if old_statement is None:
            continue
        old_text, old_speaker = labelled_text(old_statement, new_words)
        new_reading, new_speaker = new, speaker or ""
        if new_speaker and frozenset(analyze(new_speaker)) <= frozenset(analyze(old_text)):
            new_reading, new_speaker = read(f"{new_speaker}: {text}"), ""  # "Returns: ship to …"
        if first_person and (candidate.stream != stream or old_speaker != new_speaker):
            continue
        if new_speaker and old_speaker and old_speaker != new_speaker:
            continue  # another speaker's value: a disagreement, not an update
        cosine = None if meaning is None else meaning(text, candidate)
        same_meaning = cosine is not None and cosine >= SAME_MEANING_COSINE
        if replaces_value(new_reading, read(old_text), same_meaning) or _clause_replaces(
            new_clauses, old_text
        ):
            found.append(candidate)
    return found


def retired_together(
    retired: Iterable[CandidateMemory], candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The candidates of the same event (stream and time) as a retired one that say what it says,
    subject and words: an update's statement and the fact rewritten from it ("App Store review is
    slow, mobile launch slips to March 9" and "The mobile launch is on March 9") go together, or
    the one left behind would still answer with the old value."""
    retired = list(retired)
    together = []
    for candidate in candidates:
        if any(candidate.memory_id == gone.memory_id for gone in retired):
            continue
        if any(_one_saying(candidate, gone) for gone in retired):
            together.append(candidate)
    return together


def _one_saying(candidate: CandidateMemory, gone: CandidateMemory) -> bool:
    if (candidate.stream, candidate.valid_from) != (gone.stream, gone.valid_from):
        return False
    if not candidate.subject or candidate.subject != gone.subject:
        return False
    words, gone_words = frozenset(analyze(candidate.content)), frozenset(analyze(gone.content))
    return words <= gone_words or gone_words <= words


def labelled_text(statement: Statement, other: frozenset[str]) -> tuple[str, str]:
    """A statement's text and its speaker, a one-word label read as a speaker put back into the text
    when the other statement says that word (``other``: its words, stemmed): "Staging:
    https://staging.kaibo.dev" and "Staging lives at https://stg.kaibo.dev": a label, not a person."""
    speaker = statement.speaker or ""
    if speaker and frozenset(analyze(speaker)) <= other:
        return f"{speaker}: {statement.text}", ""
    return statement.text, speaker


def current_value(candidate: CandidateMemory) -> Statement | None:
    """The candidate's statement, if it holds a current value a later statement can replace (see
    ``replaceable``): never a question, hedge, proposal, reported speech, negation, history, a
    story of the past or an attachment's caption."""
    statement = statement_of_text(candidate.content)
    if not replaceable(candidate.type, statement):
        return None
    if statement.guarded or history(statement) or past(statement.text) or is_attachment(statement.text):
        return None
    return statement


#: Where a sentence's clauses meet: a dash, a semicolon, a comma (not the one of a date's year:
#: "August 21, 2023").
_CLAUSE_BREAK: Final = re.compile(r"\s+[—–]\s+|;\s+|,\s+(?!\d)")
#: What was done or heard before a colon: a clause of its own ("Checked the RDS console: prod is on
#: Postgres 15.4"); a label before a colon is not ("Milo's vaccination: this Friday at 9:15").
_PREAMBLE: Final = re.compile(
    r"^([^:]*?\b(?:[a-z]{3,}ed|rang|said|says|told|heard|found)\b[^:]*):\s+(?=\S)", re.IGNORECASE
)
#: A clause shorter than this is part of the one before it ("…, Apt 3, Beaverton, OR 97005", "…, 12:30").
MIN_CLAUSE_WORDS: Final = 3


def clauses(text: str) -> list[str]:
    """The clauses of one statement: "Clinic rang — Milo's vaccination is Monday at 17:45, vet is out
    Friday" → three; short parts stay with the clause before them."""
    parts: list[str] = []
    preamble = _PREAMBLE.match(text)
    if preamble is not None:
        parts.append(preamble.group(1))
        text = text[preamble.end() :]
    for part in _CLAUSE_BREAK.split(text):
        if parts and len(part.split()) < MIN_CLAUSE_WORDS:
            parts[-1] = f"{parts[-1]}, {part}"
        else:
            parts.append(part)
    return parts


def _clause_readings(text: str) -> list[tuple[Reading, bool]]:
    """Each clause of ``text`` read, and whether it holds a value (``has_value``)."""
    readings = []
    for clause in clauses(text):
        reading = read(clause)
        readings.append((reading, not is_attachment(clause) and _holds_value(reading)))
    return readings


def _clause_replaces(new_clauses: list[tuple[Reading, bool]], old: str) -> bool:
    """One clause of the new statement (``_clause_readings``) restates one clause of ``old`` with one
    value replaced, by their words (the other clauses bring values and words of their own:
    "Misread the itinerary, Mia gets in at 8:40pm Saturday" for "Mia's flight lands at 6:40pm on
    Saturday, I'll pick her up")."""
    old_clauses = clauses(old)
    if len(new_clauses) == 1 and len(old_clauses) == 1:
        return False
    valued = [reading for reading, holds_value in new_clauses if holds_value]
    if not valued:
        return False
    olds = [read(clause) for clause in old_clauses]
    return any(_restates_clause(n, o) for n in valued for o in olds)


def _restates_clause(new: Reading, old: Reading) -> bool:
    """``replaces_value`` for two clauses, and the later one names whoever the earlier one says the
    value is of ("Acme's contract value is $120k ARR" → "Contract value $95k ARR": perhaps another
    client's; the whole statements would have told more)."""
    settled_new, settled_old = settle_openings(new, old)
    shared = settled_old.topic & settled_new.topic
    anchors = {value for kind, value in settled_old.values & settled_new.values if kind != "date"}
    if len(shared) + len(anchors) < MIN_TOPIC_WORDS:
        return False  # "this week (…)": a clause too short to tell one thing from another
    return replaces_value(new, old) and not _owner_dropped(settled_new, settled_old, "")

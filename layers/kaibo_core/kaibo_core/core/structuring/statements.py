"""From an event's text to statements, each with the cues later rules need (pure, linear time).

A message's text may start with its author's name (``Anna: ...``, see
kaibo_core.core.provisional). It is split at line breaks, sentence ends and semicolons;
a numbered list stays one statement (it is usually a procedure). Each statement is
then *prepared*: the speaker, a leading label (``TODO:``, ``Decision:``) and filler
words (``ok,``, ``so``, ``actually,``) are taken off its ``core``, and the guards
that stop change detection are computed once (question, hedge, reported speech,
negation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

#: Statements read from one text; the rest of a longer text is kept as one overflow episode.
MAX_STATEMENTS: Final = 40
#: Characters of a text that are split into statements (files and long pastes stop here).
MAX_SPLIT_CHARS: Final = 20_000
#: Longer statements are kept but never parsed for changes (bounded regex work).
MAX_PARSED_CHARS: Final = 400

#: A word of a name: letters, with a dot, an apostrophe or a hyphen inside ("Mary-Jo", "O'Neil",
#: "Dr."); no digit: "BUG-2210: CSV export drops rows …" is a ticket's label, not its author.
_NAME_WORD = r"[A-Z][^\W\d_]{0,30}(?:[.'’-][^\W\d_]{0,30}){0,3}"
#: Labels that put forward what follows ("Idea: standup at 9:45."): not said by anyone, not decided.
_HEDGE_LABELS: Final = (
    "proposal",
    "proposed",
    "idea",
    "ideas",
    "suggestion",
    "suggestions",
    "option",
    "options",
    "thought",
    "thoughts",
    "rumor",
    "rumour",
    "draft",
    "hypothetical",
    "hypothetically",
    "maybe",
    "tentative",
    "tentatively",
    "brainstorm",
    "pitch",
    "wishlist",
    "what if",
    "plan b",
)
_HEDGE_LABEL: Final = re.compile(rf"^(?:{'|'.join(_HEDGE_LABELS)})\s*[:\-–]\s+", re.IGNORECASE)
_SPEAKER: Final = re.compile(rf"^(?P<name>{_NAME_WORD}(?: {_NAME_WORD}){{0,2}}):[ \t]+(?=\S)")
_NOT_SPEAKERS: Final = frozenset(
    [
        "todo",
        "to-do",
        "task",
        "tasks",
        "note",
        "notes",
        "update",
        "decision",
        "decisions",
        "correction",
        "fyi",
        "reminder",
        "action",
        "question",
        "edit",
        "ps",
        "re",
        "summary",
        "agenda",
        "important",
        "done",
        "preference",
        "procedure",
        "steps",
        "fact",
        "info",
        "warning",
        "caution",
        "tip",
        "heads",
        "status",
        "result",
        "results",
        "q",
        "a",
        *_HEDGE_LABELS,
    ]
)
_LABEL: Final = re.compile(
    r"^(?P<label>todo|to-do|task|action items?|decision|decided|correction|update|preference|procedure"
    r"|steps|note|fyi|reminder|done|finished|completed)\s*[:\-–]\s+"
    r"|^(?P<ticket>[a-z]{2,10}-\d{1,7}):\s+",  # a ticket's id ("OPS-2291: Renew the wildcard cert …")
    re.IGNORECASE,
)
_FILLER: Final = re.compile(
    r"^(?:(?:(?P<cue>actually|scratch that|i mean|i meant|sorry|i changed my mind|changed my mind"
    r"|from now on|going forward|as of now|as of today|these days|nowadays)"
    r"|ok(?:ay)?|so|also|and|but|alright|all right|btw|by the way|fyi|heads up|hey(?: team| all)?"
    r"|hi(?: team| all)?|hello(?: team| all)?|just so you know|oh|yeah|thanks|thank you|to be clear"
    r"|for the record|ah|hmm|(?:it\s+)?turns\s+out(?:\s+that)?)\b[\s,:;.!—–-]*"
    r"|(?:(?P<punct_cue>correction|update|change of plans?)|quick update|no|yes|great|well|good news"
    r"|bad news)\s*[,:;.!—–-]+\s*)",
    re.IGNORECASE,
)
_BULLET: Final = re.compile(r"^\s*(?:[-*•>]+|\d{1,3}[.)])\s+")
#: "1." or "1)" starts a list item; "4.2" (a version) does not.
_NUMBERED_LINE: Final = re.compile(r"^\s*(?:\d{1,3}(?:\.(?!\d)|\))|step\s+\d{1,3}\b)", re.IGNORECASE)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|;\s+")
_ABBREVIATION: Final = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|dr|mr|mrs|ms|mx|prof|rev|st|no|approx|a\.m|p\.m|inc|ltd|jr|sr|fig|cf)\.|\b[A-Z]\.)$",
    re.IGNORECASE,
)
_QUESTION_START: Final = re.compile(
    r"^(?:(?:should|shall|can|could|would|will|do|does|did|is|are|was|were|have|has)\s+"
    r"(?:we|you|i|they|he|she|it|the|our|this|that|there|anyone|someone)"
    r"|what|when|where|why|how|who|which|whom|whose|any idea|anyone know)\b",
    re.IGNORECASE,
)
_HEDGE: Final = re.compile(
    r"\b(?:if|unless|whether|might|could|would|should|maybe|perhaps|possibly|probably|suppose"
    r"|supposing|hypothetically|consider(?:ing|ed)?|thinking about|think about|wonder(?:ing|ed)?|in case"
    r"|what if|proposal(?!\s+(?:review|deadline|due|meeting|call|presentation|submission|doc|document"
    r"|template|feedback|session|walkthrough)\b|\s+(?:is|was|are)\s+due\b)"  # a proposal named, not made
    r"|propose[sd]?|proposing|suggest(?:s|ed|ing)?|idea|option|plan b|not sure|unsure"
    r"|tentative(?:ly)?|rumou?rs?|i think|we think|i guess|depending|float(?:s|ed|ing)|wants? to try"
    r"|(?:we'?ll|will|to|going to) vote|under discussion|up for discussion|tb[cd]|to be (?:decided|confirmed)"
    r"|recommend(?:s|ed)? (?:trying|trialling|trialing|switching|moving|going with|that)|keeps? recommending"
    r"|lobb(?:ying|ies|ied)|worth (?:switching|trying|a try|considering)|thinking (?:we|of)"
    r"|(?:nothing|not)\s+(?:yet\s+)?(?:agreed|decided|confirmed|settled|final))\b",
    re.IGNORECASE,
)
#: A remark that what its message says is not decided ("Still under discussion, nothing agreed."):
#: every statement of the message is tentative.
_UNDECIDED_REMARK: Final = re.compile(
    r"^(?:(?:still|but|it'?s|this is|that'?s)\s+)?(?:under discussion|up for discussion|pending|tb[cd]|"
    r"to be (?:decided|confirmed)|(?:nothing|not)\s+(?:yet\s+)?(?:agreed|decided|confirmed|settled|final))\b",
    re.IGNORECASE,
)
#: "may" the verb, not the month: lower case, or "May I/we …"; never after a day ("15th of May",
#: "in May") or before one ("May 5").
_MAY_HEDGE: Final = re.compile(
    r"(?<!\d\s)(?<!\dth\s)(?<!\bof\s)(?<!\bin\s)(?<!\bby\s)(?<!\bmid-)"
    r"\b(?:may|May(?=\s+(?i:i|we|you|he|she|they|it|be|have|need)\b))\b(?![\s,.]+\d)"
)
#: A condition on telling, not on what is told ("Standup is at 10 now, if anyone asks."; "in case you
#: missed it"): no hedge.
_TELLING_CONDITION: Final = re.compile(
    r"\b(?:if|in\s+case)\s+(?:you|anyone|anybody|someone|somebody|folks|people|y'all)\s+(?:\w+\s+){0,2}?"
    r"(?:asks?|asked|wonders?|wondered|wondering|missed|miss|forgot|cares?|cared"
    r"|wants?\s+to\s+know|curious|interested)\b|\bif\s+(?:it|that|this)\s+helps\b",
    re.IGNORECASE,
)
#: An option chosen off a menu ("please get him the plant-based option"), not one put forward ("the
#: other option is to push it"): no hedge.
_CHOSEN_OPTION: Final = re.compile(
    r"\bthe\s+(?:[\w-]+\s+){0,2}options?\b(?!\s*(?:is|are|was|would|could|here|:))", re.IGNORECASE
)
_REPORTED: Final = re.compile(
    r"\b(?:said|says|say|told|tells|mention(?:s|ed)?|asked|asks|believes?|thinks"
    r"|claimed|claims|(?:i|we|they|you)\s+claim|claim\s+(?:is\s+)?that"  # the verb, not the noun
    r"|heard|hear|according to|reportedly|wants to know|wrote that|emailed that|reckons?|swears?|insists?)\b",
    re.IGNORECASE,
)
_NEGATION: Final = re.compile(
    r"\b(?:not|never|no need|none|nobody|nothing|neither|nor|cannot|can't|won't|don't|doesn't"
    r"|didn't|isn't|aren't|wasn't|weren't|haven't|hasn't|shouldn't|wouldn't|couldn't|no one|dont|wont"
    r"|cant|isnt|arent|didnt|doesnt|havent|hasnt|wasnt)\b",
    re.IGNORECASE,
)
#: Where a remark joins the clause that holds a value: a comma, "assuming", "for anyone who".
_REMARK_BREAK: Final = re.compile(
    r",\s+|\s+(?:assuming|provided|for anyone who|for those who)\s+", re.IGNORECASE
)
#: "or not" after a value: whatever happens, no negation of it.
_OR_NOT: Final = re.compile(r",?\s+or\s+not\b", re.IGNORECASE)
#: Where a reason or a purpose joins what a statement says.
_REASON_JOIN: Final = re.compile(r",?\s+(?:so|because|since|as)\s+(?:that\s+)?", re.IGNORECASE)
_DIGIT: Final = re.compile(r"\d")
#: A remark set off by a dash after what a statement says ("… — Tom can't travel"): its reason.
_DASH_REMARK: Final = re.compile(r"\s[—–-]\s")
#: Negations that state a change ("no longer", "not ... anymore") or a new time ("won't wrap up until
#: May 22", "isn't due till May 15") are not guards.
_CHANGE_NEGATION: Final = re.compile(
    r"\bno\s+longer\b|\bany\s*more\b|(?:\bnot|n['’]t)\b[^.;]*?\b(?:until|till|til)\s", re.IGNORECASE
)
_NOW_CUE: Final = re.compile(
    r"\b(?:now|from now on|these days|going forward|anymore|any more|no longer|instead)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a text. ``text`` is what the draft keeps (the author's words);
    ``core`` is what the rules parse."""

    text: str
    core: str
    speaker: str | None = None
    label: str | None = None
    correction_cue: bool = False  # "actually", "correction:", "from now on", "I meant" ...
    now_cue: bool = False  # "now", "anymore", "no longer", "instead" ...
    question: bool = False
    hedged: bool = False  # hypothetical, tentative or proposed
    reported: bool = False  # someone else's words
    negated: bool = False  # a plain negation (not "no longer")
    numbered: bool = False  # a numbered list kept together

    @property
    def guarded(self) -> bool:
        """True when the statement must not change or retire anything."""
        return self.question or self.hedged or self.reported or self.negated

    @property
    def parseable(self) -> bool:
        return len(self.core) <= MAX_PARSED_CHARS and not self.numbered


@dataclass(frozen=True, slots=True)
class SplitText:
    statements: tuple[Statement, ...]
    overflow: str  # text beyond MAX_STATEMENTS / MAX_SPLIT_CHARS, not split ("" if none)


def split_speaker(text: str) -> tuple[str | None, str]:
    """``("Anna", "rest")`` for ``"Anna: rest"``; labels such as ``TODO:`` are not speakers."""
    match = _SPEAKER.match(text)
    if match is None or match.group("name").lower() in _NOT_SPEAKERS:
        return None, text
    return match.group("name"), text[match.end() :]


def _sentences(line: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for boundary in _SENTENCE_END.finditer(line):
        before = line[start : boundary.start()].rstrip()
        if boundary.group(0).startswith(";") or not _ABBREVIATION.search(before):
            pieces.append(line[start : boundary.start()].strip())
            start = boundary.end()
    pieces.append(line[start:].strip())
    return [piece for piece in pieces if piece]


def _blocks(text: str) -> list[tuple[str, bool]]:
    """Lines, with a numbered list (and the header line right before it) kept as one block."""
    blocks: list[tuple[str, bool]] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if _NUMBERED_LINE.match(line):
            if blocks and (blocks[-1][1] or blocks[-1][0].endswith(":")):
                blocks[-1] = (f"{blocks[-1][0]}\n{line}", True)
            else:
                blocks.append((line, True))
            continue
        blocks.append((line, False))
    return blocks


def _strip_fillers(core: str) -> tuple[str, bool]:
    cue = False
    for _ in range(4):
        match = _FILLER.match(core)
        if match is None or match.end() == 0 or match.end() >= len(core):
            break
        cue = cue or match.group("cue") is not None or match.group("punct_cue") is not None
        core = core[match.end() :]
    return core, cue


def _negated(text: str) -> bool:
    """A negation in what the statement says, not in its reason or purpose joined by "so" or
    "because" when that part holds no value ("Rosa's renovation won't be finished in time, so
    Christmas is at my parents' place"; "… on Wednesdays at 16:00 so the SF folks don't have to dial
    in at 8am" still says its value)."""
    text = _OR_NOT.sub("", text)  # "$5 a week, chores or not"
    parts = _REASON_JOIN.split(text)
    negative = [part for part in parts if _NEGATION.search(part)]
    if not negative:
        return False
    if _negation_beside_value(text):
        return False
    if len(negative) == len(parts):
        return True
    return any(_DIGIT.search(part) for part in negative)


def _negation_beside_value(text: str) -> bool:
    """Every negation is in a clause beside the one that holds the value, which holds none: "Weekly
    eng all-hands is Tuesdays 17:00 CET, recorded for anyone who can't make it.", "Public beta goes
    out 9 June, assuming Play review doesn't drag." ("The standup is not on the 5th, we moved it" and
    "The standup is at 10, not 9" still negate their value)."""
    clauses = _REMARK_BREAK.split(text)
    valued = [clause for clause in clauses if _DIGIT.search(clause)]
    return bool(valued) and not any(_NEGATION.search(clause) for clause in valued)


def prepare(text: str, speaker: str | None = None, numbered: bool = False) -> Statement:
    """The cues of one statement (``text`` without the speaker prefix)."""
    core = _BULLET.sub("", text, count=1) if not numbered else text
    label = None
    label_match = _LABEL.match(core)
    if label_match and label_match.end() < len(core):
        label = (label_match.group("label") or label_match.group("ticket")).lower()
        core = core[label_match.end() :]
    core, filler_cue = _strip_fillers(core)
    core = core.strip()
    bare = core.rstrip(" .!")
    question = bare.endswith("?") or bool(_QUESTION_START.match(bare) and not core.endswith((".", "!")))
    main = _DASH_REMARK.split(core, maxsplit=1)[0]  # "… is Sofia — Tom can't travel": the reason's "can't"
    negated = not _CHANGE_NEGATION.search(core) and _negated(main)
    told = _TELLING_CONDITION.sub(" ", core)  # what is told, whoever it is told for
    return Statement(
        text=text.strip(),
        core=bare.rstrip("?").strip() or core,
        speaker=speaker,
        label=label,
        correction_cue=filler_cue or label in {"correction", "update"},
        now_cue=bool(_NOW_CUE.search(core)),
        question=question,
        hedged=bool(
            _HEDGE.search(_CHOSEN_OPTION.sub(" ", told))
            or _MAY_HEDGE.search(core)
            or _HEDGE_LABEL.match(core)
        ),
        reported=bool(_REPORTED.search(told)),
        negated=negated,
        numbered=numbered,
    )


def _split_end(text: str) -> int:
    """Where the split part of ``text`` ends: at MAX_SPLIT_CHARS, moved back to the space before
    the word it would cut (a word cut in two is found by neither half)."""
    if len(text) <= MAX_SPLIT_CHARS or text[MAX_SPLIT_CHARS].isspace():
        return MAX_SPLIT_CHARS
    space = max(text.rfind(" ", 0, MAX_SPLIT_CHARS), text.rfind("\n", 0, MAX_SPLIT_CHARS))
    return space + 1 if space > 0 else MAX_SPLIT_CHARS


def split_statements(text: str, limit: int = MAX_STATEMENTS) -> SplitText:
    """The statements of ``text`` in order (at most ``limit``) and the text left over."""
    cut = _split_end(text)
    head, tail = text[:cut], text[cut:]
    speaker, head = split_speaker(head.lstrip())
    statements: list[Statement] = []
    blocks = _blocks(head)
    cursor = 0  # where in ``head`` the statements read so far end
    for index, (block, numbered) in enumerate(blocks):
        pieces = [block] if numbered else _sentences(block)
        for piece_index, piece in enumerate(pieces):
            first_line = piece.split("\n", 1)[0]
            found = head.find(first_line, cursor)
            if len(statements) == limit:
                if found >= 0:  # the rest as it was written: a piece of the text, not a rewrite of it
                    return SplitText(_undecided(statements), (head[found:] + tail).strip())
                rest = [*pieces[piece_index:], *(line for line, _ in blocks[index + 1 :])]
                return SplitText(_undecided(statements), "\n".join([*rest, tail.strip()]).strip())
            cursor = cursor if found < 0 else found + len(first_line)
            statements.append(prepare(piece, speaker, numbered))
    return SplitText(_undecided(statements), tail.strip())


def _undecided(statements: list[Statement]) -> tuple[Statement, ...]:
    """``statements``, all tentative when one of them is a remark that nothing is decided."""
    if not any(_UNDECIDED_REMARK.match(s.core) and not _DIGIT.search(s.core) for s in statements):
        return tuple(statements)
    return tuple(replace(statement, hedged=True) for statement in statements)

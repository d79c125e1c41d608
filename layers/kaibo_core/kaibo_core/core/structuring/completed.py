"""A task reported done in words of its own (docs/structuring-rules.md, "Completed in other words").

"TODO: export the March invoices and send them to the accountant." … "Done with the invoice
export, sent the zip to Priya." The completion rules read set phrases ("X is done", "finished
X"); this reads the *pair* instead: a statement that reports something finished (a completion
word, or the task's own verb in the past: "rotate the keys" → "keys rotated") and says most of
what the open task is about closes it.

Pure: no I/O. The caller checks the statement's guards (questions, hedges, reported speech).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from kaibo_core.core.structuring.changes import IRREGULAR_PASTS
from kaibo_core.core.structuring.classify import statement_of_text
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.restated import is_attachment, read
from kaibo_core.core.text import analyze

#: Words that report something finished, whatever the task was.
_COMPLETION: Final = re.compile(
    r"\b(done|finished|completed?|closed|closing|merged|shipped|resolved|fixed|submitted|sent|filed|"
    r"booked|paid|arrived|delivered|signed|approved|sorted|is live|went live|in place|taken care of|"
    r"all set|went out|came (?:in|through)|handed in|turned in|passed)\b",
    re.IGNORECASE,
)
#: Still to do, or a plan: never a completion.
_NOT_YET: Final = re.compile(
    r"\b(need(?:s)? to|have to|has to|must|should|will|going to|todo|to-do|remind|not yet|almost|"
    r"nearly|tomorrow|next (?:week|month)|later|\?)",
    re.IGNORECASE,
)
_TASK_LABEL: Final = re.compile(
    r"^[^:]{0,60}\b(todo|to-do|task|item|reminder|action|kb-\d+)\b[^:]{0,60}:\s*", re.IGNORECASE
)
#: Where a task's own words end and its circumstances begin ("… before the summer trip").
_CIRCUMSTANCES: Final = re.compile(r"\s(?:before|by|due|until|so that|so we|because)\s|\s?\(", re.IGNORECASE)
#: What a task is for ("… for the March framing job"), cut when what is left still says enough.
_PURPOSE: Final = re.compile(r"\sfor the\s", re.IGNORECASE)
#: The words that make a statement a task, not what it is about.
_TASK_WORDS: Final = frozenset(
    analyze(
        "need needs to have has must should still someone somebody please remind me todo open item action "
        "task reminder we i you us"
    )
)
_PERSONS: Final = frozenset(["i", "we", "you", "he", "she", "they", "i'm", "we're", "we've", "i've", "it"])
#: A completion without a completion word is a short report whose past form comes early.
MAX_REPORT_WORDS: Final = 16
PAST_WITHIN: Final = 4
#: Share of the task's words the report must say (at least two, names and codes included).
MIN_TASK_SHARE: Final = 0.5
MIN_SHARED: Final = 2
_WORD: Final = re.compile(r"[\w'’-]+")
#: A ticket's id ("OPS-212", "JIRA-4471"): a report naming it with a completion word closes it.
_TICKET: Final = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
#: A ticket's state said open ("BUG-2210: CSV export drops rows … — open, high priority").
_OPEN: Final = re.compile(r"\b(?:open|unresolved|in progress|todo|to do)\b", re.IGNORECASE)
#: Verbs whose past reports another verb's task done: "Got the dry cleaning" for "Pick up the dry cleaning".
_DONE_AS: Final[dict[str, frozenset[str]]] = {
    verb: frozenset(analyze(others))
    for verb, others in {
        "get": "pick buy collect fetch grab order",
        "buy": "get order",
        "book": "schedule reserve",
        "talk": "call phone ring",
        "speak": "call phone ring",
    }.items()
}


def reports_completion(text: str) -> bool:
    """The statement may report something finished: a completion word or a verb in the past
    (whether it closes a task is decided against each task). Cheap: it decides whether to search."""
    if _NOT_YET.search(text) or is_attachment(text):
        return False
    if _COMPLETION.search(text):
        return True
    # A short report that leads with a past form ("Stripe keys rotated …", "Rotated the keys"):
    # a narrative full of past tense ("we played a top team and …") costs no search.
    # A story told by someone ("I painted …", "we played …") is not a report on a thing.
    words = _WORD.findall(text.lower())
    if len(words) > MAX_REPORT_WORDS:
        return False
    for word in words[:PAST_WITHIN]:
        if word in _PERSONS:
            return False
        if _past(word):
            return True
    return False


def _past(word: str) -> str | None:
    """The verb a past form says (``rotated`` → ``rotat``'s stem), or None."""
    if word in IRREGULAR_PASTS:
        return IRREGULAR_PASTS[word]
    if len(word) > 4 and word.endswith("ed"):
        return word
    return None


def _task_core(text: str) -> str:
    """The task without its label ("TODO:"), circumstances ("before the trip", "(ticket 55)") and,
    where two of its words are left, what it is for ("… for the March framing job")."""
    core = _CIRCUMSTANCES.split(_TASK_LABEL.sub("", text.strip(), count=1), maxsplit=1)[0]
    shorter = _PURPOSE.split(core, maxsplit=1)[0]
    return shorter if len(_about(shorter)) >= MIN_SHARED else core


def _about(text: str) -> frozenset[str]:
    """What a statement is about: its stemmed words (past forms as their verb: "sent" is "send")
    and its names' and codes' words."""
    words = _WORD.sub(lambda match: IRREGULAR_PASTS.get(match.group(0).lower(), match.group(0)), text)
    return read(words).words({"name", "code"}) - _TASK_WORDS


def closes(text: str, task: CandidateMemory, speaker: str | None = None) -> bool:
    """True when ``text`` (one statement, said by ``speaker``) reports ``task`` (an open task) done."""
    tickets = set(_TICKET.findall(task.content))
    if task.type != "task" and not (tickets and _OPEN.search(task.content)):
        return False  # a ticket said to be open is a task, whatever type its words were given
    statement = statement_of_text(task.content)
    if statement.guarded or (speaker and statement.speaker and statement.speaker != speaker):
        return False  # another speaker's task is theirs to report done
    if tickets and tickets & set(_TICKET.findall(text)) and _COMPLETION.search(text):
        return True  # "OPS-212: migrate the nightly backups …" and "OPS-212 closed — …"
    core = _task_core(statement.text)
    task_words = _about(core)
    shared = task_words & _about(text)
    if len(shared) < MIN_SHARED or len(shared) < MIN_TASK_SHARE * len(task_words):
        return False
    if _COMPLETION.search(text):
        return True
    # Else the task's own verb, in the past: "rotate the Stripe keys" → "Stripe keys rotated".
    verbs = {term for word in _WORD.findall(core.lower())[:3] for term in analyze(word)}
    done = {term for word in _WORD.findall(text.lower()) if (past := _past(word)) for term in analyze(past)}
    if verbs & done:
        return True
    # Another verb that does it ("Got the dry cleaning" for "Pick up …"), in a report about the task
    # alone: "Got Ana's message about school" does not pick Ana up from school.
    done_as = {other for term in done for other in _DONE_AS.get(term, ())}
    return bool(verbs & done_as) and _about(text) - done <= task_words


def closed_tasks(
    text: str, speaker: str | None, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The open tasks among ``candidates`` that ``text``, said by ``speaker``, reports done."""
    if not reports_completion(text):
        return []
    return [candidate for candidate in candidates if closes(text, candidate, speaker)]

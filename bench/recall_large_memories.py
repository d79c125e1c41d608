"""What recall costs when files of a few hundred KB were remembered, each as one memory.

A project with ``--files`` file events of ``--chars`` characters each (sentences of words drawn,
seeded, from the texts of tests/data/paraphrase_tuning.json, the questions' words in a few of them)
and a few chat messages is remembered through ``RememberService`` against the emulator in this
process; then each question is recalled ``--rounds`` times through ``RecallService`` wired as the
recall function wires it (budget 300). Printed: the time per recall (median and max), the packed
items, and with ``--profile`` a cProfile of one round (top functions by cumulative time).

    PYTHONPATH=.:local .venv/bin/python bench/recall_large_memories.py [--files 3] [--chars 250000]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import re
import statistics
import time
from pathlib import Path

from bench.common import local_tables, machine, progress
from kaibo_core.adapters.dynamodb_events import DynamoEventLocator, DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.api.mapping import new_events, recall_query
from kaibo_core.api.models import RecallRequest, RememberRequest
from kaibo_core.core.ids import project_id
from kaibo_core.core.models.recall import RecallAnswer
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.recall import RecallService
from kaibo_core.services.remember import RememberService

ROOT = Path(__file__).resolve().parent.parent
WORDS_FROM = ROOT / "tests" / "data" / "paraphrase_tuning.json"
BUDGET = 300
QUESTIONS = (
    "When is the release review meeting?",
    "What did the vendor contract say about the payment terms?",
    "Which database migration caused the outage?",
    "security audit license policy",
)
#: The questions' words, each in about one sentence of a file in this many.
QUESTION_WORD_SHARE = 0.01


def vocabulary() -> list[str]:
    text = WORDS_FROM.read_text(encoding="utf-8")
    return sorted({word.lower() for word in re.findall(r"[A-Za-z]{3,}", text)})


def file_text(rng: random.Random, words: list[str], question_words: list[str], chars: int) -> str:
    """Sentences of 8-22 words, most on a line of their own paragraph, up to ``chars`` characters."""
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = [rng.choice(words) for _ in range(rng.randint(8, 22))]
        if rng.random() < QUESTION_WORD_SHARE * 10:
            sentence[rng.randrange(len(sentence))] = rng.choice(question_words)
        part = " ".join(sentence).capitalize() + rng.choice(".....?") + (" " if rng.random() < 0.85 else "\n")
        parts.append(part)
        size += len(part)
    return "".join(parts)[:chars]


def remember(service: RememberService, project: ProjectId, body: dict[str, object]) -> None:
    request = RememberRequest.model_validate(body)
    outcome = service.remember(project, request.stream, new_events(request))
    if outcome.index_failures:
        raise RuntimeError(f"indexing failed: {outcome.index_failures!r}")


def recall(service: RecallService, project: ProjectId, question: str) -> RecallAnswer:
    answer, _ = service.recall(
        project, recall_query(RecallRequest.model_validate({"question": question, "budget": BUDGET}))
    )
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--chars", type=int, default=250_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path, help="the packed items of the last round (form, tokens, text)")
    args = parser.parse_args()
    rng = random.Random(7)
    words = vocabulary()
    question_words = sorted({w.lower() for q in QUESTIONS for w in re.findall(r"[A-Za-z]{4,}", q)})
    with local_tables() as local:
        client, tables = local.client, local.tables
        memories = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        remembering = RememberService(
            DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]), memories=memories
        )
        project = ProjectId(project_id())
        progress(f"remembering {args.files} files of {args.chars:,} characters ...")
        for number in range(args.files):
            content = file_text(rng, words, question_words, args.chars)
            event = {
                "idempotencyKey": f"file-{number}",
                "kind": "file",
                "payload": {"path": f"notes/{number}.md", "content": content},
            }
            remember(remembering, project, {"stream": "files", "events": [event]})
        chat = "The release review meeting moved to the vendor's office on Thursday."
        message = {"idempotencyKey": "m1", "kind": "message", "payload": {"role": "user", "text": chat}}
        remember(remembering, project, {"stream": "chat", "events": [message]})
        service = RecallService(
            DynamoTermIndex(client, tables["TermIndexTable"]),
            memories,
            events=DynamoEventLocator(client, tables["EventsTable"]),
        )
        for question in QUESTIONS:  # warm-up: connections, caches, the stemmer
            recall(service, project, question)
        seconds: list[float] = []
        packed: dict[str, list[tuple[str, int, str]]] = {}
        for _ in range(args.rounds):
            for question in QUESTIONS:
                started = time.perf_counter()
                answer = recall(service, project, question)
                seconds.append(time.perf_counter() - started)
                packed[question] = [(item.form, item.tokens, item.text) for item in answer.items]
        print(f"machine: {machine()}")
        print(
            f"{args.files} files of {args.chars:,} characters, {len(seconds)} recalls at budget {BUDGET}: "
            f"median {statistics.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms"
        )
        for question, items in packed.items():
            print(f"  {question!r}: {[(form, tokens, len(text)) for form, tokens, text in items]}")
        if args.json is not None:
            args.json.write_text(json.dumps(packed, indent=1, sort_keys=True), encoding="utf-8")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for question in QUESTIONS:
                recall(service, project, question)
            profile.disable()
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(25)
            print(out.getvalue())


if __name__ == "__main__":
    main()

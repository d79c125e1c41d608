"""What one forget by ``query`` or ``subject`` reads from DynamoDB: driven by the rarest of its
stems, not by how many memories hold the others, and the text of the memories it takes, not of
every candidate. A selector whose rarest stem is held by too many memories is refused before any
memory is read. Counted on the emulator through botocore's own events, as in
test_recall_reads.py, with the real ``DynamoForgetStore``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.kms_secrets import KmsSaltCipher
from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.forgetting import ForgetRequest
from kaibo_core.core.indexing import DF_SHARDS
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.forgetting import ForgetService
from tests.conftest import AwsStack, emulator_client
from tests.integration.test_memory_index import memory, new_project
from tests.integration.test_recall_reads import Reads

NOW = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
#: A long text, as a memory made from a file may hold (the finding: hundreds of KB each). Few
#: distinct words: the length is what counts here, and every distinct word would be one more
#: posting per memory in the session's shared index table (which every later test scans).
FILLER = " ".join(["loose pebble on the gravel path"] * 160)


class ReadsWithText(Reads):
    """``Reads``, and how many memory items were answered with their text."""

    texts: int = 0

    def __call__(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        super().__call__(model, parsed, context)
        if model.name == "BatchGetItem":
            for items in parsed.get("Responses", {}).values():
                self.texts += sum(1 for item in items if "content" in item)


@pytest.fixture
def client(aws_stack: AwsStack) -> Iterator[Any]:
    """A client of its own: the hooks below see only this test's requests."""
    own = emulator_client("dynamodb", aws_stack.endpoint_url)
    yield own
    own.close()


def index(aws_stack: AwsStack, project: ProjectId, first: int, texts: list[str], **fields: Any) -> list[str]:
    store = DynamoMemoryStore(
        aws_stack.dynamodb, aws_stack.tables["MemoriesTable"], aws_stack.tables["TermIndexTable"]
    )
    made = []
    for number, text in enumerate(texts, start=first):
        record = memory(project, number, text, status="active", **fields)
        store.index_new(record)
        made.append(record.id)
    return made


def dry_run(
    aws_stack: AwsStack,
    client: Any,
    project: ProjectId,
    selector: dict[str, str],
    *,
    max_candidates: int | None = None,
    reads: ReadsWithText | None = None,
) -> tuple[list[str], ReadsWithText]:
    """One dry run through ``client``: the ids of its set, and what it read (into ``reads``)."""
    tables = aws_stack.tables
    store = DynamoForgetStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
    ledger = DynamoLedgerStore(client, tables["LedgerTable"])
    service = ForgetService(
        store,
        DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]),
        ledger,
        timedelta(days=1),
        lambda: NOW,
        finish=lambda entry: None,
        salts=KmsSaltCipher(emulator_client("kms", aws_stack.endpoint_url), aws_stack.kms_key_id),
        **({} if max_candidates is None else {"max_candidates": max_candidates}),
    )
    reads = ReadsWithText() if reads is None else reads
    client.meta.events.register("provide-client-params.dynamodb.*", Reads.note_table)
    client.meta.events.register("after-call.dynamodb.*", reads)
    try:
        outcome = service.forget(project, ForgetRequest(reason="r", dry_run=True, **selector))  # type: ignore[arg-type]
    finally:
        client.meta.events.unregister("after-call.dynamodb.*", reads)
        client.meta.events.unregister("provide-client-params.dynamodb.*", Reads.note_table)
    return sorted(member.memory.id for member in outcome.found.members), reads


def test_given_many_more_memories_holding_a_frequent_word_then_a_subject_dry_run_reads_as_much(
    aws_stack: AwsStack, client: Any
) -> None:
    project = new_project()
    hers = index(aws_stack, project, 1, ["Zephyrine window seat booked"] * 3, subject="zephyrine window")
    index(aws_stack, project, 10, ["Zephyrine likes the garden"], subject="zephyrine")
    index(aws_stack, project, 20, [f"Window {n} cleaned on Friday" for n in range(5)])
    few_ids, few = dry_run(aws_stack, client, project, {"subject": "Zephyrine Window"})

    index(aws_stack, project, 100, [f"Window {n} cleaned on Friday. {FILLER}" for n in range(120)])
    many_ids, many = dry_run(aws_stack, client, project, {"subject": "Zephyrine Window"})

    assert few_ids == many_ids == hers
    assert many.requests == few.requests
    index_table, memories_table = aws_stack.tables["TermIndexTable"], aws_stack.tables["MemoriesTable"]
    # The frequent word's df shards are the one thing that may grow: at most DF_SHARDS items.
    assert 0 <= many.items[index_table] - few.items[index_table] <= DF_SHARDS
    assert many.items[memories_table] == few.items[memories_table]
    assert many.texts == len(hers)  # the candidate about Zephyrine alone is read without its text


def test_given_many_long_memories_mentioning_a_name_then_a_subject_dry_run_reads_the_text_of_hers_only(
    aws_stack: AwsStack, client: Any
) -> None:
    project = new_project()
    hers = index(aws_stack, project, 1, [f"Zephyrine moved to Lyon. {FILLER}"] * 2, subject="zephyrine")
    index(aws_stack, project, 10, [f"Call {n} with Zephyrine. {FILLER}" for n in range(40)], subject="call")

    ids, reads = dry_run(aws_stack, client, project, {"subject": "Zephyrine"})

    assert ids == hers
    assert reads.texts == len(hers)


def test_given_a_query_whose_other_word_is_too_frequent_to_read_then_it_is_checked_on_the_candidates(
    aws_stack: AwsStack, client: Any
) -> None:
    project = new_project()
    taken = index(aws_stack, project, 1, ["Zephyrine window seat", "Window by Zephyrine"])
    index(aws_stack, project, 10, ["Zephyrine garden"])
    index(aws_stack, project, 20, [f"Window {n} cleaned" for n in range(12)])

    ids, reads = dry_run(aws_stack, client, project, {"query": "zephyrine window"})

    assert ids == taken
    # The rare word's postings (3), both words' df shards; none of the frequent word's postings.
    assert reads.items[aws_stack.tables["TermIndexTable"]] <= 3 + 2 * DF_SHARDS
    assert reads.texts == 3


@pytest.mark.parametrize("selector", [{"query": "zephyrine window"}, {"subject": "Zephyrine Window"}])
def test_given_a_selector_whose_rarest_word_too_many_memories_hold_then_refused_before_reading_them(
    aws_stack: AwsStack, client: Any, selector: dict[str, str]
) -> None:
    project = new_project()
    index(aws_stack, project, 1, [f"Zephyrine window {n}" for n in range(6)], subject="zephyrine window")

    read = ReadsWithText()
    with pytest.raises(UnprocessableError) as refused:
        dry_run(aws_stack, client, project, selector, max_candidates=5, reads=read)
    assert refused.value.code == "forget_selector_too_broad"
    assert refused.value.details["maxCandidates"] == 5
    assert read.items[aws_stack.tables["MemoriesTable"]] == 0
    assert read.items[aws_stack.tables["TermIndexTable"]] <= 2 * DF_SHARDS  # two words' df shards

    # At the bound it resolves (and the set limit, not this one, speaks for larger sets).
    ids, reads = dry_run(aws_stack, client, project, selector, max_candidates=6)
    assert len(ids) == 6
    assert reads.texts == 6

"""The one module that builds DynamoDB keys. Every key starts with the project.

Handlers never build keys: they get a ``ProjectId`` from the authorizer context
(kaibo_core.core.tenancy) and pass it to stores, which call these functions. Project
ids and stream names never contain ``#``, so ``project#rest`` is unambiguous.
"""

from __future__ import annotations

from typing import NewType

ProjectId = NewType("ProjectId", str)

#: The stream head lives in the stream's own partition, before seq 1.
HEAD_SEQ = 0


def events_pk(project: ProjectId, stream: str) -> str:
    return f"{project}#{stream}"


def event_key(project: ProjectId, stream: str, seq: int) -> dict[str, str | int]:
    return {"pk": events_pk(project, stream), "seq": seq}


def head_key(project: ProjectId, stream: str) -> dict[str, str | int]:
    return event_key(project, stream, HEAD_SEQ)


def stream_heads_partition(project: ProjectId) -> str:
    """Partition key of the StreamHeads index (sparse: only head items carry it)."""
    return project


def idempotency_key(project: ProjectId, key: str) -> dict[str, str]:
    return {"pk": f"{project}#{key}"}


def project_key(project: ProjectId) -> dict[str, str]:
    return {"pk": f"project#{project}"}


#: The partition key of every API key's item begins so (a scan tells keys from projects by it).
API_KEY_PREFIX = "apikey#"


def api_key_key(key_id: str) -> dict[str, str]:
    """API keys are looked up before the project is known: keyed by key id alone."""
    return {"pk": f"{API_KEY_PREFIX}{key_id}"}


# --- memories and the term index -------------------------------------------------------------


def memory_key(project: ProjectId, memory_id: str) -> dict[str, str]:
    return {"pk": f"{project}#{memory_id}"}


def postings_pk(project: ProjectId, side: str, term: str) -> str:
    """One partition per (project, side, term); ``side`` is ``c`` (current) or ``h`` (history).

    The term comes last: it may contain ``#`` (``c#``), the project and side never do.
    """
    return f"{project}#t{side}#{term}"


def posting_key(project: ProjectId, side: str, term: str, impact: int, memory_id: str) -> dict[str, str]:
    """Sort key ``<impact, 5 digits>#<memory id>``: a descending Query reads the strongest first."""
    return {"pk": postings_pk(project, side, term), "sk": f"{impact:05d}#{memory_id}"}


#: Document-frequency shards sort after every posting (``~`` > digits), in the term's
#: current-side partition: a descending Query reads them first, in the same request.
DF_SORT_PREFIX = "~df#"


def doc_freq_key(project: ProjectId, term: str, shard: int) -> dict[str, str]:
    return {"pk": postings_pk(project, "c", term), "sk": f"{DF_SORT_PREFIX}{shard:02d}"}


#: Sort key of an index marker: the only item of its partition.
INDEX_MARKER_SORT_KEY = "marker"


def index_marker_key(project: ProjectId, memory_id: str) -> dict[str, str]:
    """A memory whose index takes several transactions: the marker its first one writes (the
    memory and the side of its postings), so that forget's purge finds the postings of an index
    that never finished (the memory item is written by the last one)."""
    return {"pk": f"{project}#ix#{memory_id}", "sk": INDEX_MARKER_SORT_KEY}


def corpus_pk(project: ProjectId) -> str:
    return f"{project}#corpus"


def corpus_key(project: ProjectId, shard: int) -> dict[str, str]:
    return {"pk": corpus_pk(project), "sk": f"{shard:02d}"}


# --- structuring jobs -------------------------------------------------------------------------


def job_key(project: ProjectId, job_id: str) -> dict[str, str]:
    return {"pk": f"{project}#{job_id}"}


#: Unfinished jobs are listed by a sparse index spread over this many partitions (the
#: sweeper reads each), so that no single partition takes every remember's write.
PENDING_JOB_SHARDS = 4


def pending_jobs_partition(shard: int) -> str:
    """Partition key of the PendingJobs index (only jobs not yet done or failed carry it)."""
    return f"pending#{shard}"


def pending_job_sort_key(since: str, project: ProjectId, job_id: str) -> str:
    """Sort key of an unfinished job in the PendingJobs index: oldest first, across projects."""
    return f"{since}#{project}#{job_id}"


def parse_pending_job_sort_key(sort_key: str) -> tuple[str, ProjectId, str]:
    """``(since, project, job id)`` of a ``pending_job_sort_key``."""
    since, project, job_id = sort_key.rsplit("#", 2)
    return since, ProjectId(project), job_id


def project_prefix(project: ProjectId) -> str:
    """What every key of ``project`` starts with (a scan of one project's items filters on it)."""
    return f"{project}#"


def project_of_key(pk: str) -> ProjectId:
    """The project a partition key belongs to."""
    return ProjectId(pk.split("#", 1)[0])


# --- the deletion ledger ----------------------------------------------------------------------

#: Entry sort keys are the seq in this many digits, so that string order is seq order.
LEDGER_SEQ_DIGITS = 12
#: The head sorts after every entry (``h`` > digits): a Query between two padded seqs skips it.
LEDGER_HEAD_SORT_KEY = "head"
RECEIPT_SORT_KEY = "r"


def ledger_pk(project: ProjectId) -> str:
    """One partition per project holds its ledger entries and their head."""
    return f"{project}#ledger"


def ledger_sort_key(seq: int) -> str:
    if not 0 < seq < 10**LEDGER_SEQ_DIGITS:
        raise ValueError(f"ledger seq {seq} outside 1..{10**LEDGER_SEQ_DIGITS - 1}")
    return f"{seq:0{LEDGER_SEQ_DIGITS}d}"


def ledger_entry_key(project: ProjectId, seq: int) -> dict[str, str]:
    return {"pk": ledger_pk(project), "sk": ledger_sort_key(seq)}


def ledger_head_key(project: ProjectId) -> dict[str, str]:
    return {"pk": ledger_pk(project), "sk": LEDGER_HEAD_SORT_KEY}


def receipt_key(project: ProjectId, receipt_id: str) -> dict[str, str]:
    """Receipt id → seq pointer; the receipt id comes last (the project never contains ``#``)."""
    return {"pk": f"{project}#receipt#{receipt_id}", "sk": RECEIPT_SORT_KEY}


#: Sort key of a forget's idempotency record (the only item of its partition).
FORGET_KEY_SORT_KEY = "k"


def forget_key_key(project: ProjectId, idempotency_key: str) -> dict[str, str]:
    """A forget's idempotency key, in the ledger table: ``forgetkey`` keeps it apart from the
    ledger's and receipts' partitions and from remember's keys (another table). The key comes
    last: it may contain ``#``."""
    return {"pk": f"{project}#forgetkey#{idempotency_key}", "sk": FORGET_KEY_SORT_KEY}


# --- webhooks ---------------------------------------------------------------------------------

#: The outbox's entries share the ledger's zero-padded sort keys; its head sorts after them.
OUTBOX_HEAD_SORT_KEY = "head"


def webhooks_pk(project: ProjectId) -> str:
    """One partition per project holds its webhook subscriptions (a handful)."""
    return f"{project}#webhooks"


def webhook_key(project: ProjectId, webhook_id: str) -> dict[str, str]:
    return {"pk": webhooks_pk(project), "sk": f"wh#{webhook_id}"}


def webhook_test_log_key(project: ProjectId) -> dict[str, str]:
    """When the project's last test events were sent, whichever webhooks they went to (outside
    the ``wh#`` range the subscriptions are listed from)."""
    return {"pk": webhooks_pk(project), "sk": "tests"}


def outbox_pk(project: ProjectId) -> str:
    """The project's committed webhook events, by seq, and their head (next seq, subscribers)."""
    return f"{project}#outbox"


def outbox_event_key(project: ProjectId, seq: int) -> dict[str, str]:
    return {"pk": outbox_pk(project), "sk": ledger_sort_key(seq)}


def outbox_head_key(project: ProjectId) -> dict[str, str]:
    return {"pk": outbox_pk(project), "sk": OUTBOX_HEAD_SORT_KEY}


def work_list_sort_key(at: str, project: ProjectId, seq: int) -> str:
    """Sort key in a sparse index of work across projects, oldest first: the ledger's entries not
    applied (``applySk``) or due to purge (``dueSk``), the outbox events not relayed (``relaySk``)."""
    return f"{at}#{project}#{ledger_sort_key(seq)}"


def parse_work_list_sort_key(sort_key: str) -> tuple[ProjectId, int]:
    """``(project, seq)`` of a ``work_list_sort_key``."""
    _at, project, seq = sort_key.rsplit("#", 2)
    return ProjectId(project), int(seq)


def deliveries_pk(project: ProjectId, webhook_id: str) -> str:
    """One webhook's delivery states (``e#<seq>``) and attempt log (``a#<time>#…``)."""
    return f"{project}#wh#{webhook_id}#deliveries"


def delivery_state_key(project: ProjectId, webhook_id: str, seq: int) -> dict[str, str]:
    return {"pk": deliveries_pk(project, webhook_id), "sk": f"e#{ledger_sort_key(seq)}"}


def delivery_attempt_key(
    project: ProjectId, webhook_id: str, at: str, seq: int, attempt: int
) -> dict[str, str]:
    return {"pk": deliveries_pk(project, webhook_id), "sk": f"a#{at}#{ledger_sort_key(seq)}#{attempt:02d}"}

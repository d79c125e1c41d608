"""HTTP API models (in and out): the public contract of API.md, camelCase on the wire.

Kept apart from stored items (adapters) and domain records (services): the
wire format may gain fields without the store changing, and vice versa.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)

from kaibo_core.core.forgetting import DEFAULT_MAX_MEMORIES as DEFAULT_FORGET_MEMORIES
from kaibo_core.core.forgetting import MAX_MEMORIES_LIMIT as MAX_FORGET_MEMORIES
from kaibo_core.core.limits import (
    DEFAULT_RECALL_BUDGET,
    MAX_EVENTS_PAGE,
    MAX_EVENTS_PER_BATCH,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_QUESTION_CHARS,
    MAX_RECALL_BUDGET,
    MAX_RECALL_STREAMS,
    MAX_STREAMS_PAGE,
    STREAM_NAME_PATTERN,
)
from kaibo_core.core.models.keys import KeyScope, Scope


def _utf8_encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("text contains a lone surrogate and has no UTF-8 form") from exc
    return text


StreamName = Annotated[
    str,
    StringConstraints(pattern=STREAM_NAME_PATTERN),
    Field(
        description="1-128 characters: letters, digits, '.', '_', ':', '-'; starting with a letter or digit. "
        "Never purged: keep personal data out of stream names.",
        examples=["chat-42"],
    ),
]
IdempotencyKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LENGTH, pattern=r"^[^\x00-\x1f\x7f]+$"),
    AfterValidator(_utf8_encodable),
    Field(
        description="Unique per project. Never purged: keep personal data out of it.", examples=["msg-1001"]
    ),
]


#: A number in a query string (``limit``, ``fromSeq``): plain decimal digits. Parsed from text, but
#: not as leniently as ``int()``, which also takes " 5", "+5", "5.0" and "1_000".
_DECIMAL_DIGITS = re.compile(r"[0-9]{1,16}")
#: The largest ``fromSeq``: a sequence number is a JSON integer, exact up to 2^53 - 1 (and a
#: DynamoDB number holds at most 38 digits: a longer one would be a 500, not a 422).
MAX_QUERY_SEQ: Final = 2**53 - 1


def _decimal_digits(value: object) -> object:
    if isinstance(value, str) and not _DECIMAL_DIGITS.fullmatch(value):
        raise ValueError("must be written in decimal digits only (at most 16), e.g. 500")
    return value


# Each number with its bounds on the int itself, inside the digits check. Bounds given around the
# check (``Query(ge=1, le=1000)`` on ``Annotated[int, BeforeValidator(...)]``) are enforced too, but
# pydantic then writes them into the JSON Schema as "ge"/"le", which are no JSON Schema keywords:
# /openapi.json declared no bounds at all (found by fuzzing it, tests/integration/test_fuzz_openapi.py).
QuerySeq = Annotated[int, Field(ge=1, le=MAX_QUERY_SEQ), BeforeValidator(_decimal_digits)]
StreamsPageLimit = Annotated[int, Field(ge=1, le=MAX_STREAMS_PAGE), BeforeValidator(_decimal_digits)]
EventsPageLimit = Annotated[int, Field(ge=1, le=MAX_EVENTS_PAGE), BeforeValidator(_decimal_digits)]
#: ``GET /v1/webhooks/{id}/deliveries?limit=``: the newest attempts, at most 100.
DeliveriesPageLimit = Annotated[int, Field(ge=1, le=100), BeforeValidator(_decimal_digits)]


class WireModel(BaseModel):
    # defer_build: a function builds only the validators of the models it uses, on first use
    # (cold start), instead of every model of the API at import. Empty defaults are plain values
    # (pydantic copies them for each instance), not default_factory=list: for a builtin factory,
    # pydantic parses the builtin's text signature with tokenize (~8 ms of the first request).
    model_config = ConfigDict(populate_by_name=True, extra="forbid", defer_build=True)


class RequestModel(WireModel):
    """A request body: strict types. ``"wait": "yes"``, ``"budget": "100"`` or ``"budget": true``
    are refused (422), never coerced into what the caller did not send."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", defer_build=True, strict=True)


class SparseWireModel(WireModel):
    """A model whose optional fields are left out when None (API.md's ``field?``)."""

    # No return annotation: pydantic would take it as the serialized schema, and the OpenAPI
    # document would describe every such model as an open object instead of its fields.
    @model_serializer(mode="wrap")
    def _omit_none(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data: dict[str, Any] = handler(self)
        return {name: value for name, value in data.items() if value is not None or name in _KEEP_NULL}


#: Fields that are null rather than absent (``validTo: null`` means "still valid").
_KEEP_NULL = frozenset({"validTo"})


class PayloadModel(BaseModel):
    """Per-kind payload schemas: the named fields are checked, other fields are kept and hashed."""

    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)


class MessagePayload(PayloadModel):
    role: str = Field(min_length=1, max_length=64, examples=["user"])
    text: str
    name: str | None = None


class ToolCallPayload(PayloadModel):
    tool: str = Field(min_length=1, max_length=256)
    input: Any = None
    output: Any = None
    status: str | None = None


class FilePayload(PayloadModel):
    path: str = Field(min_length=1, max_length=1024)
    content: str
    mediaType: str | None = None  # noqa: N815 - wire name


class CommitPayload(PayloadModel):
    message: str
    sha: str | None = None
    author: str | None = None
    repository: str | None = None


class _EventInBase(RequestModel):
    idempotencyKey: IdempotencyKey  # noqa: N815
    occurredAt: str | None = Field(  # noqa: N815
        default=None,
        description="RFC 3339 with an offset; default: when Kaibo received it. At most 5 minutes ahead.",
        examples=["2026-06-02T09:30:00Z"],
    )
    timeZone: str | None = Field(default=None, max_length=64, examples=["Europe/Berlin"])  # noqa: N815
    supersedes: list[str] = Field(default=[], max_length=20)
    cancels: list[str] = Field(default=[], max_length=20)


class MessageEvent(_EventInBase):
    kind: Literal["message"]
    payload: MessagePayload


class ToolCallEvent(_EventInBase):
    kind: Literal["tool_call"]
    payload: ToolCallPayload


class FileEvent(_EventInBase):
    kind: Literal["file"]
    payload: FilePayload


class CommitEvent(_EventInBase):
    kind: Literal["commit"]
    payload: CommitPayload


EventIn = Annotated[MessageEvent | ToolCallEvent | FileEvent | CommitEvent, Field(discriminator="kind")]
EventKind = Literal["message", "tool_call", "file", "commit"]
EVENT_KINDS: Final = frozenset(get_args(EventKind))


class RememberRequest(RequestModel):
    stream: StreamName
    events: list[EventIn] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)
    wait: bool = False


class EventReceipt(WireModel):
    id: str
    stream: str
    seq: int
    hash: str
    prevHash: str  # noqa: N815
    idempotencyKey: str  # noqa: N815
    replayed: bool


class RememberResponse(WireModel):
    jobId: str | None = Field(  # noqa: N815
        default=None,
        description="The structuring job of the appended events (GET /v1/jobs/{jobId}); for a batch "
        "that only replayed, the original events' job.",
    )
    events: list[EventReceipt]
    memories: list[ProvisionalMemoryOut] = Field(
        default=[],
        description="Provisional memories made from the events, searchable at once (replaced later by "
        "structured ones). With wait: true and a 200, the structured memories.",
    )
    job: JobOut | None = Field(default=None, description="With wait: true, the job as it ended or stands.")


class StoredEventOut(SparseWireModel):
    """An event as served for verification. Only the header fields and ``hash`` are proof.
    ``payload`` and ``salt`` are absent once the event is purged (API.md)."""

    v: int
    projectId: str  # noqa: N815
    stream: str
    seq: int
    id: str
    kind: str
    idempotencyKey: str  # noqa: N815
    occurredAt: str  # noqa: N815
    receivedAt: str  # noqa: N815
    payloadDigest: str  # noqa: N815
    hash: str
    prevHash: str  # noqa: N815
    payload: dict[str, Any] | None = None
    salt: str | None = None


class EventsPage(SparseWireModel):
    events: list[StoredEventOut]
    nextFromSeq: int | None = None  # noqa: N815 - absent on the last page


class StreamHeadOut(WireModel):
    stream: str
    seq: int
    hash: str


class StreamsPage(WireModel):
    streams: list[StreamHeadOut]
    nextCursor: str | None = None  # noqa: N815


class CreateProjectRequest(RequestModel):
    name: str = Field(min_length=1, max_length=128)
    timeZone: str | None = Field(  # noqa: N815
        default=None,
        max_length=64,
        description="IANA name: where this project's events without a timeZone resolve 'tomorrow' "
        "(default UTC).",
        examples=["Europe/Berlin"],
    )


class CreateProjectResponse(WireModel):
    projectId: str  # noqa: N815
    keyId: str  # noqa: N815
    apiKey: str = Field(description="Shown once; Kaibo stores only a salted hash.")  # noqa: N815
    scopes: list[Scope]
    timeZone: str = "UTC"  # noqa: N815


def _default_scopes() -> list[KeyScope]:
    """Another key of a project can read and write; erasing is granted only when asked for."""
    return ["read", "write"]


def _no_admin_scope(scopes: object) -> object:
    if isinstance(scopes, list) and "admin" in scopes:
        raise ValueError(
            "admin cannot be granted to a project key: the admin routes take the deployment's admin key only"
        )
    return scopes


class CreateKeyRequest(RequestModel):
    scopes: Annotated[list[KeyScope], BeforeValidator(_no_admin_scope)] = Field(
        default_factory=_default_scopes,
        min_length=1,
        description="read, write and/or forget; default read and write (forget only when asked for). "
        "A project key cannot be an admin key: admin routes take the deployment's admin key only.",
    )


class CreateKeyResponse(WireModel):
    keyId: str  # noqa: N815
    apiKey: str  # noqa: N815
    scopes: list[Scope]


class ErrorBody(WireModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default={})


class ErrorResponse(WireModel):
    error: ErrorBody


# --- recall and memories ---------------------------------------------------------------------

MemoryTypeName = Literal["fact", "decision", "task", "preference", "procedure", "episode"]


class RecallRequest(RequestModel):
    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, examples=["When is the release target?"]
    )
    budget: int = Field(
        default=DEFAULT_RECALL_BUDGET,
        ge=1,
        le=MAX_RECALL_BUDGET,
        description="Tokens the items may take in all, counted by the documented conservative rule.",
    )
    asOf: str | None = Field(  # noqa: N815
        default=None,
        description="RFC 3339 with an offset: answer from what was valid then. Default: now.",
        examples=["2026-07-01T00:00:00Z"],
    )
    streams: list[StreamName] | None = Field(default=None, min_length=1, max_length=MAX_RECALL_STREAMS)
    types: list[MemoryTypeName] | None = Field(default=None, min_length=1, max_length=6)
    includeSuperseded: bool = False  # noqa: N815


class Citation(WireModel):
    eventId: str  # noqa: N815
    stream: str
    seq: int
    hash: str


class RecallItem(SparseWireModel):
    memoryId: str  # noqa: N815
    type: str
    form: Literal["quote", "summary"]
    text: str
    validFrom: str  # noqa: N815
    validTo: str | None  # noqa: N815
    confidence: float
    score: float
    tokens: int
    citations: list[Citation]
    #: A newer item of this answer that answers the question as this one does: this one is older.
    olderThan: str | None = None  # noqa: N815
    #: The earlier version (superseded or canceled by this memory) that the question's words matched.
    foundVia: str | None = None  # noqa: N815


class Abstain(SparseWireModel):
    abstained: bool
    reason: str | None = None
    message: str | None = None


class RecallResponse(WireModel):
    items: list[RecallItem]
    usedTokens: int  # noqa: N815
    budget: int
    asOf: str  # noqa: N815
    abstain: Abstain


class MemoryOut(SparseWireModel):
    id: str
    status: str
    type: str
    content: str | None = None
    validFrom: str  # noqa: N815
    validTo: str | None  # noqa: N815
    confidence: float
    stream: str
    sourceEventIds: list[str]  # noqa: N815
    sourceEvents: list[Citation]  # noqa: N815
    supersedes: list[str]
    supersededBy: list[str]  # noqa: N815
    replacedBy: list[str]  # noqa: N815
    createdAt: str  # noqa: N815
    subject: str | None = None
    tags: list[str] | None = None
    replaces: str | None = Field(
        default=None, description="A structured memory: the provisional one it replaced."
    )


class ExplainRequest(RequestModel):
    memoryId: str = Field(min_length=1, max_length=128, examples=["mem_01JZ..."])  # noqa: N815


class ExplainVersion(SparseWireModel):
    memoryId: str  # noqa: N815
    status: str
    type: str
    content: str | None = None
    validFrom: str  # noqa: N815
    validTo: str | None  # noqa: N815
    confidence: float
    supersedes: list[str]
    supersededBy: list[str]  # noqa: N815
    replacedBy: list[str]  # noqa: N815
    replaces: str | None = None
    sourceEvents: list[Citation]  # noqa: N815


class ExplainResponse(WireModel):
    memoryId: str  # noqa: N815
    chain: list[ExplainVersion] = Field(description="Oldest first; the last entry is the asked memory.")


class JobOut(SparseWireModel):
    jobId: str  # noqa: N815
    status: Literal["queued", "structuring", "done", "failed"]
    eventIds: list[str]  # noqa: N815
    memoryIds: list[str]  # noqa: N815
    createdAt: str  # noqa: N815
    updatedAt: str  # noqa: N815
    error: str | None = None


class ProvisionalMemoryOut(SparseWireModel):
    id: str
    status: str = Field(
        description="provisional for a new event; for a replayed key, the memory's status now (replaced "
        "once structured, tombstoned or purged once forgotten)"
    )
    type: str
    content: str | None = Field(default=None, description="absent once the memory is forgotten")


# --- forget, the deletion ledger, receipts ------------------------------------------------------------


class ForgetRequest(RequestModel):
    """Exactly one selector (``memoryId``, ``query``, ``stream`` or ``subject``), and why."""

    memoryId: str | None = Field(default=None, min_length=1, max_length=128, examples=["mem_01JZ..."])  # noqa: N815
    query: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="Memories holding every stem of the query (not any), in any status but forgotten.",
        examples=["release target"],
    )
    stream: StreamName | None = None
    subject: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="Memories whose subject (as GET /v1/memories/{id} shows it) is this one, compared "
        "after Unicode NFKC and case folding with whitespace runs as one space, in any status but "
        "forgotten. Found through the term index: a memory whose text lacks its subject's words may "
        "not be found (docs/forget.md).",
        examples=["release target"],
    )
    reason: str = Field(
        min_length=1,
        max_length=2000,
        description="Why (required). Stored only as sha256(reasonSalt || reason); the salt is returned once.",
    )
    dryRun: bool = Field(default=False, description="Return the set and a previewToken; change nothing.")  # noqa: N815
    previewToken: str | None = Field(  # noqa: N815
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="From a dry run: the call is refused (409 preview_changed) if the set changed since.",
    )
    maxMemories: int | None = Field(  # noqa: N815
        default=None,
        ge=1,
        le=MAX_FORGET_MEMORIES,
        description=f"Allow a set this large (default limit {DEFAULT_FORGET_MEMORIES}).",
    )
    idempotencyKey: IdempotencyKey | None = Field(  # noqa: N815
        default=None,
        description="A real forget under a key used in this project in the last 24 hours answers that "
        "forget's answer again (replayed: true), with no second ledger entry; another request under "
        "it is refused (409 idempotency_key_reused). Not with dryRun. Apart from remember's keys. "
        "Never purged: keep personal data out of it.",
        examples=["erase-2026-06-02-1"],
    )

    @model_validator(mode="after")
    def _one_selector(self) -> ForgetRequest:
        selectors = ("memoryId", "query", "stream", "subject")
        chosen = [name for name in selectors if getattr(self, name) is not None]
        if len(chosen) != 1:
            raise ValueError("give exactly one of memoryId, query, stream, subject")
        return self


class ForgottenMemoryOut(SparseWireModel):
    id: str
    status: str = Field(description="The status before this forget (a dry run: its status now).")
    type: str
    content: str | None = Field(
        default=None,
        description="Shown by a dry run only, to check the set, and only to a key with the read scope.",
    )
    why: Literal["match", "older_version", "same_source_event"]


class ReceiptOut(WireModel):
    id: str
    ledgerSeq: int  # noqa: N815
    hash: str
    prevHash: str  # noqa: N815
    v: int
    memoryIds: list[str]  # noqa: N815
    eventIds: list[str]  # noqa: N815
    reasonDigest: str  # noqa: N815
    tombstonedAt: str  # noqa: N815
    purgeAfter: str  # noqa: N815


class ForgetResponse(SparseWireModel):
    dryRun: bool  # noqa: N815
    previewToken: str  # noqa: N815
    memories: list[ForgottenMemoryOut]
    eventIds: list[str]  # noqa: N815
    receipt: ReceiptOut | None = None
    reasonSalt: str | None = Field(  # noqa: N815
        default=None,
        description="Shown once (and to a retry under the same idempotencyKey): with the reason, it "
        "reproduces the receipt's reasonDigest.",
    )
    replayed: bool | None = Field(
        default=None,
        description="With an idempotencyKey only: true if this answers an earlier forget under the key.",
    )


class LedgerPage(SparseWireModel):
    entries: list[ReceiptOut]
    nextFromSeq: int | None = None  # noqa: N815


class ReceiptStateOut(ReceiptOut, SparseWireModel):
    state: Literal["tombstoned", "purged"] = Field(
        description="tombstoned until the purge has finished the entry (after purgeAfter), then purged."
    )
    unlocatedEventIds: list[str] | None = Field(  # noqa: N815
        default=None,
        description="Only on a purged receipt whose entry was written before entries kept where their "
        "events are: the events it names that the purge found in no stream of the project, so no "
        "payload of theirs is stored (nothing to erase; nothing can be made from them).",
    )

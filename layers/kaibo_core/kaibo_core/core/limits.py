"""Documented maxima (docs/api.md "Limits"), each derived from the AWS limit it protects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: DynamoDB: one transaction holds at most 100 actions. remember writes, per
#: event, its idempotency key and the event item, plus the stream head and the job.
DYNAMODB_MAX_TRANSACTION_ACTIONS = 100
MAX_EVENTS_PER_BATCH = (DYNAMODB_MAX_TRANSACTION_ACTIONS - 2) // 2  # 49

#: DynamoDB: an item holds at most 400 KB; a transaction at most 4 MB.
DYNAMODB_MAX_ITEM_BYTES = 400 * 1024
DYNAMODB_MAX_TRANSACTION_BYTES = 4 * 1024 * 1024

#: A payload's canonical (RFC 8785) form, leaving room in the 400 KB item for the
#: header fields and future attributes.
MAX_PAYLOAD_BYTES = 256 * 1024

#: Lambda answers at most 6 MB; pages of events stop short of it.
MAX_RESPONSE_PAYLOAD_BYTES = 5 * 1024 * 1024

#: ``occurredAt`` may lead the server's clock by at most this much (clock skew).
MAX_OCCURRED_AT_LEAD = timedelta(minutes=5)
#: ... and lie no earlier than this: every date structuring derives from it ("the day after",
#: "next Friday") stays far inside what every component can represent and round-trip.
MIN_OCCURRED_AT = datetime(1900, 1, 1, tzinfo=UTC)

#: The JSON reader (every request body): nesting depth, and digits in one number literal
#: (an integer beyond ±(2^53−1) has no canonical form anyway; this bounds the parser's work).
MAX_JSON_DEPTH = 64
MAX_JSON_NUMBER_CHARS = 64

STREAM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
MAX_IDEMPOTENCY_KEY_LENGTH = 256

DEFAULT_EVENTS_PAGE = 500
MAX_EVENTS_PAGE = 1000
DEFAULT_STREAMS_PAGE = 500
MAX_STREAMS_PAGE = 1000

#: Optimistic appends that lose the race for a stream head retry this often.
MAX_APPEND_ATTEMPTS = 25

#: recall: the question's length, the token budget (default and maximum) and stream filters.
MAX_QUESTION_CHARS = 4000
DEFAULT_RECALL_BUDGET = 300
MAX_RECALL_BUDGET = 32_000
MAX_RECALL_STREAMS = 100

#: A DynamoDB transaction that lost a race without being refused (``TransactionInProgressException``:
#: the SDK's retry met its own first attempt still committing; a ``TransactionConflict``: another
#: transaction held one of its items) is sent again at most this many times in all, within this
#: many seconds, with full-jitter backoff from the base to the cap; then the request answers 429.
TRANSACTION_RACE_ATTEMPTS = 6
TRANSACTION_RACE_SECONDS = 2.0
TRANSACTION_RACE_BACKOFF_BASE_SECONDS = 0.02
TRANSACTION_RACE_BACKOFF_CAP_SECONDS = 0.5
#: What a 429 for such a race asks the caller to wait.
TRANSACTION_RACE_RETRY_AFTER_SECONDS = 1

#: Keys a BatchGetItem leaves unprocessed (a throttled table or partition) are asked again, in at
#: most this many rounds in all with full-jitter backoff from the base to the cap; then the request
#: answers ``429 table_busy`` with this Retry-After.
BATCH_GET_ROUNDS = 8
BATCH_GET_BACKOFF_BASE_SECONDS = 0.01
BATCH_GET_BACKOFF_CAP_SECONDS = 0.5
BATCH_GET_RETRY_AFTER_SECONDS = 1

#: What ``429 kms_busy`` asks the caller to wait: KMS throttled (or could not serve) an Encrypt or
#: Decrypt once the SDK's own retries gave up.
KMS_RETRY_AFTER_SECONDS = 1

#: Every retry loop of an invocation stops this long before the function's time runs out (or, for
#: an invocation shorter than 6 s, this fraction of its time): what is left writes the 429 answer,
#: or fails the job for SQS or EventBridge to retry (core/deadline.py).
DEADLINE_RESERVE_SECONDS = 1.5
DEADLINE_RESERVE_FRACTION = 0.25

#: ``POST /v1/webhooks/{id}/test`` sends at most one test event per webhook in this many seconds
#: (each one makes the service POST to the subscriber's URL); sooner: ``429 webhook_test_too_soon``.
WEBHOOK_TEST_INTERVAL_SECONDS = 10
#: ... and at most WEBHOOK_TESTS_PER_PROJECT test events per project in any
#: WEBHOOK_TESTS_WINDOW_SECONDS, whichever webhooks they went to (deleting and re-creating a
#: webhook, or adding several on one URL, does not add to it); more: ``429 webhook_tests_too_many``.
#: 10 a minute is more than anyone testing by hand sends, and holds a script that loops
#: create-test-delete (unlimited before) or tests 20 webhooks in turn (120 a minute) to about
#: one webhook's own rate (6 a minute).
WEBHOOK_TESTS_PER_PROJECT = 10
WEBHOOK_TESTS_WINDOW_SECONDS = 60

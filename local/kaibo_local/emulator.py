"""An AWS emulator for the local stack and the tests: moto's server, made to behave like DynamoDB
where Kaibo relies on it.

``start_emulator()`` serves moto (every service, in a background thread, the way
``moto.server.ThreadedMotoServer`` does) behind a WSGI wrapper, and installs the patches below.
Each exists because moto 5.2.5 differs from DynamoDB in a way our code can observe:

1. **DynamoDB requests are serialized** (``SerializedDynamoDBApp``). Real DynamoDB is linearizable
   per item; moto's threaded server runs requests concurrently on shared dicts, so two concurrent
   ``TransactWriteItems`` can both "win" the same condition (a lost update), and readers can hit
   ``dictionary changed size during iteration``. The wrapper holds one process-wide lock around
   every request whose ``X-Amz-Target`` starts with ``DynamoDB`` (DynamoDB and DynamoDB Streams),
   from reading the request body to producing the whole response body. Other services are never
   serialized: an SQS long poll must not stall DynamoDB.

2. **Transactions without a rollback copy** (``transact_write_items`` replaces
   ``DynamoDBBackend.transact_write_items``). moto applies each action as it goes and deep-copies
   every touched table beforehand so it can roll back: O(table size) time per transaction, and
   the copies' items stay referenced by moto's model tracker, so memory grows by a table per
   transaction. The replacement takes moto's steps in moto's order (check the action's
   condition, then write it with moto's own ``put_item`` / ``update_item`` / ``delete_item``, and
   record any failure as that action's reason), but before each write it keeps only what the
   write replaces: the stored item (copied if the write updates it in place) or the fact that
   there was none, and the length of the table's stream. If any action failed, it puts those back
   in reverse order, trims the streams, and cancels with moto's ``TransactionCanceledException``
   and the same positional reasons. Cost: O(size of the touched items). Nobody sees the writes
   that are undone, because requests are serialized (1.).

3. **DynamoDB's transaction limits** (``check_transaction_limits``), which moto does not all
   enforce: at most 100 actions, each Put item at most 400 KB (409,600 bytes of attribute names
   and values, sized as moto sizes them), the whole request at most 4 MB (Put items, keys and
   expression values), no item touched twice. They raise moto's ``MockValidationException``
   family, so clients get a ``ValidationException`` as from AWS. (moto itself refuses items over
   405,000 bytes when it builds them; that stricter check still applies.)

   Deliberate difference from moto: an entry holding two operations
   (``TransactWriteSingleOpException``) is refused with nothing written (moto leaves the entries
   before it applied).

4. **Pin check.** The replacement mirrors moto's function step by step (error types, messages,
   reason format). It is a ``kaibo_local.moto_speedups.MotoPatch``, like every change the emulator
   makes to moto: ``PATCHED_FUNCTION_SHA256`` is the hash of the source it replaced, and
   ``install_patches()`` refuses to patch a different one: when moto changes, re-read its
   ``transact_write_items`` and re-check the replacement before updating the hash.

5. **The backend looked up once per host name** (``HostCachingDispatcher``). moto's dispatcher
   lists its service directories on disk for every request, under a process-wide lock.

6. **moto sped up where Kaibo waits on it** (``kaibo_local.moto_speedups``, pinned the same way):
   a Query reads only its partition instead of sorting the whole table; Query, BatchGetItem and
   single-item read and write results are written with one ``json.dumps`` instead of moto's
   attribute-by-attribute serializer; an unconditional ``ADD`` of numbers (the term index's
   ``ADD df :one``) is applied without moto's tree validation; an item's size is counted once per
   attribute. Same items, pages, errors and documents as moto's (the bodies without optional
   spaces).

7. **Writes recorded** (``Emulator.record_writes``): with a recorder set, every DynamoDB request
   that answered 200 is handed to it, with its body, under the lock and before its answer leaves:
   how the local stack keeps its tables on disk (kaibo_local.durability). With a sync barrier set
   too, every DynamoDB request (answered 200 or not) calls it under the lock, and calls what it
   returns after the lock is released and before the answer leaves: the journal's group commit
   (the next request runs while this one's record is synced).

8. **Connections kept alive** (``KeepAliveRequestHandler``): moto's development server (werkzeug's)
   closed every connection after one answer, so each AWS call cost a TCP connection and a thread;
   here a client's connection serves its next request, answers go out with ``TCP_NODELAY``, and
   ``stop()`` closes the connections still open.

The local stack runs all this in a process of its own (kaibo_local.emulator_process).

In-process use: ``install_patches()`` also works under ``moto.mock_aws``; the replacement is only
atomic if callers do not run DynamoDB operations concurrently (hold ``dynamodb_lock()`` when you
do, e.g. when loading data straight into the backend while the server runs).
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from moto.core.model_instances import model_data
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    ItemSizeTooLarge,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer

from kaibo_local import moto_speedups
from kaibo_local.moto_speedups import MotoPatch, source_sha256

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "MAX_ITEM_BYTES",
    "MAX_TRANSACTION_ACTIONS",
    "MAX_TRANSACTION_BYTES",
    "MOTO_PATCHES",
    "PATCHED_FUNCTION_SHA256",
    "SERIALIZE_DYNAMODB",
    "TRANSACTION_TOO_LARGE_MESSAGE",
    "TRANSACT_WRITE_ITEMS",
    "Emulator",
    "HostCachingDispatcher",
    "SerializedDynamoDBApp",
    "SyncBarrier",
    "WriteRecorder",
    "check_transaction_limits",
    "dynamodb_lock",
    "install_patches",
    "is_dynamodb_request",
    "item_size",
    "original_transact_write_items",
    "source_sha256",
    "start_emulator",
    "transact_write_items",
    "uninstall_patches",
]

#: sha256 of ``inspect.getsource(DynamoDBBackend.transact_write_items)`` in moto 5.2.5.
PATCHED_FUNCTION_SHA256: Final = "81db2cb7d94e39c90b3a2077e1f4bb41a449c558ef9b1b1e2910fdaa39978ad4"

#: DynamoDB's limits on one TransactWriteItems request.
MAX_TRANSACTION_ACTIONS: Final = 100
MAX_TRANSACTION_BYTES: Final = 4 * 1024 * 1024
MAX_ITEM_BYTES: Final = 400 * 1024
TRANSACTION_TOO_LARGE_MESSAGE: Final = "Transaction request cannot be larger than 4 MB"

#: Whether the WSGI wrapper serializes DynamoDB requests. Only tests should turn this off.
SERIALIZE_DYNAMODB = True

log = logging.getLogger("kaibo_local.emulator")

_DYNAMODB_LOCK: Final = threading.Lock()
_ACTION_TYPES: Final = frozenset({"ConditionCheck", "Put", "Delete", "Update"})

# (Code, Message, Item) per action, as moto's TransactionCanceledException takes them.
_Reason = tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]


# --- 1. Serialized DynamoDB requests -------------------------------------------------------------


def dynamodb_lock() -> contextlib.AbstractContextManager[bool | None]:
    """The process-wide DynamoDB lock (a no-op context while ``SERIALIZE_DYNAMODB`` is off)."""
    return _DYNAMODB_LOCK if SERIALIZE_DYNAMODB else contextlib.nullcontext()


def is_dynamodb_request(environ: WSGIEnvironment) -> bool:
    """True for DynamoDB and DynamoDB Streams calls (their ``X-Amz-Target`` starts with DynamoDB)."""
    return str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB")


#: Called under the DynamoDB lock with (X-Amz-Target, request body) of every DynamoDB request
#: that answered 200, before the answer leaves (kaibo_local.durability journals the writes).
WriteRecorder = Callable[[str, bytes], None]
#: Called under the DynamoDB lock after every DynamoDB request; returns what to call once the lock
#: is released, before the answer leaves (waiting for the sync of what was recorded so far).
SyncBarrier = Callable[[], Callable[[], None]]


class SerializedDynamoDBApp:
    """WSGI wrapper running DynamoDB requests one at a time, and everything else concurrently."""

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app
        # One attribute, read once per request: a request never sees a recorder without its barrier.
        self.durability: tuple[WriteRecorder, SyncBarrier | None] | None = None

    @property
    def recorder(self) -> WriteRecorder | None:
        return None if self.durability is None else self.durability[0]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not is_dynamodb_request(environ):
            return self._app(environ, start_response)
        recorder, sync_barrier = self.durability or (None, None)
        body = _request_body(environ) if recorder is not None else b""
        statuses: list[str] = []

        def remember_status(status: str, headers: Any, exc_info: Any = None) -> Any:
            statuses.append(status)
            return start_response(status, headers, exc_info)

        with dynamodb_lock():
            # The app reads the request body, and the response is produced in full, under the lock.
            response = _materialize(self._app(environ, remember_status))
            if recorder is not None and statuses and statuses[-1].startswith("200"):
                recorder(str(environ.get("HTTP_X_AMZ_TARGET", "")), body)
            wait_for_sync = sync_barrier() if sync_barrier is not None else None
        if wait_for_sync is not None:
            wait_for_sync()
        return response


def _request_body(environ: WSGIEnvironment) -> bytes:
    """Read the whole request body and put it back for the app to read."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def _materialize(body: Iterable[bytes]) -> list[bytes]:
    try:
        return list(body)
    finally:
        close = getattr(body, "close", None)
        if callable(close):
            close()


# --- 2. Transactions without a rollback copy -----------------------------------------------------


@dataclass(frozen=True)
class _Action:
    """One parsed TransactItems entry."""

    op_type: str
    op: dict[str, Any]
    table_name: str
    key: dict[str, Any]


class _ConditionNotMet(ConditionalCheckFailed):
    """A transaction action's own condition failed; ``old_item`` is the ALL_OLD image, if asked."""

    def __init__(self, old_item: dict[str, Any] | None) -> None:
        super().__init__(item=old_item)
        self.old_item = old_item


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """Replacement for ``DynamoDBBackend.transact_write_items``: moto's steps, undone item by item.

    Same validation, errors and cancellation reasons as moto 5.2.5's version, without its deep
    copy of every touched table; relies on the caller serializing DynamoDB operations.
    """
    if len(transact_items) > MAX_TRANSACTION_ACTIONS:
        raise TooManyTransactionsException()
    check_transaction_limits(transact_items)
    journal = _UndoJournal(self)
    claimed: set[tuple[str, str]] = set()
    try:
        reasons = [_run_action(self, journal, claimed, transact_item) for transact_item in transact_items]
    except BaseException:
        journal.undo()
        raise
    if any(code is not None for code, _, _ in reasons):
        journal.undo()
        raise TransactionCanceledException(reasons)


def _run_action(
    backend: DynamoDBBackend,
    journal: _UndoJournal,
    claimed: set[tuple[str, str]],
    transact_item: dict[str, Any],
) -> _Reason:
    """Check and apply one action as moto does; moto's cancellation reason for it."""
    if len(transact_item) > 1:
        raise TransactWriteSingleOpException
    try:
        action = _parse_action(backend, transact_item)
        _claim_item(claimed, action)
        current = _check_condition(backend, action)
        if action.op_type != "ConditionCheck":
            journal.record(action, current)
            _write(backend, action)
    except (MultipleTransactionsException, MockValidationException):
        raise
    except ConditionalCheckFailed as error:
        old_item = error.old_item if isinstance(error, _ConditionNotMet) else None
        return ("ConditionalCheckFailed", str(error.message), old_item)
    except Exception as error:  # moto reports any other failure as that action's reason
        return (type(error).__name__, str(error), None)
    return (None, None, None)


def _parse_action(backend: DynamoDBBackend, transact_item: dict[str, Any]) -> _Action:
    op_type, op = next(iter(transact_item.items()))
    if op_type not in _ACTION_TYPES:
        raise ValueError("Unsupported transaction operation")
    table_name = op["TableName"]
    if op_type == "Put":
        attrs = op["Item"]
        table = backend.get_table(table_name)
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
    else:
        key = op["Key"]
    return _Action(op_type=op_type, op=op, table_name=table_name, key=key)


def _claim_item(claimed: set[tuple[str, str]], action: _Action) -> None:
    identity = (str(action.table_name), str(dict(sorted(action.key.items()))))
    if identity in claimed:
        raise MultipleTransactionsException()
    claimed.add(identity)


def _check_condition(backend: DynamoDBBackend, action: _Action) -> Item | None:
    """Evaluate the action's ConditionExpression on the stored item; return that item."""
    current = backend.get_item(action.table_name, action.key)
    condition_expression = action.op.get("ConditionExpression")
    if condition_expression is None:
        return current
    condition = get_filter_expression(
        condition_expression,
        action.op.get("ExpressionAttributeNames"),
        action.op.get("ExpressionAttributeValues"),
    )
    if not condition.expr(current):
        wants_old = action.op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
        raise _ConditionNotMet(current.to_json()["Attributes"] if wants_old and current else None)
    return current


class _UndoJournal:
    """What a transaction's writes replaced, so that a cancelled one can be put back exactly.

    Per write: the table, the key, and the item that was stored before it (None: there was
    none). ``put_item`` stores a new item and ``delete_item`` drops the stored one, so for them
    the stored object itself is kept; ``update_item`` changes the stored item in place, so it is
    copied first. And per touched table with a stream: how many records it held, since moto
    appends a record per write.
    """

    def __init__(self, backend: DynamoDBBackend) -> None:
        self._backend = backend
        self._replaced: list[tuple[Table, DynamoType, DynamoType | None, Item | None]] = []
        self._stream_ends: dict[str, tuple[list[Any], int]] = {}

    def record(self, action: _Action, current: Item | None) -> None:
        table = self._backend.get_table(action.table_name)
        hash_value, range_value = self._backend.get_keys_value(table, action.key)
        before = copy.deepcopy(current) if action.op_type == "Update" else current
        self._replaced.append((table, hash_value, range_value, before))
        if table.stream_shard is not None and table.name not in self._stream_ends:
            records = table.stream_shard.items
            self._stream_ends[table.name] = (records, len(records))

    def undo(self) -> None:
        for table, hash_value, range_value, before in reversed(self._replaced):
            _restore(table, hash_value, range_value, before)
        for records, end in self._stream_ends.values():
            del records[end:]
        self._replaced.clear()
        self._stream_ends.clear()


def _restore(table: Table, hash_value: DynamoType, range_value: DynamoType | None, item: Item | None) -> None:
    """Store ``item`` under the key again (None: no item), in moto's layout of ``table.items``."""
    if table.range_key_attr is None:
        if item is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = item  # type: ignore[assignment]  # moto's own layout
        return
    assert range_value is not None
    same_hash = table.items.get(hash_value)
    if item is not None:
        table.items[hash_value][range_value] = item
    elif same_hash is not None:
        same_hash.pop(range_value, None)
        if not same_hash:
            del table.items[hash_value]


def _write(backend: DynamoDBBackend, action: _Action) -> None:
    """The action's write with moto's own ``put_item`` / ``delete_item`` / ``update_item``, as moto's
    transaction performs it, but without its condition: ``_check_condition`` has just evaluated it
    on the same stored item (requests are serialized), and parsing it again cost as much."""
    op = action.op
    names = op.get("ExpressionAttributeNames")
    values = op.get("ExpressionAttributeValues")
    if action.op_type == "Put":
        backend.put_item(
            action.table_name,
            op["Item"],
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif action.op_type == "Delete":
        backend.delete_item(
            action.table_name,
            action.key,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif action.op_type == "Update":
        backend.update_item(
            action.table_name,
            action.key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=names,  # type: ignore[arg-type]  # moto passes None too
            expression_attribute_values=values,  # type: ignore[arg-type]
        )


# --- 3. DynamoDB's transaction limits ------------------------------------------------------------


def item_size(attributes: Mapping[str, Any]) -> int:
    """Size of wire-format attributes as moto computes it: attribute name + value bytes."""
    return sum(bytesize(name) + DynamoType(value).size() for name, value in attributes.items())


def _action_size(op_type: str, op: Mapping[str, Any]) -> int:
    """Data an action carries: the Put item, or the key plus the expression attribute values."""
    if op_type == "Put":
        return item_size(op.get("Item") or {})
    values = op.get("ExpressionAttributeValues") or {}
    return item_size(op.get("Key") or {}) + sum(DynamoType(value).size() for value in values.values())


def check_transaction_limits(transact_items: list[dict[str, Any]]) -> None:
    """Raise a ValidationException, as DynamoDB does, for a too large item or request.

    The action count and the one-operation-per-item rule are checked in ``transact_write_items``.
    """
    total = 0
    for transact_item in transact_items:
        for op_type, op in transact_item.items():
            size = _action_size(op_type, op)
            if op_type == "Put" and size > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge()
            total += size
    if total > MAX_TRANSACTION_BYTES:
        raise MockValidationException(TRANSACTION_TOO_LARGE_MESSAGE)


# --- 4. Installing the patches, pinned ------------------------------------------------------------

TRANSACT_WRITE_ITEMS: Final = MotoPatch(
    DynamoDBBackend,
    "transact_write_items",
    transact_write_items,
    PATCHED_FUNCTION_SHA256,
    summary="transactions undone item by item, without a copy of each touched table",
    recheck=(
        "Re-read moto's DynamoDBBackend.transact_write_items and re-check "
        "kaibo_local.emulator.transact_write_items against it"
    ),
)

#: Every change the emulator makes to moto's code, each pinned (``MotoPatch``).
MOTO_PATCHES: Final = (TRANSACT_WRITE_ITEMS, *moto_speedups.SPEEDUPS)


def original_transact_write_items() -> Callable[..., None]:
    """moto's own ``DynamoDBBackend.transact_write_items``, patched or not."""
    function: Callable[..., None] = TRANSACT_WRITE_ITEMS.original()
    return function


class _Untracked(list[Any]):
    """A model tracker that keeps nothing: moto's ``instances_tracked`` exists for its dashboard
    only, and holding every DynamoDB item ever built (each read copy, each replaced head) would grow
    the local stack's memory with every request, forever."""

    def append(self, _item: Any) -> None:
        return None


def stop_tracking_dynamodb_models() -> None:
    for cls in model_data.get("dynamodb", {}).values():
        if not isinstance(getattr(cls, "instances_tracked", None), _Untracked):
            setattr(cls, "instances_tracked", _Untracked())  # noqa: B010 - moto's classes don't declare it


def install_patches() -> None:
    """Apply ``MOTO_PATCHES`` (idempotent); RuntimeError, and nothing patched, if moto changed."""
    stop_tracking_dynamodb_models()
    moto_speedups.install(MOTO_PATCHES)


def uninstall_patches() -> None:
    """Restore moto's own functions (for tests comparing against them)."""
    moto_speedups.uninstall(MOTO_PATCHES)


# --- The server ----------------------------------------------------------------------------------


class Emulator:
    """A running emulator: point boto3 at ``endpoint_url``; ``stop()`` (or leave the ``with``)."""

    def __init__(self, server: BaseWSGIServer, thread: threading.Thread, app: SerializedDynamoDBApp) -> None:
        self._server = server
        self._thread = thread
        self._stopped = False
        self.app = app

    def record_writes(self, recorder: WriteRecorder | None, sync_barrier: SyncBarrier | None = None) -> None:
        """From now on, call ``recorder`` for every DynamoDB request answered 200 (None: stop), and
        ``sync_barrier`` for every DynamoDB request (see ``SyncBarrier``)."""
        self.app.durability = None if recorder is None else (recorder, sync_barrier)

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent). moto's state stays in the process."""
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()
        if isinstance(self._server, _EmulatorServer):
            self._server.close_connections()

    def __enter__(self) -> Emulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class HostCachingDispatcher(DomainDispatcherApplication):
    """moto's dispatcher, remembering which backend serves each host name.

    moto works the backend out for every request, and first lists its ~170 service directories on
    disk to see whether the host is one of them, all under the dispatcher's process-wide lock:
    about 1 ms per request, every request serialized. The answer depends only on the host.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._backend_by_host: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        try:
            return self._backend_by_host[host]
        except KeyError:
            backend = self._backend_by_host[host] = super().get_backend_for_host(host)
            return backend


#: Seconds a keep-alive connection to the emulator may sit idle before it is closed.
IDLE_CONNECTION_SECONDS: Final = 120.0
_FRAMING_HEADERS: Final = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


class KeepAliveRequestHandler(MotoRequestHandler):
    """moto's request handler, keeping the connection open between requests (HTTP/1.1).

    werkzeug's development server closes every connection after its response and then waits up
    to 10 ms for leftover bytes, so each AWS call cost a new TCP connection and a new thread, and
    boto3 found its pooled connection dropped every time. Here a request whose body comes with a
    ``Content-Length`` (every botocore request) is read whole, the answer is produced whole and
    sent with its ``Content-Length``, and the connection serves the client's next request. Anything
    else (a chunked body, ``Expect: 100-continue``, a malformed length) goes to werkzeug's own
    handling, which closes the connection as before. A connection idle for
    ``IDLE_CONNECTION_SECONDS`` is closed.
    """

    protocol_version = "HTTP/1.1"
    timeout = IDLE_CONNECTION_SECONDS  # socketserver sets it on the connection: idle ones end
    # TCP_NODELAY: the body, written after the headers, leaves at once. With Nagle's algorithm it
    # waited for the client to acknowledge the headers, which a client delays up to 40 ms.
    disable_nagle_algorithm = True

    def run_wsgi(self) -> None:
        length = _content_length(self.headers)
        if (
            length is None
            or self.headers.get("Expect")
            or "chunked" in self.headers.get("Transfer-Encoding", "")
        ):
            self.close_connection = True
            super().run_wsgi()
            return
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            self.close_connection = True
            return
        environ = self.make_environ()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["wsgi.input_terminated"] = True
        started: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            del exc_info  # nothing is sent before the whole answer is there
            started[:] = [(status, headers)]
            return _no_write

        try:
            answer = b"".join(_materialize(self.server.app(environ, start_response)))
        except Exception:
            log.exception("the AWS emulator failed a request")
            started[:] = [("500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")])]
            answer = b"internal error"
            self.close_connection = True
        status, headers = started[0] if started else ("500 INTERNAL SERVER ERROR", [])
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        for name, value in headers:
            if name.lower() not in _FRAMING_HEADERS:
                self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)
        self.wfile.flush()

    def log_error(self, format: str, *args: Any) -> None:
        if not format.startswith("Request timed out"):  # an idle keep-alive connection, closed
            super().log_error(format, *args)


def _no_write(_data: bytes) -> None:
    raise RuntimeError("the emulator's apps return their bodies; write() is not supported")


def _content_length(headers: Any) -> int | None:
    text = headers.get("Content-Length")
    if text is None:
        return 0
    try:
        length = int(text)
    except ValueError:
        return None
    return length if length >= 0 else None


class _EmulatorServer(ThreadedWSGIServer):
    """werkzeug's threaded server, keeping track of its open connections so that ``stop`` ends
    them too (a kept-alive connection would otherwise go on being served)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def start_emulator(host: str = "127.0.0.1", port: int = 0, fd: int | None = None) -> Emulator:
    """Serve moto (all services) on ``host:port`` (0: a free port; or on the listening socket
    ``fd``) in a background thread."""
    install_patches()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = SerializedDynamoDBApp(HostCachingDispatcher(create_backend_app))
    server = _EmulatorServer(host, port, app, KeepAliveRequestHandler, fd=fd)
    # The server has bound and is listening: requests queue until serve_forever picks them up.
    thread = threading.Thread(target=server.serve_forever, name=f"kaibo-emulator-{server.port}", daemon=True)
    thread.start()
    return Emulator(server, thread, app)

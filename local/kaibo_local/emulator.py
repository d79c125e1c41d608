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
   transaction. With requests serialized, nothing can change between checking and writing, so the
   replacement evaluates every action first without mutating anything (its condition, then a
   dry run of its write against a one-item sandbox table, which surfaces the errors the write
   itself would raise), cancels with moto's ``TransactionCanceledException`` and the same
   positional reasons if anything fails, and only then applies the writes with moto's own
   ``put_item`` / ``update_item`` / ``delete_item``. Cost: O(size of the touched items).

3. **DynamoDB's transaction limits** (``check_transaction_limits``), which moto does not all
   enforce: at most 100 actions, each Put item at most 400 KB (409,600 bytes of attribute names
   and values, sized as moto sizes them), the whole request at most 4 MB (Put items, keys and
   expression values), no item touched twice. They raise moto's ``MockValidationException``
   family, so clients get a ``ValidationException`` as from AWS. (moto itself refuses items over
   405,000 bytes when it builds them; that stricter check still applies.)

   Deliberate differences from moto: an entry holding two operations
   (``TransactWriteSingleOpException``) is refused before anything is written (moto has already
   applied the entries before it), and if a write ever failed after its checks passed (concurrent
   requests without the lock) the request fails with a RuntimeError (HTTP 500) naming the cause.

4. **Pin check.** The replacement mirrors moto's function step by step (error types, messages,
   reason format). ``PATCHED_FUNCTION_SHA256`` is the hash of the source it replaced, and
   ``install_patches()`` refuses to patch a different one: when moto changes, re-read its
   ``transact_write_items`` and re-check the replacement before updating the hash.

In-process use: ``install_patches()`` also works under ``moto.mock_aws``; the replacement is only
atomic if callers do not run DynamoDB operations concurrently (hold ``dynamodb_lock()`` when you
do, e.g. when loading data straight into the backend while the server runs).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
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
from werkzeug.serving import BaseWSGIServer, make_server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "MAX_ITEM_BYTES",
    "MAX_TRANSACTION_ACTIONS",
    "MAX_TRANSACTION_BYTES",
    "PATCHED_FUNCTION_SHA256",
    "SERIALIZE_DYNAMODB",
    "TRANSACTION_TOO_LARGE_MESSAGE",
    "Emulator",
    "SerializedDynamoDBApp",
    "check_pin",
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

_DYNAMODB_LOCK: Final = threading.Lock()
_PATCH_LOCK: Final = threading.Lock()
_ACTION_TYPES: Final = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_original_transact_write_items: Callable[..., None] | None = None

# (Code, Message, Item) per action, as moto's TransactionCanceledException takes them.
_Reason = tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]


# --- 1. Serialized DynamoDB requests -------------------------------------------------------------


def dynamodb_lock() -> contextlib.AbstractContextManager[bool | None]:
    """The process-wide DynamoDB lock (a no-op context while ``SERIALIZE_DYNAMODB`` is off)."""
    return _DYNAMODB_LOCK if SERIALIZE_DYNAMODB else contextlib.nullcontext()


def is_dynamodb_request(environ: WSGIEnvironment) -> bool:
    """True for DynamoDB and DynamoDB Streams calls (their ``X-Amz-Target`` starts with DynamoDB)."""
    return str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB")


class SerializedDynamoDBApp:
    """WSGI wrapper running DynamoDB requests one at a time, and everything else concurrently."""

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not is_dynamodb_request(environ):
            return self._app(environ, start_response)
        with dynamodb_lock():
            # The app reads the request body, and the response is produced in full, under the lock.
            return _materialize(self._app(environ, start_response))


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
    """Replacement for ``DynamoDBBackend.transact_write_items``: check everything, then write.

    Same validation, errors and cancellation reasons as moto 5.2.5's version, without its deep
    copy of every touched table; relies on the caller serializing DynamoDB operations.
    """
    if len(transact_items) > MAX_TRANSACTION_ACTIONS:
        raise TooManyTransactionsException()
    check_transaction_limits(transact_items)
    actions, reasons = _evaluate_all(self, transact_items)
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)
    _apply_all(self, actions)


def _evaluate_all(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> tuple[list[_Action], list[_Reason]]:
    """Check every action in order, mutating nothing; moto's reason for each, positionally."""
    claimed: set[tuple[str, str]] = set()
    actions: list[_Action] = []
    reasons: list[_Reason] = []
    for transact_item in transact_items:
        if len(transact_item) > 1:
            raise TransactWriteSingleOpException
        try:
            action = _parse_action(backend, transact_item)
            _claim_item(claimed, action)
            current = _check_condition(backend, action)
            _dry_run(backend, action, current)
        except (MultipleTransactionsException, MockValidationException):
            raise
        except ConditionalCheckFailed as error:
            old_item = error.old_item if isinstance(error, _ConditionNotMet) else None
            reasons.append(("ConditionalCheckFailed", str(error.message), old_item))
        except Exception as error:  # moto reports any other failure as that action's reason
            reasons.append((type(error).__name__, str(error), None))
        else:
            actions.append(action)
            reasons.append((None, None, None))
    return actions, reasons


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


def _dry_run(backend: DynamoDBBackend, action: _Action, current: Item | None) -> None:
    """Run the action's write against a sandbox holding a copy of the one item it touches.

    Raises whatever moto's write would raise (validation of the item, the update expression,
    sizes), so that the real writes, applied afterwards, cannot fail half-way.
    """
    if action.op_type == "ConditionCheck":
        return
    table = backend.get_table(action.table_name)
    with _forgetting_new_instances(Item, type(table)):
        _write(_sandbox(backend, table, current), action)


def _sandbox(backend: DynamoDBBackend, table: Table, current: Item | None) -> DynamoDBBackend:
    """A shallow copy of the backend whose only table is ``table`` holding only ``current``."""
    shadow = copy.copy(table)
    shadow.items = defaultdict(dict)
    shadow.stream_shard = None  # no stream records for a write that does not happen
    if current is not None:
        twin = copy.deepcopy(current)
        if current.range_key is not None:
            shadow.items[current.hash_key][current.range_key] = twin
        else:
            shadow.items[current.hash_key] = twin  # type: ignore[assignment]  # moto's own layout
    sandbox = copy.copy(backend)
    sandbox.tables = {table.name: shadow}
    return sandbox


@contextlib.contextmanager
def _forgetting_new_instances(*classes: type) -> Iterator[None]:
    """Drop the sandbox's objects from moto's model tracker, which would keep them alive forever.

    moto appends every model instance to ``cls.instances_tracked`` (for its dashboard only). The
    caller holds the DynamoDB lock, so everything appended meanwhile comes from the sandbox.
    """
    marks: dict[int, tuple[list[Any], int]] = {}
    for cls in classes:
        tracked = getattr(cls, "instances_tracked", None)
        if isinstance(tracked, list):
            marks[id(tracked)] = (tracked, len(tracked))
    try:
        yield
    finally:
        for tracked, mark in marks.values():
            del tracked[mark:]


def _write(backend: DynamoDBBackend, action: _Action) -> None:
    """The action's write, exactly as moto's transaction performs it."""
    op = action.op
    condition_expression = op.get("ConditionExpression")
    names = op.get("ExpressionAttributeNames")
    values = op.get("ExpressionAttributeValues")
    if action.op_type == "Put":
        backend.put_item(
            action.table_name,
            op["Item"],
            condition_expression=condition_expression,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif action.op_type == "Delete":
        backend.delete_item(
            action.table_name,
            action.key,
            condition_expression=condition_expression,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif action.op_type == "Update":
        backend.update_item(
            action.table_name,
            action.key,
            update_expression=op["UpdateExpression"],
            condition_expression=condition_expression,
            expression_attribute_names=names,  # type: ignore[arg-type]  # moto passes None too
            expression_attribute_values=values,  # type: ignore[arg-type]
        )


def _apply_all(backend: DynamoDBBackend, actions: list[_Action]) -> None:
    for index, action in enumerate(actions):
        try:
            _write(backend, action)
        except Exception as error:
            raise RuntimeError(
                f"TransactWriteItems: the write of action {index} ({action.op_type} on "
                f"{action.table_name}) failed after every check had passed, with {index} of "
                f"{len(actions)} writes already applied. Either DynamoDB requests ran concurrently "
                "(is dynamodb_lock() held?) or the dry run no longer matches moto's write."
            ) from error


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


# --- 4. Installing the patch, pinned -------------------------------------------------------------


def source_sha256(function: Callable[..., Any]) -> str:
    """sha256 of a function's source text, as ``PATCHED_FUNCTION_SHA256`` records it."""
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()


def check_pin(function: Callable[..., Any]) -> None:
    """Raise RuntimeError unless ``function`` is the moto code the replacement was written for."""
    actual = source_sha256(function)
    if actual != PATCHED_FUNCTION_SHA256:
        raise RuntimeError(
            f"moto's {function.__qualname__} changed (source sha256 {actual}, expected "
            f"{PATCHED_FUNCTION_SHA256}): re-read it, re-check kaibo_local.emulator.transact_write_items "
            "against it, then update PATCHED_FUNCTION_SHA256."
        )


def original_transact_write_items() -> Callable[..., None]:
    """moto's own ``DynamoDBBackend.transact_write_items``, patched or not."""
    if _original_transact_write_items is not None:
        return _original_transact_write_items
    function: Callable[..., None] = DynamoDBBackend.transact_write_items
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
    """Replace moto's ``transact_write_items`` (idempotent); RuntimeError if moto changed."""
    global _original_transact_write_items  # noqa: PLW0603 - the patch is process-wide state
    stop_tracking_dynamodb_models()
    with _PATCH_LOCK:
        current = DynamoDBBackend.transact_write_items
        if current is transact_write_items:
            return
        check_pin(current)
        _original_transact_write_items = current
        setattr(DynamoDBBackend, "transact_write_items", transact_write_items)  # noqa: B010


def uninstall_patches() -> None:
    """Restore moto's own ``transact_write_items`` (for tests comparing against it)."""
    global _original_transact_write_items  # noqa: PLW0603
    with _PATCH_LOCK:
        if _original_transact_write_items is not None:
            setattr(DynamoDBBackend, "transact_write_items", _original_transact_write_items)  # noqa: B010
            _original_transact_write_items = None


# --- The server ----------------------------------------------------------------------------------


class Emulator:
    """A running emulator: point boto3 at ``endpoint_url``; ``stop()`` (or leave the ``with``)."""

    def __init__(self, server: BaseWSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self._stopped = False

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

    def __enter__(self) -> Emulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_emulator(host: str = "127.0.0.1", port: int = 0) -> Emulator:
    """Serve moto (all services) on ``host:port`` (0: a free port) in a background thread."""
    install_patches()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = SerializedDynamoDBApp(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)
    # make_server has bound and is listening: requests queue until serve_forever picks them up.
    thread = threading.Thread(target=server.serve_forever, name=f"kaibo-emulator-{server.port}", daemon=True)
    thread.start()
    return Emulator(server, thread)

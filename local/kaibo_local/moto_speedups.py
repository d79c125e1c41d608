"""moto made faster where the local stack and the benchmarks wait on it, with the same answers.

Every change the emulator makes to moto's own code is a ``MotoPatch``: one moto function replaced,
pinned by the sha256 of the moto source the replacement was written against (the replaced function
and the moto functions whose behaviour it reproduces). ``install()`` checks every pin before it
replaces anything and raises ``RuntimeError`` naming the function and what to re-check when the
installed moto differs; nothing is replaced then. ``kaibo_local.emulator.install_patches()``
installs the emulator's transaction patch and the two speed-ups below, so the local stack
(``make run``), the tests and the benchmarks all run on the same moto.

1. **Query reads only its partition** (``partition_query`` replaces ``Table.query``). moto 5.2.5
   lists and sorts every item of the table (``Table.all_items``) for each Query and keeps those
   of the queried partition: O(table) per Query, seconds with millions of postings. The
   replacement runs moto's own ``Table.query`` on a view of the table whose ``all_items()`` is the
   queried partition's items: the same candidates, which moto then sorts, pages, limits and
   filters as always, so the items, counts and ``LastEvaluatedKey`` are the same. Index queries,
   tables without a sort key and queries without a partition key go to moto unchanged.

2. **Query, BatchGetItem and item reads' and writes' results serialized in one ``json.dumps``**
   (``fast_execute_result`` replaces ``ActionResult.execute_result`` for ``DynamoResult``; the
   operations are ``FAST_SERIALIZED_OPERATIONS``: also GetItem, PutItem, UpdateItem and
   DeleteItem, whose results are an item or nothing). moto walks the response shape
   attribute by attribute (``moto.core.serialize``): ~0.1 s for a Query of 400 small items, most
   of a recall's time on the emulator. The replacement reproduces that walk where it is trivial
   (structures in the shape's member order, numbers as moto casts them, items and keys, already in
   wire form, copied through) and leaves everything else to moto: a binary attribute, a value of a
   type moto would convert, a member the output shape does not name, ``MOTO_PRETTIFY_RESPONSES``.
   The body is moto's document, same keys in the same order, same values, written without the
   optional spaces (``json.dumps(..., separators=(",", ":"))``); status and headers are moto's.

3. **SQS reads one queue attribute without counting the queue** (``send_message`` replaces
   ``SQSBackend.send_message``, ``retention_check`` replaces
   ``SQSBackend.is_message_valid_based_on_retention_period``). moto builds every attribute of the
   queue (``Queue.attributes``) to read one: ``ContentBasedDeduplication`` for each message sent,
   ``MessageRetentionPeriod`` for each message received, and the attributes include the three
   approximate message counts, each a pass over every message of the queue with a clock read per
   message. With a backlog of structuring jobs that is O(queue) per message sent and per message
   received, most of the emulator's SQS time. The replacements read the one attribute from the
   queue as ``Queue.attributes`` would report it, and otherwise take moto's steps in moto's order.

4. **An update expression is parsed once** (``cached_update_expression`` replaces
   ``UpdateExpressionParser.make``). moto parses a request's ``UpdateExpression`` twice (to check
   the names it uses, then to apply it), for every Update of every transaction: Kaibo's index
   writes are transactions of up to 50 Updates with the same few expressions (``ADD df :one``).
   The tree depends on the text alone, and no caller changes it (the validator works on a deep
   copy of it), so the replacement keeps the trees of the last ``UPDATE_EXPRESSION_CACHE_SIZE``
   texts and hands the same tree out again. An expression that does not parse raises as before
   and is not kept.

5. **A condition expression is parsed once per text, names and values** (``cached_condition``
   replaces ``ConditionExpressionParser.parse``). moto parses a transaction's conditions at least
   twice (to check the names, then to evaluate them); Kaibo's are mostly the same few texts
   (``attribute_not_exists(pk)``). The condition moto builds depends only on the text, the
   ``ExpressionAttributeNames`` and the ``ExpressionAttributeValues``, and evaluating it changes
   nothing, so the replacement keeps the last ``CONDITION_CACHE_SIZE`` conditions, keyed by those
   three (as JSON, when shorter than ``CONDITION_KEY_MAX_CHARS``), and hands the same condition out
   again, with the names and values it found, as moto's parser records them. A condition that does
   not parse raises as before and is not kept.

6. **A validator's copy of the tree is unpickled** (``validator_init`` replaces
   ``Validator.__init__``). moto's validator works on a ``copy.deepcopy`` of the tree (it replaces
   nodes with the item's values as it goes): ~50 µs for a tree as small as ``ADD df :one``, once or
   twice per Update. ``cached_update_expression`` pickles each tree it keeps, and the replacement
   copies such a tree with ``pickle.loads`` (~4x faster), which builds the same objects as
   ``deepcopy`` does for moto's nodes (plain objects, both going through their ``__reduce_ex__``,
   shared references and parent links kept). Any other tree, or one that did not pickle, is
   deep-copied as before.

7. **An unconditional ADD of numbers is applied directly** (``number_add_update_item`` replaces
   ``DynamoDBBackend.update_item``). Kaibo's index transactions are mostly ``ADD df :one`` Updates
   (and ``ADD docs :one, #terms :dl``): for each, moto deep-copies the stored item, builds the
   tree, validates it twice when the item is new (ten passes over a copy of the tree each time)
   and executes it, ~65 % of the emulator's time under an append load. When the expression is one
   ``ADD`` clause of ``N`` values to distinct top-level attributes (plain names that are not
   reserved words, or ``#names`` that are defined), none of them a key of the table, with no
   condition, ``Expected`` or ``AttributeUpdates``, the replacement does what moto's executor does:
   each attribute becomes the stored number (0 if absent) plus the value, added by moto's
   ``DynamoType.__add__``, in the expression's order, the item created with its keys first if
   absent, the size limit checked by moto's attribute dict (``ItemSizeToUpdateTooLarge``), and a
   stream record as moto adds it. Every other update, and any case where moto would refuse (a
   stored value that is not a number, a value that is not a number), goes to moto's own
   ``update_item``, before anything is changed.

8. **An item's size is counted once per attribute** (``item_init`` replaces ``Item.__init__``).
   moto builds an item attribute by attribute into a ``LimitedSizeDict``, which sums the size of
   every attribute already there for each one it adds: O(attributes²) per item built, and every
   Put, every read copy and every journal image builds one. The replacement keeps the running
   total: the same attributes in the same order, the same ``ItemSizeTooLarge`` at the same
   attribute (moto's limit, 405,000 bytes).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import json
import pickle
import re
import string
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from moto import settings
from moto.core.responses import ActionResult
from moto.core.serialize import BaseJSONSerializer, JSONSerializer, ResponseSerializer
from moto.core.utils import camelcase_to_underscores, unix_time
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.exceptions import ItemSizeTooLarge, ItemSizeToUpdateTooLarge
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]
from moto.dynamodb.parsing.executors import AddExecutor, SetExecutor, UpdateExpressionExecutor
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords
from moto.dynamodb.parsing.validators import (
    ExpressionAttributeResolvingProcessor,
    ExpressionAttributeValueProcessor,
    UpdateExpressionValidator,
    UpdateHashRangeKeyValidator,
    Validator,
)
from moto.dynamodb.responses import DynamoHandler, DynamoResult
from moto.moto_api._internal import mock_random
from moto.sqs.exceptions import InvalidParameterValue
from moto.sqs.models import MAXIMUM_MESSAGE_DELAY, Message, Queue, SQSBackend

if TYPE_CHECKING:
    from botocore.model import Shape
    from moto.core.common_types import TYPE_RESPONSE
    from moto.core.responses import ActionContext

__all__ = [
    "CONDITIONS",
    "CONDITION_CACHE_SIZE",
    "CONDITION_KEY_MAX_CHARS",
    "FAST_SERIALIZATION",
    "FAST_SERIALIZED_OPERATIONS",
    "ITEM_SIZE",
    "NUMBER_ADD_UPDATE",
    "PARTITION_QUERY",
    "SPEEDUPS",
    "SQS_RETENTION_CHECK",
    "SQS_SEND_MESSAGE",
    "UPDATE_EXPRESSIONS",
    "UPDATE_EXPRESSION_CACHE_SIZE",
    "VALIDATOR_TREE_COPY",
    "MotoPatch",
    "cached_condition",
    "cached_update_expression",
    "fast_execute_result",
    "install",
    "item_init",
    "number_add_update_item",
    "partition_query",
    "retention_check",
    "send_message",
    "source_sha256",
    "uninstall",
    "validator_init",
]

_PATCH_LOCK: Final = threading.RLock()
_ABSENT: Final = object()


def source_sha256(*functions: Callable[..., Any]) -> str:
    """sha256 of the functions' source text, concatenated in order (a pin records it)."""
    return hashlib.sha256("".join(inspect.getsource(f) for f in functions).encode()).hexdigest()


class MotoPatch:
    """One moto function replaced by ours, pinned to the moto code the replacement was written for.

    ``sha256`` is ``source_sha256`` of the replaced function followed by ``mirrors``: the other moto
    functions whose behaviour the replacement reproduces. ``recheck`` says what to re-read before
    updating the pin when moto changes; ``summary``, what the replacement does, in a few words.
    """

    def __init__(
        self,
        owner: type,
        name: str,
        replacement: Callable[..., Any],
        sha256: str,
        *,
        summary: str,
        recheck: str,
        mirrors: Iterable[Callable[..., Any]] = (),
    ) -> None:
        self.owner = owner
        self.name = name
        self.replacement = replacement
        self.sha256 = sha256
        self.summary = summary
        self.recheck = recheck
        self.mirrors = tuple(mirrors)
        self._original: Callable[..., Any] | None = None
        self._owned: object = _ABSENT  # what ``owner.__dict__`` held under ``name`` before install

    @property
    def qualname(self) -> str:
        return f"{self.owner.__module__}.{self.owner.__qualname__}.{self.name}"

    @property
    def installed(self) -> bool:
        return self.owner.__dict__.get(self.name) is self.replacement

    def original(self) -> Callable[..., Any]:
        """moto's own function, installed or not."""
        if self._original is not None:
            return self._original
        function: Callable[..., Any] = getattr(self.owner, self.name)
        return function

    def source_sha256(self) -> str:
        return source_sha256(self.original(), *self.mirrors)

    def check(self) -> None:
        """Raise RuntimeError unless moto's code is what the replacement was written for."""
        actual = self.source_sha256()
        if actual != self.sha256:
            raise RuntimeError(
                f"moto's {self.qualname} (or a moto function it relies on) changed: source sha256 "
                f"{actual}, pinned {self.sha256}. {self.recheck}, then update the pin "
                f"(MotoPatch.sha256 of {self.replacement.__module__}.{self.replacement.__qualname__})."
            )

    def _replace(self) -> None:
        if self.installed:
            return
        self._original = getattr(self.owner, self.name)
        self._owned = self.owner.__dict__.get(self.name, _ABSENT)
        setattr(self.owner, self.name, self.replacement)

    def _restore(self) -> None:
        if not self.installed:
            return
        if self._owned is _ABSENT:
            delattr(self.owner, self.name)  # it was inherited: inherit it again
        else:
            setattr(self.owner, self.name, self._owned)
        self._original = None
        self._owned = _ABSENT


def install(patches: Iterable[MotoPatch]) -> None:
    """Check every pin, then replace the functions not replaced yet (idempotent, all or nothing)."""
    chosen = tuple(patches)
    with _PATCH_LOCK:
        for patch in chosen:
            if not patch.installed:
                patch.check()
        for patch in chosen:
            patch._replace()


def uninstall(patches: Iterable[MotoPatch]) -> None:
    """Put moto's own functions back (for tests comparing against moto)."""
    with _PATCH_LOCK:
        for patch in reversed(tuple(patches)):
            patch._restore()


# --- 1. Query reads only its partition ----------------------------------------------------------


class _PartitionView:
    """A moto table seen through one partition: ``all_items()`` is that partition's items."""

    __slots__ = ("_items", "_table")

    def __init__(self, table: Table, items: list[Any]) -> None:
        self._table = table
        self._items = items

    def all_items(self) -> list[Any]:
        return self._items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def partition_query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """``Table.query`` on the queried partition's items instead of the whole table's.

    moto's own ``Table.query`` runs on a ``_PartitionView``: it keeps the items whose hash key is
    ``hash_key`` (all of the view's), then sorts, pages and filters them as it always does.
    """
    original = PARTITION_QUERY.original()
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    if index_name or hash_key is None or not self.range_key_attr:
        return original(self, hash_key, *args, **kwargs)
    partition = self.items.get(hash_key)
    items = list(partition.values()) if partition else []
    return original(_PartitionView(self, items), hash_key, *args, **kwargs)


#: sha256 of ``Table.query`` and ``Table.all_items`` in moto 5.2.5.
PARTITION_QUERY: Final = MotoPatch(
    Table,
    "query",
    partition_query,
    "b5579b88e55e299d09786319aeafee5d759c48f4cb8713c94ef5d18641895dc9",
    mirrors=(Table.all_items,),
    summary="Query reads only its partition",
    recheck=(
        "Re-read moto's Table.query and Table.all_items: the partition view is only right while "
        "Table.query takes its candidates from self.all_items() alone (no index) and keeps those of "
        "the queried hash key"
    ),
)


# --- 2. Query, BatchGetItem, item reads and writes answered in one json.dumps ------------------

#: Operations whose results ``fast_execute_result`` serializes itself.
FAST_SERIALIZED_OPERATIONS: Final = frozenset(
    {"Query", "BatchGetItem", "GetItem", "PutItem", "UpdateItem", "DeleteItem"}
)


class _LeaveToMotoError(Exception):
    """A value the fast path does not reproduce: moto's serializer answers instead."""


_STRING_TYPES: Final = frozenset({"S", "N"})
_BOOLEAN_TYPES: Final = frozenset({"BOOL", "NULL"})
_SET_TYPES: Final = frozenset({"SS", "NS"})


def _is_wire_value(value: object) -> bool:
    """An AttributeValue that moto's serializer writes out unchanged: one type, no binary."""
    if type(value) is not dict or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind in _STRING_TYPES:
        return type(inner) is str
    if kind in _BOOLEAN_TYPES:
        return type(inner) is bool
    if kind in _SET_TYPES:
        return type(inner) is list and all(type(v) is str for v in inner)
    if kind == "L":
        return type(inner) is list and all(_is_wire_value(v) for v in inner)
    if kind == "M":
        return _is_wire_map(inner)
    return False  # B, BS: bytes, base64-encoded by moto


def _is_wire_map(value: object) -> bool:
    return type(value) is dict and all(type(k) is str and _is_wire_value(v) for k, v in value.items())


def _wire(value: Any, shape: Shape) -> Any:
    """``value`` as moto's JSON serializer writes it for ``shape``; ``_LeaveToMotoError`` otherwise."""
    kind = shape.type_name
    if kind == "structure":
        return _wire_structure(value, shape)
    if kind == "list":
        if type(value) is not list:
            raise _LeaveToMotoError
        member = shape.member  # type: ignore[attr-defined]
        return [_wire(item, member) for item in value]
    if kind == "map":
        return _wire_map(value, shape)
    if kind == "string" and type(value) is str:
        return value
    if kind == "boolean" and type(value) is bool:
        return value
    if kind in ("integer", "long") and type(value) is int:
        return value
    if kind in ("double", "float") and type(value) in (int, float):
        return float(value)
    raise _LeaveToMotoError  # blobs, timestamps, anything moto would convert


def _wire_structure(value: Any, shape: Shape) -> dict[str, Any]:
    if shape.name == "AttributeValue":
        if not _is_wire_value(value):
            raise _LeaveToMotoError
        return value  # type: ignore[no-any-return]
    members: Mapping[str, Shape] = shape.members  # type: ignore[attr-defined]
    if (
        type(value) is not dict
        or not value.keys() <= members.keys()
        or getattr(shape, "is_document_type", False)
    ):
        raise _LeaveToMotoError
    wired: dict[str, Any] = {}
    for name, member in members.items():
        member_value = value.get(name)
        if member_value is not None:
            if "name" in member.serialization:
                raise _LeaveToMotoError
            wired[name] = _wire(member_value, member)
    return wired


def _wire_map(value: Any, shape: Shape) -> dict[str, Any]:
    value_shape: Shape = shape.value  # type: ignore[attr-defined]
    if value_shape.name == "AttributeValue":  # an item or a key: already in wire form
        if not _is_wire_map(value):
            raise _LeaveToMotoError
        return value  # type: ignore[no-any-return]
    if type(value) is not dict:
        raise _LeaveToMotoError
    return {key: _wire(item, value_shape) for key, item in value.items()}


def fast_execute_result(self: ActionResult, context: ActionContext) -> TYPE_RESPONSE:
    """``ActionResult.execute_result`` for DynamoDB: ``FAST_SERIALIZED_OPERATIONS`` in one ``json.dumps``."""
    operation = context.operation_model
    output = operation.output_shape
    if (
        operation.name in FAST_SERIALIZED_OPERATIONS
        and output is not None
        and context.serializer_class is JSONSerializer
        and operation.service_model.protocol == "json"
        and not settings.PRETTIFY_RESPONSES
    ):
        try:
            body = json.dumps(_wire(self.result, output), separators=(",", ":"))
        except (_LeaveToMotoError, TypeError, ValueError):
            pass
        else:
            version = operation.service_model.metadata.get("jsonVersion", "1.0")
            status: int = operation.http.get("responseCode", ResponseSerializer.DEFAULT_RESPONSE_CODE)
            return status, {"Content-Type": f"application/x-amz-json-{version}"}, body
    answer: TYPE_RESPONSE = FAST_SERIALIZATION.original()(self, context)
    return answer


#: sha256 of ``ActionResult.execute_result`` and the serializer methods ``_wire`` reproduces, in
#: moto 5.2.5.
FAST_SERIALIZATION: Final = MotoPatch(
    DynamoResult,
    "execute_result",
    fast_execute_result,
    "a1cfcf26bd493c368ce9c730d17be0fcd5aa9a06b448ccb1bef67449a771f6e9",
    mirrors=(
        ResponseSerializer._serialize_result,
        ResponseSerializer._serialize_type_structure,
        ResponseSerializer._serialize_structure_member,
        ResponseSerializer._default_serialize,
        ResponseSerializer._serialize_type_integer,
        ResponseSerializer._serialize_type_float,
        BaseJSONSerializer._serialized_result_to_response,
        BaseJSONSerializer._get_protocol_specific_content_type,
        BaseJSONSerializer._serialize_body,
        BaseJSONSerializer._serialize_type_map,
        BaseJSONSerializer._serialize_type_list,
        BaseJSONSerializer._serialize_type_structure,
        BaseJSONSerializer._serialize_type_string,
    ),
    summary="Query, BatchGetItem and item read and write results written with one json.dumps",
    recheck=(
        "Re-read moto's ActionResult.execute_result and the JSON serializer methods pinned with it "
        "(kaibo_local.moto_speedups.FAST_SERIALIZATION.mirrors), and re-check _wire against them"
    ),
)


# --- 3. SQS reads one queue attribute without counting the queue ------------------------------


def _reported_attribute(queue: Queue, name: str, group: list[str]) -> Any:
    """``queue.attributes.get(name)`` without building the others: the attribute of ``group``
    (the queue's base, FIFO or KMS attributes) as ``Queue.attributes`` reports it."""
    if name not in group:
        return None
    value = getattr(queue, camelcase_to_underscores(name))
    return str(value).lower() if isinstance(value, bool) else value


def send_message(  # noqa: PLR0917 - moto's signature
    self: SQSBackend,
    queue_name: str,
    message_body: str,
    message_attributes: dict[str, Any] | None = None,
    delay_seconds: int | None = None,
    deduplication_id: str | None = None,
    group_id: str | None = None,
    system_attributes: dict[str, Any] | None = None,
    validate_group_id: bool = True,
) -> Message:
    """``SQSBackend.send_message``, moto's steps, reading ``ContentBasedDeduplication`` alone."""
    queue = self.get_queue(queue_name)

    self._validate_message(
        queue,
        message_body=message_body,
        delay_seconds=int(delay_seconds or 0),
        deduplication_id=deduplication_id,
        group_id=group_id,
        validate_group_id=validate_group_id,
    )

    if delay_seconds is not None:  # noqa: SIM108 - moto's code, as moto wrote it
        delay_seconds = int(delay_seconds)
    else:
        delay_seconds = queue.delay_seconds  # type: ignore[attr-defined]  # set from the attributes

    message_id = str(mock_random.uuid4())
    message = Message(message_id, message_body, system_attributes)

    # moto: ``queue.attributes.get("ContentBasedDeduplication") == "true"``; a FIFO attribute.
    based_on_content = queue.fifo_queue and (
        _reported_attribute(queue, "ContentBasedDeduplication", queue.FIFO_ATTRIBUTES) == "true"
    )
    if based_on_content:
        sha256 = hashlib.sha256()
        sha256.update(message_body.encode("utf-8"))
        message.deduplication_id = sha256.hexdigest()

    if deduplication_id is not None:
        message.deduplication_id = deduplication_id
        message.sequence_number = "".join(mock_random.choice(string.digits) for _ in range(20))

    if group_id is not None:
        message.group_id = group_id

    if message_attributes:
        message.message_attributes = message_attributes

    if delay_seconds > MAXIMUM_MESSAGE_DELAY:
        msg = (
            f"Value {delay_seconds} for parameter DelaySeconds is invalid. "
            "Reason: DelaySeconds must be >= 0 and <= 900."
        )
        raise InvalidParameterValue(msg)

    message.mark_sent(delay_seconds=delay_seconds)

    queue.add_message(message)

    return message


def retention_check(self: SQSBackend, queue_name: str, message: Message) -> bool:
    """``SQSBackend.is_message_valid_based_on_retention_period``, reading the retention period alone
    (moto reads it through ``get_queue_attributes``, which builds every attribute twice)."""
    queue = self.get_queue(queue_name)
    retention_period = _reported_attribute(queue, "MessageRetentionPeriod", queue.BASE_ATTRIBUTES)
    if retention_period is None:  # moto's get_queue_attributes leaves it out: moto's KeyError
        raise KeyError("MessageRetentionPeriod")
    retain_until = retention_period + message.sent_timestamp / 1000  # type: ignore[operator]
    return not retain_until <= unix_time()


#: sha256 of ``SQSBackend.send_message`` and ``Queue.attributes`` in moto 5.2.5.
SQS_SEND_MESSAGE: Final = MotoPatch(
    SQSBackend,
    "send_message",
    send_message,
    "99641ccca42cbd0c5fd8eaefba900272ace60c53da468cc8954b9d94b29c1110",
    mirrors=(Queue.attributes.fget,),  # type: ignore[attr-defined]
    summary="SQS SendMessage without building every queue attribute",
    recheck=(
        "Re-read moto's SQSBackend.send_message and Queue.attributes, and re-check "
        "kaibo_local.moto_speedups.send_message against them"
    ),
)

#: sha256 of ``SQSBackend.is_message_valid_based_on_retention_period``,
#: ``SQSBackend.get_queue_attributes`` and ``Queue.attributes`` in moto 5.2.5.
SQS_RETENTION_CHECK: Final = MotoPatch(
    SQSBackend,
    "is_message_valid_based_on_retention_period",
    retention_check,
    "2039bb1bceee1a5686bc3a2e1a4304a68bb2b811423b67b6588af051439bd5a1",
    mirrors=(SQSBackend.get_queue_attributes, Queue.attributes.fget),  # type: ignore[attr-defined]
    summary="SQS ReceiveMessage's retention check without building every queue attribute",
    recheck=(
        "Re-read moto's SQSBackend.is_message_valid_based_on_retention_period, "
        "SQSBackend.get_queue_attributes and Queue.attributes, and re-check "
        "kaibo_local.moto_speedups.retention_check against them"
    ),
)


# --- 4. An update expression is parsed once ----------------------------------------------------

#: How many update expressions' trees are kept (all of them are dropped when it is reached).
UPDATE_EXPRESSION_CACHE_SIZE: Final = 1024
_update_trees: dict[str, Any] = {}
#: id(tree) -> (the tree, kept so that its id stays its own; the tree pickled), for ``validator_init``.
_pickled_trees: dict[int, tuple[Any, bytes]] = {}


class _CachedUpdateExpressions:
    """``UpdateExpressionParser.make(expression_str)``: the tree of ``expression_str``, parsed once.

    A callable object, not a function: stored on the class, it is called as the classmethod was,
    without being bound (``UpdateExpressionParser.make`` is this object itself).
    """

    def __init__(self) -> None:
        self.__qualname__ = self.__name__ = "cached_update_expression"  # what a pin's message names

    def __call__(self, expression_str: str) -> Any:
        tree = _update_trees.get(expression_str)
        if tree is None:
            tree = UPDATE_EXPRESSIONS.original()(expression_str)
            if len(_update_trees) >= UPDATE_EXPRESSION_CACHE_SIZE:
                _update_trees.clear()
                _pickled_trees.clear()
            _update_trees[expression_str] = tree
            # A tree that does not pickle is deep-copied, as moto does.
            with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError, RecursionError):
                _pickled_trees[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
        return tree


cached_update_expression: Final = _CachedUpdateExpressions()

#: sha256 of ``UpdateExpressionParser.make`` and of the moto functions that use its tree (none of
#: them changes it) in moto 5.2.5.
UPDATE_EXPRESSIONS: Final = MotoPatch(
    UpdateExpressionParser,
    "make",
    cached_update_expression,
    "2a60f9186721f72fffd26bb946873907f8ffe718898296947d1c9836f0dc1fb7",
    mirrors=(
        DynamoDBBackend.update_item,
        DynamoHandler.update_item,
        DynamoHandler.transact_write_items,
        Validator.__init__,
        Node.find_clauses,
    ),
    summary="an update expression parsed once, its tree shared",
    recheck=(
        "Re-read moto's UpdateExpressionParser.make and every caller pinned with it "
        "(kaibo_local.moto_speedups.UPDATE_EXPRESSIONS.mirrors): the shared tree must never be changed"
    ),
)

# --- 5. A condition expression is parsed once per text, names and values --------------------------

#: How many conditions are kept (all of them are dropped when it is reached).
CONDITION_CACHE_SIZE: Final = 1024
#: Conditions whose text, names and values take more JSON than this are parsed every time.
CONDITION_KEY_MAX_CHARS: Final = 2048
_conditions: dict[str, tuple[Any, list[str], list[str]]] = {}


def cached_condition(self: ConditionExpressionParser) -> Any:
    """``ConditionExpressionParser.parse``: the condition built once per text, names and values."""
    parse = CONDITIONS.original()
    if not self.condition_expression:
        return parse(self)
    try:
        key = json.dumps(
            [self.condition_expression, self.expression_attribute_names, self.expression_attribute_values],
            sort_keys=True,
            separators=(",", ":"),
        )
    except (TypeError, ValueError):
        return parse(self)
    if len(key) > CONDITION_KEY_MAX_CHARS:
        return parse(self)
    kept = _conditions.get(key)
    if kept is None:
        names_before, values_before = len(self.expr_attr_names_found), len(self.expr_attr_values_found)
        condition = parse(self)  # raises for a condition that does not parse: nothing kept
        kept = (
            condition,
            self.expr_attr_names_found[names_before:],
            self.expr_attr_values_found[values_before:],
        )
        if len(_conditions) >= CONDITION_CACHE_SIZE:
            _conditions.clear()
        _conditions[key] = kept
        return condition
    condition, names, values = kept
    self.expr_attr_names_found.extend(names)
    self.expr_attr_values_found.extend(values)
    return condition


#: sha256 of ``ConditionExpressionParser.parse`` and of the parser's methods it relies on in moto 5.2.5.
CONDITIONS: Final = MotoPatch(
    ConditionExpressionParser,
    "parse",
    cached_condition,
    "d4010e239384fa6751b0f2217762d683df9554d1a0f453fc1ea2b7e87296909f",
    mirrors=(
        ConditionExpressionParser.__init__,
        ConditionExpressionParser._make_op_condition,
        ConditionExpressionParser._make_operand,
        ConditionExpressionParser._find_literals,
        ConditionExpressionParser._find_expr_attr_values,
    ),
    summary="a condition expression parsed once per text, names and values",
    recheck=(
        "Re-read moto's ConditionExpressionParser.parse and the methods pinned with it "
        "(kaibo_local.moto_speedups.CONDITIONS.mirrors): the condition must depend on the text, names "
        "and values alone, and evaluating it must change nothing"
    ),
)

# --- 6. A validator copies a kept update expression's tree from its pickle -----------------------


def _copy_of_tree(tree: Any) -> Any:
    """``deepcopy(tree)``; for a tree ``cached_update_expression`` handed out, unpickled instead."""
    kept = _pickled_trees.get(id(tree))
    if kept is not None and kept[0] is tree:
        return pickle.loads(kept[1])  # noqa: S301 - bytes this process pickled itself
    return copy.deepcopy(tree)


def validator_init(  # noqa: PLR0917 - moto's signature
    self: Validator,
    expression: Node,
    expression_attribute_names: dict[str, str],
    expression_attribute_values: dict[str, dict[str, Any]],
    item: Any,
    table: Table,
) -> None:
    """``Validator.__init__``, moto's steps, copying the tree with ``_copy_of_tree``."""
    self.expression_attribute_names = expression_attribute_names
    self.expression_attribute_values = expression_attribute_values
    self.item = item
    self.table = table
    self.processors = self.get_ast_processors()
    self.node_to_validate = _copy_of_tree(expression)


#: sha256 of ``Validator.__init__`` and ``Node.__init__`` in moto 5.2.5.
VALIDATOR_TREE_COPY: Final = MotoPatch(
    Validator,
    "__init__",
    validator_init,
    "e3d56dab15a6b9cf51bf1f356da60ab2e76e630d667e3b00d926d39d31216967",
    mirrors=(Node.__init__,),
    summary="a validator's copy of a kept update expression's tree unpickled, not deep-copied",
    recheck=(
        "Re-read moto's Validator.__init__ and the Node classes of moto.dynamodb.parsing.ast_nodes: "
        "unpickling the kept tree must give what deepcopy gives (no __deepcopy__, __reduce__ or "
        "__getstate__ of their own)"
    ),
)

# --- 7. ADD of numbers to top-level attributes without moto's validators --------------------------

#: ``ADD path :value`` actions, comma-separated; a path is a plain attribute name or a ``#name``.
_NUMBER_ADD: Final = re.compile(
    r"ADD\s+((?:[A-Za-z][A-Za-z0-9_]*|#[A-Za-z0-9_]+)\s+:[A-Za-z0-9_]+"
    r"(?:\s*,\s*(?:[A-Za-z][A-Za-z0-9_]*|#[A-Za-z0-9_]+)\s+:[A-Za-z0-9_]+)*)\s*"
)
_NUMBER_ADD_ACTION: Final = re.compile(r"\s*(\S+)\s+(\S+)\s*")
_reserved_words: set[str] = set()


def _number_adds(
    table: Table, update_expression: str, names: Mapping[str, str] | None, values: Mapping[str, Any] | None
) -> list[tuple[str, DynamoType]] | None:
    """(attribute, number to add) per action of ``update_expression``, in its order, if it is one
    ADD clause of numbers to distinct top-level attributes, none of them a key, every placeholder
    defined; None for anything else (moto's own update_item then parses, checks and answers)."""
    matched = _NUMBER_ADD.fullmatch(update_expression)
    if matched is None:
        return None
    if not _reserved_words:
        _reserved_words.update(word.upper() for word in ReservedKeywords.get_reserved_keywords())
    adds: list[tuple[str, DynamoType]] = []
    for action in matched.group(1).split(","):
        path, placeholder = _NUMBER_ADD_ACTION.fullmatch(action).groups()  # type: ignore[union-attr]
        if path.startswith("#"):
            name = (names or {}).get(path)
            if not isinstance(name, str):
                return None
        elif path.upper() in _reserved_words:
            return None
        else:
            name = path
        value = (values or {}).get(placeholder)
        if (
            type(value) is not dict
            or list(value) != ["N"]
            or type(value["N"]) is not str
            or name in table.table_key_attrs
            or any(name == seen for seen, _ in adds)
        ):
            return None
        adds.append((name, DynamoType(value)))
    return adds


def number_add_update_item(  # noqa: PLR0917 - moto's signature
    self: DynamoDBBackend,
    table_name: str,
    key: dict[str, dict[str, Any]],
    update_expression: str,
    expression_attribute_names: dict[str, Any],
    expression_attribute_values: dict[str, Any],
    attribute_updates: dict[str, Any] | None = None,
    expected: dict[str, Any] | None = None,
    condition_expression: str | None = None,
    return_values_on_condition_check_failure: str | None = None,
) -> Any:
    """``DynamoDBBackend.update_item``; an unconditional ``ADD`` of numbers (``ADD df :one``) applied
    directly, as moto's executor applies it, without building and validating the tree."""

    def by_moto() -> Any:
        return NUMBER_ADD_UPDATE.original()(
            self,
            table_name,
            key,
            update_expression,
            expression_attribute_names,
            expression_attribute_values,
            attribute_updates,
            expected,
            condition_expression,
            return_values_on_condition_check_failure,
        )

    table = self.get_table(table_name)
    key_names = {table.hash_key_attr} | ({table.range_key_attr} if table.range_key_attr else set())
    if (
        attribute_updates
        or expected
        or condition_expression
        or not update_expression
        or set(key) != key_names
    ):
        return by_moto()
    adds = _number_adds(table, update_expression, expression_attribute_names, expression_attribute_values)
    if adds is None:
        return by_moto()
    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    item = table.get_item(hash_value, range_value)
    orig_item = copy.deepcopy(item) if table.stream_shard is not None else None  # moto: for the stream
    totals: list[tuple[str, DynamoType]] = []
    for name, number in adds:  # computed before anything changes: a bad number changes nothing
        existing = item.attrs.get(name) if item is not None else None
        if existing is not None and existing.type != "N":
            return by_moto()  # moto's IncorrectDataType
        try:
            totals.append((name, (existing or DynamoType({"N": "0"})) + number))
        except (ValueError, ArithmeticError):
            return by_moto()
    if item is None:  # moto: an update creates the item, keys first
        data: dict[str, Any] = {table.hash_key_attr: {hash_value.type: hash_value.value}}
        if range_value:
            data[table.range_key_attr] = {range_value.type: range_value.value}  # type: ignore[index]
        table.put_item(data)
        item = table.get_item(hash_value, range_value)
        assert item is not None
    try:
        for name, total in totals:
            item.attrs[name] = total
    except ItemSizeTooLarge:
        raise ItemSizeToUpdateTooLarge() from None
    if table.stream_shard is not None:
        table.stream_shard.add(orig_item, item)
    return item


#: sha256 of ``DynamoDBBackend.update_item`` and of the moto code an ADD of numbers goes through
#: (parser, validators, executor, number addition, the size-limited attributes) in moto 5.2.5.
NUMBER_ADD_UPDATE: Final = MotoPatch(
    DynamoDBBackend,
    "update_item",
    number_add_update_item,
    "ec2047b055a720dc034a6f86be71e0a88da581f48043bc4c0ccaa0500e31510c",
    mirrors=(
        UpdateExpressionValidator.get_ast_processors,
        UpdateHashRangeKeyValidator.check_for_hash_or_range_key,
        ExpressionAttributeValueProcessor.replace_expression_attribute_value_with_value,
        ExpressionAttributeResolvingProcessor.pre_processing_of_child,
        ExpressionAttributeResolvingProcessor.resolve_expression_path,
        Node.normalize,
        UpdateExpressionExecutor.execute,
        AddExecutor.execute,
        SetExecutor.set,
        DynamoType.__add__,
        LimitedSizeDict.__setitem__,
    ),
    summary="an unconditional ADD of numbers applied without building and validating its tree",
    recheck=(
        "Re-read moto's DynamoDBBackend.update_item and the code pinned with it "
        "(kaibo_local.moto_speedups.NUMBER_ADD_UPDATE.mirrors): an ADD of a number to a top-level "
        "non-key attribute must still set it to the stored number (0 if absent) plus the value, in "
        "the expression's order, creating the item first if absent, and refuse the rest as moto does"
    ),
)

# --- 8. An item's size counted once per attribute as it is built -----------------------------------

#: moto's item size limit (``LimitedSizeDict.__setitem__``: between DynamoDB's 400 KB and 410 KB).
_MOTO_ITEM_LIMIT: Final = 405000


def item_init(self: Item, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]) -> None:
    """``Item.__init__``: moto's attributes and size check, the size of those already set kept as a
    running total (moto's ``LimitedSizeDict`` sums every attribute again for each one it adds)."""
    self.hash_key = hash_key
    self.range_key = range_key
    self.attrs = LimitedSizeDict()
    total = 0
    for key, value in attrs.items():
        typed = DynamoType(value)
        size = bytesize(key) + typed.size()
        if total + size > _MOTO_ITEM_LIMIT:
            raise ItemSizeTooLarge
        dict.__setitem__(self.attrs, key, typed)
        total += size


#: sha256 of ``Item.__init__`` and ``LimitedSizeDict.__setitem__`` in moto 5.2.5.
ITEM_SIZE: Final = MotoPatch(
    Item,
    "__init__",
    item_init,
    "fc02f7fab7a521c3c0cb66831ca5baa67abea1cd98a35fd7704654b1d9208344",
    mirrors=(LimitedSizeDict.__setitem__,),
    summary="an item's size counted once per attribute as it is built",
    recheck=(
        "Re-read moto's Item.__init__ and LimitedSizeDict.__setitem__, and re-check "
        "kaibo_local.moto_speedups.item_init against them (same attributes, same limit, same error)"
    ),
)

#: The speed-ups, in the order ``install`` applies them.
SPEEDUPS: Final = (
    PARTITION_QUERY,
    FAST_SERIALIZATION,
    SQS_SEND_MESSAGE,
    SQS_RETENTION_CHECK,
    UPDATE_EXPRESSIONS,
    CONDITIONS,
    VALIDATOR_TREE_COPY,
    NUMBER_ADD_UPDATE,
    ITEM_SIZE,
)

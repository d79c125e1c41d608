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

2. **Query and BatchGetItem results serialized in one ``json.dumps``** (``fast_execute_result``
   replaces ``ActionResult.execute_result`` for ``DynamoResult``). moto walks the response shape
   attribute by attribute (``moto.core.serialize``): ~0.1 s for a Query of 400 small items, most
   of a recall's time on the emulator. The replacement reproduces that walk where it is trivial
   (structures in the shape's member order, numbers as moto casts them, items and keys, already in
   wire form, copied through) and leaves everything else to moto: a binary attribute, a value of a
   type moto would convert, a member the output shape does not name, ``MOTO_PRETTIFY_RESPONSES``.
   The body is moto's document, same keys in the same order, same values, written without the
   optional spaces (``json.dumps(..., separators=(",", ":"))``); status and headers are moto's.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from moto import settings
from moto.core.responses import ActionResult
from moto.core.serialize import BaseJSONSerializer, JSONSerializer, ResponseSerializer
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult

if TYPE_CHECKING:
    from botocore.model import Shape
    from moto.core.common_types import TYPE_RESPONSE
    from moto.core.responses import ActionContext

__all__ = [
    "FAST_SERIALIZATION",
    "FAST_SERIALIZED_OPERATIONS",
    "PARTITION_QUERY",
    "SPEEDUPS",
    "MotoPatch",
    "fast_execute_result",
    "install",
    "partition_query",
    "source_sha256",
    "uninstall",
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


# --- 2. Query and BatchGetItem results in one json.dumps -----------------------------------------

#: Operations whose results ``fast_execute_result`` serializes itself.
FAST_SERIALIZED_OPERATIONS: Final = frozenset({"Query", "BatchGetItem"})


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
    """``ActionResult.execute_result`` for DynamoDB: Query and BatchGetItem in one ``json.dumps``."""
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
    summary="Query and BatchGetItem results written with one json.dumps",
    recheck=(
        "Re-read moto's ActionResult.execute_result and the JSON serializer methods pinned with it "
        "(kaibo_local.moto_speedups.FAST_SERIALIZATION.mirrors), and re-check _wire against them"
    ),
)

#: The speed-ups, in the order ``install`` applies them.
SPEEDUPS: Final = (PARTITION_QUERY, FAST_SERIALIZATION)

"""What one recall costs, as the project grows: DynamoDB reads, read units, CPU, needle hit rate.

Run from the repository root (``bench/README.md``)::

    PYTHONPATH=.:local .venv/bin/python bench/recall_cost.py [--quick] [--sizes 1000,10000,100000]
        [--json PATH] [--profile] [--semantic mini6]

Projects of 1k, 10k and 100k synthetic memories (a Zipf-like vocabulary of 20k made-up words,
memories of 8-40 words rendered as sentences) are seeded straight into the emulator's backend,
exactly as ``DynamoMemoryStore.index_new`` would have stored them (checked against the real
``index_new`` on a sample before anything else). Each project holds 50 planted "needle" memories
whose questions use frequent words plus one or two rare ones. Per recall (``RecallService.recall``
with the real ``DynamoTermIndex`` and ``DynamoMemoryStore``, budget 300) it reports DynamoDB
requests by operation, items and bytes read, read units as DynamoDB bills them (counted with
botocore event hooks; moto reports no consumed capacity), the process CPU time of the whole recall
call p50/p95, and whether the needle's memory was recalled. Then the write units per remembered
event (``RememberService`` with the event store and the memory store), events part vs index part.

The emulator runs in a child process (``start_emulator`` + tables from template.yaml), which also
does the seeding, so that ``time.process_time()`` in this process measures the recall alone:
deserialization, tokenizing, ranking and packing, with botocore's request/response handling
included and moto's work excluded. ``--quick``: 1k and 10k only, fewer recalls (< 2 minutes).

``--semantic mini6``: recall by meaning on (issue #19). Every seeded memory is placed: its cells,
impacts and int8 code are ``place(vector, cells)``'s, as remember writes them, but its vector is
synthetic (a trained centroid pulled toward a neighbouring one, plus gaussian noise: made-up
meaning, nearest-cell cosines calibrated on real texts'), since embedding 100k memories would
take most of an hour; the needles carry their real MiniLM placements. The questions are embedded
by the real model inside the measured recall (``OPENBLAS_NUM_THREADS=1``, one core as a 1-vCPU
Lambda). The seeder check also places memories (by the model and synthetically); a lexical-only
baseline is recalled on a project seeded without placements at the CPU target's size; the write
units are measured with and without the channel.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import http.client
import io
import itertools
import json
import multiprocessing
import os
import pstats
import random
import statistics
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

ROOT: Final = Path(__file__).resolve().parents[1]
# The local stack lives in local/: make the script run from a clean checkout without PYTHONPATH too
# (kaibo_core is installed in the venv). The spawned emulator process inherits sys.path.
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

import botocore.session
from botocore.awsrequest import AWSHTTPConnection

from bench.common import (
    REGION,
    CellStyle,
    Report,
    heads_index_units,
    machine,
    moto_dynamodb_backend,
    percentile,
    process_memory_mb,
    progress,
    read_units,
    total,
    update_size,
    use_fake_aws,
    write_units,
)
from kaibo_core.adapters.aws import dynamodb_client, dynamodb_reads
from kaibo_core.adapters.dynamodb_events import DynamoEventLocator, DynamoEventStore, event_item
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore, memory_item, posting_item
from kaibo_core.adapters.dynamodb_values import Item, item_size, key, n
from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads
from kaibo_core.api.mapping import new_events, recall_body, recall_query
from kaibo_core.api.models import RecallRequest, RememberRequest
from kaibo_core.core import storage_keys
from kaibo_core.core.clock import format_instant
from kaibo_core.core.indexing import CORPUS_SHARDS, DF_SHARDS, index_side, memory_plan
from kaibo_core.core.limits import MAX_EVENTS_PER_BATCH
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import (
    PROVISIONAL_CONFIDENCE,
    MemoryRecord,
    SemanticPlacement,
    SourceEventRef,
)
from kaibo_core.core.provisional import PROVISIONAL_TYPE, provisional_memory_id
from kaibo_core.core.semantic.placement import CELL_IMPACT_SCALE, CELL_TERM_PREFIX, place
from kaibo_core.core.semantic.scoring import SemanticParams
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import STOPWORDS, analyze, query_terms
from kaibo_core.services.recall import RecallParams, RecallService
from kaibo_core.services.remember import RememberService
from kaibo_core.services.semantic import SemanticChannel

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import numpy as np
    from moto.dynamodb.models.table import Table
    from mypy_boto3_dynamodb import DynamoDBClient
    from numpy.typing import NDArray

    from kaibo_core.core.semantic.cells import Cells

# --- The synthetic corpus ------------------------------------------------------------------------

VOCABULARY_SIZE: Final = 20_000
FRESH_WORDS: Final = 500  # made-up words that never occur in the corpus: needles' distinctive words
ZIPF_S: Final = 1.1
VOCABULARY_SEED: Final = 20260601
NEEDLE_SEED: Final = 4242
NEEDLES: Final = 50
FREQUENT_RANKS: Final = 50  # needles' and questions' frequent words: vocabulary ranks 1..50
RARE_RANKS: Final = (5_001, 10_000)  # needles' rare words: vocabulary ranks in this range
BUDGET: Final = 300
#: Function words sprinkled between content words (all stopwords: they never reach the index).
FILLERS: Final = ("the", "a", "to", "and", "of", "in", "for", "is", "we", "it", "on", "with", "that", "was")
STREAMS: Final = ("chat", "ops", "design", "support", "notes", "sales", "infra", "people")
BASE_INSTANT: Final = datetime(2024, 1, 1, tzinfo=UTC)
_ONSETS: Final = ("", *"b c d f g h j k l m n p r s t v w z br cl dr fl gr pl pr sk st tr ch sh th".split())  # noqa: SIM905
_VOWELS: Final = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y")
_CODAS: Final = ("", "", "", "n", "r", "l", "s", "t", "m", "nd", "rk", "st", "ng", "x")
_CROCKFORD: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# --- Targets -------------------------------------------------------------------------------------

RCU_TARGET: Final = 2.0  # mean read units per recall at 100k / at 1k
HIT_TOLERANCE_POINTS: Final = 2.0  # needle hit rate at 100k at most this many points below 1k's
CPU_TARGET_MS: Final = 20.0  # recall CPU p95 at 10k
CPU_TARGET_SIZE: Final = 10_000
DRIFT_SAMPLE: Final = 50
PROFILE_ROWS: Final = 15

# --- Recall by meaning (--semantic) --------------------------------------------------------------

#: Models ``--semantic`` takes: the synthetic vectors are calibrated on this model's space.
SEMANTIC_MODELS: Final = ("mini6",)
#: Recall CPU p95 at 10k with recall by meaning on, at most this many times the lexical figure.
SEMANTIC_CPU_RATIO: Final = 1.5
SYNTHETIC_SEED: Final = 1919
#: A synthetic vector: a random centroid, pulled by λ ~ U(0, SYNTHETIC_PULL) toward one of its
#: SYNTHETIC_NEIGHBOURS nearest centroids, plus gaussian noise of norm σ ~ U(SYNTHETIC_NOISE),
#: normalised. Calibrated (2026-06) so that the nearest two cells' cosines match those of real
#: English memories placed by MiniLM (section 2 shows both, each run).
SYNTHETIC_NEIGHBOURS: Final = 8
SYNTHETIC_PULL: Final = 0.75
SYNTHETIC_NOISE: Final = (1.2, 3.6)
SYNTHETIC_CHUNK: Final = 1024
#: Corpus-like texts placed by the real model, for the comparison of section 1.
CALIBRATION_TEXTS: Final = 200
#: Real English memories (hand-written, tests/data): the other side of that comparison.
ENGLISH_TEXTS: Final = ROOT / "tests" / "data" / "paraphrase_tuning.json"
QUANTILES: Final = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Sizes:
    """Sizes of one run: ``--quick`` or the full one."""

    projects: tuple[int, ...]
    recalls: int  # per project: the needles' questions + organic questions
    warmup: int
    single_calls: int  # remember calls of one event
    batch_calls: int  # remember calls of MAX_EVENTS_PER_BATCH events
    profiled_recalls: int


QUICK: Final = Sizes(
    projects=(1_000, 10_000), recalls=100, warmup=5, single_calls=5, batch_calls=1, profiled_recalls=30
)
FULL: Final = Sizes(
    projects=(1_000, 10_000, 100_000),
    recalls=250,
    warmup=20,
    single_calls=30,
    batch_calls=4,
    profiled_recalls=100,
)


def _word(rng: random.Random) -> str:
    syllables = rng.choice((1, 2, 2, 2, 3, 3))
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))


def _crockford(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


class Vocabulary:
    """20k made-up English-like words, ranked (rank 1 most frequent), each its own term.

    Every word survives the text pipeline as exactly one term (alphabetic, not a stopword), and
    no two words share a term (Snowball stems that would merge two words drop the later one).
    Shorter words get the frequent ranks, as in English. Deterministic for a given seed.
    """

    def __init__(self, seed: int = VOCABULARY_SEED) -> None:
        rng = random.Random(seed)
        words: list[str] = []
        terms: set[str] = set()
        while len(words) < VOCABULARY_SIZE + FRESH_WORDS:
            word = _word(rng)
            found = analyze(word)
            if len(word) < 3 or len(found) != 1 or found[0] in terms:
                continue
            terms.add(found[0])
            words.append(word)
        self.words = sorted(words[:VOCABULARY_SIZE], key=len)  # stable: random order within a length
        self.fresh = words[VOCABULARY_SIZE:]
        self.rank = {word: number for number, word in enumerate(self.words, start=1)}
        self.term = {word: analyze(word)[0] for word in words}
        self._cumulative = list(itertools.accumulate(r**-ZIPF_S for r in range(1, VOCABULARY_SIZE + 1)))
        if not set(FILLERS) <= STOPWORDS:
            raise RuntimeError("every filler word must be a stopword")

    def sample(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self._cumulative, k=count)

    def frequent(self, rng: random.Random, count: int) -> list[str]:
        return rng.sample(self.words[:FREQUENT_RANKS], count)

    def rare(self, rng: random.Random, count: int) -> list[str]:
        low, high = RARE_RANKS
        return rng.sample(self.words[low - 1 : high], count)


def render(rng: random.Random, content: Sequence[str]) -> str:
    """Content words as sentences of 5-12 words, with function words (stopwords) in between."""
    sentences: list[str] = []
    position = 0
    while position < len(content):
        length = rng.randint(5, 12)
        tokens: list[str] = []
        for word in content[position : position + length]:
            if rng.random() < 0.35:
                tokens.append(rng.choice(FILLERS))
            tokens.append(word)
        position += length
        sentence = " ".join(tokens)
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(sentences)


def content_length(rng: random.Random) -> int:
    """Content words of a memory: 8-40, and 2 % longer ones (80-200) like pasted paragraphs."""
    return rng.randint(80, 200) if rng.random() < 0.02 else rng.randint(8, 40)


def question_text(rng: random.Random, words: Sequence[str]) -> str:
    """A question whose only non-stopwords are ``words`` (in a random order)."""
    shuffled = list(words)
    rng.shuffle(shuffled)
    listed = ", ".join(shuffled[:-1]) + " and " + shuffled[-1] if len(shuffled) > 1 else shuffled[0]
    template = rng.choice(("What about {}?", "What was it with {}?", "Which {}?", "And {} again?"))
    return template.format(listed)


@dataclass(frozen=True)
class NeedleSpec:
    """A planted memory and its question; the same text and question in every project."""

    number: int
    kind: str  # "fresh": a word no other memory has; "rare2"/"rare1": vocabulary ranks 5001-10000
    frequent: tuple[str, ...]
    distinctive: tuple[str, ...]
    text: str
    question: str


NEEDLE_KINDS: Final = {
    "fresh": "2-3 frequent words + a made-up word no other memory has (+ a rare word half the time)",
    "rare2": "2-3 frequent words + 2 rare words (vocabulary ranks 5001-10000)",
    "rare1": "2-3 frequent words + 1 rare word (vocabulary ranks 5001-10000)",
}


def needle_specs(vocabulary: Vocabulary) -> list[NeedleSpec]:
    specs: list[NeedleSpec] = []
    fresh = iter(vocabulary.fresh)
    for number in range(NEEDLES):
        rng = random.Random(NEEDLE_SEED * 1000 + number)
        frequent = vocabulary.frequent(rng, rng.choice((2, 3)))
        if number < 20:
            kind = "fresh"
            distinctive = [next(fresh)] + (vocabulary.rare(rng, 1) if rng.random() < 0.5 else [])
        elif number < 35:
            kind, distinctive = "rare2", vocabulary.rare(rng, 2)
        else:
            kind, distinctive = "rare1", vocabulary.rare(rng, 1)
        words = frequent + distinctive + vocabulary.sample(rng, rng.randint(8, 20))
        rng.shuffle(words)
        specs.append(
            NeedleSpec(
                number,
                kind,
                tuple(frequent),
                tuple(distinctive),
                render(rng, words),
                question_text(rng, frequent + distinctive),
            )
        )
    return specs


def memory_record(project: ProjectId, rng: random.Random, index: int, size: int, text: str) -> MemoryRecord:
    """A provisional memory as remember makes it, with a fake but well-formed source event."""
    moment = BASE_INSTANT + timedelta(days=365 * index / max(1, size))
    millis = int(moment.timestamp() * 1000)
    event = f"evt_{_crockford(millis, 10)}{_crockford(rng.getrandbits(80), 16)}"
    stream = STREAMS[index % len(STREAMS)]
    source = SourceEventRef(event, stream, index // len(STREAMS) + 1, f"{rng.getrandbits(256):064x}")
    return MemoryRecord(
        project_id=project,
        id=provisional_memory_id(event),
        status="provisional",
        type=PROVISIONAL_TYPE,
        content=text,
        valid_from=format_instant(moment),
        valid_to=None,
        confidence=PROVISIONAL_CONFIDENCE,
        stream=stream,
        source_events=(source,),
        created_at=format_instant(moment + timedelta(seconds=2)),
    )


def source_event(memory: MemoryRecord, source: SourceEventRef) -> EventRecord:
    """The event a seeded memory cites, as remember stores a message of its text (a made-up
    digest, hashes and salt of the real lengths: an item of the real size)."""
    payload = json.dumps({"role": "user", "text": memory.content}, ensure_ascii=False, sort_keys=True)
    return EventRecord(
        project_id=memory.project_id,
        stream=source.stream,
        seq=source.seq,
        id=source.event_id,
        kind="message",
        idempotency_key=f"seed-{source.event_id}",
        occurred_at=memory.valid_from,
        received_at=memory.created_at,
        payload_digest=source.hash,
        hash=source.hash,
        prev_hash=source.hash,
        canonical_payload=payload,
        salt=source.hash[:32],
    )


# --- Synthetic placements (--semantic) -----------------------------------------------------------


def synthetic_vectors(cells: Cells, rng: np.random.Generator, count: int) -> NDArray[np.float32]:
    """``count`` unit vectors near the trained centroids (``SYNTHETIC_*``): a made-up meaning whose
    nearest cells, and their cosines, look like a real text's."""
    import numpy as np  # noqa: PLC0415 - only a semantic run pays for numpy

    centroids = cells.centroids
    similarity = centroids @ centroids.T
    np.fill_diagonal(similarity, -np.inf)
    neighbours = np.argsort(-similarity, axis=1)[:, :SYNTHETIC_NEIGHBOURS]
    anchor = rng.integers(0, cells.count, count)
    pulled = neighbours[anchor, rng.integers(0, SYNTHETIC_NEIGHBOURS, count)]
    pull = rng.uniform(0.0, SYNTHETIC_PULL, (count, 1))
    sigma = rng.uniform(*SYNTHETIC_NOISE, (count, 1))
    dimensions = centroids.shape[1]
    noise = rng.standard_normal((count, dimensions)) * sigma / np.sqrt(dimensions)
    vectors = centroids[anchor] + pull * centroids[pulled] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors, dtype=np.float32)


class SyntheticPlacements:
    """Placements of synthetic vectors, one per call, deterministic for a seed: ``place()``'s
    cells, impacts and int8 code, exactly as remember stores a placement (only the vector is made up)."""

    def __init__(self, cells: Cells, seed: int) -> None:
        import numpy as np  # noqa: PLC0415 - only a semantic run pays for numpy

        self._cells = cells
        self._rng = np.random.default_rng(seed)
        self._pending: list[NDArray[np.float32]] = []

    def __call__(self) -> SemanticPlacement:
        if not self._pending:
            self._pending = list(synthetic_vectors(self._cells, self._rng, SYNTHETIC_CHUNK))[::-1]
        return place(self._pending.pop(), self._cells)


def nearest_cosines(placement: SemanticPlacement) -> tuple[float, float]:
    """The cosines of a placement's two nearest cells (its impacts, unscaled)."""
    (_, first), (_, second) = placement.cells[:2]
    return first / CELL_IMPACT_SCALE, second / CELL_IMPACT_SCALE


@dataclass
class PlacementProfile:
    """How a set of placements sits among the cells: nearest-cell cosines and cell occupancy."""

    label: str
    count: int
    top1: list[float]  # quantiles QUANTILES of the nearest cell's cosine
    top2: list[float]  # of the second nearest's
    cells_used: int  # distinct nearest cells
    largest_share: float  # of the placements, the share of the most used nearest cell

    @classmethod
    def of(cls, label: str, placements: Sequence[SemanticPlacement]) -> PlacementProfile:
        cosines = [nearest_cosines(p) for p in placements]
        firsts = Counter(p.cells[0][0] for p in placements)
        return cls(
            label,
            len(placements),
            quantiles([first for first, _ in cosines]),
            quantiles([second for _, second in cosines]),
            len(firsts),
            max(firsts.values()) / len(placements),
        )


def quantiles(values: Sequence[float]) -> list[float]:
    return [percentile(values, q) for q in QUANTILES]


# --- Seeding straight into moto's backend (in the emulator process) ------------------------------


# moto and the emulator are imported only in the emulator process (inside these functions): the
# benchmark process stays as lean as a recall handler's, since a full garbage collection there
# walks every object it holds and is part of the CPU measured.


def _insert(table: Table, attributes: dict[str, Any]) -> None:
    """Store an item as moto's ``put_item`` would (same ``Item``), without its per-put overhead.

    moto's ``Item.__init__`` re-sums the size of every attribute for each attribute it adds and
    ``put_item`` evaluates an (absent) condition; for two million small items that is most of the
    seeding time. The stored object is the same: key ``DynamoType``s and the attributes in moto's
    ``LimitedSizeDict`` (``dict.update`` skips the 400 KB check, far off for these items). The
    drift check compares the stored items with those the real ``index_new`` writes.
    """
    from moto.dynamodb.models.dynamo_type import (  # noqa: PLC0415 - emulator process only
        DynamoType,
        LimitedSizeDict,
    )
    from moto.dynamodb.models.dynamo_type import Item as MotoItem  # noqa: PLC0415

    if table.stream_shard is not None:
        raise RuntimeError(f"table {table.name} has a stream: seed it with put_item")
    hash_key = DynamoType(attributes[table.hash_key_attr])
    range_key = DynamoType(attributes[table.range_key_attr]) if table.range_key_attr else None
    item = cast("MotoItem", MotoItem.__new__(MotoItem))
    item.hash_key = hash_key
    item.range_key = range_key
    item.attrs = LimitedSizeDict({name: DynamoType(value) for name, value in attributes.items()})
    if range_key is None:
        table.items[hash_key] = item  # type: ignore[assignment]  # moto's own layout, as put_item does
    else:
        table.items[hash_key][range_key] = item


@dataclass
class SeedStats:
    memories: int = 0
    postings: int = 0
    df_items: int = 0
    corpus_items: int = 0
    seconds: float = 0.0
    doc_freq: dict[str, int] = field(default_factory=dict)  # term -> memories containing it
    cell_postings: int = 0  # of postings: cells' (placed memories)
    placements: list[SemanticPlacement] = field(default_factory=list)  # of the placed memories


class Seeder:
    """Writes memories with their index into moto's backend: the items ``index_new`` writes.

    Per memory: ``memory_plan`` (its terms and, when placed, its cells), its postings
    (``posting_item``) and its memory item (``memory_item``); the df and corpus shard counters
    are summed here and stored once per shard item at the end (``index_new`` adds 1 per memory
    with ``ADD``). Holds ``dynamodb_lock()`` while it touches the backend, so requests served
    meanwhile see consistent tables.
    """

    def __init__(self, tables: dict[str, str]) -> None:
        backend = moto_dynamodb_backend()
        self._index: Table = backend.get_table(tables["TermIndexTable"])
        self._memories: Table = backend.get_table(tables["MemoriesTable"])
        self._events: Table = backend.get_table(tables["EventsTable"])

    def seed(self, project: ProjectId, memories: Iterable[MemoryRecord]) -> SeedStats:
        """Seed, then move everything to the garbage collector's permanent generation.

        Millions of moto objects make each full collection of the emulator process take seconds
        (long enough for the client's 5 s read timeout); they live until the process ends, so
        collections skip them (``gc.freeze()``), and none runs while seeding.
        """
        gc.disable()
        try:
            return self._seed(project, memories)
        finally:
            gc.freeze()
            gc.enable()

    def _seed(self, project: ProjectId, memories: Iterable[MemoryRecord]) -> SeedStats:
        from kaibo_local.emulator import dynamodb_lock  # noqa: PLC0415 - emulator process only

        started = time.perf_counter()
        stats = SeedStats()
        doc_freq: Counter[tuple[str, int]] = Counter()
        docs = [0] * CORPUS_SHARDS
        terms = [0] * CORPUS_SHARDS
        partitions: set[str] = set()
        for memory in memories:
            if memory.content is None or memory.project_id != project:
                raise ValueError("seed memories with content, of this project")
            side = index_side(memory.status)
            if side is None:
                raise ValueError(f"a {memory.status} memory is not indexed")
            plan = memory_plan(memory)
            items = [posting_item(project, memory, side, entry, plan.dl) for entry in plan.entries]
            with dynamodb_lock():
                for item in items:
                    _insert(self._index, item)
                _insert(self._memories, memory_item(memory, plan.dl, side))
                for source in memory.source_events:  # what recall's context reads (its ids)
                    _insert(self._events, event_item(source_event(memory, source)))
            for entry in plan.entries:
                doc_freq[entry.term, plan.df_shard] += 1
                partitions.add(storage_keys.postings_pk(project, side, entry.term))
            docs[plan.corpus_shard] += 1
            terms[plan.corpus_shard] += plan.dl
            stats.memories += 1
            stats.postings += len(items)
            if memory.semantic is not None:
                stats.cell_postings += len(memory.semantic.cells)
                stats.placements.append(memory.semantic)
            if stats.memories % 10_000 == 0:
                progress(f"  seeded {stats.memories:,} memories ({time.perf_counter() - started:.0f} s)")
        with dynamodb_lock():
            for (term, shard), count in sorted(doc_freq.items()):
                self._put_new(
                    self._index, {**key(storage_keys.doc_freq_key(project, term, shard)), "df": n(count)}
                )
            for shard in range(CORPUS_SHARDS):
                if docs[shard]:
                    counters: Item = {"docs": n(docs[shard]), "terms": n(terms[shard])}
                    self._put_new(self._index, {**key(storage_keys.corpus_key(project, shard)), **counters})
                    stats.corpus_items += 1
            self._presort(partitions)
        stats.df_items = len(doc_freq)
        totals: Counter[str] = Counter()
        for (term, _), count in doc_freq.items():
            totals[term] += count
        stats.doc_freq = dict(totals)
        stats.seconds = time.perf_counter() - started
        return stats

    def _put_new(self, table: Table, attributes: dict[str, Any]) -> None:
        from moto.dynamodb.models.dynamo_type import DynamoType  # noqa: PLC0415 - emulator process only

        hash_key = DynamoType(attributes[table.hash_key_attr])
        range_key = DynamoType(attributes[table.range_key_attr]) if table.range_key_attr else None
        if table.get_item(hash_key, range_key) is not None:
            raise RuntimeError("a shard counter exists already: seed each project once, into a fresh one")
        _insert(table, attributes)

    def _presort(self, partitions: set[str]) -> None:
        """Store each postings partition in sort-key order (moto's Query sorts it: now in O(n))."""
        from moto.dynamodb.models.dynamo_type import DynamoType  # noqa: PLC0415 - emulator process only

        for pk in partitions:
            hash_key = DynamoType({"S": pk})
            partition = self._index.items.get(hash_key)
            if partition:
                self._index.items[hash_key] = dict(sorted(partition.items(), key=lambda kv: str(kv[0].value)))


@dataclass(frozen=True)
class Question:
    target: str  # the memory id a hit must include
    kind: str  # a needle kind, or "organic"
    text: str
    distinctive_df: int = 0  # memories containing the needle's rarest distinctive word


class CorpusWorld:
    """The emulator process's side: the vocabulary, the seeder, the projects.

    With ``semantic`` (a model version, ``--semantic``), its trained cells: ``corpus`` can place
    every memory (synthetic vectors; the needles' placements are given, from the model).
    """

    def __init__(self, tables: dict[str, str], semantic: str | None = None) -> None:
        self.tables = tables
        self.vocabulary = Vocabulary()
        self.needles = needle_specs(self.vocabulary)
        self.seeder = Seeder(tables)
        self.cells: Cells | None = None
        if semantic is not None:
            from kaibo_core.adapters.semantic_cells import load_cells  # noqa: PLC0415 - semantic runs only

            self.cells = load_cells(semantic)

    def corpus(
        self,
        project: ProjectId,
        size: int,
        organic: int,
        needle_placements: Sequence[SemanticPlacement] | None = None,
    ) -> dict[str, Any]:
        """Seed a project of ``size`` memories (needles included) and make its questions.

        ``needle_placements`` (one per needle, in order): every memory is placed, the needles
        with these, the others with synthetic vectors (``SyntheticPlacements``, seeded by size).
        Without, nothing is placed. The texts, ids and questions are the same either way.
        """
        rng = random.Random(f"corpus-{size}")
        synthetic: SyntheticPlacements | None = None
        if needle_placements is not None:
            if self.cells is None or len(needle_placements) != len(self.needles):
                raise ValueError("placed projects need the world's cells and one placement per needle")
            synthetic = SyntheticPlacements(self.cells, SYNTHETIC_SEED * 1_000_003 + size)
        needle_at = {int((number + 0.5) * size / NEEDLES): spec for number, spec in enumerate(self.needles)}
        if len(needle_at) != NEEDLES or size < 2 * NEEDLES:
            raise ValueError(f"a project needs at least {2 * NEEDLES} memories")
        ordinary = [i for i in range(size) if i not in needle_at]
        organic_at = set(random.Random(f"organic-{size}").sample(ordinary, min(organic, len(ordinary))))
        words_of: dict[int, list[str]] = {}
        needle_ids: dict[int, str] = {}

        def memories() -> Iterator[MemoryRecord]:
            for index in range(size):
                spec = needle_at.get(index)
                if spec is not None:
                    text = spec.text
                else:
                    words = self.vocabulary.sample(rng, content_length(rng))
                    text = render(rng, words)
                    if index in organic_at:
                        words_of[index] = words
                record = memory_record(project, rng, index, size, text)
                if synthetic is not None and needle_placements is not None:
                    placement = synthetic() if spec is None else needle_placements[spec.number]
                    record = replace(record, semantic=placement)
                if spec is not None:
                    needle_ids[spec.number] = record.id
                if index in organic_at:
                    needle_ids[-1 - index] = record.id
                yield record

        stats = self.seeder.seed(project, memories())
        questions = [
            Question(
                needle_ids[spec.number],
                spec.kind,
                spec.question,
                min(stats.doc_freq.get(self.vocabulary.term[w], 0) for w in spec.distinctive),
            )
            for spec in self.needles
        ]
        question_rng = random.Random(f"questions-{size}")
        for index in sorted(organic_at):
            distinct = sorted(set(words_of[index]), key=self.vocabulary.rank.__getitem__)
            frequent = [w for w in distinct if self.vocabulary.rank[w] <= FREQUENT_RANKS][:2] or distinct[:2]
            rarest = distinct[-1]
            words = frequent + ([rarest] if rarest not in frequent else [])
            questions.append(Question(needle_ids[-1 - index], "organic", question_text(question_rng, words)))
        seeded = {
            "memories": stats.memories,
            "postings": stats.postings,
            "df_items": stats.df_items,
            "corpus_items": stats.corpus_items,
            "seconds": stats.seconds,
            "questions": [asdict(question) for question in questions],  # plain data through the pipe
        }
        if needle_placements is not None:
            seeded["cell_postings"] = stats.cell_postings
            seeded["placements"] = asdict(PlacementProfile.of(f"seeded {size:,}", stats.placements))
        return seeded

    def sample(self, project: ProjectId, count: int) -> list[MemoryRecord]:
        """``count`` corpus-like memories (some long), seeded into ``project``; returned."""
        records = self.drift_records(project, count)
        self.seeder.seed(project, records)
        return records

    def drift_records(self, project: ProjectId, count: int) -> list[MemoryRecord]:
        """``count`` corpus-like memories (some long) of ``project``, not seeded (``seed``)."""
        rng = random.Random("drift-sample")
        records = []
        for index in range(count):
            words = self.vocabulary.sample(
                rng, rng.randint(80, 200) if index % 10 == 0 else content_length(rng)
            )
            records.append(memory_record(project, rng, index, count, render(rng, words)))
        return records

    def seed(self, project: ProjectId, records: list[MemoryRecord]) -> int:
        """Seed ``records`` (placed or not) into ``project``: how many."""
        return self.seeder.seed(project, records).memories

    def synthetic_placements(self, count: int, seed: int) -> list[SemanticPlacement]:
        """``count`` placements of synthetic vectors, as ``corpus`` gives its memories."""
        if self.cells is None:
            raise ValueError("the world has no cells: start the emulator process with --semantic")
        synthetic = SyntheticPlacements(self.cells, seed)
        return [synthetic() for _ in range(count)]

    def needle_texts(self) -> list[str]:
        return [spec.text for spec in self.needles]

    def corpus_texts(self, count: int) -> list[str]:
        """Texts made like the corpus's memories (with their own random stream)."""
        rng = random.Random("calibration-texts")
        return [render(rng, self.vocabulary.sample(rng, content_length(rng))) for _ in range(count)]

    def texts(self, count: int) -> list[str]:
        rng = random.Random("remember-texts")
        return [render(rng, self.vocabulary.sample(rng, rng.randint(8, 40))) for _ in range(count)]

    def dump(self, project: ProjectId) -> dict[str, list[dict[str, Any]]]:
        """Every stored item of ``project`` (memories and term index), in wire format."""
        from kaibo_local.emulator import dynamodb_lock  # noqa: PLC0415 - emulator process only

        backend = moto_dynamodb_backend()
        prefix = f"{project}#"
        found: dict[str, list[dict[str, Any]]] = {}
        with dynamodb_lock():
            for logical in ("MemoriesTable", "TermIndexTable"):
                table = backend.get_table(self.tables[logical])
                items: list[dict[str, Any]] = []
                for hash_key, stored in table.items.items():
                    if not str(hash_key.value).startswith(prefix):
                        continue
                    values = stored.values() if isinstance(stored, dict) else [stored]
                    items.extend(item.to_json()["Attributes"] for item in values)
                found[logical] = items
        return found


def emulator_main(connection: Connection, semantic: str | None = None) -> None:
    """The emulator process: moto on a free port, the tables, then commands from the pipe."""
    from kaibo_local.emulator import start_emulator  # noqa: PLC0415 - emulator process only
    from kaibo_local.template import create_tables, load_template  # noqa: PLC0415

    use_fake_aws()
    emulator = start_emulator()
    client = botocore.session.get_session().create_client(
        "dynamodb", endpoint_url=emulator.endpoint_url, region_name=REGION
    )
    tables = create_tables(cast("DynamoDBClient", client), load_template(), "bench")
    world: CorpusWorld | None = None
    connection.send({"endpoint": emulator.endpoint_url, "tables": tables})
    while True:
        command, arguments = connection.recv()
        if command == "stop":
            break
        try:
            if world is None:
                world = CorpusWorld(tables, semantic)
            reply: Any = getattr(world, command)(*arguments)
            connection.send({"ok": reply})
        except Exception:
            connection.send({"error": traceback.format_exc()})
    emulator.stop()
    connection.close()


class EmulatorProcess:
    """The emulator in a child process (spawned), driven through a pipe; ``semantic``: its world's
    cells (a model version)."""

    def __init__(self, semantic: str | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(
            target=emulator_main, args=(child, semantic), name="kaibo-bench-emulator"
        )
        self._process.start()
        child.close()
        ready: dict[str, Any] = self._connection.recv()
        self.endpoint: str = ready["endpoint"]
        self.tables: dict[str, str] = ready["tables"]

    def call(self, command: str, *arguments: Any) -> Any:
        self._connection.send((command, arguments))
        reply: dict[str, Any] = self._connection.recv()
        if "error" in reply:
            raise RuntimeError(f"emulator process: {command} failed:\n{reply['error']}")
        return reply["ok"]

    def memory_mb(self) -> tuple[float, float]:
        """The emulator process's resident set size and its peak (VmRSS, VmHWM), in MB."""
        assert self._process.pid is not None
        return process_memory_mb(self._process.pid)

    def stop(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self._connection.send(("stop", ()))
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()


# --- Counting DynamoDB requests with botocore event hooks -----------------------------------------


@dataclass(frozen=True)
class _Call:
    """One DynamoDB request as the hooks saw it; counted later, outside any timed region."""

    operation: str
    body: bytes
    parsed: dict[str, Any] | bytes  # bytes: a direct read's response body, parsed when counted
    response_bytes: int


class DynamoMeter:
    """Counts what a DynamoDB client sends and receives, from botocore's event hooks.

    The hooks only keep a reference to each request body and parsed response (a few
    microseconds, inside the timed recall); ``snapshot()`` does the counting. Every figure is a
    named counter; ``snapshot()`` and ``since()`` give the difference over a run. Reads: items and
    response bytes per operation, and read units as DynamoDB bills them (from the sizes of the
    returned items, ``kaibo_core`` ``item_size``): a Query is billed the sum of its items' sizes
    rounded up to 4 KB; BatchGetItem and GetItem per item, each rounded up to 4 KB, a missing item
    at the minimum; ×1 strongly consistent, ×0.5 eventually. Writes: per TransactWriteItems
    action, 2 units per started KB of the item (a Put's item; an Update's key plus the attributes
    it sets); the StreamHeads index entry of a head write 1 unit per KB. A cancelled transaction's
    writes are counted apart (``cancelled:``).

    ``split:`` counters tell recall by meaning's cells apart (a cell partition's key has ``~``
    after ``#tc#``/``#th#``), beside the totals they are part of: Query requests, items and read
    units of words (``terms``, the corpus stats' Query included) and of cells, and the write
    actions and units of cell postings and their df shards.
    """

    def __init__(self, client: DynamoDBClient, tables: dict[str, str]) -> None:
        self._part = {
            tables["EventsTable"]: "events",
            tables["IdempotencyTable"]: "events",
            tables["MemoriesTable"]: "index",
            tables["TermIndexTable"]: "index",
            tables["ProjectsTable"]: "projects",
        }
        self._events_table = tables["EventsTable"]
        self._lock = threading.Lock()
        self._pending: list[_Call] = []
        self._counts: dict[str, float] = {}
        self.query_sizes: list[int] = []  # items returned by each Query, in order
        client.meta.events.register("before-call.dynamodb.*", self._before_call)
        client.meta.events.register("before-send.dynamodb.*", self._before_send)
        client.meta.events.register("after-call.dynamodb.*", self._after_call)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            pending, self._pending = self._pending, []
        for call in pending:
            self._count(call)
        with self._lock:
            return dict(self._counts)

    def since(self, before: dict[str, float]) -> dict[str, float]:
        now = self.snapshot()
        return {name: now.get(name, 0.0) - before.get(name, 0.0) for name in now.keys() | before.keys()}

    def observe_direct(self, operation: str, body: bytes, answer: bytes) -> None:
        """``DirectDynamoReads``' observer: a read sent without botocore (no botocore events)."""
        with self._lock:
            self._counts["attempts"] = self._counts.get("attempts", 0.0) + 1
            self._pending.append(_Call(operation, body, answer, len(answer)))

    def _before_call(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_body"] = params.get("body") or b"{}"

    def _before_send(self, **_: Any) -> None:
        with self._lock:
            self._counts["attempts"] = self._counts.get("attempts", 0.0) + 1  # retries included

    def _after_call(
        self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        call = _Call(
            str(model.name), context.get("bench_body", b"{}"), parsed, len(http_response.content or b"")
        )
        with self._lock:
            self._pending.append(call)

    def _count(self, call: _Call) -> None:
        operation = call.operation
        parsed: dict[str, Any] = json.loads(call.parsed) if isinstance(call.parsed, bytes) else call.parsed
        body: dict[str, Any] = json.loads(call.body)
        amounts: defaultdict[str, float] = defaultdict(float)
        amounts[f"requests:{operation}"] = 1
        amounts["request_bytes"] = len(call.body)
        amounts[f"response_bytes:{operation}"] = call.response_bytes
        writes = self._writes(operation, body)
        code = (parsed.get("Error") or {}).get("Code")
        if code:
            amounts[f"errors:{code}"] += 1
            amounts.update({f"cancelled:{name}": value for name, value in writes.items()})
        else:
            amounts.update(writes)
            amounts.update(self._reads(operation, body, parsed))
        with self._lock:
            for name, amount in amounts.items():
                self._counts[name] = self._counts.get(name, 0.0) + amount

    def _writes(self, operation: str, body: dict[str, Any]) -> defaultdict[str, float]:
        writes: defaultdict[str, float] = defaultdict(float)
        for action in body.get("TransactItems", []):
            (kind, spec), *_rest = action.items()
            table = spec["TableName"]
            part = self._part.get(table, "other")
            if kind == "Put":
                item = spec["Item"]
                size = item_size(item)
                writes[f"bytes:{part}"] += size
                if table == self._events_table and "headsPk" in item:
                    writes[f"wcu:{part}"] += heads_index_units(item)
            else:
                size = update_size(spec)
            units = write_units(size, transactional=True)
            writes[f"wcu:{part}"] += units
            writes[f"actions:{part}:{kind}"] += 1
            if _is_cell_partition((spec.get("Item") or spec.get("Key") or {}).get("pk", {}).get("S", "")):
                writes[f"split:actions:cells:{kind}"] += 1
                writes["split:wcu:cells"] += units
        if body.get("TransactItems"):
            parts = {self._part.get(a[next(iter(a))]["TableName"], "other") for a in body["TransactItems"]}
            writes[f"transactions:{'events' if 'events' in parts else min(parts)}"] += 1
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            part = self._part.get(body.get("TableName", ""), "other")
            writes[f"wcu:{part}"] += write_units(item_size(body.get("Item") or body.get("Key") or {}), False)
        return writes

    def _reads(self, operation: str, body: dict[str, Any], parsed: dict[str, Any]) -> defaultdict[str, float]:
        reads: defaultdict[str, float] = defaultdict(float)
        if operation == "Query":
            items = parsed.get("Items", [])
            reads["items:Query"] = len(items)
            reads["rcu:Query"] = read_units(
                sum(item_size(i) for i in items), bool(body.get("ConsistentRead"))
            )
            pk = body.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")
            part = "cells" if _is_cell_partition(pk) else "terms"
            reads[f"split:requests:{part}"] = 1
            reads[f"split:items:{part}"] = len(items)
            reads[f"split:rcu:{part}"] = reads["rcu:Query"]
            with self._lock:
                self.query_sizes.append(len(items))
        elif operation == "BatchGetItem":
            for table, request in body.get("RequestItems", {}).items():
                consistent = bool(request.get("ConsistentRead"))
                items = parsed.get("Responses", {}).get(table, [])
                unprocessed = len(parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", []))
                missing = len(request.get("Keys", [])) - len(items) - unprocessed
                units = sum(read_units(item_size(i), consistent) for i in items)
                units += missing * read_units(0, consistent)
                reads["items:BatchGetItem"] += len(items)
                reads["rcu:BatchGetItem"] += units
                if table == self._events_table:  # recall's context: its neighbours' event ids
                    reads["split:rcu:context_events"] += units
        elif operation == "GetItem":
            item = parsed.get("Item") or {}
            reads["items:GetItem"] = 1 if item else 0
            reads["rcu:GetItem"] = read_units(item_size(item), bool(body.get("ConsistentRead")))
        return reads


def _is_cell_partition(pk: str) -> bool:
    """A postings partition of a cell (``<project>#tc#~<version>.<cell>``, or ``#th#``)."""
    return f"#tc#{CELL_TERM_PREFIX}" in pk or f"#th#{CELL_TERM_PREFIX}" in pk


class ConnectionMeter:
    """CPU time spent opening HTTP connections to the emulator (the thread's own CPU, per connect).

    werkzeug's development server, under moto, answers every request with ``Connection: close``,
    so each request opens a new TCP connection; on AWS connections are kept alive (a Lambda
    container reuses them). Wraps ``AWSHTTPConnection.connect`` (botocore) and
    ``http.client.HTTPConnection.connect`` (the direct reads; the outermost call only) in this
    process, so that the recall CPU can be shown with and without this local-only cost.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = threading.local()
        self.connects = 0
        self.cpu = 0.0
        for cls in (AWSHTTPConnection, http.client.HTTPConnection):  # botocore's, the direct reads'
            self._wrap(cls)

    def _wrap(self, cls: Any) -> None:
        original = cls.connect

        def connect(connection: Any) -> None:
            depth = getattr(self._depth, "value", 0)
            self._depth.value = depth + 1
            started = time.thread_time()
            try:
                original(connection)
            finally:
                spent = time.thread_time() - started
                self._depth.value = depth
                if depth == 0:  # the outermost connect only
                    with self._lock:
                        self.connects += 1
                        self.cpu += spent

        cls.connect = connect

    def snapshot(self) -> tuple[int, float]:
        with self._lock:
            return self.connects, self.cpu


class GcMeter:
    """CPU time this process spends in the garbage collector (``gc.callbacks``), and full collections."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.full = 0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        self.cpu += time.process_time() - self._started
        self.full += info.get("generation") == 2

    def snapshot(self) -> tuple[float, int]:
        return self.cpu, self.full


# --- Output --------------------------------------------------------------------------------------

#: How this report writes values in its tables.
CELLS: Final = CellStyle(zero="0")


def size_name(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


# --- 1. The seeder against the real index_new -----------------------------------------------------


def _normalized(items: list[dict[str, Any]], project: str) -> dict[tuple[str, str], str]:
    """Items keyed by (pk, sk) with the project id removed from the keys, as canonical JSON."""
    found: dict[tuple[str, str], str] = {}
    for item in items:
        pk = item["pk"]["S"].replace(f"{project}#", "<project>#", 1)
        sk = item.get("sk", {}).get("S", "")
        found[pk, sk] = json.dumps({**item, "pk": {"S": pk}}, sort_keys=True)
    return found


def check_seeder(
    emulator: EmulatorProcess,
    store: DynamoMemoryStore,
    report: Report,
    channel: SemanticChannel | None = None,
) -> dict[str, Any]:
    """The seeder's items against ``index_new``'s; with ``channel``, of placed memories: half
    placed by the model, half by the seeder's synthetic vectors."""
    seeded_project, real_project = ProjectId("prj_driftseeded"), ProjectId("prj_driftindexnew")
    records: list[MemoryRecord]
    by_model = 0
    if channel is None:
        records = emulator.call("sample", seeded_project, DRIFT_SAMPLE)
    else:
        drafts: list[MemoryRecord] = emulator.call("drift_records", seeded_project, DRIFT_SAMPLE)
        by_model = len(drafts) // 2
        synthetic: list[SemanticPlacement] = emulator.call(
            "synthetic_placements", len(drafts) - by_model, SYNTHETIC_SEED
        )
        records = channel.place(drafts[:by_model]) + [
            replace(draft, semantic=placement)
            for draft, placement in zip(drafts[by_model:], synthetic, strict=True)
        ]
        if any(record.semantic is None for record in records):
            raise RuntimeError("a drift-check memory was left unplaced")
        emulator.call("seed", seeded_project, records)
    for record in records:
        if not store.index_new(replace(record, project_id=real_project)):
            raise RuntimeError("index_new found the drift-check memory already stored")
    seeded: dict[str, list[dict[str, Any]]] = emulator.call("dump", seeded_project)
    real: dict[str, list[dict[str, Any]]] = emulator.call("dump", real_project)
    compared = cell_items = 0
    differences: list[str] = []
    for table in ("MemoriesTable", "TermIndexTable"):
        mine, theirs = _normalized(seeded[table], seeded_project), _normalized(real[table], real_project)
        compared += len(theirs)
        cell_items += sum(1 for pk, _ in theirs if _is_cell_partition(pk))
        for item_key in sorted(mine.keys() | theirs.keys()):
            if mine.get(item_key) != theirs.get(item_key):
                differences.append(
                    f"{table} {item_key}: seeded {mine.get(item_key)} / index_new {theirs.get(item_key)}"
                )
    report.title("1. Seeder check")
    report.line(
        f"{len(records)} memories ({sum(1 for r in records if len((r.content or '').split()) > 100)} long) "
        "indexed by the real `DynamoMemoryStore.index_new` into one project and by the seeder into another; "
        f"the {compared:,} stored items (memories, postings, df shards, corpus shards) compared "
        f"attribute for attribute: **{'identical' if not differences else f'{len(differences)} DIFFER'}**."
    )
    if channel is not None:
        report.line()
        report.line(
            f"Recall by meaning: every one of them placed, {by_model} by the model "
            f"(`SemanticChannel.place`) and {len(records) - by_model} by the seeder's synthetic vectors "
            f"(`SyntheticPlacements`), the same placements given to both: memory items with `sem`, "
            f"{cell_items:,} cell items compared among them (postings with `v`, the cells' df shards)."
        )
    if differences:
        for difference in differences[:10]:
            report.line(f"- {difference}")
        raise RuntimeError("the seeder drifted from index_new; see the differences above")
    checked: dict[str, Any] = {"memories": len(records), "items": compared, "identical": not differences}
    if channel is not None:
        checked |= {"placed_by_model": by_model, "cell_items": cell_items}
    return checked


# --- 2. Recall cost per project size ---------------------------------------------------------------


@dataclass
class RecallSample:
    kind: str
    question: str
    hit: bool
    answered: bool  # the target, or another recalled item holding every term of the question
    abstained: bool
    cpu_ms: float
    connect_cpu_ms: float  # of cpu_ms: opening connections (local only; see ConnectionMeter)
    connects: int
    gc_cpu_ms: float  # of cpu_ms: in the garbage collector
    full_collections: int
    wall_ms: float
    counts: dict[str, float]
    queries: list[int]  # items returned by each Query of this recall
    terms: int
    postings_read: int
    truncated_terms: int
    candidates: int
    fetched: int
    items: int
    distinctive_df: int
    # Recall by meaning (0 without): cells read, their postings, the candidates they gave, and the
    # CPU of embedding the question and finding its cells (of cpu_ms).
    cells: int = 0
    cell_postings_read: int = 0
    semantic_candidates: int = 0
    embed_cpu_ms: float = 0.0


@dataclass(frozen=True)
class TimedChannel(SemanticChannel):
    """The semantic channel, with the process CPU of each question's embedding (and its cells)."""

    spent: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, channel: SemanticChannel) -> TimedChannel:
        return cls(channel.embedder, channel.cells, channel.params)

    def question(self, text: str) -> tuple[NDArray[np.float32], list[str]]:
        started = time.process_time()
        try:
            return super().question(text)
        finally:
            self.spent.append(time.process_time() - started)


class ProfiledTermIndex(DynamoTermIndex):
    """``DynamoTermIndex`` whose reads (on the io pool's threads) run under their own profilers."""

    def __init__(self, client: DynamoDBClient | DirectDynamoReads, table: str) -> None:
        super().__init__(client, table)
        self.profiles: list[cProfile.Profile] = []
        self._profiles_lock = threading.Lock()

    def _query_one(self, request: dict[str, Any]) -> Any:
        """A Query on an io pool thread (botocore reads; direct reads run in the calling thread)."""
        profile = cProfile.Profile(time.thread_time)
        profile.enable()
        try:
            return super()._query_one(request)
        finally:
            profile.disable()
            with self._profiles_lock:
                self.profiles.append(profile)


def run_recalls(
    service: RecallService, harness: Harness, project: ProjectId, questions: Sequence[Question]
) -> list[RecallSample]:
    meter, connections, collector = harness.meter, harness.connections, harness.collector
    embeds = [] if harness.channel is None else harness.channel.spent
    samples: list[RecallSample] = []
    for question in questions:
        query = recall_query(RecallRequest(question=question.text, budget=BUDGET))
        before = meter.snapshot()
        first_embed = len(embeds)
        first_query = len(meter.query_sizes)
        connects, connect_cpu = connections.snapshot()
        gc_cpu, full_collections = collector.snapshot()
        wall = time.perf_counter()
        cpu = time.process_time()
        found, stats = service.recall(project, query)
        answer = recall_body(found)  # the JSON body, as the handler builds it
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
        connects_after, connect_cpu_after = connections.snapshot()
        gc_cpu_after, full_collections_after = collector.snapshot()
        counts = meter.since(before)
        recalled = {item["memoryId"] for item in answer["items"]}
        asked = set(query_terms(question.text))
        answered = question.target in recalled or any(
            asked <= set(analyze(i["text"])) for i in answer["items"]
        )
        samples.append(
            RecallSample(
                kind=question.kind,
                hit=question.target in recalled,
                answered=answered,
                question=question.text,
                abstained=bool(answer["abstain"]["abstained"]),
                cpu_ms=cpu * 1000,
                connect_cpu_ms=(connect_cpu_after - connect_cpu) * 1000,
                connects=connects_after - connects,
                gc_cpu_ms=(gc_cpu_after - gc_cpu) * 1000,
                full_collections=full_collections_after - full_collections,
                wall_ms=wall * 1000,
                counts=counts,
                queries=meter.query_sizes[first_query:],
                terms=stats.terms,
                postings_read=stats.postings_read,
                truncated_terms=stats.truncated_terms,
                candidates=stats.candidates,
                fetched=stats.fetched,
                items=len(answer["items"]),
                distinctive_df=question.distinctive_df,
                cells=stats.cells,
                cell_postings_read=stats.cell_postings_read,
                semantic_candidates=stats.semantic_candidates,
                embed_cpu_ms=sum(embeds[first_embed:]) * 1000,
            )
        )
    return samples


def hit_rate(samples: Sequence[RecallSample], kind: str | None = None) -> float:
    chosen = [s for s in samples if (s.kind != "organic" if kind is None else s.kind == kind)]
    return 100.0 * sum(s.hit for s in chosen) / len(chosen) if chosen else float("nan")


def answered_rate(samples: Sequence[RecallSample], kind: str) -> float:
    chosen = [s for s in samples if s.kind == kind]
    return 100.0 * sum(s.answered for s in chosen) / len(chosen) if chosen else float("nan")


@dataclass
class SizeResult:
    size: int
    seeding: dict[str, Any]
    emulator_mb: tuple[float, float]
    samples: list[RecallSample]
    profile: str | None = None
    #: Recall by meaning: the memories placed and the recalls through the channel.
    placed: bool = False

    @property
    def label(self) -> str:
        """The project in a table: its size, and whether its recalls used the model (semantic runs)."""
        return f"{self.size:,} {'on' if self.placed else 'off'}"

    def mean(self, name: str) -> float:
        return statistics.fmean(s.counts.get(name, 0.0) for s in self.samples)

    def pooled_cpu(self) -> list[float]:
        """CPU per recall without opening connections (as with a kept-alive pool, on AWS)."""
        return [s.cpu_ms - s.connect_cpu_ms for s in self.samples]

    def rcus(self) -> list[float]:
        return [total(s.counts, "rcu:") for s in self.samples]

    def summary(self) -> dict[str, Any]:
        rcus = self.rcus()
        cpu = [s.cpu_ms for s in self.samples]
        pooled = self.pooled_cpu()
        wall = [s.wall_ms for s in self.samples]
        return {
            "size": self.size,
            "seeding": {k: v for k, v in self.seeding.items() if k != "questions"},
            "emulator_rss_mb": self.emulator_mb[0],
            "emulator_peak_mb": self.emulator_mb[1],
            "recalls": len(self.samples),
            "query_per_recall": self.mean("requests:Query"),
            "batchget_per_recall": self.mean("requests:BatchGetItem"),
            "items_read": statistics.fmean(total(s.counts, "items:") for s in self.samples),
            "kb_read": statistics.fmean(total(s.counts, "response_bytes:") for s in self.samples) / 1024,
            "rcu": {
                "p50": percentile(rcus, 0.5),
                "p95": percentile(rcus, 0.95),
                "mean": statistics.fmean(rcus),
            },
            "rcu_query_mean": self.mean("rcu:Query"),
            "rcu_batchget_mean": self.mean("rcu:BatchGetItem"),
            "cpu_ms": {
                "p50": percentile(cpu, 0.5),
                "p95": percentile(cpu, 0.95),
                "mean": statistics.fmean(cpu),
            },
            "cpu_ms_pooled": {
                "p50": percentile(pooled, 0.5),
                "p95": percentile(pooled, 0.95),
                "mean": statistics.fmean(pooled),
            },
            "connects_per_recall": statistics.fmean(s.connects for s in self.samples),
            "connect_cpu_ms_mean": statistics.fmean(s.connect_cpu_ms for s in self.samples),
            "gc_cpu_ms_mean": statistics.fmean(s.gc_cpu_ms for s in self.samples),
            "full_collections": sum(s.full_collections for s in self.samples),
            "wall_ms": {"p50": percentile(wall, 0.5), "p95": percentile(wall, 0.95)},
            "needle_hit_rate": hit_rate(self.samples),
            "hit_rate_by_kind": {kind: hit_rate(self.samples, kind) for kind in [*NEEDLE_KINDS, "organic"]},
            "organic_answered_rate": answered_rate(self.samples, "organic"),
            "max_query_items": max((q for s in self.samples for q in s.queries), default=0),
            "abstained": sum(s.abstained for s in self.samples),
            "semantic": self.placed,
            "label": self.label,
            "rcu_split_mean": {
                "terms_query": self.mean("split:rcu:terms"),
                "cells_query": self.mean("split:rcu:cells"),
                "batchget": self.mean("rcu:BatchGetItem"),
                "context_events_batchget": self.mean("split:rcu:context_events"),
            },
            "cells_per_recall": statistics.fmean(s.cells for s in self.samples),
            "cell_postings_per_recall": statistics.fmean(s.cell_postings_read for s in self.samples),
            "semantic_candidates_per_recall": statistics.fmean(s.semantic_candidates for s in self.samples),
            "embed_cpu_ms": {
                "p50": percentile([s.embed_cpu_ms for s in self.samples], 0.5),
                "p95": percentile([s.embed_cpu_ms for s in self.samples], 0.95),
            },
            "per_recall": [
                {
                    "kind": s.kind,
                    "question": s.question,
                    "hit": s.hit,
                    "answered": s.answered,
                    "distinctive_df": s.distinctive_df,
                    "cpu_ms": round(s.cpu_ms, 3),
                    "connect_cpu_ms": round(s.connect_cpu_ms, 3),
                    "gc_cpu_ms": round(s.gc_cpu_ms, 3),
                    "full_collections": s.full_collections,
                    "wall_ms": round(s.wall_ms, 3),
                    "rcu": total(s.counts, "rcu:"),
                    "queries": s.queries,
                    "postings_read": s.postings_read,
                    "candidates": s.candidates,
                    "cell_postings_read": s.cell_postings_read,
                    "semantic_candidates": s.semantic_candidates,
                    "embed_cpu_ms": round(s.embed_cpu_ms, 3),
                }
                for s in self.samples
            ],
        }


def profile_text(
    service: RecallService, index: ProfiledTermIndex, project: ProjectId, questions: Sequence[Question]
) -> str:
    main = cProfile.Profile(time.thread_time)
    for question in questions:
        query = recall_query(RecallRequest(question=question.text, budget=BUDGET))
        main.enable()
        recall_body(service.recall(project, query)[0])
        main.disable()
    out = io.StringIO()
    stats = pstats.Stats(main, stream=out)
    for profile in index.profiles:
        stats.add(profile)
    stats.strip_dirs().sort_stats("tottime").print_stats(PROFILE_ROWS)
    return out.getvalue()


@dataclass(frozen=True)
class Harness:
    """The emulator process, the client every store here uses, and the meters on it."""

    emulator: EmulatorProcess
    client: DynamoDBClient
    meter: DynamoMeter
    connections: ConnectionMeter
    collector: GcMeter
    #: What recall reads through: ``DirectDynamoReads`` (as the recall function) or the client.
    reads: DynamoDBClient | DirectDynamoReads
    #: Recall by meaning (``--semantic``): the real model's channel, its question CPU timed.
    channel: TimedChannel | None = None
    #: ``--no-context``: recall without reading the best memories' neighbours.
    params: RecallParams = field(default_factory=RecallParams)


def bench_size(
    harness: Harness,
    size: int,
    sizes: Sizes,
    profile: bool,
    needle_placements: Sequence[SemanticPlacement] | None = None,
) -> SizeResult:
    """Seed a project of ``size`` memories and recall its questions. With ``needle_placements``
    (``--semantic``), every memory placed and the recalls through ``harness.channel``; a
    semantic run's project without them is the lexical baseline (``prj_recall<size>off``)."""
    emulator, client = harness.emulator, harness.client
    placed = needle_placements is not None
    if placed and harness.channel is None:
        raise ValueError("a placed project is recalled through the harness's channel")
    baseline = harness.channel is not None and not placed
    project = ProjectId(f"prj_recall{size_name(size)}{'off' if baseline else ''}")
    progress(f"seeding {size:,} memories into {project}{' (placed)' if placed else ''} ...")
    arguments: tuple[Any, ...] = (project, size, sizes.recalls - NEEDLES)
    if needle_placements is not None:
        arguments += (list(needle_placements),)
    seeding: dict[str, Any] = emulator.call("corpus", *arguments)
    progress(f"  done: {seeding['postings']:,} postings in {seeding['seconds']:.0f} s")
    tables = emulator.tables
    reads = harness.reads
    memories = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"], reads=reads)
    channel = harness.channel if placed else None
    events = DynamoEventLocator(reads, tables["EventsTable"])
    service = RecallService(
        DynamoTermIndex(reads, tables["TermIndexTable"]),
        memories,
        params=harness.params,
        semantic=channel,
        events=events,
    )
    questions = [Question(**question) for question in seeding["questions"]]
    warmup = [replace(q, kind="warmup") for q in questions[NEEDLES : NEEDLES + sizes.warmup]]
    run_recalls(service, harness, project, warmup)
    progress(f"  {len(questions)} recalls ...")
    samples = run_recalls(service, harness, project, questions)
    result = SizeResult(size, seeding, emulator.memory_mb(), samples, placed=placed)
    if profile and size == profile_size(sizes) and not baseline:
        index = ProfiledTermIndex(harness.reads, tables["TermIndexTable"])
        profiled = RecallService(index, memories, params=harness.params, semantic=channel, events=events)
        result.profile = profile_text(profiled, index, project, questions[: sizes.profiled_recalls])
    return result


def profile_size(sizes: Sizes) -> int:
    return CPU_TARGET_SIZE if CPU_TARGET_SIZE in sizes.projects else sizes.projects[len(sizes.projects) // 2]


def report_recalls(
    results: Sequence[SizeResult], report: Report, real: Sequence[PlacementProfile] = ()
) -> dict[str, Any]:
    """Section 2; ``real``: the model's placements of real texts (semantic runs), beside the seeded ones."""
    semantic = any(r.placed for r in results)
    report.title(f"2. Recall cost per project size (budget {BUDGET}, {len(results[0].samples)} recalls each)")
    report_seeding(results, report)
    report.line()
    if semantic:
        report_placements(results, real, report)
        report.line()
    summaries = [r.summary() for r in results]
    report_cost(summaries, report)
    report.line()
    report.line(
        "Needle hit rate by kind (a hit: the needle's memory among the recalled items), and the read path:"
    )
    report.line()
    report_read_path(results, report)
    report.line()
    report_recall_notes(report, semantic)
    return {"sizes": summaries}


def report_seeding(results: Sequence[SizeResult], report: Report) -> None:
    """The projects: what was seeded, how long it took, the emulator's memory."""
    semantic = any(r.placed for r in results)
    headers = ["memories", "postings", "df shard items", "seed s", "emulator RSS MB", "emulator peak MB"]
    rows: list[list[object]] = [
        [
            r.seeding["memories"],
            r.seeding["postings"],
            r.seeding["df_items"],
            r.seeding["seconds"],
            r.emulator_mb[0],
            r.emulator_mb[1],
        ]
        for r in results
    ]
    if semantic:
        headers[0:1] = ["memories, recall by meaning", "placed"]
        headers.insert(3, "of which cell postings")
        for row, r in zip(rows, results, strict=True):
            row[0:1] = [r.label, "yes" if r.placed else "no"]
            row.insert(3, r.seeding.get("cell_postings", 0))
    report.table(headers, rows)


def report_placements(
    results: Sequence[SizeResult], real: Sequence[PlacementProfile], report: Report
) -> None:
    """Where memories sit among the cells: texts placed by the model vs the seeded placements."""
    profiles = [*real, *(PlacementProfile(**r.seeding["placements"]) for r in results if r.placed)]
    named = "/".join(f"p{round(q * 100)}" for q in QUANTILES)
    report.line(
        "The placements: cosine of a memory to its nearest and second nearest cell (its two cells' "
        f"impacts), {named}, and how many distinct nearest cells its memories have:"
    )
    report.line()
    report.table(
        [
            "placements",
            "count",
            f"nearest cell cosine {named}",
            f"2nd cell cosine {named}",
            "cells used",
            "largest cell's share",
        ],
        [
            [
                p.label,
                p.count,
                " / ".join(f"{v:.2f}" for v in p.top1),
                " / ".join(f"{v:.2f}" for v in p.top2),
                p.cells_used,
                f"{100 * p.largest_share:.1f} %",
            ]
            for p in profiles
        ],
    )
    report.line()
    report.line(
        "Seeded: synthetic vectors (a centroid chosen uniformly, pulled toward one of its "
        f"{SYNTHETIC_NEIGHBOURS} nearest centroids by U(0, {SYNTHETIC_PULL}), gaussian noise of norm "
        f"U{SYNTHETIC_NOISE}, normalised), placed by `place()`; the {NEEDLES} needles carry their real "
        "placements. The noise is fitted to the English memories' cosines. The corpus texts are made of "
        "made-up words, which the model lumps together in a few cells (see the row above): seeding that "
        "crowding would be an artefact of the synthetic vocabulary, and it would flatter the read ratio "
        "(a 1k project's probed cells would already be full), so the seeded memories spread over all "
        "cells, as varied real memories do."
    )


#: A column of section 2's cost table: its header, and its value in a project's summary.
Column = tuple[str, Callable[[dict[str, Any]], object]]


def _cost_columns(semantic: bool) -> list[Column]:
    """The cost table's columns: today's; a semantic run's with read units per kind of read and
    the question's embedding."""
    first: Column = (
        ("memories, recall by meaning", lambda s: s["label"])
        if semantic
        else ("memories", lambda s: s["seeding"]["memories"])
    )
    reads: list[Column] = [
        ("Query/recall", lambda s: s["query_per_recall"]),
        ("BatchGetItem/recall", lambda s: s["batchget_per_recall"]),
        ("items read", lambda s: s["items_read"]),
        ("KB read", lambda s: s["kb_read"]),
        ("RCU p50", lambda s: s["rcu"]["p50"]),
        ("RCU p95", lambda s: s["rcu"]["p95"]),
        ("RCU mean", lambda s: s["rcu"]["mean"]),
    ]
    parts: list[Column] = (
        [
            ("of which terms Query", lambda s: s["rcu_split_mean"]["terms_query"]),
            ("of which cells Query", lambda s: s["rcu_split_mean"]["cells_query"]),
            ("of which BatchGetItem", lambda s: s["rcu_split_mean"]["batchget"]),
        ]
        if semantic
        else [("of which Query", lambda s: s["rcu_query_mean"])]
    )
    cpu: list[Column] = [
        ("CPU ms p50", lambda s: s["cpu_ms"]["p50"]),
        ("CPU ms p95", lambda s: s["cpu_ms"]["p95"]),
        ("CPU ms p50 pooled", lambda s: s["cpu_ms_pooled"]["p50"]),
        ("CPU ms p95 pooled", lambda s: s["cpu_ms_pooled"]["p95"]),
    ]
    embed: list[Column] = (
        [
            ("of which question embedding ms p50", lambda s: s["embed_cpu_ms"]["p50"]),
            ("question embedding ms p95", lambda s: s["embed_cpu_ms"]["p95"]),
        ]
        if semantic
        else []
    )
    rest: list[Column] = [
        ("of which GC ms (mean)", lambda s: s["gc_cpu_ms_mean"]),
        ("wall ms p50", lambda s: s["wall_ms"]["p50"]),
        ("wall ms p95", lambda s: s["wall_ms"]["p95"]),
        ("needle hit rate", lambda s: f"{s['needle_hit_rate']:.1f} %"),
    ]
    return [first, *reads, *parts, *cpu, *embed, *rest]


def report_cost(summaries: Sequence[dict[str, Any]], report: Report) -> None:
    """Per project size: requests, items and bytes read, read units, CPU, wall time, hit rate."""
    columns = _cost_columns(any(s["semantic"] for s in summaries))
    report.table([header for header, _ in columns], [[value(s) for _, value in columns] for s in summaries])


def report_read_path(results: Sequence[SizeResult], report: Report) -> None:
    """Per project size: hit rate by needle kind, and what the recalls read."""
    semantic = any(r.placed for r in results)
    headers = [
        "memories, recall by meaning" if semantic else "memories",
        *(f"{kind} ({sum(1 for s in results[0].samples if s.kind == kind)})" for kind in NEEDLE_KINDS),
        f"organic ({sum(1 for s in results[0].samples if s.kind == 'organic')})",
        "organic answered",
        "rare word df (median)",
        "terms/recall",
        "postings read/recall",
        "truncated terms/recall",
        "candidates/recall",
        "largest Query (items)",
        "retries",
        "abstained",
    ]
    rows: list[list[object]] = [
        [
            r.label if semantic else r.size,
            *(f"{hit_rate(r.samples, kind):.0f} %" for kind in NEEDLE_KINDS),
            f"{hit_rate(r.samples, 'organic'):.0f} %",
            f"{answered_rate(r.samples, 'organic'):.0f} %",
            statistics.median(s.distinctive_df for s in r.samples if s.kind in ("rare1", "rare2")),
            statistics.fmean(s.terms for s in r.samples),
            statistics.fmean(s.postings_read for s in r.samples),
            statistics.fmean(s.truncated_terms for s in r.samples),
            statistics.fmean(s.candidates for s in r.samples),
            max((q for s in r.samples for q in s.queries), default=0),
            int(sum(s.counts.get("attempts", 0) - total(s.counts, "requests:") for s in r.samples)),
            sum(s.abstained for s in r.samples),
        ]
        for r in results
    ]
    if semantic:
        at = headers.index("candidates/recall") + 1
        headers[at:at] = ["cells/recall", "cell postings read/recall", "semantic candidates/recall"]
        for row, r in zip(rows, results, strict=True):
            row[at:at] = [
                statistics.fmean(s.cells for s in r.samples),
                statistics.fmean(s.cell_postings_read for s in r.samples),
                statistics.fmean(s.semantic_candidates for s in r.samples),
            ]
    report.table(headers, rows)


def report_recall_notes(report: Report, semantic: bool = False) -> None:
    """What the columns of section 2 mean and how they were measured."""
    for kind, description in NEEDLE_KINDS.items():
        report.line(f"- `{kind}`: {description}.")
    report.line(
        "- `organic`: a random ordinary memory's question (its two most frequent words among ranks 1-50 and "
        "its rarest word); not part of the targets. organic answered: the memory, or another recalled item "
        "whose text holds every term of the question."
    )
    report.line(
        "- rare word df: how many memories of the project contain the needle's rarest vocabulary word "
        "(`rare1`/`rare2` needles)."
    )
    report.line()
    report.line(
        "RCU: read units as DynamoDB bills them, computed from the items each response returned (moto "
        "reports no consumed capacity): a Query is billed the sum of its items' sizes rounded up to 4 KB, "
        "BatchGetItem each item rounded up to 4 KB, at least 1 unit per read; every read here is strongly "
        "consistent (`ConsistentRead=True`, checked per request: eventually consistent would be half). Item "
        "sizes with `kaibo_core.adapters.dynamodb_values.item_size` (attribute names + values; numbers as "
        "digits/2 + 2). KB read: response bodies as received. items read: items in the responses."
    )
    report.line()
    report.line(
        "CPU: `time.process_time()` of this process around `RecallService.recall` (every thread: the caller "
        "and the io pool's Query threads), so it covers building and sending the requests, reading and "
        "deserializing the responses, tokenizing, ranking, selection and packing. The emulator runs in a "
        "separate process (seeded there too), so moto's work is not in it; wall time includes it. Requests "
        "are built before the clock starts (pydantic validation is the handler's). The emulator (werkzeug) "
        "closes every connection, so each request opens a new one; *pooled* subtracts the CPU spent in "
        "those connects (`AWSHTTPConnection.connect` and `http.client.HTTPConnection.connect`, the "
        "connecting thread's CPU), as with the kept-alive "
        "connections of a Lambda container; the targets use it. GC: CPU inside the garbage collector "
        "(`gc.callbacks`), included in both; what the process held before the first recall is frozen "
        "(`gc.freeze()`), as the recall handler freezes what its import built."
    )
    if semantic:
        params = SemanticParams()
        report.line()
        report.line(
            f"Recall by meaning (`on` rows): each question embedded by the real model (`RecallService(..., "
            f"semantic=channel)`), its {params.probes} nearest cells read (a Query each, at most "
            f"{params.postings_per_cell} postings + {DF_SHARDS} df shards, in the terms' wave), up to "
            f"{params.candidates} semantic candidates fetched with the lexical ones. terms Query: the words' "
            "Queries (and the corpus stats' when its cache is stale); cells Query: the cells' (a partition "
            "whose key has `~` after `#tc#`); BatchGetItem: the memory items. question embedding: the "
            "process CPU of `SemanticChannel.question` (tokenizing, the forward pass, the nearest cells), "
            "part of the recall CPU. `off` rows: recall without the channel, on a project of the same texts "
            "seeded without placements (today's recall, measured in the same run)."
        )


def report_targets(results: Sequence[SizeResult], report: Report) -> dict[str, Any]:
    """Section 3; in a semantic run, read units with recall by meaning on, and its CPU against the
    lexical baseline's."""
    report.title("3. Targets")
    semantic = any(r.placed for r in results)
    by_size = {r.size: r for r in results if r.placed == semantic}
    verdicts: dict[str, Any] = {}
    if semantic:
        report.line(
            "Recall by meaning on (the `on` projects): seeded memories with synthetic vectors, questions "
            "embedded by the real model; the `off` project is the lexical baseline."
        )
        report.line()
    small, large = by_size.get(1_000), by_size.get(100_000)
    if small and large:
        ratio = statistics.fmean(large.rcus()) / statistics.fmean(small.rcus())
        p95_ratio = percentile(large.rcus(), 0.95) / percentile(small.rcus(), 0.95)
        drop = hit_rate(small.samples) - hit_rate(large.samples)
        met = ratio <= RCU_TARGET and drop <= HIT_TOLERANCE_POINTS
        report.line(
            f"- Read units at 100k / at 1k: mean **{ratio:.2f}x** (p95 {p95_ratio:.2f}x), "
            f"target <= {RCU_TARGET}x; needle hit rate {hit_rate(large.samples):.1f} % at 100k vs "
            f"{hit_rate(small.samples):.1f} % at 1k "
            f"({-drop:+.1f} points, target: at most {HIT_TOLERANCE_POINTS:.0f} points lower): "
            f"**{'met' if met else 'MISSED'}**."
        )
        verdicts["rcu"] = {"ratio": ratio, "p95_ratio": p95_ratio, "hit_drop_points": drop, "met": met}
        parts = (
            ("terms Query", "split:rcu:terms"),
            ("cells Query", "split:rcu:cells"),
            ("BatchGetItem", "rcu:BatchGetItem"),
            ("of which context's events", "split:rcu:context_events"),
        )
        report.line(
            "  - mean read units per recall at 1k -> 100k: "
            + "; ".join(f"{name} {small.mean(c):.1f} -> {large.mean(c):.1f}" for name, c in parts)
            + "."
        )
    else:
        report.line("- Read units at 100k / at 1k: not measured (needs the 1k and 100k projects).")
    cpu = by_size.get(CPU_TARGET_SIZE)
    lexical = next((r for r in results if r.size == CPU_TARGET_SIZE and not r.placed), None)
    if semantic and cpu and lexical:
        verdicts["cpu"] = report_semantic_cpu(cpu, lexical, report)
    elif semantic:
        report.line("- Recall CPU p95 at 10k, on / off: not measured (needs the 10k project).")
    elif cpu:
        p95 = percentile(cpu.pooled_cpu(), 0.95)
        raw = percentile([s.cpu_ms for s in cpu.samples], 0.95)
        met = p95 <= CPU_TARGET_MS
        report.line(
            f"- Recall CPU p95 at 10k: **{p95:.1f} ms** pooled ({raw:.1f} ms with a new connection per "
            f"request), target <= {CPU_TARGET_MS:.0f} ms: **{'met' if met else 'MISSED'}**."
        )
        verdicts["cpu"] = {"p95_ms": p95, "p95_ms_with_connects": raw, "met": met}
    else:
        report.line("- Recall CPU p95 at 10k: not measured.")
    if semantic:
        report.line(
            "- Write units per chat message, with and without recall by meaning: section 4 (no target)."
        )
    return verdicts


def report_semantic_cpu(on: SizeResult, off: SizeResult, report: Report) -> dict[str, Any]:
    """Recall CPU p95 at the target size with recall by meaning on, against the lexical baseline."""
    p95, p95_off = percentile(on.pooled_cpu(), 0.95), percentile(off.pooled_cpu(), 0.95)
    raw, raw_off = (percentile([s.cpu_ms for s in r.samples], 0.95) for r in (on, off))
    embed = percentile([s.embed_cpu_ms for s in on.samples], 0.95)
    ratio = p95 / p95_off
    met = ratio <= SEMANTIC_CPU_RATIO
    report.line(
        f"- Recall CPU p95 at 10k: **{p95:.1f} ms** pooled with recall by meaning vs **{p95_off:.1f} ms** "
        f"without (same run, same texts): **{ratio:.2f}x**, target <= {SEMANTIC_CPU_RATIO}x: "
        f"**{'met' if met else 'MISSED'}** (with a new connection per request {raw:.1f} vs "
        f"{raw_off:.1f} ms; the question's embedding alone p95 {embed:.1f} ms; the lexical target "
        f"<= {CPU_TARGET_MS:.0f} ms: {'met' if p95 <= CPU_TARGET_MS else 'missed'} on, "
        f"{'met' if p95_off <= CPU_TARGET_MS else 'missed'} off)."
    )
    return {
        "p95_ms": p95,
        "p95_ms_off": p95_off,
        "ratio": ratio,
        "p95_ms_with_connects": raw,
        "p95_ms_with_connects_off": raw_off,
        "embed_p95_ms": embed,
        "met": met,
    }


# --- 4. Write units per remembered event ----------------------------------------------------------


def bench_writes(  # noqa: PLR0917 - the run's parts, and the channel
    emulator: EmulatorProcess,
    client: DynamoDBClient,
    meter: DynamoMeter,
    sizes: Sizes,
    report: Report,
    channel: SemanticChannel | None = None,
) -> list[dict[str, Any]]:
    """Section 4; with ``channel``, the same remembers without it, then with it (placed memories)."""
    rows = measure_writes(emulator, client, meter, sizes)
    if channel is not None:
        for row in rows:
            row["semantic"] = False
        placed = measure_writes(emulator, client, meter, sizes, channel, "prj_remembersem")
        rows += [{**row, "semantic": True} for row in placed]
    report_writes(rows, report)
    return rows


def measure_writes(  # noqa: PLR0917 - the run's parts, and the channel's
    emulator: EmulatorProcess,
    client: DynamoDBClient,
    meter: DynamoMeter,
    sizes: Sizes,
    channel: SemanticChannel | None = None,
    project_id: str = "prj_remember",
) -> list[dict[str, Any]]:
    """Sequential remembers of 1 and of ``MAX_EVENTS_PER_BATCH`` events: what they wrote, per event
    (with ``channel``, each memory placed by the model, as remember places it)."""
    tables = emulator.tables
    service = RememberService(
        DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]),
        memories=DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"]),
        semantic=channel,
    )
    project = ProjectId(project_id)
    runs = ((1, sizes.single_calls), (MAX_EVENTS_PER_BATCH, sizes.batch_calls))
    texts = iter(emulator.call("texts", sum(batch * (calls + 1) for batch, calls in runs)))
    serial = itertools.count()

    def remember(stream: str, batch: int) -> None:
        events = [
            {
                "kind": "message",
                "idempotencyKey": f"bench-{next(serial)}",
                "payload": {"role": "user", "text": next(texts)},
            }
            for _ in range(batch)
        ]
        request = RememberRequest.model_validate({"stream": stream, "events": events})
        outcome = service.remember(project, stream, new_events(request))
        if outcome.appended != batch or outcome.index_failures or len(outcome.memories) != batch:
            raise RuntimeError(f"unexpected remember outcome: {outcome}")

    rows: list[dict[str, Any]] = []
    for batch, calls in runs:
        stream = f"bench-writes-{batch}"
        remember(stream, batch)  # creates the stream: measure appends only
        before = meter.snapshot()
        for _ in range(calls):
            remember(stream, batch)
        c = meter.since(before)
        events = batch * calls
        rows.append(
            {
                "batch": batch,
                "calls": calls,
                "events": events,
                "requests_per_event": total(c, "requests:") / events,
                "event_transactions_per_event": c.get("transactions:events", 0) / events,
                "index_transactions_per_event": c.get("transactions:index", 0) / events,
                "events_wcu_per_event": c.get("wcu:events", 0) / events,
                "index_wcu_per_event": c.get("wcu:index", 0) / events,
                "postings_per_event": c.get("actions:index:Put", 0) / events
                - 1,  # the memory item is a Put too
                "updates_per_event": c.get("actions:index:Update", 0) / events,
                "rcu_per_event": total(c, "rcu:") / events,
                "cancelled_transactions": c.get("errors:TransactionCanceledException", 0),
                "cell_postings_per_event": c.get("split:actions:cells:Put", 0) / events,
                "cells_wcu_per_event": c.get("split:wcu:cells", 0) / events,
            }
        )
    return rows


def report_writes(rows: Sequence[dict[str, Any]], report: Report) -> None:
    report.title("4. Write units per remembered event (RememberService with the event and memory stores)")
    semantic = any("semantic" in r for r in rows)
    headers = [
        "batch",
        "calls",
        "requests/event",
        "event txns/event",
        "index txns/event",
        "postings/event",
        "df+corpus updates/event",
        "events-part WCU/event",
        "index-part WCU/event",
        "total WCU/event",
        "RCU/event",
    ]
    table: list[list[object]] = [
        [
            r["batch"],
            r["calls"],
            r["requests_per_event"],
            r["event_transactions_per_event"],
            r["index_transactions_per_event"],
            r["postings_per_event"],
            r["updates_per_event"],
            r["events_wcu_per_event"],
            r["index_wcu_per_event"],
            r["events_wcu_per_event"] + r["index_wcu_per_event"],
            r["rcu_per_event"],
        ]
        for r in rows
    ]
    if semantic:
        headers.insert(1, "recall by meaning")
        at = headers.index("postings/event") + 1
        headers[at:at] = ["of which cell postings/event"]
        headers.insert(headers.index("index-part WCU/event") + 1, "of which cells' WCU/event")
        for row, r in zip(table, rows, strict=True):
            row.insert(1, "on" if r["semantic"] else "off")
            row.insert(at, r["cell_postings_per_event"])
            row.insert(headers.index("of which cells' WCU/event"), r["cells_wcu_per_event"])
    report.table(headers, table)
    report.line()
    report.line(
        "Sequential remembers into one existing stream, in this process (no HTTP front, no authorizer); each "
        "event a chat message from the generator (8-40 content words). events part: idempotency items, event "
        "items, the stream head (and its StreamHeads index entry, 1 unit per KB) in the append transaction. "
        "index part: per provisional memory, its postings (conditional Puts), one df shard ADD per distinct "
        "term, the memory item and a corpus shard ADD, in TransactWriteItems of up to 100 actions. 2 WCU per "
        "started KB of each transactional item (an Update's item estimated as its key plus the attributes it "
        "sets, all far below 1 KB). Cancelled transactions: "
        f"{sum(r['cancelled_transactions'] for r in rows):.0f} (moto serializes requests, so concurrent "
        "indexing of a batch never conflicts on a df shard here; on DynamoDB it can, and each retry costs "
        "its writes again)."
    )
    if semantic:
        report.line()
        report.line(
            "Recall by meaning `on`: `RememberService(..., semantic=channel)`, each memory placed by the "
            "real model before indexing (its CPU not measured here), so the index part also holds its cell "
            "postings (with the vector, `v`), their df shard ADDs, and the memory item's `sem`; `off`: the "
            "same messages without the channel, into another project."
        )


# --- Main -----------------------------------------------------------------------------------------


def run(  # noqa: PLR0917 - the command line's choices
    sizes: Sizes,
    profile: bool,
    report: Report,
    direct: bool = True,
    semantic: str | None = None,
    params: RecallParams | None = None,
) -> dict[str, Any]:
    channel: TimedChannel | None = None
    if semantic is not None:
        from kaibo_core.runtime.wiring import build_semantic_channel  # noqa: PLC0415 - semantic runs only

        progress(f"loading the {semantic} model and its cells ...")
        built = build_semantic_channel(semantic)
        if built is None:
            raise ValueError(f"no semantic channel for {semantic!r}")
        channel = TimedChannel.of(built)
    progress("starting the emulator process ...")
    emulator = EmulatorProcess(semantic)
    try:
        use_fake_aws()
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint
        client = dynamodb_client()
        meter = DynamoMeter(client, emulator.tables)
        reads = dynamodb_reads(direct, observer=meter.observe_direct)
        direct_path = isinstance(reads, DirectDynamoReads)
        path = "the direct path (`DirectDynamoReads`, as the recall function)" if direct_path else "botocore"
        report.line(f"Recall reads through {path}.")
        report.line()
        harness = Harness(
            emulator, client, meter, ConnectionMeter(), GcMeter(), reads, channel, params or RecallParams()
        )
        tables = emulator.tables
        store = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        results: dict[str, Any] = {"machine": machine("moto", "botocore"), "sizes": list(sizes.projects)}
        results["seeder_check"] = check_seeder(emulator, store, report, channel)
        progress("seeder check passed")
        needles: list[SemanticPlacement] | None = None
        real: list[PlacementProfile] = []
        if channel is not None:
            progress("placing the needles and the comparison texts with the model ...")
            needles, real = real_placements(emulator, channel)
            results["semantic"] = {"model": semantic, "real_placements": [asdict(p) for p in real]}
        # As the recall handler after its import (functions/recall/app.py): what exists now lives
        # as long as the process, and full collections stop rescanning it.
        gc.collect()
        gc.freeze()
        measured: list[SizeResult] = []
        for size in sizes.projects:
            if channel is not None and size == CPU_TARGET_SIZE:  # the lexical baseline, same texts
                measured.append(bench_size(harness, size, sizes, profile=False))
            measured.append(bench_size(harness, size, sizes, profile, needles))
        results["recall"] = report_recalls(measured, report, real)
        results["targets"] = report_targets(measured, report)
        progress("remember write units ...")
        results["writes"] = bench_writes(emulator, client, meter, sizes, report, channel)
        params = harness.params
        report.line()
        report.line(
            f"Recall parameters: {params.postings_per_term} postings per term (+{DF_SHARDS} df shards in "
            f"the same Query), fetch {params.fetch_count(BUDGET)} memory items at budget {BUDGET}; index: "
            f"{DF_SHARDS} df shards, {CORPUS_SHARDS} corpus shards; context: {params.context!r}."
        )
        for result in measured:
            if result.profile is not None:
                report.title(
                    f"5. Profile of the recall CPU at {size_name(result.size)} "
                    f"({min(sizes.profiled_recalls, len(result.samples))} recalls, top 15 by own time)"
                )
                report.line(
                    "cProfile of the calling thread plus the io pool threads' Queries (each read under its "
                    "own profiler, merged); a separate, profiled pass over the same questions, not the "
                    "measured one."
                )
                report.line()
                report.line("```")
                for text in result.profile.rstrip().splitlines():
                    report.line(text)
                report.line("```")
                results["profile"] = result.profile
        return results
    finally:
        emulator.stop()


def real_placements(
    emulator: EmulatorProcess, channel: SemanticChannel
) -> tuple[list[SemanticPlacement], list[PlacementProfile]]:
    """The needles' placements by the model, and how texts placed by the model sit among the
    cells (the corpus's texts, real English memories, the needles), to compare with the seeded."""

    def placed(texts: Sequence[str]) -> list[SemanticPlacement]:
        return [place(vector, channel.cells) for vector in channel.embedder.embed(list(texts))]

    needles = placed(emulator.call("needle_texts"))
    corpus = placed(emulator.call("corpus_texts", CALIBRATION_TEXTS))
    profiles = [PlacementProfile.of("corpus texts (model)", corpus)]
    if ENGLISH_TEXTS.exists():
        data = json.loads(ENGLISH_TEXTS.read_text(encoding="utf-8"))
        pairs = data.get("pairs", [])
        english = [
            *data.get("background", []),
            *(pair["memory"] for pair in pairs),
            *(text for pair in pairs for text in pair.get("distractors", [])),
        ]
        profiles.append(
            PlacementProfile.of(f"English memories (model, {ENGLISH_TEXTS.name})", placed(english))
        )
    profiles.append(PlacementProfile.of("needles (model)", needles))
    return needles, profiles


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1k and 10k only, fewer recalls (< 2 minutes)")
    parser.add_argument("--sizes", help="project sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--json", type=Path, help="also write the results (and every recall's figures) here")
    parser.add_argument("--profile", action="store_true", help="cProfile the recall CPU at 10k, top 15")
    parser.add_argument(
        "--reads",
        choices=("direct", "botocore"),
        default="direct",
        help="recall's reads: the recall function's direct path (default) or the botocore client",
    )
    parser.add_argument(
        "--semantic",
        choices=("off", *SEMANTIC_MODELS),
        default="off",
        help="recall by meaning with this model (default off): memories placed (synthetic vectors), "
        "questions embedded by the model",
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="recall without context (RecallParams.context=None): the best memories' neighbours unread",
    )
    args = parser.parse_args(argv)
    semantic = None if args.semantic == "off" else args.semantic
    if semantic is not None:
        if "numpy" in sys.modules:
            raise RuntimeError("numpy was imported before OPENBLAS_NUM_THREADS could be set")
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as a 1-vCPU Lambda; before numpy
    sizes = QUICK if args.quick else FULL
    if args.sizes:
        sizes = replace(sizes, projects=tuple(int(size) for size in args.sizes.split(",")))
    started = time.perf_counter()
    report = Report(cells=CELLS)
    report.line(f"# Kaibo recall cost benchmark ({'quick' if args.quick else 'full'} run)")
    report.line()
    report.line(f"On {machine('moto', 'botocore')}.")
    if semantic is not None:
        report_semantic_header(semantic, report)
    params = replace(RecallParams(), context=None) if args.no_context else RecallParams()
    results = run(
        sizes, args.profile, report, direct=args.reads == "direct", semantic=semantic, params=params
    )
    elapsed = time.perf_counter() - started
    report.line()
    report.line(f"Done in {elapsed:.0f} s.")
    results["seconds"] = elapsed
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


def report_semantic_header(model: str, report: Report) -> None:
    """What a semantic run measures, and what in it is made up."""
    load = os.getloadavg()
    cores = os.cpu_count() or 1
    report.line()
    report.line(
        f"**Recall by meaning on (`--semantic {model}`).** The seeded memories carry **synthetic "
        "vectors**: their cells, impacts and int8 codes are real (`place(vector, cells)` with the trained "
        "cells, stored exactly as remember stores a placement: checked in section 1), but the vectors, so "
        f"their meaning, are made up (trained centroids plus noise, section 2); only the {NEEDLES} needle "
        "memories carry the model's placements of their texts. The **question embeddings are real**: "
        f"every question is embedded by the {model} model inside the measured recall, on one thread "
        f"(`OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')}`, as a 1-vCPU Lambda)."
    )
    report.line()
    busy = load[0] >= 0.5
    report.line(
        f"Load average at the start: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {cores} cores"
        + (": other processes were using the CPU, so the CPU figures are noisy." if busy else ".")
    )
    report.line()


if __name__ == "__main__":
    raise SystemExit(main())

"""bench/recall_cost.py's recall-by-meaning mode (#19): the synthetic placements it seeds, the
seeder's items for placed memories against the real ``index_new``'s, and the meter's split of
read units between words and cells. moto in-process (no socket), no model."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import boto3
import botocore.session
import numpy as np
import pytest
from moto import mock_aws

from bench.common import FAKE_AWS, REGION
from bench.recall_cost import (
    CorpusWorld,
    DynamoMeter,
    PlacementProfile,
    Seeder,
    SyntheticPlacements,
    _normalized,
    memory_record,
)
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.semantic_cells import load_cells
from kaibo_core.core.semantic.placement import MEMORY_CELLS, place
from kaibo_core.core.semantic.vectors import decode_vector
from kaibo_core.core.storage_keys import ProjectId
from kaibo_local.template import create_tables, load_template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from kaibo_core.core.models.memories import MemoryRecord

TEXTS = (
    "We moved the standup to half past ten, starting next week.",
    "The staging database runs out of disk every Friday night.",
    "Priya prefers the blue theme for the dashboard redesign.",
    "Remember that the invoice template needs the new VAT number.",
)


def test_synthetic_placements_are_deterministic_and_well_formed() -> None:
    cells = load_cells("mini6")
    first = [SyntheticPlacements(cells, 7)() for _ in range(3)]
    again = [SyntheticPlacements(cells, 7)() for _ in range(3)]
    other = [SyntheticPlacements(cells, 8)() for _ in range(3)]
    assert first == again
    assert first != other
    for placement in first:
        assert placement.version == cells.version
        assert len(placement.cells) == MEMORY_CELLS
        (_, nearest), (_, second) = placement.cells
        assert nearest >= second > 0
        vector = decode_vector(placement.vector)
        assert vector.shape == (cells.centroids.shape[1],)
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=0.02)
        # What place() gives for the stored vector: the same two cells.
        assert [c for c, _ in place(vector, cells).cells] == [c for c, _ in placement.cells]


def test_synthetic_placements_spread_over_the_cells_with_real_looking_cosines() -> None:
    """The calibration (SYNTHETIC_*): nearest-cell cosines in the range of real English memories'
    (median ~0.42, docs in the report), and every cell used, none crowded."""
    placer = SyntheticPlacements(load_cells("mini6"), 1)
    profile = PlacementProfile.of("synthetic", [placer() for _ in range(3000)])
    assert 0.35 <= profile.top1[2] <= 0.5
    assert 0.25 <= profile.top2[2] <= profile.top1[2]
    assert profile.cells_used >= 250
    assert profile.largest_share < 0.02


@pytest.fixture
def moto_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DynamoDBClient, dict[str, str]]]:
    for name, value in FAKE_AWS.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        yield client, create_tables(client, load_template(), "unit")


def _records(project: ProjectId) -> list[MemoryRecord]:
    rng = random.Random("unit")
    return [memory_record(project, rng, index, len(TEXTS), text) for index, text in enumerate(TEXTS)]


def test_seeded_placed_memories_are_what_index_new_writes(
    moto_tables: tuple[DynamoDBClient, dict[str, str]],
) -> None:
    client, tables = moto_tables
    seeded, real = ProjectId("prj_seeded"), ProjectId("prj_indexnew")
    placer = SyntheticPlacements(load_cells("mini6"), 3)
    records = [replace(record, semantic=placer()) for record in _records(seeded)]
    Seeder(tables).seed(seeded, records)
    store = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
    for record in records:
        assert store.index_new(replace(record, project_id=real))
    world = CorpusWorld.__new__(CorpusWorld)
    world.tables = tables
    mine, theirs = world.dump(seeded), world.dump(real)
    cell_items = 0
    for table in ("MemoriesTable", "TermIndexTable"):
        assert _normalized(mine[table], seeded) == _normalized(theirs[table], real)
        cell_items += sum(1 for pk, _ in _normalized(theirs[table], real) if "#tc#~" in pk)
    # 2 cell postings (with the vector) per memory, plus their cells' df shards.
    assert cell_items >= len(records) * MEMORY_CELLS
    assert all("sem" in item for item in mine["MemoriesTable"])


def test_the_meter_tells_cell_queries_from_term_queries() -> None:
    client = botocore.session.get_session().create_client(
        "dynamodb", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
    )
    names = ("EventsTable", "IdempotencyTable", "MemoriesTable", "TermIndexTable", "ProjectsTable")
    meter = DynamoMeter(client, {name: name for name in names})  # type: ignore[arg-type]

    def query(pk: str, items: int) -> None:
        body = {"ExpressionAttributeValues": {":pk": {"S": pk}}, "ConsistentRead": True}
        answer = {"Items": [{"sk": {"S": f"{n:05d}#mem"}, "v": {"S": "x" * 600}} for n in range(items)]}
        meter.observe_direct("Query", json.dumps(body).encode(), json.dumps(answer).encode())

    query("prj_a#tc#standup", 2)
    query("prj_a#tc#~mini6c256.17", 10)
    query("prj_a#th#~mini6c256.17", 1)
    counts = meter.snapshot()
    assert counts["split:requests:terms"] == 1
    assert counts["split:requests:cells"] == 2
    assert counts["split:items:cells"] == 11
    assert counts["split:rcu:terms"] + counts["split:rcu:cells"] == counts["rcu:Query"]
    assert counts["split:rcu:cells"] > counts["split:rcu:terms"]

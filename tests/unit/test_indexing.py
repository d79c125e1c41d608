"""The index plan: terms with tf, impacts ordering the reads, deterministic chunks and shards."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.core.indexing import (
    CORPUS_SHARDS,
    DF_SHARDS,
    TERMS_PER_TRANSACTION,
    decode_posting,
    encode_posting,
    impact,
    index_side,
    plan_index,
    shard_of,
)
from kaibo_core.core.limits import DYNAMODB_MAX_TRANSACTION_ACTIONS
from kaibo_core.core.models.memories import Posting
from kaibo_core.core.text import analyze


def test_given_a_text_then_each_distinct_term_once_with_its_frequency() -> None:
    plan = plan_index("mem_1", analyze("Release moved. The release moved to July 17."))
    assert plan.dl == len(analyze("Release moved. The release moved to July 17."))
    assert {e.term: e.tf for e in plan.entries} == {"releas": 2, "move": 2, "juli": 1, "17": 1}
    assert [e.term for e in plan.entries] == sorted(e.term for e in plan.entries)


def test_given_more_occurrences_or_a_shorter_text_then_a_higher_impact() -> None:
    assert impact(2, 10) > impact(1, 10)
    assert impact(1, 5) > impact(1, 50)
    assert 0 < impact(1, 10_000) < impact(1000, 1) <= 99_999


#: crc32 values of memory ids, computed once and pinned (see the test below).
PINNED_CRC32 = {
    "mem_1": 2273991170,
    "mem_2": 511904696,
    "mem_3": 1770273582,
    "mem_01JTESTE2E0000000000000000": 1491682792,
    "mem_01J9Z3K4M5N6P7Q8R9S0T1V2W3": 3102396154,
    "mem_\u00e9": 3037437064,  # the id's UTF-8 bytes are hashed
}
PINNED_SHARDS = {
    "mem_1": 2,
    "mem_2": 0,
    "mem_3": 6,
    "mem_4": 5,
    "mem_01JTESTE2E0000000000000000": 0,
    "mem_01J9Z3K4M5N6P7Q8R9S0T1V2W3": 2,
    "mem_\u00e9": 0,
}


def test_given_a_memory_then_its_shards_are_stable_and_in_range() -> None:
    """A memory's shard is part of stored keys: indexing adds to df and corpus shard k, and
    retiring it later (in another process, maybe another deployment) subtracts from the shard
    computed then. So ``shard_of`` must give the same answer in every process and every
    release, unlike ``hash()`` (salted per process): these values were computed once and pinned.
    Changing the hash or the shard count re-shards stored counters and needs a migration."""
    assert DF_SHARDS == CORPUS_SHARDS == 8
    assert {m: shard_of(m, 2**32) for m in PINNED_CRC32} == PINNED_CRC32
    assert {m: shard_of(m, DF_SHARDS) for m in PINNED_SHARDS} == PINNED_SHARDS
    plan = plan_index("mem_3", analyze("Release moved to July 17."))
    assert (plan.df_shard, plan.corpus_shard) == (6, 6)
    assert {shard_of(f"mem_{n}", DF_SHARDS) for n in range(200)} == set(range(DF_SHARDS))


@given(st.lists(st.text(alphabet="abcdefghij ", min_size=1, max_size=12), max_size=400))
def test_given_any_text_then_chunks_cover_every_term_once_and_fit_a_transaction(words: list[str]) -> None:
    plan = plan_index("mem_x", analyze(" ".join(words)))
    chunks = plan.chunks()
    assert [e for chunk in chunks for e in chunk] == list(plan.entries)
    # two actions per term, plus the memory item and its corpus shard in the last chunk
    assert all(2 * len(chunk) + 2 <= DYNAMODB_MAX_TRANSACTION_ACTIONS for chunk in chunks)
    assert all(len(chunk) <= TERMS_PER_TRANSACTION for chunk in chunks)
    assert plan.chunks() == chunks


def test_given_statuses_then_current_history_or_not_indexed() -> None:
    assert index_side("provisional") == index_side("active") == "c"
    assert index_side("superseded") == index_side("canceled") == "h"
    assert index_side("replaced") is index_side("tombstoned") is index_side("purged") is None


@given(
    tf=st.integers(1, 10_000),
    dl=st.integers(1, 100_000),
    valid_from=st.integers(0, 2**45),
    valid_to=st.none() | st.integers(0, 2**45),
    status=st.sampled_from(["provisional", "active", "superseded", "canceled"]),
    memory_type=st.sampled_from(["fact", "episode"]),
    stream=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True),
    successor=st.none() | st.from_regex(r"mem_[0-9a-z]{26}", fullmatch=True),
)
def test_given_any_posting_then_its_stored_form_decodes_to_it(  # noqa: PLR0917 - hypothesis arguments
    tf: int,
    dl: int,
    valid_from: int,
    valid_to: int | None,
    status: str,
    memory_type: str,
    stream: str,
    successor: str | None,
) -> None:
    posting = Posting("mem_1", tf, dl, valid_from, valid_to, stream, memory_type, status, None, successor)
    assert decode_posting("mem_1", encode_posting(posting)) == posting


def test_a_posting_stored_before_successors_were_written_decodes_without_one() -> None:
    posting = decode_posting("mem_1", "2|9|1000|2000|superseded|fact|chat-1")
    assert (posting.status, posting.stream, posting.successor) == ("superseded", "chat-1", None)

"""Reading the term index: the postings of a question's terms, in parallel, each read bounded.

Per term, one Query on its current-side partition, descending: the df shards
(``sk = ~df#NN``) sort last, so they come first, then postings by impact, at most
``limit`` of them. With history wanted (a past ``asOf``, ``includeSuperseded``), a
second Query reads the term's history side the same way. One more Query reads the
corpus shards (reused for a minute within a container). All run at once, so a recall's
latency is about one round trip, its cost the bounded reads of its own terms: never
proportional to the project. Through the direct read path (``sdk_speedups.direct_reads``) they
are all sent from the calling thread before any answer is read; through a botocore
client, each runs on the shared io thread pool (botocore clients are thread-safe).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from kaibo_core.adapters.aws import io_pool
from kaibo_core.adapters.dynamodb_values import s
from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads
from kaibo_core.core import storage_keys
from kaibo_core.core.indexing import DF_SHARDS, decode_posting
from kaibo_core.core.models.memories import CorpusStats, Posting, TermRead
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


#: Corpus statistics (N, average length) are reused this long within a container: they
#: move by one memory at a time and only scale BM25 slightly, so a minute-old value ranks
#: alike, and a recall saves a request. Document frequencies are always read fresh.
CORPUS_STATS_TTL_SECONDS: Final = 60.0


class DynamoTermIndex:
    def __init__(
        self,
        client: DynamoDBClient | DirectDynamoReads,
        index_table: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._table = index_table
        self._clock = clock
        self._corpus_cache: dict[ProjectId, tuple[float, CorpusStats]] = {}

    def read(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        history: bool,
        *,
        cells: Sequence[str] = (),
        cell_limit: int = 0,
    ) -> tuple[list[TermRead], CorpusStats]:
        """Each term's postings (current side, and history when asked) and df, then each cell
        term's (recall by meaning: at most ``cell_limit`` each); the corpus stats. One wave."""
        cached = self._corpus_cache.get(project)
        fresh = cached is not None and self._clock() - cached[0] < CORPUS_STATS_TTL_SECONDS
        wanted = [(term, limit) for term in terms] + [(cell, cell_limit) for cell in cells]
        requests = [self._postings_request(project, "c", term, bound) for term, bound in wanted]
        if history:
            requests += [self._postings_request(project, "h", term, bound) for term, bound in wanted]
        if not fresh:
            requests.append(self._corpus_request(project))
        responses = self._query_all(requests)
        reads: list[TermRead] = []
        for number, (term, bound) in enumerate(wanted):
            postings, doc_freq, truncated = _postings(responses[number], bound)
            if history:
                old, _, old_truncated = _postings(responses[len(wanted) + number], bound)
                postings = postings + old
                truncated = truncated or old_truncated
            reads.append(TermRead(term, postings, doc_freq, truncated))
        if fresh:
            assert cached is not None
            return reads, cached[1]
        stats = _corpus_stats(responses[-1])
        self._corpus_cache[project] = (self._clock(), stats)
        return reads, stats

    def _query_all(self, requests: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        client = self._client
        if isinstance(client, DirectDynamoReads) and client.enabled:
            return list(client.query_all(requests))
        pool = io_pool()
        return [future.result() for future in [pool.submit(self._query_one, r) for r in requests]]

    def _query_one(self, request: dict[str, Any]) -> Mapping[str, Any]:
        return self._client.query(**request)

    def _postings_request(self, project: ProjectId, side: str, term: str, limit: int) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(storage_keys.postings_pk(project, side, term))},
            "ScanIndexForward": False,
            "Limit": limit + (DF_SHARDS if side == "c" else 0),
            "ProjectionExpression": "sk, p, df, v",  # not pk: the same in every item
            "ConsistentRead": True,  # a memory remembered a moment ago is found
        }

    def _corpus_request(self, project: ProjectId) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(storage_keys.corpus_pk(project))},
            "ConsistentRead": True,
        }


def _postings(response: Mapping[str, Any], limit: int) -> tuple[list[Posting], int, bool]:
    """A term's postings (at most ``limit``), its df (the df shards' sum), and whether more exist."""
    postings: list[Posting] = []
    doc_freq = 0
    df_prefix = storage_keys.DF_SORT_PREFIX
    for item in response.get("Items", []):
        sort_key = item["sk"]["S"]
        if sort_key.startswith(df_prefix):
            doc_freq += int(item["df"]["N"])
        else:  # sk = <impact key>#<memory id>
            posting = decode_posting(sort_key.split("#", 1)[1], item["p"]["S"])
            vector = item.get("v")
            postings.append(posting if vector is None else posting._replace(vector=vector["S"]))
    return postings[:limit], doc_freq, len(postings) > limit or "LastEvaluatedKey" in response


def _corpus_stats(response: Mapping[str, Any]) -> CorpusStats:
    docs = terms = 0
    for item in response.get("Items", []):
        docs += int(item.get("docs", {"N": "0"})["N"])
        terms += int(item.get("terms", {"N": "0"})["N"])
    return CorpusStats(docs=docs, terms=terms)

"""Dense retrieval for `factscore` (`config.retriever: dense`, the reference profile's default):
FActScore's reference retriever encodes the query ("<topic> <fact>") and each passage ("<title>
<text>") with an embedding model (gtr-t5-large there) and ranks passages by the inner product of the
two vectors. Here the embedding model is any embedding provider (`config.embeddingProvider`, e.g.
`openai:embedding:text-embedding-3-small`), called through ctx.grader.embed, so run/calling/caller retries,
paces, caches and prices the calls like every grader call.

Vectors are also kept in memory by the run (`Vectors`, the run's Grader.kept): a document's passages
are embedded once per run however many facts and rows retrieve from it. The run makes them and drops
them when it ends; another run in the same process never sees them. At most `KEEP` vectors
(10,000, as 8-byte floats: about 120 MB at 1,536 dimensions), the least recently used dropped past it.
Under --no-cache a row keeps them only while it retrieves: each row embeds its passages again.
"""

from __future__ import annotations

import asyncio
from array import array
from collections import OrderedDict

from factcli.methods.claims import JudgeCall, JudgeError
from factcli.scoring.gather import gather_all
from factcli.stats.text import Passage
from factcli.types import ProviderSpec

MAX_PASSAGES = 5000  # a whole source without a topic: beyond this, ask for a topic or BM25
KEEP = 10_000  # twice MAX_PASSAGES: a whole source's passages and its queries fit


class Vectors:
    """Embedding vectors by (model and its config, text), the least recently used dropped past `keep`."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._kept: OrderedDict[tuple[str, str], array] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: tuple[str, str]) -> array | None:
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        return found

    def put(self, key: tuple[str, str], vector: list[float]) -> array:
        kept = self._kept[key] = array("d", vector)
        while len(self._kept) > self.keep:
            self._kept.popitem(last=False)
        return kept


def passage_text(p: Passage) -> str:
    return f"{p.title} {p.text}"


async def _vector(ctx, spec: ProviderSpec, text: str, call: JudgeCall, sem: asyncio.Semaphore,
                  vectors: Vectors) -> array:
    key = (f"{spec.id} {sorted(spec.config.items())!r}", text)
    found = vectors.get(key)
    if found is not None:
        return found
    async with sem:
        vector, error, tokens = await ctx.grader.embed(spec, text)
    call.tokens.add(tokens)
    if error is not None or vector is None:
        raise JudgeError(f"embedding with {spec.id}: {error or 'no vector'}")
    try:
        return vectors.put(key, vector)
    except TypeError:  # (a list, but not of numbers)
        raise JudgeError(f"embedding with {spec.id}: the reply is not a vector of numbers") from None


def _dot(a: array, b: array) -> float:
    return sum(x * y for x, y in zip(a, b))


async def dense_retrieve(ctx, spec: ProviderSpec, passages: list[Passage], queries: list[str], k: int,
                         call: JudgeCall, sem: asyncio.Semaphore) -> list[list[Passage]]:
    """The top-k passages for each query by inner product, best first (ties keep document order)."""
    if len(passages) > MAX_PASSAGES:
        raise ValueError(f"dense retrieval over {len(passages)} passages: give a topic (the reference retrieves "
                         f"within the topic's own article) or use config.retriever: bm25")
    kept = ctx.grader.kept("factscore.vectors", Vectors) or Vectors()  # (None: --no-cache, this row's alone)
    vectors = await gather_all(_vector(ctx, spec, passage_text(p), call, sem, kept) for p in passages)
    out = []
    for query in queries:
        q = await _vector(ctx, spec, query, call, sem, kept)
        ranked = sorted(range(len(passages)), key=lambda i: (-_dot(q, vectors[i]), i))
        out.append([passages[i] for i in ranked[:k]])
    return out

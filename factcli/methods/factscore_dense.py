"""Dense retrieval for `factscore` (`config.retriever: dense`, the reference profile's default):
FActScore's reference retriever encodes the query ("<topic> <fact>") and each passage ("<title>
<text>") with an embedding model (gtr-t5-large there) and ranks passages by the inner product of the
two vectors. Here the embedding model is any embedding provider (`config.embeddingProvider`, e.g.
`openai:embedding:text-embedding-3-small`), called through ctx.grader.embed, so run/calls retries,
paces, caches and prices the calls like every grader call; vectors are also kept in this process, so
a document's passages are embedded once per run however many facts and rows retrieve from it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from factcli.methods.claims import JudgeCall, JudgeError
from factcli.scoring.gather import gather_all
from factcli.stats.text import Passage
from factcli.types import ProviderSpec

MAX_PASSAGES = 5000  # a whole source without a topic: beyond this, ask for a topic or BM25
_KEEP = 100_000
_VECTORS: OrderedDict[tuple[str, str], list[float]] = OrderedDict()


def passage_text(p: Passage) -> str:
    return f"{p.title} {p.text}"


async def _vector(ctx, spec: ProviderSpec, text: str, call: JudgeCall, sem: asyncio.Semaphore) -> list[float]:
    key = (f"{spec.id} {sorted(spec.config.items())!r}", text)
    found = _VECTORS.get(key)
    if found is not None:
        _VECTORS.move_to_end(key)
        return found
    async with sem:
        vector, error, tokens = await ctx.grader.embed(spec, text)
    call.tokens.add(tokens)
    if error is not None or vector is None:
        raise JudgeError(f"embedding with {spec.id}: {error or 'no vector'}")
    _VECTORS[key] = vector
    while len(_VECTORS) > _KEEP:
        _VECTORS.popitem(last=False)
    return vector


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


async def dense_retrieve(ctx, spec: ProviderSpec, passages: list[Passage], queries: list[str], k: int,
                         call: JudgeCall, sem: asyncio.Semaphore) -> list[list[Passage]]:
    """The top-k passages for each query by inner product, best first (ties keep document order)."""
    if len(passages) > MAX_PASSAGES:
        raise ValueError(f"dense retrieval over {len(passages)} passages: give a topic (the reference retrieves "
                         f"within the topic's own article) or use config.retriever: bm25")
    vectors = await gather_all(_vector(ctx, spec, passage_text(p), call, sem) for p in passages)
    out = []
    for query in queries:
        q = await _vector(ctx, spec, query, call, sem)
        ranked = sorted(range(len(passages)), key=lambda i: (-_dot(q, vectors[i]), i))
        out.append([passages[i] for i in ranked[:k]])
    return out


def clear() -> None:
    _VECTORS.clear()

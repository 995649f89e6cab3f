"""Coroutines of one row run together: the first failure cancelling the rest (`gather_all`), or, for a
step whose calls each judge one part of a reply, every call run to its end first (`gather_settled`).

asyncio.gather leaves the others running when one raises: a row whose grading already failed, or a
run the budget stopped, would go on calling models after the run closed its HTTP sessions (and open
new ones nobody closes). Every place that runs a row's calls side by side goes through here
(tests/test_owned_rules.py reads scoring/, methods/ and assertions/ for any other).

How many of them are out at once is not decided here: every call takes a place under the run's cap
(`-j`, run/calling/caller.CallCap), whichever assertion or step makes it, so a row starts all its assertions and
a method all its steps together. `bound` is for a limit a user set on one assertion (a method's
`config.maxConcurrency`), under that cap."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


class _Unbounded:
    """A bound that never waits: no limit of the assertion's own, -j alone."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc) -> bool:
        return False


UNBOUNDED = _Unbounded()


def bound(limit: int | None):
    """`async with bound(n):` at most n of one assertion's calls in flight (its `config.maxConcurrency`),
    under the run's cap; with no limit of its own (None), the run's cap alone."""
    return asyncio.Semaphore(limit) if limit else UNBOUNDED


async def gather_all(aws: Iterable[Awaitable[Any]]) -> list:
    """The results in order; on the first exception the others are cancelled and awaited, then it is raised."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def gather_settled(aws: Iterable[Awaitable[Any]], part_error: type[BaseException]) -> list:
    """The results in order, every call run to its end first (none cancelled, so none left running either);
    then the first exception that is not a `part_error` (a budget stop, an abort: the run's to act on),
    else the first `part_error` in order. For a step whose calls each judge one part of the reply
    (facts-grounding's spans, beside its eligibility step): the error it reports is the same whatever
    order the replies came in, and a request is never dropped while its server still answers it, which
    would put one more call at an endpoint than its `maxConcurrency` allows."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for wanted in (lambda r: not isinstance(r, part_error), lambda r: True):
        for r in results:
            if isinstance(r, BaseException) and wanted(r):
                raise r
    return results

"""Coroutines of one row run together, the first failure cancelling the rest.

asyncio.gather leaves the others running when one raises: a row whose grading already failed, or a
run the budget stopped, would go on calling models after the run closed its HTTP sessions (and open
new ones nobody closes). Every place that runs a row's calls side by side goes through here."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


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

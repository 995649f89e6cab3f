"""Per-endpoint limits, under the run's cap on calls in flight (`-j`: run/calling/caller.CallCap): a provider's
`maxConcurrency`, requests per minute (`rpm`) and tokens per minute (`tpm`), set in its config (graders
are providers too). Columns on the same endpoint (same id and base URL) share one limiter.

- Rates are enforced by spacing, not by a per-minute budget: providers enforce per-minute limits
  over shorter periods too (OpenAI documents 60,000 rpm as 1,000 requests per second), so request
  starts are at least 60/rpm seconds apart, and a request of t tokens holds the next one back by
  t·60/tpm seconds. No burst at the start: with a rate set, the first call of an endpoint goes
  alone (its client and connection take a while to set up, which would bunch it with the second),
  and no sliding second sees more than rpm/60 requests.
- The pace adapts when the endpoint asks to slow down (AIMD, as TCP does): a 429, or a 503 with
  Retry-After, halves the in-flight limit and the request rate (the first time, half the rate of the
  last second's starts); each success adds 1/limit to the one and 1/rate to the other, so each grows
  by about one per round of calls. A burst of 429s answered together is one cut, not many. The limit
  stays between 1 and `maxConcurrency` (else `-j`), the rate at or above 0.5 calls a second (below
  that, set `rpm`). Both are needed: against a fast endpoint even one call in flight can exceed a
  rate limit. An endpoint that answers 429 at random, whatever the pace, settles at a slow pace.
- A call takes its endpoint's slot (and its place in the spacing) first, then its place under the run's
  cap: a call waiting for an endpoint's slot never holds a place another endpoint's call could use.
  A call the cap held back is spaced again from the endpoint's last start (`started`), so calls the
  cap lets go together do not go out closer than the endpoint's gap.
"""

from __future__ import annotations

import asyncio
import collections
import math
from contextlib import asynccontextmanager
from dataclasses import dataclass

from factcli.run.calling import clock

LIMIT_KEYS = ("maxConcurrency", "rpm", "tpm")  # factcli's, never sent to the API nor part of the cache key
CHARS_PER_TOKEN = 4  # a prompt's token estimate for tpm spacing when nothing better is known
SPACING_MARGIN = 1.05  # 5% wider gaps: a 50 ms hiccup on either side must not put rpm/60 + 1 calls in a second
CUT_INTERVAL_S = 1.0  # 429s within this long of a cut answer calls sent before it: no further cut
MIN_RATE = 0.5  # requests per second the adaptive pace never goes below (a gap of at most 2 s)


@dataclass
class Throttling:
    """What the endpoint went through, for the summary."""

    throttled: int = 0  # replies that asked to slow down (429, or 503 with Retry-After)
    lowest_limit: int | None = None  # the smallest in-flight limit it was cut to


class Limiter:
    def __init__(self, ceiling: int, rpm: float | None = None, tpm: float | None = None, capped: bool = False):
        self.ceiling = max(1, int(ceiling))
        self.capped = capped  # maxConcurrency was set: the ceiling is the endpoint's, not -j
        self.limit = float(self.ceiling)
        self.rpm, self.tpm = rpm, tpm
        self.in_flight = 0
        self.rate: float | None = None  # adaptive requests per second, from the first 429 on
        self.stats = Throttling()
        self._next_start = 0.0  # monotonic time before which no request may start
        self._free_at = 0.0  # monotonic time before which no request may start, from the last actual start
        self._starts: collections.deque = collections.deque()  # start times in the last second
        self._last_cut = -math.inf
        self._first: asyncio.Event | None = None  # set once the endpoint's first paced call has finished
        self._changed = asyncio.Condition()

    @property
    def idle(self) -> bool:
        """Nothing to enforce yet (no limit set, never throttled): -j alone bounds the calls, and a call
        skips the limiter (a 10,000-row run paid ~8% for the bookkeeping). Calls in flight on this path
        are not counted once a first 429 engages the limiter; they finish within one round."""
        return not (self.capped or self.rpm or self.tpm or self.rate) and self.limit >= self.ceiling

    @asynccontextmanager
    async def slot(self, tokens: int = 0):
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < math.floor(self.limit))
            self.in_flight += 1
        first = None
        try:
            if self.rpm or self.tpm or self.rate:
                if self._first is None:
                    first = self._first = asyncio.Event()
                else:
                    await self._first.wait()
            await self._space(tokens)
            yield
        finally:
            if first is not None:
                first.set()
            async with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()

    def _gap(self, tokens: int) -> float:
        gap = 0.0
        if self.rpm:
            gap = max(gap, 60.0 / self.rpm * SPACING_MARGIN)
        if self.tpm and tokens:
            gap = max(gap, tokens * 60.0 / self.tpm * SPACING_MARGIN)
        if self.rate:
            gap = max(gap, 1.0 / self.rate)
        return gap

    async def started(self, tokens: int = 0) -> None:
        """The request goes out now, or once the gap after the endpoint's last start has passed: waits
        only when the run's cap held this start back past its place in the spacing (the gap here is
        without SPACING_MARGIN, so a start the loop woke a little late does not delay the next)."""
        gap = self._gap(tokens)
        if not gap:
            return
        now = clock.now()
        start = max(now, self._free_at)
        self._free_at = start + gap / SPACING_MARGIN  # reserved before sleeping, as in _space
        if start > now:
            await clock.sleep(start - now)

    async def _space(self, tokens: int) -> None:
        gap = self._gap(tokens)
        now = clock.now()
        start = max(now, self._next_start)
        self._next_start = start + gap  # reserved before sleeping: concurrent callers queue up in order
        self.note_start(start, now)
        if start > now:
            await clock.sleep(start - now)

    def note_start(self, start: float | None = None, now: float | None = None) -> None:
        """Remember a start (the last second's, which size the first cut of the rate)."""
        now = clock.now() if now is None else now
        self._starts.append(now if start is None else start)
        while self._starts[0] < now - 1.0:
            self._starts.popleft()

    async def throttled(self) -> None:
        self.stats.throttled += 1
        now = clock.now()
        if now - self._last_cut < CUT_INTERVAL_S:
            return
        self._last_cut = now
        async with self._changed:
            self.limit = max(1.0, math.floor(self.limit / 2))
            low = int(self.limit)
            self.stats.lowest_limit = low if self.stats.lowest_limit is None else min(self.stats.lowest_limit, low)
            recent = sum(1 for s in self._starts if s >= now - 1.0)
            self.rate = max(MIN_RATE, (self.rate or recent or 1) / 2)

    async def succeeded(self) -> None:
        if self.rate is not None:
            self.rate += 1.0 / self.rate
        if self.limit >= self.ceiling:
            return
        async with self._changed:
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
            self._changed.notify_all()


def _positive(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


class Limiters:
    """One Limiter per endpoint, made on first use from the provider's config."""

    def __init__(self, default_ceiling: int):
        self.default_ceiling = max(1, default_ceiling)
        self.by_endpoint: dict[tuple, Limiter] = {}

    def for_provider(self, provider) -> Limiter:
        config = provider.config or {}
        key = (provider.id, config.get("apiBaseUrl") or config.get("api_base"))
        limiter = self.by_endpoint.get(key)
        if limiter is None:
            ceiling = _positive(config.get("maxConcurrency"))
            limiter = Limiter(int(ceiling) if ceiling else self.default_ceiling, _positive(config.get("rpm")),
                              _positive(config.get("tpm")), capped=ceiling is not None)
            self.by_endpoint[key] = limiter
        return limiter

    def report(self) -> dict[str, dict]:
        """{provider id: {"throttled", "lowestLimit", "limit"}} for every endpoint that was throttled."""
        return {key[0]: {"throttled": lim.stats.throttled, "lowestLimit": lim.stats.lowest_limit,
                         "limit": lim.ceiling}
                for key, lim in self.by_endpoint.items() if lim.stats.throttled}


def estimate_tokens(prompt, config: dict) -> int:
    """A request's tokens for tpm spacing: the prompt's characters / 4, plus the reply's cap."""
    cap = config.get("max_tokens") or config.get("max_completion_tokens") or 0
    cap = int(cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) else 0
    return len(prompt.text) // CHARS_PER_TOKEN + cap

"""A circuit breaker per endpoint (a provider's server and model, Provider.endpoint()): an endpoint that is
not there, or that answers every call with a failure, is stopped instead of being retried row after row
(a judge answering only 429 held a 10-row CI job for 815 s; a wrong port ran 40 rows through 160 retries).

The breaker of an endpoint opens when
- `CONNECT_FAILURES` attempts in a row could not connect to it (connection refused, no such host), with no
  reply between them; or the preflight found it unreachable (run/planning/preflight.reach) before any call;
- `failures` calls in a row (FACTCLI_BREAKER_FAILURES, evaluateOptions.breakerFailures; default 5) ended
  failed after all their retries (429, 5xx, a dropped connection), with no call answered between them;
- or no call to it was answered for `seconds` (FACTCLI_BREAKER_SECONDS, evaluateOptions.breakerSeconds;
  default 20) since the first failure of such a streak, while calls to it were still under way (a call
  waiting out a long Retry-After does not hold the run past that).
A reply of any kind (an answer, a 400) is not a failure of the endpoint; timeouts are not counted (a long
generation is not an outage). 0 for either setting turns that rule off.

Once open, no request goes to the endpoint: calls waiting to retry end at once, new calls end without
being sent, each with an error naming the breaker (a provider error for the model under test, a grading
error for a judge); run/executor starts no more rows, and the run ends interrupted, resumable: its
abort reason says ROW_MARK, and --resume of such a run also runs its ERROR rows again (run/recording/resume).
run/calling/caller.Caller owns the retries and tells the breaker what each attempt and call came to; this
module only counts and decides.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from factcli.run.calling import clock as run_clock

CONNECT_FAILURES = 3
DEFAULT_FAILURES = 5
DEFAULT_SECONDS = 20.0
ROW_MARK = "stopped by the circuit breaker"  # in every error the breaker gives, and in the run's abort reason


@dataclass
class Trip:
    """An endpoint the breaker stopped, and why."""

    endpoint: str  # Provider.endpoint(): its URL and model
    label: str  # the provider's id (or label)
    judge: bool  # a grader, embedding model or search backend; else a model under test
    why: str

    @property
    def exit_code(self) -> int:
        return 4 if self.judge else 1  # contract §2: judged rows missing (4); the model under test failed (1)

    def error(self) -> str:
        """The error of each call the breaker ended."""
        return f"{self.who()} {ROW_MARK}: {self.why}"

    def who(self) -> str:
        url, _, model = self.endpoint.rpartition(" ")
        where = f" at {url}" if url else ""
        return f"{'the judge' if self.judge else 'the model under test'} {self.label}{where}"


class Breaker:
    """One endpoint's count of failures; `trip` once it is stopped."""

    def __init__(self, owner: "Breakers", endpoint: str, label: str, judge: bool):
        self.owner, self.endpoint, self.label, self.judge = owner, endpoint, label, judge
        self.connect_failures = 0
        self.failed_calls = 0
        self.since: float | None = None  # when the current streak of failures began
        self.pending = 0  # calls to this endpoint under way (sent, or waiting to be sent or retried)
        self.trip: Trip | None = None
        self.last_error = ""
        self._opened: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None

    def attempt_failed(self, error: str, unreachable: bool) -> None:
        """An attempt failed in a way the breaker counts (429, 5xx, a connection error)."""
        self.last_error = error
        now = self.owner.clock()
        if self.since is None:
            self.since = now
            self._arm()
        self.connect_failures = self.connect_failures + 1 if unreachable else 0
        if unreachable and self.connect_failures >= CONNECT_FAILURES:
            self.open(f"{self.connect_failures} attempts in a row could not connect ({error})")
        elif self.owner.seconds and now - self.since >= self.owner.seconds:
            self._timed_out()

    def call_failed(self) -> None:
        """A call ended failed after its retries (its last attempt was counted by attempt_failed)."""
        self.failed_calls += 1
        if self.owner.failures and self.failed_calls >= self.owner.failures and self.trip is None:
            self.open(f"{self.failed_calls} calls in a row failed after their retries, none answered "
                      f"(last: {self.last_error})")

    def answered(self) -> None:
        """The endpoint answered: whatever failed before was not an outage."""
        self.connect_failures = self.failed_calls = 0
        self.since = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def open(self, why: str) -> None:
        if self.trip is not None:
            return
        self.trip = Trip(self.endpoint, self.label, self.judge, why)
        if self.owner.trip is None:
            self.owner.trip = self.trip
        if self._opened is not None:
            self._opened.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def sleep(self, seconds: float) -> bool:
        """Wait `seconds` (a retry's backoff) unless the breaker opens first; True if it is open."""
        if self.trip is None:
            if self._opened is None:
                self._opened = asyncio.Event()
            try:
                async with asyncio.timeout(run_clock.real(seconds)):
                    await self._opened.wait()
            except TimeoutError:
                pass
        return self.trip is not None

    async def unless_open(self, send, sending: list):
        """Await `send` (a request waiting for its endpoint's turn, then sent); None, with `send` cancelled,
        if the breaker opens before it is sent (`sending` still empty). A request already sent is awaited:
        it may be a long generation about to be answered and billed."""
        task = asyncio.ensure_future(send)
        if self.trip is None and self._opened is None:
            self._opened = asyncio.Event()
        opened = asyncio.ensure_future(self._opened.wait()) if self.trip is None else None
        try:
            if opened is not None:
                await asyncio.wait({task, opened}, return_when=asyncio.FIRST_COMPLETED)
            if task.done() or sending:
                return await task
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            return None
        except BaseException:
            task.cancel()
            raise
        finally:
            if opened is not None:
                opened.cancel()

    def _arm(self) -> None:
        if not self.owner.seconds:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(run_clock.real(self.owner.seconds), self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        if self.trip is not None or self.since is None:
            return
        if self.pending == 0:  # nothing was waiting on it meanwhile: time without calls is not an outage
            self.since = None
            return
        seconds = self.owner.clock() - self.since
        self.open(f"no call answered for {seconds:.0f} s, every attempt failed (last: {self.last_error})")


class Breakers:
    """The run's breakers, one per endpoint, made on first use; `trip`: the first endpoint stopped."""

    def __init__(self, failures: int = DEFAULT_FAILURES, seconds: float = DEFAULT_SECONDS,
                 clock: Callable[[], float] = run_clock.now):
        self.failures = max(0, int(failures))
        self.seconds = max(0.0, float(seconds))
        self.clock = clock
        self.models: set[str] = set()  # the endpoints of the providers under test (the rest are judges)
        self.by_endpoint: dict[str, Breaker] = {}
        self.trip: Trip | None = None

    @classmethod
    def from_settings(cls, evaluate_options: dict | None = None) -> "Breakers":
        """The thresholds from evaluateOptions (breakerFailures, breakerSeconds), else the environment
        (FACTCLI_BREAKER_FAILURES, FACTCLI_BREAKER_SECONDS), else the defaults."""
        from factcli import settings

        opts = evaluate_options or {}
        failures = opts.get("breakerFailures")
        seconds = opts.get("breakerSeconds")
        return cls(settings.env_float("FACTCLI_BREAKER_FAILURES", DEFAULT_FAILURES) if failures is None else failures,
                   settings.env_float("FACTCLI_BREAKER_SECONDS", DEFAULT_SECONDS) if seconds is None else seconds)

    def of(self, provider) -> Breaker:
        endpoint = provider.endpoint()
        breaker = self.by_endpoint.get(endpoint)
        if breaker is None:
            breaker = Breaker(self, endpoint, provider.label or provider.id, endpoint not in self.models)
            self.by_endpoint[endpoint] = breaker
        return breaker

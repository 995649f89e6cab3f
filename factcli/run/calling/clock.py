"""The clock a run waits by: the limiter's spacing (run/calling/limits.py), a retry's backoff (run/calling/caller.py) and the
circuit breaker's time (run/calling/breaker.py). One place, so that a test can make it fast: with `speed = 50`,
time reads 50 times faster and every wait is 50 times shorter, and the code decides exactly as it would
in real time (issue 51: "a clock the tests can fake"). The per-attempt timeout of a call is real time:
it bounds a server, not a decision."""

from __future__ import annotations

import asyncio
import time

speed = 1.0  # tests set it (monkeypatch); never changed by factcli itself
_origin = time.monotonic()


def now() -> float:
    """Monotonic seconds, on the run's clock."""
    t = time.monotonic()
    return t if speed == 1.0 else _origin + (t - _origin) * speed


def real(seconds: float) -> float:
    """How long `seconds` on the run's clock lasts in real time."""
    return seconds if speed == 1.0 else seconds / speed


async def sleep(seconds: float) -> None:
    await asyncio.sleep(real(seconds))

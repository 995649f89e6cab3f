"""The wall clock a store keeps its times by: a run's `created_at`/`updated_at`, and so its lease's
heartbeats and their age (store/leases.py, base.holder_alive), and the heartbeat's wait between beats.
UTC wall time, not run/calling/clock's monotonic time: a lease's heartbeat is written by one machine and read by
another. One place, so that a test can make leases fast: with `speed = 50`, time reads 50 times faster
(past the moment the module was imported) and a heartbeat waits 50 times shorter, and every lease
decision is the one real time would make (issue 51: "a clock the tests can fake" for leases).
Never changed by factcli itself: two processes judging one lease read the same real time."""

from __future__ import annotations

import time
from datetime import datetime, timezone

speed = 1.0  # tests set it (monkeypatch)
_origin = time.time()


def time_now() -> float:
    """Seconds since the epoch, UTC, on the store's clock."""
    t = time.time()
    return t if speed == 1.0 else _origin + (t - _origin) * speed


def wall() -> datetime:
    if speed == 1.0:
        return datetime.now(timezone.utc)
    return datetime.fromtimestamp(time_now(), timezone.utc)


def real(seconds: float) -> float:
    """How long `seconds` on the store's clock lasts in real time."""
    return seconds if speed == 1.0 else seconds / speed

"""Leases on runs: a run being executed or resumed is held by one process, named by its row's
`host`, `pid` and heartbeat (`updated_at`), with status `started`.

- Taking a stored run over (`take`, for --resume and --retry-errors) is one compare-and-set UPDATE on
  the values read before: of two machines resuming at once, one wins and the other is refused with
  one line naming the holder.
- The holder is alive while its heartbeat is younger than the lease timeout (FACTCLI_LEASE_TIMEOUT
  seconds, 60 by default: database.holder_alive), whatever its pid says; on its own machine, also
  only while its pid is alive and could have written that heartbeat (not a zombie, not a pid reused
  by a process started since: base.pid_alive). A run whose process or machine died is taken over
  once that time has passed, or at once when its pid is plainly not its holder's any more.
- A `Heartbeat` thread refreshes `updated_at` every timeout/6 seconds through its own connection,
  also while no row finishes (a slow model), on every store (SQLite too: a pid alone never holds a
  run, issue 48).
- Every time here (a heartbeat, its age, the wait between beats) is the store's clock (store/clock.py):
  UTC wall time, which a test can make run fast.

Machines are assumed to keep their clocks within a few seconds of each other (NTP); a clock far
ahead makes its heartbeats look fresh for longer.
"""

from __future__ import annotations

import os
import socket
import threading

from factcli.errors import FactcliError
from factcli.store import clock
from factcli.store.database import Store, holder_alive, lease_timeout, now, seconds_since, store_errors


def holder(run: dict) -> str:
    age = seconds_since(run.get("updated_at"))
    beat = f", last heartbeat {age:.0f} s ago" if age is not None else ""
    return f"pid {run.get('pid')} on {run.get('host')}{beat}"


def refusal(run: dict) -> FactcliError:
    """One line: who holds the run, and exactly when it can be taken over if its heartbeat stops now."""
    timeout = lease_timeout()
    age = seconds_since(run.get("updated_at"))
    if age is None:
        when = f"once its heartbeat is {timeout:.0f} s old"
    else:
        from datetime import timedelta

        left = max(0.0, timeout - age)
        at = clock.wall() + timedelta(seconds=left)
        when = f"at {at.strftime('%H:%M:%S')} UTC (in {left:.0f} s) if no heartbeat comes before"
    return FactcliError(f"run {run['id']} is being run by {holder(run)}; wait for it or stop it: it can be "
                        f"taken over {when} (each heartbeat moves that {timeout:.0f} s on)")


def take(store: Store, run: dict) -> dict:
    """Hold `run` (a row read from `store`) for this process; refused while another process holds it.
    Returns the fields written."""
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    if run.get("status") == "started" and holder_alive(run) and \
            (run.get("pid"), run.get("host")) != (me["pid"], me["host"]):
        raise refusal(run)
    fields = {"status": "started", "updated_at": now(), "finished_at": None, **me}
    sets = ", ".join(f"{k} = ?" for k in fields)
    same = " AND ".join(f"{k} IS NOT DISTINCT FROM ?" for k in ("status", "pid", "host", "updated_at"))
    n = store.execute(f"UPDATE runs SET {sets} WHERE id = ? AND {same}",
                      [*fields.values(), run["id"], run.get("status"), run.get("pid"), run.get("host"),
                       run.get("updated_at")]).rowcount
    store.commit()
    if n != 1:  # another process took it between our read and our write
        raise refusal(store.resolve(run["id"]))
    return fields


class Heartbeat:
    """Refreshes a held run's `updated_at` from a thread with its own connection, until `stop`."""

    def __init__(self, target, run_id: str):
        self.target, self.run_id = target, run_id
        self.pid, self.host = os.getpid(), socket.gethostname()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Heartbeat":
        self._thread = threading.Thread(target=self._beat, name="factcli-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        every = lease_timeout() / 6
        store = None
        while not self._stop.wait(clock.real(every)):
            try:
                if store is None:
                    store = Store.open(self.target)
                    if store.kind == "postgresql":  # never wait long on the run row the writer is updating
                        store.execute("SET lock_timeout = '2s'")
                store.execute("UPDATE runs SET updated_at = ? WHERE id = ? AND pid = ? AND host = ? "
                              "AND status = 'started'", (now(), self.run_id, self.pid, self.host))
                store.commit()
            except (FactcliError, *store_errors()):
                if store is not None:  # a dropped connection: open a new one next time
                    try:
                        store.close()
                    except (FactcliError, *store_errors()):
                        pass
                store = None
        if store is not None:
            try:
                store.close()
            except (FactcliError, *store_errors()):
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def heartbeat(store: Store, run_id: str) -> Heartbeat:
    """A started heartbeat for a run held in `store` (any kind: a pid alone never holds a run)."""
    return Heartbeat(store.target, run_id).start()

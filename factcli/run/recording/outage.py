"""A store that stopped taking rows in the middle of a run (a PostgreSQL server restarted, a network
blink, a SQLite file on a full disk or locked past its timeout): the run goes on, its rows are held,
and the store is tried again with backoff for a bounded time (FACTCLI_STORE_TIMEOUT seconds, 60 by
default). On reconnect every held row is written; if the store is still gone when the run ends, the
run waits out the rest of that time, then keeps every row in memory for its table and -o files and
says which rows the store lacks (run/recording/writer.py drives it; docs/commands.md, "What a crash can lose").
"""

from __future__ import annotations

import marshal
import tempfile
import time

from factcli.store.schema import RESULT_FIELDS

DEFAULT_TIMEOUT_S = 60.0
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0
_KEY = tuple(RESULT_FIELDS.index(f) for f in ("test_idx", "prompt_idx", "repeat_idx"))


def timeout() -> float:
    """How long a run keeps trying a store that stopped answering (FACTCLI_STORE_TIMEOUT seconds)."""
    from factcli.settings import env_float

    return max(0.0, env_float("FACTCLI_STORE_TIMEOUT", DEFAULT_TIMEOUT_S))


class Outage:
    """The rows the store has not taken yet (tuples as store/records.RowEncoder makes them) and when to
    try it again: 0.25 s after the failure, then twice as long each time up to 5 s, until `deadline`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.started = time.monotonic()
        self.deadline = self.started + timeout()
        self.delay = FIRST_DELAY_S
        self.next_try = self.started + self.delay
        self.held: list[tuple] = []
        self.tries = 0

    def hold(self, rows) -> None:
        self.held.extend(rows)

    def due(self) -> bool:
        """Time to try again (never after the deadline while rows still run: a server that does not
        answer would stall the run for its connect timeout each time; the end of the run tries once more)."""
        t = time.monotonic()
        return t >= self.next_try and t < self.deadline

    def failed(self, error: BaseException) -> None:
        self.error, self.tries = error, self.tries + 1
        self.delay = min(self.delay * 2, MAX_DELAY_S)
        self.next_try = time.monotonic() + self.delay

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def wait(self) -> None:
        """Sleep until the next try (the end of the run, waiting for the store)."""
        time.sleep(max(0.0, min(self.next_try, self.deadline) - time.monotonic()))

    def rows(self) -> list[tuple]:
        """The held rows, each once (a row held twice is stored as its last copy)."""
        seen: dict = {}
        for row in self.held:
            seen[tuple(row[i] for i in _KEY)] = row
        return list(seen.values())


class Spool:
    """The rows a server store took, kept in an unnamed temporary file (readable by this user alone,
    gone when closed) rather than in memory: if the server is gone at the end of the run, the table
    and the -o files are made from them. One marshal record a group, appended as the group commits."""

    def __init__(self) -> None:
        self._file = None

    def add(self, rows: list[tuple]) -> None:
        if rows:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="factcli-rows-")  # noqa: SIM115 (open until close())
            marshal.dump(rows, self._file)

    def rows(self) -> list[tuple]:
        out: list[tuple] = []
        if self._file is not None:
            self._file.seek(0)
            while True:
                try:
                    out.extend(marshal.load(self._file))
                except EOFError:
                    break
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def permanent(error: BaseException) -> bool:
    """Whether a store error is the row's, not the store's: a value the store cannot take (`string or
    blob too big`, a NUL in PostgreSQL text, a number out of range) or a constraint it breaks. Trying
    again cannot help, so it is no outage: the row is reported and its neighbours stored. Anything else
    (a connection lost, a locked or full database) is an outage."""
    import sqlite3

    if isinstance(error, (sqlite3.DataError, sqlite3.IntegrityError)):
        return True
    if isinstance(error, sqlite3.OperationalError):  # "too big" is an OperationalError on some builds
        return "too big" in str(error)
    import sys

    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(error, (psycopg.DataError, psycopg.IntegrityError))


def place(row: tuple) -> str:
    """`test 3 (prompt 0, repeat 0)`: a stored row's place, for a message."""
    t, p, r = (row[i] for i in _KEY)
    return f"test {t} (prompt {p}, repeat {r})"


def missing_tests(rows: list[tuple]) -> str:
    """`tests 3, 4, 9 (…)`: the tests whose rows the store lacks, for the message."""
    tests = sorted({row[_KEY[0]] for row in rows})
    shown = ", ".join(str(t) for t in tests[:12]) + (", …" if len(tests) > 12 else "")
    return f"test{'s' if len(tests) != 1 else ''} {shown}"


def describe(error: BaseException) -> str:
    """A driver's error as one line, without a password it may hold."""
    from factcli.store.base import redact

    return redact(" ".join(str(error).split()) or type(error).__name__)


def announce(path, error: BaseException) -> str:
    seconds = timeout()
    if not seconds:
        return f"could not write to {path} ({describe(error)})"
    return (f"could not write to {path} ({describe(error)}); trying again for up to {seconds:g} s while the run "
            "goes on (its rows are held meanwhile)")

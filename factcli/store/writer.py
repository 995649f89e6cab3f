"""A second process that writes a big run's result rows into its SQLite file (issue 30).

Writing and committing a stored row is SQLite work that is a large share of an echo row's time in
the eval's process. `RowWriter` hands each group of rows (the tuples `store.records.to_row` makes)
to a child process through a pipe, so that SQLite's work runs on another core while the eval goes
on building the next group. A thread would not do: sqlite3 gives up the GIL for each row's insert
and must win it back from the busy eval loop, which starves it.

- At most IN_FLIGHT groups are in the child: handing over one more waits for the oldest one's
  commit (usually long done by then), and a failure is reported with the rows it cost.
- The rows travel as `marshal` data (tuples of str, int, float and None; both ends are the same
  interpreter), which encodes a group of 500 rows in well under a millisecond.
- The child is in a process group of its own, so Ctrl-C in the terminal does not reach it (the
  eval's process decides when to stop), and it commits every group it has read whole. When the
  eval's process dies, even by SIGKILL, its end of the pipe closes, and the child commits what it
  had and exits: a crash still loses at most the group being built.
- The child also copies the log back into the file (the checkpoint), after answering.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import struct
import sys
from collections import deque

_LEN = struct.Struct("<Q")
_OK, _FAILED = b"\x00", b"\x01"
# Groups handed over and not yet committed: two, so that the eval goes on while the child starts
# or checkpoints its log.
IN_FLIGHT = 2
CHECKPOINT_BYTES = 2 << 20  # of text written between two checkpoints (~130 of factcli's 16 KB pages)


class WriterError(sqlite3.OperationalError):  # a store error (store.base.store_errors) like any other
    """The child could not commit a group, or is gone: `rows` are the rows handed over earlier that
    are not stored (the group being handed over is not taken either)."""

    def __init__(self, message: str, rows: list[tuple]):
        super().__init__(message)
        self.rows = rows


class RowWriter:
    """The eval's end: `send` a group (returns at once), `sync` to wait until all are committed."""

    def __init__(self, path, sql: str, busy_timeout_ms: int):
        import subprocess

        # This file run as a script, by the same interpreter, with the standard library alone: -S
        # skips site-packages' start-up files, -P keeps this folder off sys.path (store/copy.py
        # would hide the standard `copy`), and no factcli package is imported, so that it is soon ready.
        # In a process group of its own: Ctrl-C in the terminal reaches the eval alone.
        self.proc = subprocess.Popen([sys.executable, "-S", "-P", __file__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0, close_fds=True, process_group=0)
        self._out, self._in = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        _widen(self._out)
        self._pending: deque[list[tuple]] = deque()  # the groups in the child, until their commits are read
        self._send(marshal.dumps((str(path), sql, busy_timeout_ms)))

    def _send(self, data: bytes) -> None:
        view = memoryview(_LEN.pack(len(data)) + data)
        while view:
            view = view[os.write(self._out, view):]

    def _answer(self) -> None:
        """Read the answer for the oldest group in the child."""
        rows = self._pending.popleft()
        status = _read(self._in, 1)
        if status == _OK:
            return
        if status == _FAILED:  # that group alone: the child goes on with the next ones
            (n,) = _LEN.unpack(_read(self._in, _LEN.size))
            raise WriterError(_read(self._in, n).decode("utf-8", "replace"), rows)
        lost = [*rows, *(r for group in self._pending for r in group)]
        self._pending.clear()
        raise WriterError(f"the writer process ended (exit code {self.proc.wait()})", lost)

    def send(self, rows: list[tuple]) -> None:
        """Hand a group to the child; raises WriterError if an earlier group failed."""
        while len(self._pending) >= IN_FLIGHT:
            self._answer()
        try:
            self._send(marshal.dumps(rows))
        except OSError as exc:
            lost = [r for group in self._pending for r in group]
            self._pending.clear()
            raise WriterError(f"the writer process ended ({exc.strerror or exc})", lost) from None
        self._pending.append(rows)

    def sync(self) -> None:
        """Wait until every group handed over is committed."""
        while self._pending:
            self._answer()

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def close(self, wait_for_answer: bool = True) -> None:
        """Commit what is left and let the child close the file; its exit is left to reap(), so
        that it overlaps the caller's own closing (the checkpoint of the log). Without
        `wait_for_answer` (after an interruption), the last groups' answers are not read: the child
        commits each it has whole, the caller writes them again anyway, and the child is reaped now."""
        try:
            if wait_for_answer:
                self.sync()
        finally:
            try:  # through the file object that owns the descriptor: closed twice, the second
                self.proc.stdin.close()  # close could hit a file opened since with that number
            except OSError:
                pass
            if wait_for_answer:
                _read(self._in, 1)  # the child closed the file (or is gone)
            else:
                self.reap()

    def reap(self) -> None:
        """Wait for the child's exit."""
        self.proc.wait()
        self.proc.stdout.close()


def _widen(fd: int) -> None:
    """Make the pipe hold a whole group (much more than Linux's default 64 KB), so that
    handing one over is one copy instead of a dozen waits on the child's reads (Linux only)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):  # elsewhere, or above /proc/sys/fs/pipe-max-size
        pass


def _read(fd: int, n: int) -> bytes:
    """n bytes, or fewer if the other end closed first."""
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _message(fd: int) -> bytes | None:
    head = _read(fd, _LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    body = _read(fd, n)
    return body if len(body) == n else None  # a group cut short by a crash is not written


def _serve(inp: int, out: int) -> None:
    header = _message(inp)
    if header is None:
        return
    path, sql, busy_ms = marshal.loads(header)
    conn = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None)
    answering = True  # until the eval's process is gone: then its groups are still committed
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        # The log is copied back into the file here, beside the eval, every CHECKPOINT_BYTES of text
        # written (SQLite's own threshold is 1,000 pages, ~16 MB, left to the eval's close at the end), and
        # after the group's answer, so that the eval never waits for it (nor, as long, for the last
        # group).
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        logged = 0
        while (data := _message(inp)) is not None:
            rows = marshal.loads(data)
            try:
                conn.execute("BEGIN")
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
                answer = _OK
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                answer = _failed(str(exc))
            if answering:
                try:
                    os.write(out, answer)
                except OSError:
                    answering = False
            logged += sum(len(v) for row in rows for v in row if type(v) is str)  # ~what the log took
            if logged >= CHECKPOINT_BYTES:
                logged = 0
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:  # a reader in the way: the next one, or the eval's close, does it
                    pass
    finally:
        conn.close()
    if answering:
        try:
            os.write(out, _OK)  # closed: the eval's own connection is the last, and checkpoints the log
        except OSError:
            pass


def _failed(message: str) -> bytes:
    text = message.encode("utf-8", "replace")
    return _FAILED + _LEN.pack(len(text)) + text


def main() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout.fileno()
    try:
        _serve(sys.stdin.fileno(), out)
    except BaseException as exc:  # the eval's process reports it: never a traceback of ours on its terminal
        try:
            os.write(out, _failed(f"the writer process failed: {type(exc).__name__}: {exc}"))
        except OSError:
            pass
        sys.exit(1)


if __name__ == "__main__":
    main()

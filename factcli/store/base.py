"""What both store backends share: the `BaseStore` every command talks to (the queries, written once
in the SQL both backends run), and the helpers around a store's name (a path or a URL, shown without
its password), its errors and a run's holder. `Store.open` (store/database.py) picks the backend.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from factcli.errors import FactcliError
from factcli.store import clock
from factcli.types import ERROR_REASONS, FAILURE_GRADING
from factcli.store.schema import MIGRATION_NAMES, MIGRATION_SET, RESULT_FIELDS, upsert_sql  # noqa: F401

FINAL_STATUSES = ("complete", "interrupted", "aborted", "error")
URL_SCHEMES = ("postgresql://", "postgres://")
# how long a run's heartbeat may be silent before another machine may take the run over (store/leases.py)
LEASE_TIMEOUT_S = 60.0


def default_path() -> Path:
    from factcli.settings import home

    return home() / "factcli.db"


def default_target() -> str | Path:
    """`FACTCLI_DB` when set (a file path or a postgresql:// URL), else FACTCLI_HOME/factcli.db."""
    env = os.environ.get("FACTCLI_DB", "").strip()
    if env:
        return env if is_url(env) else Path(env).expanduser()
    return default_path()


# SQLAlchemy's spellings, which people paste from other tools: the same server through psycopg
DRIVER_SCHEMES = ("postgresql+psycopg://", "postgresql+psycopg2://")
_ANY_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(target: Any) -> bool:
    """A store named by a URL (a supported one: check_url refuses the others), not a file path."""
    return isinstance(target, str) and bool(_ANY_URL.match(target.strip()))


def check_url(target: str) -> str:
    """A store URL as psycopg takes it (SQLAlchemy's `postgresql+psycopg2://` as `postgresql://`); any
    other scheme is one error naming the supported ones, never a folder named after the URL."""
    from factcli.store.redact import note_store_url

    url = target.strip()
    note_store_url(url)
    lower = url.lower()
    for scheme in DRIVER_SCHEMES:
        if lower.startswith(scheme):
            return "postgresql://" + url[len(scheme):]
    for scheme in URL_SCHEMES:
        if lower.startswith(scheme):
            return scheme + url[len(scheme):]  # libpq knows the schemes in lower case only
    raise FactcliError(f"{redact(url)}: not a supported store; give a SQLite file path or a PostgreSQL URL "
                       "(postgresql://, postgres://, postgresql+psycopg://, postgresql+psycopg2://)")


# the password runs to the authority's last `@`: a raw `@` in it (`user:p@ss@host`) is not its end
_PASSWORD = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^:/@\s]*:)([^/?#\s]*)(@)")
_KEYWORD_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('[^']*'|\S+)")


def redact(text: str) -> str:
    """A database URL (or anything holding one) with its password shown as *** (in a URL or as password=…)."""
    text = _PASSWORD.sub(lambda m: m.group(1) + "***" + m.group(3), str(text))
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + "***", text)


def shown(target: str | Path | None) -> str:
    """How a store is named in messages: its path, or its URL without the password."""
    if target is None:
        target = default_target()
    return redact(target) if is_url(target) else str(target)


def store_errors() -> tuple[type[BaseException], ...]:
    """The driver errors a store may raise, for `except store_errors()` (psycopg's only once loaded)."""
    import sqlite3

    errors: list = [sqlite3.Error]
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors.append(psycopg.Error)
    return tuple(errors)


def now() -> str:
    return clock.wall().isoformat(timespec="milliseconds")  # (the store's clock: a test can make leases fast)


# ---------------------------------------------------------------- the database


class BaseStore:
    """One open database. Writes are committed by `commit` (or at once where the method says so)."""

    kind = "?"
    path: Any  # what messages show
    target: Any  # what opens it again (a Path, or the URL with its password: never printed)
    conn: Any  # the driver's DB-API connection

    # -- what each backend provides

    def execute(self, sql: str, params: Iterable = ()):
        raise NotImplementedError

    def executemany(self, sql: str, rows: Iterable) -> None:
        raise NotImplementedError

    # both drivers (sqlite3, psycopg) are DB-API connections: committing and rolling back are the same
    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        raise NotImplementedError

    def reopen(self) -> None:
        """After a failed write: make the store take writes again if it can (a new connection to a
        server); a store error if it cannot yet. Uncommitted writes are dropped."""
        self.rollback()

    def json_number(self, column: str, key: str) -> tuple[str, list]:
        """SQL reading the number under top-level `key` of a JSON text column, and its parameters."""
        raise NotImplementedError

    def write_results(self, rows: list[tuple]) -> None:
        """Upsert result rows (tuples in RESULT_FIELDS order) in one bulk statement; uncommitted."""
        if rows:
            self.executemany(upsert_sql(), rows)

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return store_errors()

    def __enter__(self) -> "BaseStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- runs

    def run_count(self) -> int:
        return self.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    _NEWEST = "ORDER BY created_at DESC, id DESC"  # newest first (SQLite: ties in insertion order)

    def resolve(self, ref: str | None) -> dict:
        """A run row from `latest` (the default), `latest~N` (N runs before it), an id, or a unique part
        of one: its start (`eval-20261124T19`) or any other piece, such as the hex tail (`9a84d9`) that
        tells runs of one day apart. A start that matches one run wins over pieces elsewhere; two or
        more matches are an error naming them. Every command that takes a run id comes here."""
        ref = (ref or "latest").strip()
        back = ref.removeprefix("latest~")
        if ref == "latest" or (back != ref and back.isdigit()):  # latest~1: the run before the latest
            n = 0 if ref == "latest" else int(back)
            row = self.execute(f"SELECT * FROM runs {self._NEWEST} LIMIT 1 OFFSET ?", (n,)).fetchone()
            if row is None:
                raise FactcliError(f"no runs stored yet in {self.path}" if n == 0 else
                                   f"no run '{ref}': {self.path} holds fewer than {n + 1} runs")
            return dict(row)
        row = self.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
        if row is not None:
            return dict(row)
        if not ref:
            raise FactcliError("an empty run id: give a run id, a unique part of one, or 'latest'")
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows: list = []
        for pattern in (escaped + "%", "%" + escaped + "%"):
            rows = self.execute(f"SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' {self._NEWEST} LIMIT 6",
                                (pattern,)).fetchall()
            if rows:
                break
        if len(rows) == 1:
            return dict(rows[0])
        if not rows:
            raise FactcliError(f"no run '{ref}' in {self.path} (`factcli list` shows the runs)")
        ids = [r["id"] for r in rows]
        listed = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        raise FactcliError(f"run id '{ref}' is ambiguous: it matches {listed}; give more of the id")

    def first_failed_test(self, run_id: str) -> int | None:
        """The first test with a FAIL row (an ERROR row when none failed): the row worth opening."""
        for reasons in ((1,), ERROR_REASONS):
            row = self.execute("SELECT MIN(test_idx) FROM results WHERE run_id = ? AND failure_reason IN "
                               f"({', '.join('?' * len(reasons))})", (run_id, *reasons)).fetchone()
            if row[0] is not None:
                return row[0]
        return None

    def list_runs(self, limit: int = 20) -> list[dict]:
        return [dict(r) for r in self.execute(f"SELECT * FROM runs {self._NEWEST} LIMIT ?", (limit,))]

    def insert_run(self, record: dict) -> None:
        fields = list(record)
        self.execute(f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)})",
                     [record[f] for f in fields])
        self.commit()

    def upsert_run(self, record: dict) -> None:
        """Insert a run row or replace every given field of it (factcli copy); uncommitted."""
        fields = list(record)
        self.execute(f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)}) "
                     "ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{f} = excluded.{f}" for f in fields if f != "id"),
                     [record[f] for f in fields])

    def update_run(self, run_id: str, fields: dict, commit: bool = True) -> None:
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.execute(f"UPDATE runs SET {sets} WHERE id = ?", [*fields.values(), run_id])
        if commit:
            self.commit()

    def set_columns(self, run_id: str, columns: list[dict], commit: bool = True) -> None:
        for c in columns:
            fields = ["run_id", *c]
            self.execute(
                f"INSERT INTO columns ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)}) "
                f"ON CONFLICT(run_id, prompt_idx) DO UPDATE SET "
                + ", ".join(f"{f} = excluded.{f}" for f in c if f != "prompt_idx"),
                [run_id, *c.values()])
        if commit:
            self.commit()

    def set_column_metrics(self, run_id: str, metrics: list[str], commit: bool = True) -> None:
        self.executemany("UPDATE columns SET metrics_json = ? WHERE run_id = ? AND prompt_idx = ?",
                         [(m, run_id, i) for i, m in enumerate(metrics)])
        if commit:
            self.commit()

    def columns(self, run_id: str) -> list[dict]:
        return [dict(r) for r in self.execute("SELECT * FROM columns WHERE run_id = ? ORDER BY prompt_idx", (run_id,))]

    def delete_run(self, run_id: str) -> int:
        try:
            n = self.execute("DELETE FROM results WHERE run_id = ?", (run_id,)).rowcount
            self.execute("DELETE FROM ratings WHERE run_id = ?", (run_id,))
            self.execute("DELETE FROM batch_lines WHERE run_id = ?", (run_id,))
            self.execute("DELETE FROM batches WHERE run_id = ?", (run_id,))
            self.execute("DELETE FROM columns WHERE run_id = ?", (run_id,))
            self.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            self.commit()
        except BaseException:
            self.rollback()
            raise
        return n

    # -- results

    def upsert_result(self, record: dict, commit: bool = True) -> None:
        self.write_results([tuple(record.get(f) for f in RESULT_FIELDS)])
        if commit:
            self.commit()

    def results(self, run_id: str, where: str = "", params: Iterable = (), order: str = "seq",
                fields: str = "*") -> Iterable[dict]:
        sql = f"SELECT {fields} FROM results WHERE run_id = ?" + (f" AND ({where})" if where else "")
        for row in self.execute(sql + f" ORDER BY {order}", [run_id, *params]):
            yield dict(row)

    def result_count(self, run_id: str) -> int:
        return self.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (run_id,)).fetchone()[0]

    def done_keys(self, run_id: str) -> dict[tuple[int, int, int], tuple[int, str]]:
        """(test_idx, prompt_idx, repeat_idx) -> (failure_reason, test_key) for every stored row."""
        return {(r[0], r[1], r[2]): (r[3], r[4]) for r in self.execute(
            "SELECT test_idx, prompt_idx, repeat_idx, failure_reason, test_key FROM results WHERE run_id = ?",
            (run_id,))}

    # how a stored grading says an assertion was not judged (its metadata as json.dumps writes it: a quote
    # inside a string is escaped, so no text a model or a judge wrote matches), for a LIKE
    GRADER_ERROR_MARK = '%"graderError": true%'

    def errored_assertion_keys(self, run_id: str) -> set[tuple[int, int, int]]:
        """The rows, among those that passed or failed, holding an assertion whose grading errored
        (scoring/outcome.needs_retry: --retry-errors runs them again, whatever their other assertions
        decided). The text match narrows the rows read; each grading is read to decide."""
        from factcli.store.encode import loads
        from factcli.scoring.outcome import has_grader_error
        from factcli.types import grading_from_json

        out = set()
        for t, p, r, graded in self.execute(
                "SELECT test_idx, prompt_idx, repeat_idx, grading_json FROM results WHERE run_id = ? AND "
                "failure_reason NOT IN (?, ?) AND grading_json LIKE ?",
                (run_id, *ERROR_REASONS, self.GRADER_ERROR_MARK)):
            grading = loads(graded, None)
            if isinstance(grading, dict) and has_grader_error(grading_from_json(grading)):
                out.add((t, p, r))
        return out

    def not_judged(self, run_id: str) -> int:
        """The run's rows the judge could not judge (ERROR rows, out of its pass rate); an index's count."""
        return self.execute("SELECT COUNT(*) FROM results WHERE run_id = ? AND failure_reason = ?",
                            (run_id, FAILURE_GRADING)).fetchone()[0]

    def counts(self, run_id: str) -> dict[int, dict[str, int]]:
        """prompt_idx -> {pass, fail, error, notJudged (of the errors)} counted in SQL (exact even while a run is writing)."""
        out: dict[int, dict[str, int]] = {}
        for p, s, f, n in self.execute(
                "SELECT prompt_idx, success, failure_reason, COUNT(*) FROM results WHERE run_id = ? "
                "GROUP BY prompt_idx, failure_reason, success", (run_id,)):
            c = out.setdefault(p, {"pass": 0, "fail": 0, "error": 0, "notJudged": 0})
            c["pass" if s else ("error" if f in ERROR_REASONS else "fail")] += n
            if not s and f == FAILURE_GRADING:  # an ERROR the judge could not judge: out of the pass rate
                c["notJudged"] += n
        return out


def pid_alive(pid: int | None, host: str | None, since: str | None = None) -> bool:
    """Whether process `pid` on this machine is alive and could be the one that wrote a lease at
    `since` (an ISO time): a zombie (exited, not yet reaped) is not, nor a process that started after
    `since` (its pid was reused since the lease's holder died: a holder starts before its heartbeats)."""
    import socket

    if not pid or host != socket.gethostname():
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OSError:
        return False
    started, state = _process_start(pid)
    if state in ("Z", "X", "x"):
        return False
    if started is not None and since:
        written = _epoch(since)
        # /proc gives the start to a clock tick past a boot time in whole seconds: 2 s of slack
        if written is not None and started > written + 2.0:
            return False
    return True


def _process_start(pid: int) -> tuple[float | None, str | None]:
    """(start time as a Unix time, state letter) of a process, from Linux's /proc; (None, None) elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        with open("/proc/stat", encoding="ascii", errors="replace") as f:
            boot = next((float(line.split()[1]) for line in f if line.startswith("btime ")), None)
    except OSError:
        return None, None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    if len(fields) < 20 or boot is None:
        return None, fields[0] if fields else None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK"), fields[0]


def _epoch(iso: str) -> float | None:
    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return then.timestamp()


def seconds_since(iso: str | None) -> float | None:
    then = _epoch(iso) if iso else None
    return None if then is None else clock.time_now() - then


def lease_timeout() -> float:
    try:
        return max(1.0, float(os.environ.get("FACTCLI_LEASE_TIMEOUT") or LEASE_TIMEOUT_S))
    except ValueError:
        return LEASE_TIMEOUT_S


def holder_alive(run: dict) -> bool:
    """Whether the process that holds a started run is still at it: its heartbeat (`updated_at`) is
    younger than the lease timeout, and, on this machine, its pid is alive and the process there could
    have written that heartbeat (pid_alive: not a zombie, not a pid reused since). A heartbeat older
    than the timeout frees the run whatever the pid says (store/leases.Heartbeat beats on every store)."""
    import socket

    age = seconds_since(run.get("updated_at"))
    if age is None or age >= lease_timeout():
        return False
    if run.get("host") == socket.gethostname():
        return pid_alive(run.get("pid"), run.get("host"), run.get("updated_at"))
    return True


def shown_status(run: dict) -> str:
    """The stored status, with `started` told apart: still running, or killed without finishing."""
    if run["status"] == "started":
        return "running" if holder_alive(run) else "interrupted"
    return run["status"]

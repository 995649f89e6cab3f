"""The run store: every eval kept in SQLite (`FACTCLI_HOME/factcli.db`, or `--db FILE`).

- Schema changes are sqlite-utils `Migrations` (set "factcli"); an old database upgrades in place,
  a database from a newer factcli is refused with one line, and nothing is ever dropped.
- The read path (view, list, show, ...) uses plain sqlite3 and imports sqlite-utils only when a
  migration is pending, so `factcli view` starts fast.
- Every text written passes through the `Scrubber` of store/redact.py (contract §9): no API key, header value or
  secret-looking environment value reaches the file.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from factcli.errors import FactcliError

MIGRATION_SET = "factcli"
MIGRATION_NAMES = ("m001_initial", "m002_ratings")  # keep in step with _migrations()
FINAL_STATUSES = ("complete", "interrupted", "aborted", "error")

RESULT_FIELDS = (
    "run_id", "test_idx", "prompt_idx", "repeat_idx", "provider_idx", "seq", "test_key", "description",
    "success", "failure_reason", "score", "error", "output", "output_json", "named_scores_json",
    "grading_json", "latency_ms", "tokens_prompt", "tokens_completion", "tokens_total", "grader_tokens",
    "cost", "cached", "vars_json", "rendered_prompt", "extra_json", "created_at",
)
_UPSERT = (
    f"INSERT INTO results ({', '.join(RESULT_FIELDS)}) VALUES ({', '.join('?' for _ in RESULT_FIELDS)}) "
    "ON CONFLICT(run_id, test_idx, prompt_idx, repeat_idx) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in RESULT_FIELDS[4:])
)


def default_path() -> Path:
    from factcli.settings import home

    return home() / "factcli.db"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _migrations():
    from sqlite_utils import Migrations

    migrations = Migrations(MIGRATION_SET)

    @migrations(name="m001_initial")
    def m001_initial(db) -> None:
        db["runs"].create({
            "id": str, "created_at": str, "updated_at": str, "finished_at": str, "description": str,
            "status": str, "config_json": str, "config_files_json": str, "base_dir": str,
            "options_json": str, "graders_json": str, "total_steps": int, "rows_done": int,
            "successes": int, "failures": int, "errors": int, "tokens_json": str, "cost": float,
            "duration_ms": int, "retries": int, "calls": int, "abort_reason": str, "warnings_json": str,
            "factcli_version": str, "pid": int, "host": str, "attempts": int,
        }, pk="id")
        db["runs"].create_index(["created_at"])
        db["results"].create({
            "id": int, "run_id": str, "test_idx": int, "prompt_idx": int, "repeat_idx": int,
            "provider_idx": int, "seq": int, "test_key": str, "description": str, "success": int,
            "failure_reason": int, "score": float, "error": str, "output": str, "output_json": int,
            "named_scores_json": str, "grading_json": str, "latency_ms": float, "tokens_prompt": int,
            "tokens_completion": int, "tokens_total": int, "grader_tokens": int, "cost": float,
            "cached": int, "vars_json": str, "rendered_prompt": str, "extra_json": str, "created_at": str,
        }, pk="id", foreign_keys=[("run_id", "runs", "id")])
        db["results"].create_index(["run_id", "test_idx", "prompt_idx", "repeat_idx"], unique=True)
        db["results"].create_index(["run_id", "failure_reason", "test_idx"])  # view --failures / --errors
        db["results"].create_index(["run_id", "prompt_idx", "failure_reason", "success"])  # counts per column
        db["columns"].create({
            "run_id": str, "prompt_idx": int, "provider_idx": int, "provider_id": str,
            "provider_label": str, "prompt_label": str, "prompt_raw": str, "prompt_id": str,
            "metrics_json": str,
        }, pk=("run_id", "prompt_idx"), foreign_keys=[("run_id", "runs", "id")])

    @migrations(name="m002_ratings")
    def m002_ratings(db) -> None:
        # People's pass/fail verdicts on stored rows (store/ratings.py); `results` is never touched.
        db["ratings"].create({
            "id": int, "run_id": str, "test_idx": int, "prompt_idx": int, "repeat_idx": int,
            "assertion_idx": int, "passed": int, "comment": str, "rater": str, "created_at": str,
            "retracted_at": str,
        }, pk="id", foreign_keys=[("run_id", "runs", "id")])
        db["ratings"].create_index(["run_id", "test_idx", "prompt_idx", "repeat_idx"])

    names = tuple(m.name for m in migrations._migrations)
    assert names == MIGRATION_NAMES, names
    return migrations


# ---------------------------------------------------------------- the database


class Store:
    """One open database. A run's rows are written in groups through `write_results` and committed by
    the caller (`commit`); run rows through `insert_run` / `update_run`."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn

    # -- opening

    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = False) -> "Store":
        """Open (and migrate) the database. `create`: make it if missing (eval); otherwise a missing
        file is an error. Any problem is a FactcliError naming the file; the file is never replaced."""
        p = Path(path) if path else default_path()
        if p.is_dir():
            raise FactcliError(f"{p}: is a directory, not a database file")
        if not p.exists():
            if not create:
                raise FactcliError(f"no runs stored yet: {p} does not exist (run `factcli eval` first)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FactcliError(f"{p}: cannot create the database: {exc.strerror or exc} "
                                   "(--db FILE stores runs elsewhere; --no-write does not store them)") from None
        try:
            conn = sqlite3.connect(str(p), timeout=10)
        except sqlite3.Error as exc:
            raise FactcliError(f"{p}: cannot open the database: {exc}") from None
        store = cls(p, conn)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 10000")
            store._migrate(write=create)
        except sqlite3.Error as exc:
            conn.close()
            raise FactcliError(f"{p}: not a readable factcli database ({exc})") from None
        except BaseException:
            conn.close()
            raise
        return store

    def _migrate(self, write: bool) -> None:
        conn = self.conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        applied: list[str] = []
        if "_sqlite_migrations" in tables:
            applied = [r[0] for r in conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", (MIGRATION_SET,))]
        unknown = [n for n in applied if n not in MIGRATION_NAMES]
        if unknown:
            raise FactcliError(f"{self.path} was written by a newer factcli (schema {unknown[-1]}); "
                               "upgrade factcli to use it")
        if not applied and tables & {"runs", "results", "columns"}:
            raise FactcliError(f"{self.path}: not a factcli database (it has tables factcli did not create)")
        pending = [n for n in MIGRATION_NAMES if n not in applied]
        if pending:
            from sqlite_utils import Database

            db = Database(conn, execute_plugins=False)
            _migrations().apply(db)
            conn.commit()
            write = True
        if write:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        try:
            self.conn.commit()
        finally:
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- runs

    def run_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def resolve(self, ref: str | None) -> dict:
        """A run row from `latest` (the default), an id, or a unique part of one: its start
        (`eval-20261124T19`) or any other piece, such as the hex tail (`9a84d9`) that tells runs of
        one day apart. A start that matches one run wins over pieces elsewhere; two or more
        matches are an error naming them. Every command that takes a run id comes here."""
        ref = (ref or "latest").strip()
        if ref == "latest":
            row = self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
            if row is None:
                raise FactcliError(f"no runs stored yet in {self.path}")
            return dict(row)
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
        if row is not None:
            return dict(row)
        if not ref:
            raise FactcliError("an empty run id: give a run id, a unique part of one, or 'latest'")
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows: list = []
        for pattern in (escaped + "%", "%" + escaped + "%"):
            rows = self.conn.execute(
                "SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at DESC, rowid DESC LIMIT 6",
                (pattern,)).fetchall()
            if rows:
                break
        if len(rows) == 1:
            return dict(rows[0])
        if not rows:
            raise FactcliError(f"no run '{ref}' in {self.path} (`factcli list` shows the runs)")
        shown = ", ".join(r["id"] for r in rows[:5]) + (", …" if len(rows) > 5 else "")
        raise FactcliError(f"run id '{ref}' is ambiguous: it matches {shown}; give more of the id")

    def first_failed_test(self, run_id: str) -> int | None:
        """The first test with a FAIL row (an ERROR row when none failed): the row worth opening."""
        for reason in (1, 2):
            row = self.conn.execute("SELECT MIN(test_idx) FROM results WHERE run_id = ? AND failure_reason = ?",
                                    (run_id, reason)).fetchone()
            if row[0] is not None:
                return row[0]
        return None

    def list_runs(self, limit: int = 20) -> list[dict]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,))]

    def insert_run(self, record: dict) -> None:
        fields = list(record)
        self.conn.execute(f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)})",
                          [record[f] for f in fields])
        self.conn.commit()

    def update_run(self, run_id: str, fields: dict, commit: bool = True) -> None:
        if not fields:
            return
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.conn.execute(f"UPDATE runs SET {sets} WHERE id = ?", [*fields.values(), run_id])
        if commit:
            self.conn.commit()

    def set_columns(self, run_id: str, columns: list[dict]) -> None:
        for c in columns:
            fields = ["run_id", *c]
            self.conn.execute(
                f"INSERT INTO columns ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)}) "
                f"ON CONFLICT(run_id, prompt_idx) DO UPDATE SET "
                + ", ".join(f"{f} = excluded.{f}" for f in c if f != "prompt_idx"),
                [run_id, *c.values()])
        self.conn.commit()

    def set_column_metrics(self, run_id: str, metrics: list[str], commit: bool = True) -> None:
        self.conn.executemany("UPDATE columns SET metrics_json = ? WHERE run_id = ? AND prompt_idx = ?",
                              [(m, run_id, i) for i, m in enumerate(metrics)])
        if commit:
            self.conn.commit()

    def columns(self, run_id: str) -> list[dict]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM columns WHERE run_id = ? ORDER BY prompt_idx", (run_id,))]

    def delete_run(self, run_id: str) -> int:
        with self.conn:
            n = self.conn.execute("DELETE FROM results WHERE run_id = ?", (run_id,)).rowcount
            self.conn.execute("DELETE FROM ratings WHERE run_id = ?", (run_id,))
            self.conn.execute("DELETE FROM columns WHERE run_id = ?", (run_id,))
            self.conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        return n

    # -- results

    def upsert_result(self, record: dict, commit: bool = True) -> None:
        self.conn.execute(_UPSERT, [record.get(f) for f in RESULT_FIELDS])
        if commit:
            self.conn.commit()

    def write_results(self, rows: list[tuple]) -> None:
        """Upsert a group of rows, each a tuple in RESULT_FIELDS order (keyed on run, test, prompt
        and repeat), uncommitted: the session commits a group at once (run/session.py)."""
        if rows:
            self.conn.executemany(_UPSERT, rows)

    def commit(self) -> None:
        self.conn.commit()

    def results(self, run_id: str, where: str = "", params: Iterable = (), order: str = "seq",
                fields: str = "*") -> Iterable[dict]:
        sql = f"SELECT {fields} FROM results WHERE run_id = ?" + (f" AND ({where})" if where else "")
        cursor = self.conn.execute(sql + f" ORDER BY {order}", [run_id, *params])
        for row in cursor:
            yield dict(row)

    def done_keys(self, run_id: str) -> dict[tuple[int, int, int], tuple[int, str]]:
        """(test_idx, prompt_idx, repeat_idx) -> (failure_reason, test_key) for every stored row."""
        return {(r[0], r[1], r[2]): (r[3], r[4]) for r in self.conn.execute(
            "SELECT test_idx, prompt_idx, repeat_idx, failure_reason, test_key FROM results WHERE run_id = ?",
            (run_id,))}

    def counts(self, run_id: str) -> dict[int, dict[str, int]]:
        """prompt_idx -> {pass, fail, error} counted in SQL (exact even while a run is writing)."""
        out: dict[int, dict[str, int]] = {}
        for p, s, f, n in self.conn.execute(
                "SELECT prompt_idx, success, failure_reason, COUNT(*) FROM results WHERE run_id = ? "
                "GROUP BY prompt_idx, failure_reason, success", (run_id,)):
            c = out.setdefault(p, {"pass": 0, "fail": 0, "error": 0})
            c["pass" if s else ("error" if f == 2 else "fail")] += n
        return out


def pid_alive(pid: int | None, host: str | None) -> bool:
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
        return True
    except OSError:
        return False
    return True


def shown_status(run: dict) -> str:
    """The stored status, with `started` told apart: still running, or killed without finishing."""
    if run["status"] == "started":
        return "running" if pid_alive(run.get("pid"), run.get("host")) else "interrupted"
    return run["status"]
